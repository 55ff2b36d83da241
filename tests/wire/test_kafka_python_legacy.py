"""Strom against kafka-python's hand-written (pre-JSON) protocol classes.

kafka-python 3 still ships its older protocol layer, `kafka.protocol.old`:
per-version classes with hand-written schemas (`Schema(('name', Int32), ...)`),
their own `RequestHeader` / `RequestHeaderV2` / `ResponseHeader` classes and
their own codecs. They do not read Kafka's JSON at all, so they are a check on
Strom that is independent of the message definitions too. They stop at the
last non-flexible version of most APIs (ApiVersions has 3 and 4), so this
covers, for the versions both sides have:

  Produce 3-8, Fetch 4-11, ListOffsets 1-5, Metadata 0-8, OffsetCommit 2-7,
  OffsetFetch 1-5, FindCoordinator 0-2, JoinGroup 2-5, Heartbeat 0-3,
  LeaveGroup 0-3, SyncGroup 0-3, ApiVersions 0-4, CreateTopics 2-3,
  InitProducerId 0-1, DescribeConfigs 1-2.

Values are generated from each legacy schema (every field distinct and
non-default, two elements in every array) and compared by position against
Strom's fields in the order its definitions give for that version.
"""

from __future__ import annotations

import io
import itertools
import struct
import uuid
import warnings
from collections.abc import Iterator
from typing import Any

import pytest

from strom.wire.apis import response_class
from strom.wire.connection import encode_response
from strom.wire.message import Message
from strom.wire.messages import api_versions as s_api_versions
from strom.wire.primitives import ZERO_UUID
from tests.wire.kp_helpers import (
    CLIENT_ID,
    RENAMES,
    kp_admin,
    kp_consumer,
    kp_metadata,
    kp_producer,
    strom_receive,
    strom_response_bytes,
)

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from kafka.protocol.old import (
        admin,
        api_versions,
        commit,
        fetch,
        find_coordinator,
        group,
        init_producer_id,
        list_offsets,
        metadata,
        produce,
    )
    from kafka.protocol.old import types as t

# (name, legacy request list, legacy response list, kafka-python JSON classes, versions)
APIS: list[tuple[str, Any, Any, Any, Any, range]] = [
    (
        "Produce",
        produce.ProduceRequest,
        produce.ProduceResponse,
        kp_producer.ProduceRequest,
        kp_producer.ProduceResponse,
        range(3, 9),
    ),
    (
        "Fetch",
        fetch.FetchRequest,
        fetch.FetchResponse,
        kp_consumer.FetchRequest,
        kp_consumer.FetchResponse,
        range(4, 12),
    ),
    (
        "ListOffsets",
        list_offsets.ListOffsetsRequest,
        list_offsets.ListOffsetsResponse,
        kp_consumer.ListOffsetsRequest,
        kp_consumer.ListOffsetsResponse,
        range(1, 6),
    ),
    (
        "Metadata",
        metadata.MetadataRequest,
        metadata.MetadataResponse,
        kp_metadata.MetadataRequest,
        kp_metadata.MetadataResponse,
        range(9),
    ),
    (
        "OffsetCommit",
        commit.OffsetCommitRequest,
        commit.OffsetCommitResponse,
        kp_consumer.OffsetCommitRequest,
        kp_consumer.OffsetCommitResponse,
        range(2, 8),
    ),
    (
        "OffsetFetch",
        commit.OffsetFetchRequest,
        commit.OffsetFetchResponse,
        kp_consumer.OffsetFetchRequest,
        kp_consumer.OffsetFetchResponse,
        range(1, 6),
    ),
    (
        "FindCoordinator",
        find_coordinator.FindCoordinatorRequest,
        find_coordinator.FindCoordinatorResponse,
        kp_metadata.FindCoordinatorRequest,
        kp_metadata.FindCoordinatorResponse,
        range(3),
    ),
    (
        "JoinGroup",
        group.JoinGroupRequest,
        group.JoinGroupResponse,
        kp_consumer.JoinGroupRequest,
        kp_consumer.JoinGroupResponse,
        range(2, 6),
    ),
    (
        "SyncGroup",
        group.SyncGroupRequest,
        group.SyncGroupResponse,
        kp_consumer.SyncGroupRequest,
        kp_consumer.SyncGroupResponse,
        range(4),
    ),
    (
        "Heartbeat",
        group.HeartbeatRequest,
        group.HeartbeatResponse,
        kp_consumer.HeartbeatRequest,
        kp_consumer.HeartbeatResponse,
        range(4),
    ),
    (
        "LeaveGroup",
        group.LeaveGroupRequest,
        group.LeaveGroupResponse,
        kp_consumer.LeaveGroupRequest,
        kp_consumer.LeaveGroupResponse,
        range(4),
    ),
    (
        "ApiVersions",
        api_versions.ApiVersionsRequest,
        api_versions.ApiVersionsResponse,
        kp_metadata.ApiVersionsRequest,
        kp_metadata.ApiVersionsResponse,
        range(5),
    ),
    (
        "CreateTopics",
        admin.CreateTopicsRequest,
        admin.CreateTopicsResponse,
        kp_admin.CreateTopicsRequest,
        kp_admin.CreateTopicsResponse,
        range(2, 4),
    ),
    (
        "InitProducerId",
        init_producer_id.InitProducerIdRequest,
        init_producer_id.InitProducerIdResponse,
        kp_producer.InitProducerIdRequest,
        kp_producer.InitProducerIdResponse,
        range(2),
    ),
    (
        "DescribeConfigs",
        admin.DescribeConfigsRequest,
        admin.DescribeConfigsResponse,
        kp_admin.DescribeConfigsRequest,
        kp_admin.DescribeConfigsResponse,
        range(1, 3),
    ),
]
PARAMS = [
    pytest.param(old_req[v], old_resp[v], kp_req, kp_resp, v, id=f"{name}-v{v}")
    for name, old_req, old_resp, kp_req, kp_resp, versions in APIS
    for v in versions
]


