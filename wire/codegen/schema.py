"""The JSON message definitions, loaded into a small typed model.

Kafka's files carry `//` comments, so they are stripped before parsing. The
model keeps what generated code needs -- names, types, version ranges, tags,
defaults -- and drops the prose.
"""

from __future__ import annotations

import json
import keyword
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

PRIMITIVES = frozenset(
    {
        "int8", "int16", "int32", "int64", "uint16", "uint32", "varint", "varlong",
        "float64", "bool", "string", "bytes", "uuid", "records",
    }
)  # fmt: skip

NO_VERSION = 1 << 15


@dataclass(frozen=True)
class Versions:
    """An inclusive version range; `none` is the empty range."""

    lo: int
    hi: int

    @classmethod
    def parse(cls, text: str | None, default: Versions | None = None) -> Versions:
        if text is None:
            return default if default is not None else NONE
        text = text.strip()
        if text == "none":
            return NONE
        if text.endswith("+"):
            return cls(int(text[:-1]), NO_VERSION)
        if "-" in text:
            lo, hi = text.split("-")
            return cls(int(lo), int(hi))
        return cls(int(text), int(text))

    def __contains__(self, version: object) -> bool:
        return isinstance(version, int) and self.lo <= version <= self.hi

    @property
    def empty(self) -> bool:
        return self.lo > self.hi


NONE = Versions(0, -1)


@dataclass
class Field:
    """One field of a struct, as the JSON declares it."""

    name: str
    type: str
    versions: Versions
    nullable: Versions
    tagged: Versions
    tag: int | None
    default: Any
    ignorable: bool
    flexible: Versions | None  # a field-level override of the message's flexibleVersions
    fields: list[Field] | None  # inline struct definition

    @property
    def attr(self) -> str:
        """The Python attribute name: snake_case, never a keyword."""
        return attr_name(self.name)

    @property
    def is_array(self) -> bool:
        return self.type.startswith("[]")

    @property
    def element(self) -> str:
        """The element type of an array, or the type itself."""
        return self.type[2:] if self.is_array else self.type

    @property
    def is_struct(self) -> bool:
        """True for struct fields and arrays of structs."""
        return self.element not in PRIMITIVES


@dataclass
class Struct:
    """A named struct: a message body or one of its nested structs."""

    name: str
    fields: list[Field]


@dataclass
class Message:
    """One JSON file: a request, response, header or data record."""

    name: str
    kind: str  # request, response, header, data, metadata
    api_key: int | None
    valid: Versions
    flexible: Versions
    fields: list[Field]
    structs: dict[str, Struct] = field(default_factory=dict)
    latest_version_unstable: bool = False
    source: str = ""

    def versions(self) -> range:
        return range(self.valid.lo, self.valid.hi + 1)


def attr_name(name: str) -> str:
    snake = re.sub(r"([A-Z]+)([A-Z][a-z])", r"\1_\2", name)
    snake = re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", snake).lower()
    return snake + "_" if keyword.iskeyword(snake) or snake == "unknown_tagged_fields" else snake


def module_name(name: str) -> str:
    """The module a message lands in: `ProduceRequest` -> `produce`."""
    for suffix in ("Request", "Response"):
        if name.endswith(suffix) and name != suffix:
            name = name[: -len(suffix)]
            break
    return attr_name(name).rstrip("_")


def strip_comments(text: str) -> str:
    return re.sub(r"^\s*//.*$", "", text, flags=re.MULTILINE)


def _field(raw: dict[str, Any]) -> Field:
    nested = raw.get("fields")
    tagged = Versions.parse(raw.get("taggedVersions"))
    return Field(
        name=raw["name"],
        type=raw["type"],
        # a field without "versions" exists in its tagged versions (Kafka's FieldSpec)
        versions=Versions.parse(raw.get("versions"), tagged),
        nullable=Versions.parse(raw.get("nullableVersions")),
        tagged=tagged,
        tag=int(raw["tag"]) if "tag" in raw else None,
        default="null" if "default" in raw and raw["default"] is None else raw.get("default"),
        ignorable=bool(raw.get("ignorable", False)),
        flexible=Versions.parse(raw["flexibleVersions"]) if "flexibleVersions" in raw else None,
        fields=[_field(f) for f in nested] if nested is not None else None,
    )


def _collect_structs(fields: list[Field], out: dict[str, Struct]) -> None:
    for f in fields:
        if f.fields is not None:
            if f.element in out:
                raise ValueError(f"struct {f.element} is defined twice")
            out[f.element] = Struct(f.element, f.fields)
            _collect_structs(f.fields, out)


def load(path: Path) -> Message:
    raw = json.loads(strip_comments(path.read_text()))
    fields = [_field(f) for f in raw.get("fields", [])]
    valid = Versions.parse(raw["validVersions"])
    if raw["type"] == "header" and raw["name"] == "RequestHeader":
        valid = Versions(0, valid.hi)  # header v0: no client id (ControlledShutdown v0)
    msg = Message(
        name=raw["name"],
        kind=raw["type"],
        api_key=raw.get("apiKey"),
        valid=valid,
        flexible=Versions.parse(raw.get("flexibleVersions")),
        fields=fields,
        latest_version_unstable=bool(raw.get("latestVersionUnstable", False)),
        source=f"{path.parent.name}/{path.name}",
    )
    for common in raw.get("commonStructs", []):
        common_fields = [_field(f) for f in common["fields"]]
        msg.structs[common["name"]] = Struct(common["name"], common_fields)
        _collect_structs(common_fields, msg.structs)
    _collect_structs(fields, msg.structs)
    return msg


def load_dir(folder: Path) -> list[Message]:
    return [load(p) for p in sorted(folder.glob("*.json"))]
