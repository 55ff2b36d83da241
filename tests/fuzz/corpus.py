"""Seeded request frames for fuzzing: valid requests of every advertised API, then mutated.

`random_body` walks the same JSON model as `tests.wire.schema_strategies` but draws
from a `random.Random`, so a run outside hypothesis (the socket fuzzer) is replayed
exactly from its seed. Values lean towards the edges that break decoders and
handlers (0, -1, type limits, empty and null) and towards a small vocabulary of
names, so that some requests reach real topics and groups instead of stopping at
UNKNOWN_TOPIC_OR_PARTITION. `records` fields get a real batch half of the time.

`mutate` applies one of the corruptions listed in `MUTATIONS` to a whole frame
(size prefix included): what a broken or hostile client could send.
"""

from __future__ import annotations

import importlib
import random
import struct
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from functools import cache
from typing import Any

from strom.broker.handlers import HANDLERS
from strom.wire.apis import request_class, request_header_version
from strom.wire.codegen.__main__ import DEFAULT_DEFINITIONS
from strom.wire.codegen.schema import Field, Message, load
from strom.wire.formats.protocol.request_header import RequestHeader
from strom.wire.message import Message as MessageClass
from strom.wire.message import Struct
from strom.wire.records import Codec, Record, build_batch
from tests.wire.schema_strategies import INT_RANGES

NAMES = ("", "fuzz", "fuzz-0", "fuzz-1", "group", "member", "x" * 300, "é\u0000\ufffd")
"""Names fuzzed requests use: topics and groups the fuzzer creates, and odd strings."""


@dataclass(frozen=True)
class Api:
    key: int
    versions: range
    schema: Message
    cls: type[MessageClass]


@cache
def advertised_apis() -> tuple[Api, ...]:
    """Every API in the handler registry, with every advertised version the wire layer decodes.

    (Produce advertises v0-v2 without a schema for them; `random_api` sends those.)
    """
    out = []
    for handler in HANDLERS.values():
        cls = request_class(handler.api_key)
        schema = load(DEFAULT_DEFINITIONS / "messages" / f"{cls.NAME}.json")
        versions = range(
            max(handler.advertised_min_version, cls.MIN_VERSION), handler.max_version + 1
        )
        out.append(Api(handler.api_key, versions, schema, cls))
    return tuple(out)


def pairs() -> list[tuple[Api, int]]:
    """(API, version) for every advertised version of every advertised API."""
    return [(api, v) for api in advertised_apis() for v in api.versions]


# --- valid bodies -----------------------------------------------------------------------------


def _int(rng: random.Random, kind: str) -> int:
    lo, hi = INT_RANGES[kind]
    roll = rng.random()
    if roll < 0.45:
        return max(lo, rng.choice((0, 1, 2, 3, -1)))  # unsigned types have no -1
    if roll < 0.6:
        return rng.choice((lo, hi, lo + 1, hi - 1))
    if roll < 0.85:
        return max(lo, min(hi, rng.randint(-1000, 100_000)))
    return rng.randint(lo, hi)


def _string(rng: random.Random) -> str:
    if rng.random() < 0.7:
        return rng.choice(NAMES)
    return "".join(chr(rng.randint(32, 0x2FF)) for _ in range(rng.randint(0, 12)))


def _records(rng: random.Random) -> bytes:
    if rng.random() < 0.5:
        return rng.randbytes(rng.randint(0, 40))
    records = [
        Record(rng.randbytes(rng.randint(0, 8)) or None, rng.randbytes(rng.randint(0, 64)))
        for _ in range(rng.randint(1, 4))
    ]
    return bytes(build_batch(records, codec=rng.choice(list(Codec))))


def _scalar(rng: random.Random, kind: str, nullable: bool) -> Any:
    if nullable and rng.random() < 0.1:
        return None
    if kind in INT_RANGES:
        return _int(rng, kind)
    if kind == "bool":
        return rng.random() < 0.5
    if kind == "float64":
        return rng.choice((0.0, -1.0, 1e300, rng.random()))
    if kind == "string":
        return _string(rng)
    if kind == "bytes":
        return rng.randbytes(rng.randint(0, 24))
    if kind == "records":
        return _records(rng)
    if kind == "uuid":
        return uuid.UUID(int=0) if rng.random() < 0.3 else uuid.UUID(bytes=rng.randbytes(16))
    raise ValueError(kind)


def _struct(
    rng: random.Random,
    msg: Message,
    cls: type[Struct],
    fields: list[Field],
    version: int,
    depth: int,
) -> Any:
    kwargs: dict[str, Any] = {}
    for f in fields:
        if version in f.versions:
            kwargs[f.attr] = _field(rng, msg, cls, f, version, depth)
    if version in msg.flexible and rng.random() < 0.1:
        kwargs["unknown_tagged_fields"] = ((1000 + rng.randint(0, 50), rng.randbytes(4)),)
    return cls(**kwargs)


def _field(
    rng: random.Random, msg: Message, owner: type[Struct], f: Field, version: int, depth: int
) -> Any:
    nullable = version in f.nullable
    if f.is_array and nullable and rng.random() < 0.1:
        return None
    count = rng.choice((0, 1, 1, 2, 3)) if depth < 2 else rng.choice((0, 1))
    if f.is_struct:
        top = importlib.import_module(owner.__module__)
        sub = getattr(getattr(top, owner.__qualname__.split(".")[0]), f.element)
        fields = msg.structs[f.element].fields

        def one() -> Any:
            return _struct(rng, msg, sub, fields, version, depth + 1)

        if not f.is_array:
            return None if nullable and rng.random() < 0.1 else one()
        return [one() for _ in range(count)]
    if f.is_array:
        return [_scalar(rng, f.element, False) for _ in range(count)]
    return _scalar(rng, f.element, nullable)