# --- values from a legacy schema -------------------------------------------------


def generate(kind: Any, n: Iterator[int]) -> Any:
    """A distinct, non-default, non-null value of a legacy type."""
    i = next(n)
    if isinstance(kind, t.Schema):
        return tuple(generate(f, n) for f in kind.fields if f is not t.TaggedFields)
    if isinstance(kind, t.Array):
        return [generate(kind.array_of, n) for _ in range(2)]
    if isinstance(kind, t.String):  # and CompactString
        return f"s{i}-ü✓"
    if kind in (t.Bytes, t.CompactBytes):
        return bytes([i % 256, 0, 255]) * (i % 3 + 1)
    if kind is t.Boolean:
        return i % 2 == 1
    if kind is t.Int8:
        return i % 100 + 1
    if kind is t.Int16:
        return (i * 7919) % 65536 - 32768
    if kind is t.Int32:
        return (i * 2654435761) % 2**32 - 2**31
    if kind is t.Int64:
        return (i * 0x9E3779B97F4A7C15) % 2**64 - 2**63
    if kind is t.UUID:
        return uuid.UUID(int=i + 1)
    if kind is t.BitField:
        return {i % 31, (i + 7) % 31}
    raise AssertionError(f"no generator for {kind!r}")


def _bitfield_int(bits: set[int]) -> int:
    raw = sum(1 << b for b in bits)
    return raw - 2**32 if raw >= 2**31 else raw


def _values(old: Any, schema: Any) -> list[Any]:
    """An old Struct or decoded tuple as a list, without its trailing tagged fields."""
    if isinstance(old, tuple):
        values = list(old)
    else:
        values = [getattr(old, name) for name in schema.names]
    if schema.has_tagged_fields() and len(values) == len(schema.fields):
        values.pop()
    return values


def _untagged(schema: Any) -> list[Any]:
    return [f for f in schema.fields if f is not t.TaggedFields]


def assert_legacy_matches(
    strom: Any, old: Any, schema: Any, kp_struct: Any, version: int, path: str = ""
) -> int:
    """Compare by position: legacy schema fields vs Strom's fields at `version`."""
    kp_fields = kp_struct.untagged_fields(version)
    kinds = _untagged(schema)
    values = _values(old, schema)
    names = [RENAMES.get((type(strom).__name__, f.name), f.name) for f in kp_fields]
    assert len(kinds) == len(kp_fields), f"{path}: legacy {schema.names} vs Strom {names}"
    leaves = 0
    for kind, value, field, name in zip(kinds, values, kp_fields, names, strict=True):
        s = getattr(strom, name)
        here = f"{path}.{name}"
        if field.is_struct_array() and not isinstance(kind.array_of, t.Schema):
            # A legacy array of scalars is, on the wire, an array of one-field structs
            # (Metadata v0-9 topics: []string vs []MetadataRequestTopic{Name}).
            assert len(s) == len(value), here
            one = t.Schema(("value", kind.array_of))
            for i, (si, vi) in enumerate(zip(s, value, strict=True)):
                leaves += assert_legacy_matches(si, (vi,), one, field, version, f"{here}[{i}]")
        elif isinstance(kind, t.Array) and isinstance(kind.array_of, t.Schema):
            assert len(s) == len(value), here
            for i, (si, vi) in enumerate(zip(s, value, strict=True)):
                leaves += assert_legacy_matches(
                    si, vi, kind.array_of, field, version, f"{here}[{i}]"
                )
        elif isinstance(kind, t.Schema):
            leaves += assert_legacy_matches(s, value, kind, field, version, here)
        else:
            if kind is t.UUID:
                expected: Any = ZERO_UUID if value is None else value
            elif kind is t.BitField:
                expected = _bitfield_int(value)
            else:
                expected = value
            if kind in (t.Bytes, t.CompactBytes):
                s = None if s is None else bytes(s)
            assert s == expected, f"{here}: Strom {s!r} != legacy {expected!r}"
            assert type(s) is type(expected), f"{here}: {type(s)} vs {type(expected)}"
            leaves += 1
    return leaves


