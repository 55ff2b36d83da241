"""`python -m wire.codegen [--check] [--definitions DIR]`: (re)generate or verify."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from wire.codegen.emit_module import BANNER, emit_module
from wire.codegen.schema import Message, load_dir, module_name

WIRE = Path(__file__).resolve().parent.parent
DEFAULT_DEFINITIONS = WIRE.parent.parent / "shared" / "kafka-protocol"
# definitions folder -> package under wire/formats/
FORMAT_GROUPS = {
    "messages": "protocol",
    "metadata": "metadata",
    "group-coordinator": "group_coordinator",
    "transaction-coordinator": "transaction_coordinator",
    "raft": "raft",
}


def _api_modules(messages: list[Message]) -> tuple[dict[Path, str], list[str]]:
    pairs: dict[int, dict[str, Message]] = {}
    for m in messages:
        if m.kind in ("request", "response") and m.api_key is not None and not m.valid.empty:
            pairs.setdefault(m.api_key, {})[m.kind] = m
    files: dict[Path, str] = {}
    rows = []
    for key in sorted(pairs):
        req, resp = pairs[key]["request"], pairs[key]["response"]
        if req.valid != resp.valid:
            raise ValueError(f"API {key}: request and response versions differ")
        mod = module_name(req.name)
        doc = (
            f"{req.name[: -len('Request')]} (API key {key}): versions {req.valid.lo}-{req.valid.hi}, "
            f"from {req.source} and {resp.source}."
        )
        files[WIRE / "messages" / f"{mod}.py"] = emit_module([req, resp], doc)
        flex = None if req.flexible.empty else max(req.flexible.lo, req.valid.lo)
        rows.append(
            f"    {key}: ApiInfo({key}, {req.name[: -len('Request')]!r}, 'wire.messages.{mod}', "
            f"{req.name!r}, {resp.name!r}, {req.valid.lo}, {req.valid.hi}, {flex!r}, "
            f"{req.latest_version_unstable!r}),"
        )
    return files, rows


REGISTRY = '''"""Every Kafka API key: its name, module, classes and valid versions."""

from __future__ import annotations

from typing import NamedTuple


class ApiInfo(NamedTuple):
    key: int
    name: str
    module: str
    request: str
    response: str
    min_version: int
    max_version: int
    flexible_min: int | None
    latest_version_unstable: bool


APIS: dict[int, ApiInfo] = {
'''


def _format_modules(group: str, messages: list[Message]) -> dict[Path, str]:
    files: dict[Path, str] = {}
    rows = []
    for m in messages:
        if m.kind in ("request", "response"):
            continue
        mod = module_name(m.name)
        doc = f"{m.name} ({m.kind}): versions {m.valid.lo}-{m.valid.hi}, from {m.source}."
        files[WIRE / "formats" / group / f"{mod}.py"] = emit_module([m], doc)
        rows.append(f"    {m.name!r}: ('wire.formats.{group}.{mod}', {m.api_key!r}),")
    index = "\n".join(
        [
            BANNER,
            f'"""The {group} formats: class name -> (module, type id or None)."""',
            "",
            "FORMATS: dict[str, tuple[str, int | None]] = {",
            *rows,
            "}",
            "",
        ]
    )
    files[WIRE / "formats" / group / "__init__.py"] = index
    return files


def generate(definitions: Path) -> dict[Path, str]:
    files: dict[Path, str] = {}
    api_files, rows = _api_modules(load_dir(definitions / "messages"))
    files.update(api_files)
    files[WIRE / "messages" / "__init__.py"] = "\n".join([BANNER, REGISTRY + "\n".join(rows), "}", ""])
    for folder, group in FORMAT_GROUPS.items():
        files.update(_format_modules(group, load_dir(definitions / folder)))
    files[WIRE / "formats" / "__init__.py"] = (
        f'{BANNER}\n"""Record formats of internal topics, the metadata log and the protocol."""\n'
    )
    return files


def _existing() -> set[Path]:
    found = set()
    for sub in ("messages", "formats"):
        found |= set((WIRE / sub).rglob("*.py"))
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m wire.codegen", description=__doc__)
    parser.add_argument("--check", action="store_true", help="fail if generated files are stale")
    parser.add_argument("--definitions", type=Path, default=DEFAULT_DEFINITIONS)
    args = parser.parse_args(argv)
    if not (args.definitions / "messages").is_dir():
        print(f"no definitions at {args.definitions} (expected ../shared/kafka-protocol)", file=sys.stderr)
        return 2
    files = generate(args.definitions)
    stale = sorted(_existing() - set(files))
    if args.check:
        bad = [p for p, text in files.items() if not p.exists() or p.read_text() != text]
        for p in [*bad, *stale]:
            print(f"stale: {p.relative_to(WIRE.parent)}", file=sys.stderr)
        if bad or stale:
            print("generated code is stale: run `python -m wire.codegen`", file=sys.stderr)
            return 1
        print(f"{len(files)} generated modules are up to date")
        return 0
    for p in stale:
        p.unlink()
    for p, text in files.items():
        p.parent.mkdir(parents=True, exist_ok=True)
        if not p.exists() or p.read_text() != text:
            p.write_text(text)
    print(f"wrote {len(files)} modules under wire/messages and wire/formats")
    return 0


if __name__ == "__main__":
    sys.exit(main())