def random_body(rng: random.Random, api: Api, version: int) -> MessageClass:
    """A valid request body of `api` at `version`, drawn from `rng`."""
    body: MessageClass = _struct(rng, api.schema, api.cls, api.schema.fields, version, 0)
    return body


TAME = {
    "max_wait_ms": 100,
    "timeout_ms": 1000,
    "session_timeout_ms": 1000,
    "rebalance_timeout_ms": 1000,
    "num_partitions": 4,
    "count": 4,
}
"""Upper bounds for fields that make a valid request wait or create things.

A valid Fetch may long-poll for 24 days and a valid CreateTopics may ask for
10,000 partitions: both are Kafka's behaviour, not a bug, but they would turn a
fuzz run into a wait or a file-limit test. Mutations can still exceed them.
"""


def tame(value: Any) -> Any:
    """Clamp the `TAME` fields of a request, its structs and arrays, in place."""
    if isinstance(value, list):
        for item in value:
            tame(item)
    elif isinstance(value, Struct):
        for name in value.FIELDS:
            field_value = getattr(value, name)
            limit = TAME.get(name)
            if limit is not None and isinstance(field_value, int) and field_value > limit:
                setattr(value, name, limit)
            elif isinstance(field_value, list | Struct):
                tame(field_value)
    return value


def frame(
    api_key: int, version: int, correlation_id: int, body: bytes, client_id: str | None
) -> bytes:
    """A whole request frame: size prefix, header at the right version, body bytes."""
    header = RequestHeader(api_key, version, correlation_id, client_id).encode(
        request_header_version(api_key, version)
    )
    return struct.pack(">i", len(header) + len(body)) + header + body


def valid_frame(rng: random.Random, correlation_id: int) -> tuple[bytes, Api, int]:
    api, version = rng.choice(pairs())
    body = tame(random_body(rng, api, version)).encode(version)
    client_id = rng.choice(("fuzz", None, "", "c" * 200))
    return frame(api.key, version, correlation_id, body, client_id), api, version


# --- mutations --------------------------------------------------------------------------------


def _flip_bits(rng: random.Random, data: bytearray) -> None:
    for _ in range(rng.randint(1, 8)):
        index = rng.randrange(len(data))
        data[index] ^= 1 << rng.randrange(8)


def _set_bytes(rng: random.Random, data: bytearray) -> None:
    for _ in range(rng.randint(1, 4)):
        data[rng.randrange(len(data))] = rng.choice((0x00, 0xFF, 0x7F, 0x80, rng.randrange(256)))


def _truncate_body(rng: random.Random, data: bytearray) -> None:
    """Cut the frame short and fix its size, so the body itself ends early."""
    cut = rng.randint(4, len(data))
    del data[cut:]
    data[0:4] = struct.pack(">i", cut - 4)


def _lie_about_length(rng: random.Random, data: bytearray) -> None:
    size = len(data) - 4
    lie = rng.choice(
        (size - 1, size + 1, size * 2, 0, -1, -(2**31), 2**31 - 1, rng.randint(0, 2**20))
    )
    data[0:4] = struct.pack(">i", lie)


def _huge_count(rng: random.Random, data: bytearray) -> None:
    """Overwrite a spot in the body with a huge int32 or varint count."""
    if len(data) < 16:
        return
    index = rng.randrange(12, len(data))
    value = rng.choice(
        (
            b"\x7f\xff\xff\xff",
            b"\xff\xff\xff\xfe",
            b"\x00\x10\x00\x00",
            b"\xff\xff\xff\xff\x0f",  # uvarint 2^32 - 1
            b"\x80\x80\x80\x80\x08",  # uvarint 2^31
            b"\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  # 10-byte varint
        )
    )
    data[index : index + len(value)] = value
    data[0:4] = struct.pack(">i", len(data) - 4)


def _random_api(rng: random.Random, data: bytearray) -> None:
    """Another API key and/or version in the header: a body that belongs to something else."""
    key = rng.choice((rng.randint(-(2**15), 2**15 - 1), rng.randint(0, 80), *HANDLERS))
    version = rng.choice((rng.randint(-(2**15), 2**15 - 1), rng.randint(-1, 20)))
    data[4:8] = struct.pack(">hh", key, version)


def _insert_junk(rng: random.Random, data: bytearray) -> None:
    index = rng.randint(4, len(data))
    data[index:index] = rng.randbytes(rng.randint(1, 16))
    data[0:4] = struct.pack(">i", len(data) - 4)


def _random_frame(rng: random.Random, data: bytearray) -> None:
    body = rng.randbytes(rng.randint(0, 64))
    data[:] = struct.pack(">i", len(body)) + body


MUTATIONS: dict[str, Callable[[random.Random, bytearray], None]] = {
    "flip_bits": _flip_bits,
    "set_bytes": _set_bytes,
    "truncate_body": _truncate_body,
    "lie_about_length": _lie_about_length,
    "huge_count": _huge_count,
    "random_api": _random_api,
    "insert_junk": _insert_junk,
    "random_frame": _random_frame,
}


def mutate(rng: random.Random, data: bytes) -> tuple[bytes, str]:
    """One corruption of a whole frame; returns the frame and the mutation's name."""
    name = rng.choice(list(MUTATIONS))
    out = bytearray(data)
    MUTATIONS[name](rng, out)
    return bytes(out), name
