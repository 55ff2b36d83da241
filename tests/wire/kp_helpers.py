"""Cross-checking Strom's wire layer against kafka-python's protocol codec.

kafka-python 3 has its own codec for Kafka's JSON message definitions
(`kafka.protocol.*`, compiled per version at run time, written independently
of `wire/`), and its own client framing (`kafka.protocol.parser.KafkaProtocol`:
request header + body + size prefix out, response header + body in). Driving
the real client framing means the request headers, correlation ids, client id
encoding and the ApiVersions response header quirk are all what kafka-python
actually does on a socket.

Each API case supplies:
  * `kp_request(v)`: a kafka-python request with non-default values in every
    field of every version (fields a version lacks are simply not encoded);
  * `strom_response(v)`: a Strom response likewise, trimmed to `v` by
    `trim_to_version` (fields the version lacks are reset to Strom's defaults,
    as a broker would leave them);
  * explicit checks of a few decoded values against literals.

`assert_matches` then compares every field the version has, recursively,
between the Strom object and the kafka-python one.
"""

from __future__ import annotations

import uuid
import warnings
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, TypeVar

# kafka-python reads its JSON schemas through a deprecated importlib API when
# its classes are created; the suite turns warnings into errors, so every
# kafka.* import goes through here. Test modules use these module objects.
with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    import kafka.protocol.admin as kp_admin
    import kafka.protocol.consumer as kp_consumer
    import kafka.protocol.metadata as kp_metadata
    import kafka.protocol.producer as kp_producer
    from kafka.protocol import api_header as kp_api_header
    from kafka.protocol.data_container import DataContainer
    from kafka.protocol.parser import KafkaProtocol
    from kafka.record.default_records import DefaultRecordBatchBuilder

from strom.wire.connection import NEED_DATA, Connection, Request, encode_response
from strom.wire.message import Message, Struct
from strom.wire.primitives import ZERO_UUID

CLIENT_ID = "strøm-tëst-クライアント"
"""Non-ASCII, so a byte-length/char-length mix-up in the header shows."""

# kafka-python renames two MetadataResponse fields (its `json_patch`) and
# decodes them as a set of bit positions: (Strom class, kafka-python name).
RENAMES: dict[tuple[str, str], str] = {
    ("MetadataResponse", "authorized_operations"): "cluster_authorized_operations",
    ("MetadataResponseTopic", "authorized_operations"): "topic_authorized_operations",
}
_REVERSE_RENAMES = {(cls, strom): kp for (cls, kp), strom in RENAMES.items()}

__all__ = ["kp_admin", "kp_api_header", "kp_consumer", "kp_metadata", "kp_producer"]


@dataclass(frozen=True)
class ApiCase:
    """One API: its kafka-python classes, versions to cover and value builders."""

    name: str
    kp_request_cls: Any
    kp_response_cls: Any
    versions: range
    kp_request: Callable[[int], Any]
    strom_response: Callable[[int], Message]
    check_request: Callable[[Any, int], None]
    check_response: Callable[[Any, int], None]

    def params(self) -> list[tuple[ApiCase, int]]:
        return [(self, v) for v in self.versions]


def case_id(value: object) -> str:
    return value.name if isinstance(value, ApiCase) else f"v{value}"


# --- framing -----------------------------------------------------------------


def kp_send(
    requests: list[tuple[Any, int]], client_id: str | None = CLIENT_ID
) -> tuple[Any, bytes]:
    """Frame (request, correlation id) pairs with kafka-python's client protocol."""
    proto = KafkaProtocol(client_id=client_id)
    for request, correlation_id in requests:
        proto.send_request(request, correlation_id=correlation_id)
    return proto, bytes(proto.send_bytes())


def strom_receive(data: bytes) -> list[Request]:
    """Decode every request frame in `data` with Strom's sans-IO connection."""
    conn = Connection()
    conn.receive_data(data)
    out = []
    while True:
        event = conn.next_event()
        if event is NEED_DATA:
            break
        assert isinstance(event, Request), event
        out.append(event)
    assert conn.buffered == 0
    return out


M = TypeVar("M", bound=Message)


def strom_body(data: bytes, cls: type[M]) -> M:
    """The body of the single request frame in `data`, decoded by Strom."""
    (request,) = strom_receive(data)
    assert isinstance(request.body, cls), request.body
    return request.body


def strom_response_bytes(request: Request, body: Message, body_version: int | None = None) -> bytes:
    header = request.header
    chunks = encode_response(
        header.request_api_key,
        header.request_api_version,
        header.correlation_id,
        body,
        body_version,
    )
    return b"".join(bytes(c) for c in chunks)


def kp_receive(proto: Any, data: bytes) -> list[tuple[int, Any]]:
    """Decode response frames with kafka-python against its in-flight requests."""
    responses: list[tuple[int, Any]] = proto.receive_bytes(data)
    assert not proto.in_flight_requests
    return responses


# --- value helpers -------------------------------------------------------------


def record_batch(value: bytes, producer_id: int = 4242, base_offset: int = 0) -> bytes:
    """A real, deterministic v2 RecordBatch built by kafka-python."""
    builder = DefaultRecordBatchBuilder(
        magic=2,
        compression_type=0,
        is_transactional=0,
        producer_id=producer_id,
        producer_epoch=3,
        base_sequence=17,
        batch_size=1 << 20,
    )
    builder.append(
        base_offset,
        timestamp=1_700_000_000_123,
        key=b"k\x00",
        value=value,
        headers=[("hé", b"\xff")],
    )
    return bytes(builder.build())


