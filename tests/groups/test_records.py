"""__consumer_offsets records: Kafka's partition hash and byte formats."""

from __future__ import annotations

import struct

import pytest

from strom.coordinator.groups import records
from strom.coordinator.groups.model import Group, Member, OffsetEntry
from strom.wire.errors import ProtocolError


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("", 0),
        ("hello", 99162322),
        ("polygenelubricants", -(2**31)),  # Integer.MIN_VALUE
        ("ß中😀", 0),  # computed below from UTF-16 units
    ],
)
def test_java_string_hash(text: str, expected: int) -> None:
    if text == "ß中😀":
        units = [0xDF, 0x4E2D, 0xD83D, 0xDE00]
        h = 0
        for u in units:
            h = (31 * h + u) & 0xFFFFFFFF
        expected = h - 2**32 if h >= 2**31 else h
    assert records.java_string_hash(text) == expected


def test_partition_for_uses_utils_abs() -> None:
    assert records.partition_for("polygenelubricants", 50) == 0
    assert records.partition_for("hello", 50) == 99162322 % 50
    assert records.partition_for("hello", 1) == 0
    negative = "Aa" * 9 + "z"
    h = records.java_string_hash(negative)
    assert records.partition_for(negative, 7) == abs(h) % 7


def test_offset_commit_record_bytes() -> None:
    key, value = records.offset_record("g", "t", 3, OffsetEntry(42, 5, "md", 1000))
    assert key == struct.pack(">hh1sh1si", 1, 1, b"g", 1, b"t", 3)
    assert value == struct.pack(">hqih2sq", 3, 42, 5, 2, b"md", 1000)
    parsed = records.parse_record(key, value)
    assert parsed == records.OffsetRecord("g", "t", 3, OffsetEntry(42, 5, "md", 1000))
    tombstone = records.parse_record(key, None)
    assert tombstone == records.OffsetRecord("g", "t", 3, None)


def test_offset_commit_with_expiry_uses_value_v1() -> None:
    _, value = records.offset_record("g", "t", 0, OffsetEntry(1, -1, "", 10, 99))
    assert value == struct.pack(">hqhqq", 1, 1, 0, 10, 99)
    parsed = records.parse_record(records.offset_key("g", "t", 0), value)
    assert isinstance(parsed, records.OffsetRecord)
    assert parsed.entry == OffsetEntry(1, -1, "", 10, 99)


def test_group_metadata_record() -> None:
    group = Group("grp", protocol_type="consumer", protocol_name="range", generation=4)
    group.add(
        Member("m1", "inst", "cid", "/1.2.3.4", 300, 45, "consumer", [("range", b"sub")], b"asg")
    )
    key, value = records.group_record(group, 777)
    assert key == struct.pack(">hh3s", 2, 3, b"grp")
    assert value is not None
    assert value[:2] == b"\x00\x03"
    parsed = records.parse_record(key, value)
    assert isinstance(parsed, records.GroupRecord)
    assert parsed.value is not None
    v = parsed.value
    assert (v.protocol_type, v.generation, v.protocol, v.leader, v.current_state_timestamp) == (
        "consumer", 4, "range", "m1", 777,
    )  # fmt: skip
    [m] = v.members
    assert (m.member_id, m.group_instance_id, m.client_id, m.client_host) == (
        "m1", "inst", "cid", "/1.2.3.4",
    )  # fmt: skip
    assert (m.rebalance_timeout, m.session_timeout, m.subscription, m.assignment) == (
        300, 45, b"sub", b"asg",
    )  # fmt: skip
    assert records.parse_record(records.group_key("grp"), None) == records.GroupRecord("grp", None)


def test_other_record_types_are_skipped_and_garbage_refused() -> None:
    assert records.parse_record(struct.pack(">h", 3) + b"whatever", b"x") is None
    with pytest.raises(ProtocolError):
        records.parse_record(None, b"x")
    with pytest.raises(ProtocolError):
        records.parse_record(struct.pack(">h", 1) + b"\x00", b"")
