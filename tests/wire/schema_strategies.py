"""Hypothesis strategies for any generated message at any version.

Built from the same JSON model the generator reads, so every field of every
version is exercised: fields absent from a version keep their defaults (what
a decoder fills in), nullable ones are sometimes null, flexible versions get
unknown tagged fields that must survive a round trip unchanged.
"""

from __future__ import annotations

import importlib
import uuid
from pathlib import Path
from typing import Any

from hypothesis import strategies as st

from strom.wire.codegen.__main__ import DEFAULT_DEFINITIONS, FORMAT_GROUPS
from strom.wire.codegen.schema import Field, Message, load_dir, module_name
from strom.wire.message import Message as MessageClass
from strom.wire.message import Struct

INT_RANGES = {
    "int8": (-(2**7), 2**7 - 1),
    "int16": (-(2**15), 2**15 - 1),
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint16": (0, 2**16 - 1),
    "uint32": (0, 2**32 - 1),
    "varint": (-(2**31), 2**31 - 1),
    "varlong": (-(2**63), 2**63 - 1),
}
UNKNOWN_TAG_BASE = 1000


def definitions() -> Path:
    return DEFAULT_DEFINITIONS


def all_messages() -> list[tuple[Message, type[MessageClass]]]:
    """Every generated message with its JSON model."""
    out = []
    for m in load_dir(definitions() / "messages"):
        if m.valid.empty:
            continue
        if m.kind in ("request", "response"):
            module = importlib.import_module(f"strom.wire.messages.{module_name(m.name)}")
        else:
            module = importlib.import_module(f"strom.wire.formats.protocol.{module_name(m.name)}")
        out.append((m, getattr(module, m.name)))
    for folder, group in FORMAT_GROUPS.items():
        if folder == "messages":
            continue
        for m in load_dir(definitions() / folder):
            module = importlib.import_module(f"strom.wire.formats.{group}.{module_name(m.name)}")
            out.append((m, getattr(module, m.name)))
    return out


def _scalar(t: str, nullable: bool) -> st.SearchStrategy[Any]:
    base: st.SearchStrategy[Any]
    if t in INT_RANGES:
        lo, hi = INT_RANGES[t]
        base = st.integers(lo, hi)
    elif t == "bool":
        base = st.booleans()
    elif t == "float64":
        base = st.floats(allow_nan=False)
    elif t == "string":
        base = st.text(max_size=12)
    elif t in ("bytes", "records"):
        base = st.binary(max_size=24)
    elif t == "uuid":
        base = st.binary(min_size=16, max_size=16).map(lambda b: uuid.UUID(bytes=b))
    else:
        raise ValueError(t)
    return st.one_of(st.none(), base) if nullable else base


def unknown_tags() -> st.SearchStrategy[tuple[tuple[int, bytes], ...]]:
    tags = st.lists(st.integers(UNKNOWN_TAG_BASE, UNKNOWN_TAG_BASE + 50), max_size=3, unique=True)
    return tags.flatmap(
        lambda ts: st.tuples(*[st.tuples(st.just(t), st.binary(max_size=8)) for t in sorted(ts)])
    )


def struct_strategy(
    msg: Message, cls: type[Struct], fields: list[Field], version: int, depth: int = 0
) -> st.SearchStrategy[Any]:
    flexible = version in msg.flexible
    kwargs: dict[str, st.SearchStrategy[Any]] = {}
    for f in fields:
        if version not in f.versions:
            continue  # keeps its default, as a decoder would produce
        kwargs[f.attr] = field_strategy(msg, cls, f, version, depth)
    if flexible:
        kwargs["unknown_tagged_fields"] = unknown_tags()
    return st.builds(cls, **kwargs)


def field_strategy(
    msg: Message, owner: type[Struct], f: Field, version: int, depth: int
) -> st.SearchStrategy[Any]:
    nullable = version in f.nullable
    if f.is_struct:
        top = _top_class(owner)
        sub_cls = getattr(top, f.element)
        elem = struct_strategy(msg, sub_cls, msg.structs[f.element].fields, version, depth + 1)
    else:
        elem = _scalar(f.element, nullable and not f.is_array)
    if f.is_array:
        arr = st.lists(elem, max_size=2 if depth < 2 else 1)
        return st.one_of(st.none(), arr) if nullable else arr
    if f.is_struct and nullable:
        return st.one_of(st.none(), elem)
    return elem


def _top_class(cls: type[Struct]) -> type[Struct]:
    module = importlib.import_module(cls.__module__)
    top: type[Struct] = getattr(module, cls.__qualname__.split(".")[0])
    return top