def fixed_uuid(n: int) -> uuid.UUID:
    return uuid.UUID(int=(0x0123456789ABCDEF << 64) | (n * 0x1111))


# --- structural comparison -----------------------------------------------------


def _kp_fields(kp: Any) -> Any:
    return kp._struct._fields


def _bits(value: int) -> set[int] | None:
    """Strom's int32 bit field as kafka-python's set of bits (None: not requested)."""
    raw = value & 0xFFFFFFFF
    bits = {i for i in range(32) if raw >> i & 1}
    return None if bits == {31} else bits


def assert_matches(
    strom: Struct, kp: Any, version: int, path: str = "", *, no_unknown_tags: bool = True
) -> int:
    """Assert every field kafka-python's schema has at `version` is equal on both sides.

    Returns how many leaf values were compared. With `no_unknown_tags`, neither
    side may have tagged fields it did not recognise.
    """
    assert isinstance(kp, DataContainer), f"{path}: {kp!r}"
    leaves = 0
    if no_unknown_tags:
        assert strom.unknown_tagged_fields == (), f"{path}: {strom.unknown_tagged_fields!r}"  # type: ignore[attr-defined]
        assert not kp.unknown_tags, f"{path}: {kp.unknown_tags!r}"
    cls_name = type(strom).__name__
    for field in _kp_fields(kp):
        if not field.for_version_q(version):
            continue
        name = RENAMES.get((cls_name, field.name), field.name)
        here = f"{path}.{name}"
        s = getattr(strom, name)
        k = getattr(kp, field.name)
        if field.is_struct_array():
            if k is None or s is None:
                assert (s, k) == (None, None), f"{here}: {s!r} != {k!r}"
                leaves += 1
                continue
            assert len(s) == len(k), f"{here}: {len(s)} items != {len(k)}"
            for i, (si, ki) in enumerate(zip(s, k, strict=True)):
                leaves += assert_matches(
                    si, ki, version, f"{here}[{i}]", no_unknown_tags=no_unknown_tags
                )
        elif field.is_struct():
            if k is None:  # absent tagged struct: Strom holds its default
                assert s == type(s)(), f"{here}: {s!r} but kafka-python saw none"
                leaves += 1
            else:
                leaves += assert_matches(s, k, version, here, no_unknown_tags=no_unknown_tags)
        elif field.is_array():
            assert s == k, f"{here}: {s!r} != {k!r}"
            leaves += 1
        else:
            t = field.type_str
            if t == "uuid":
                assert s == (ZERO_UUID if k is None else k), f"{here}: {s!r} != {k!r}"
            elif t == "bitfield":
                assert _bits(s) == k, f"{here}: {s!r} != {k!r}"
            elif t in ("bytes", "records"):
                sb = None if s is None else bytes(s)
                kb = None if k is None else bytes(k)
                assert sb == kb, f"{here}: {sb!r} != {kb!r}"
            elif t == "bool":
                assert (type(s), s) == (bool, bool(k)), f"{here}: {s!r} != {k!r}"
            else:
                assert (type(s), s) == (type(k), k), f"{here}: {s!r} != {k!r}"
            leaves += 1
    return leaves


def trim_to_version(strom: Struct, kp_struct: Any, version: int) -> None:
    """Reset, in place, every Strom field kafka-python's schema lacks at `version`."""
    default = type(strom)()
    cls_name = type(strom).__name__
    fields = kp_struct.fields
    for name in strom.FIELDS:
        if name == "unknown_tagged_fields":
            continue
        field = fields.get(_REVERSE_RENAMES.get((cls_name, name), name))
        if field is None or not field.for_version_q(version):
            setattr(strom, name, getattr(default, name))
            continue
        value = getattr(strom, name)
        if field.is_struct_array() and value is not None:
            for item in value:
                trim_to_version(item, field.array_of, version)
        elif field.is_struct():
            trim_to_version(value, field, version)


def strom_body_for(case: ApiCase, version: int) -> Message:
    body = case.strom_response(version)
    trim_to_version(body, case.kp_response_cls._struct, version)
    return body


# --- the two directions --------------------------------------------------------


def run_request_case(case: ApiCase, version: int, correlation_id: int) -> Request:
    """kafka-python encodes the request; Strom decodes it; every field must agree."""
    kp_req = case.kp_request(version)
    _, data = kp_send([(kp_req, correlation_id)])
    (request,) = strom_receive(data)
    header = request.header
    assert header.request_api_key == case.kp_request_cls.API_KEY
    assert header.request_api_version == version
    assert header.correlation_id == correlation_id
    assert header.client_id == CLIENT_ID
    assert header.unknown_tagged_fields == ()
    assert type(request.body).API_KEY == case.kp_request_cls.API_KEY
    assert request.size == len(data) - 4
    compared = assert_matches(request.body, kp_req, version)
    assert compared > 0 or not any(f.for_version_q(version) for f in _kp_fields(kp_req))
    case.check_request(request.body, version)
    return request


def run_response_case(case: ApiCase, version: int, correlation_id: int) -> Any:
    """Strom encodes the response to kafka-python's request; kafka-python decodes it."""
    proto, data = kp_send([(case.kp_request(version), correlation_id)])
    (request,) = strom_receive(data)
    body = strom_body_for(case, version)
    raw = strom_response_bytes(request, body)
    ((got_id, got),) = kp_receive(proto, raw)
    assert got_id == correlation_id
    assert type(got) is case.kp_response_cls
    assert got.version == version
    assert assert_matches(body, got, version) > 0
    case.check_response(got, version)
    return got
