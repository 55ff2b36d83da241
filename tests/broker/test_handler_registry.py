"""The handler table matches the handler modules, which it lets the broker import lazily."""

from __future__ import annotations

import importlib
import pkgutil

import strom.broker.handlers as handlers_package
from strom.broker.handlers import HANDLERS


def _handler_modules() -> dict[int, tuple[str, int, int, int]]:
    """API key -> (module, min, max, advertised min) from every module in the package."""
    found: dict[int, tuple[str, int, int, int]] = {}
    for info in pkgutil.iter_modules(handlers_package.__path__):
        module = importlib.import_module(f"strom.broker.handlers.{info.name}")
        if not hasattr(module, "API_KEY"):
            continue
        assert module.API_KEY not in found, f"two handler modules for API key {module.API_KEY}"
        advertised = getattr(module, "ADVERTISED_MIN_VERSION", module.MIN_VERSION)
        found[module.API_KEY] = (info.name, module.MIN_VERSION, module.MAX_VERSION, advertised)
    return found


def test_table_lists_every_handler_module_with_its_versions() -> None:
    table = {
        h.api_key: (h.module, h.min_version, h.max_version, h.advertised_min_version)
        for h in HANDLERS.values()
    }
    assert table == _handler_modules()


def test_handle_is_the_modules_handle() -> None:
    for handler in HANDLERS.values():
        module = importlib.import_module(f"strom.broker.handlers.{handler.module}")
        assert handler.handle is module.handle


def test_versions_are_within_what_the_wire_layer_decodes() -> None:
    from strom.wire.messages import APIS

    for handler in HANDLERS.values():
        info = APIS[handler.api_key]
        assert info.min_version <= handler.min_version <= handler.max_version <= info.max_version


def _kafka_listeners() -> dict[int, set[str]]:
    """API key -> the listeners Kafka's JSON definition names for its request."""
    import json
    from pathlib import Path

    import strom.wire
    from strom.wire.codegen.schema import strip_comments

    folder = Path(strom.wire.__file__).resolve().parent / "kafka-protocol" / "messages"
    found: dict[int, set[str]] = {}
    for path in folder.glob("*Request.json"):
        raw = json.loads(strip_comments(path.read_text()))
        found[raw["apiKey"]] = set(raw.get("listeners", []))
    return found


def test_listeners_are_kafkas() -> None:
    """An API is answered only on listeners Kafka answers it on; controller-only APIs
    (BrokerRegistration, BrokerHeartbeat) never on a client listener."""
    kafka = _kafka_listeners()
    for handler in HANDLERS.values():
        assert handler.listeners, handler.module
        assert handler.listeners <= kafka[handler.api_key], handler.module
    assert HANDLERS[62].listeners == {"controller"}
    assert HANDLERS[63].listeners == {"controller"}
    assert HANDLERS[0].listeners == {"broker"}