def build_strom(
    cls: type[Message], top: type[Message], values: Any, schema: Any, kp_struct: Any, version: int
) -> Any:
    """A Strom struct from generated legacy values, by position."""
    obj = cls()
    kp_fields = kp_struct.untagged_fields(version)
    for kind, value, field in zip(_untagged(schema), values, kp_fields, strict=True):
        name = RENAMES.get((cls.__name__, field.name), field.name)
        if isinstance(kind, t.Array) and isinstance(kind.array_of, t.Schema):
            nested = getattr(top, field.type_str)
            value = [build_strom(nested, top, v, kind.array_of, field, version) for v in value]
        elif isinstance(kind, t.Schema):
            value = build_strom(getattr(top, field.type_str), top, value, kind, field, version)
        elif kind is t.BitField:
            value = _bitfield_int(value)
        setattr(obj, name, value)
    return obj


# --- the tests -------------------------------------------------------------------


def _legacy_frame(old_cls: Any, values: tuple[Any, ...], correlation_id: int) -> bytes:
    req = old_cls(*values)
    req.with_header(correlation_id=correlation_id, client_id=CLIENT_ID)
    return bytes(req.encode(header=True, framed=True))


@pytest.mark.parametrize(("old_req", "old_resp", "kp_req", "kp_resp", "version"), PARAMS)
def test_legacy_request_decodes_in_strom(
    old_req: Any, old_resp: Any, kp_req: Any, kp_resp: Any, version: int
) -> None:
    assert version == old_req.API_VERSION
    values = generate(old_req.SCHEMA, itertools.count(1))
    (request,) = strom_receive(_legacy_frame(old_req, values, -7 - version))
    header = request.header
    assert (header.request_api_key, header.request_api_version) == (old_req.API_KEY, version)
    assert (header.correlation_id, header.client_id) == (-7 - version, CLIENT_ID)
    assert header.unknown_tagged_fields == ()
    body: Any = request.body
    compared = assert_legacy_matches(body, values, old_req.SCHEMA, kp_req._struct, version)
    assert compared > 0 or not _untagged(old_req.SCHEMA)  # ApiVersions v0-2 have no fields
    assert body.unknown_tagged_fields == ()


@pytest.mark.parametrize(("old_req", "old_resp", "kp_req", "kp_resp", "version"), PARAMS)
def test_strom_response_decodes_in_legacy(
    old_req: Any, old_resp: Any, kp_req: Any, kp_resp: Any, version: int
) -> None:
    assert version == old_resp.API_VERSION
    request_values = generate(old_req.SCHEMA, itertools.count(1))
    (request,) = strom_receive(_legacy_frame(old_req, request_values, 12345))

    values = generate(old_resp.SCHEMA, itertools.count(1000))
    if old_resp.API_KEY == 18:
        values = (0, *values[1:])  # a non-zero ApiVersions error would mean a v0 body
    cls = response_class(old_resp.API_KEY)
    body = build_strom(cls, cls, values, old_resp.SCHEMA, kp_resp._struct, version)
    raw = strom_response_bytes(request, body)

    got = old_resp.decode(io.BytesIO(raw), header=True, framed=True)
    assert got.header.correlation_id == 12345
    assert assert_legacy_matches(body, got, old_resp.SCHEMA, kp_resp._struct, version) > 0
    assert tuple(_values(got, old_resp.SCHEMA)) == values  # exactly what was generated


@pytest.mark.parametrize("version", [3, 4], ids=lambda v: f"v{v}")
def test_api_versions_tagged_fields_raw_in_legacy(version: int) -> None:
    """The legacy codec keeps ApiVersions v3+ tags raw and insists on ascending tag order."""
    body = s_api_versions.ApiVersionsResponse(
        error_code=0,
        api_keys=[
            s_api_versions.ApiVersionsResponse.ApiVersion(api_key=18, min_version=0, max_version=4)
        ],
        throttle_time_ms=-2,
        supported_features=[
            s_api_versions.ApiVersionsResponse.SupportedFeatureKey(
                name="ü", min_version=1, max_version=2
            )
        ],
        finalized_features_epoch=-3,
        finalized_features=[],
        zk_migration_ready=True,
        unknown_tagged_fields=((9, b"\x07"),),
    )
    raw = b"".join(bytes(c) for c in encode_response(18, version, 5, body))
    got = api_versions.ApiVersionsResponse[version].decode(
        io.BytesIO(raw), header=True, framed=True
    )
    assert got.header.correlation_id == 5
    assert (got.error_code, got.api_keys, got.throttle_time_ms) == (0, [(18, 0, 4)], -2)
    assert got.tags == {
        0: b"\x02" + b"\x03\xc3\xbc" + b"\x00\x01\x00\x02" + b"\x00",  # [{"ü", 1, 2}]
        1: struct.pack(">q", -3),
        # 2: an empty FinalizedFeatures is the default, so it is not written
        3: b"\x01",
        9: b"\x07",
    }
