"""Assertions shared by the Java tests: produced records against consumed ones."""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable
from typing import Any, Literal

from compat_tests.java.harness import Event


def no_error(outcome: dict[str, Any]) -> Any:
    """The result of an action the harness ran with Errors.outcome, which must have succeeded."""
    assert outcome["error"] is None, f"unexpected {outcome['error']}: {outcome['message']}"
    return outcome["result"]


def error_of(outcome: dict[str, Any]) -> str | None:
    return outcome["error"]  # type: ignore[no-any-return]


def serialized_size(data: str | None) -> int:
    """The client's serializedKeySize/serializedValueSize for a hex field or its length."""
    return -1 if data is None else len(bytes.fromhex(data))


def by_position(received: Iterable[Event]) -> dict[tuple[int, int], dict[str, Any]]:
    """Consumed records by (partition, offset); a record read twice is an error."""
    out: dict[tuple[int, int], dict[str, Any]] = {}
    for event in received:
        record = event["record"]
        position = (record["partition"], record["offset"])
        assert position not in out, f"record at {position} consumed twice"
        out[position] = record
    return out


def assert_round_trip(
    sent: list[Event],
    received: list[Event],
    *,
    order: Literal["contiguous", "increasing", "any"] = "contiguous",
    log_append_after: int | None = None,
) -> None:
    """Every sent record was consumed once, unchanged, where its RecordMetadata said it went.

    `order` of each partition's offsets in send order: "contiguous" (0, 1, 2, ...: one producer
    sent everything, and acks=all with idempotence keeps order across retries and in-flight
    requests), "increasing" (one producer, a later part of the log), "any" (several producers).
    `log_append_after`: the topic uses LogAppendTime, stamped no earlier than this (ms).
    """
    assert sent, "nothing was sent"
    got = by_position(received)
    assert len(got) == len(sent), f"sent {len(sent)} records, consumed {len(got)}"
    offsets: dict[int, list[int]] = defaultdict(list)
    for event in sent:
        spec, meta = event["record"], event["metadata"]
        where = (meta["partition"], meta["offset"])
        assert where in got, f"record {spec['index']} acknowledged at {where} but not consumed"
        record = got[where]
        context = f"record {spec['index']} at {where}"
        if spec["want_partition"] is not None:
            assert meta["partition"] == spec["want_partition"], context
        assert record["key"] == spec["key"], context
        assert record["value_len"] == spec["value_len"], context
        assert record["value_sha"] == spec["value_sha"], context
        assert record["headers"] == spec["headers"], context
        assert record["key_size"] == serialized_size(spec["key"]) == meta["key_size"], context
        value_size = -1 if spec["value_len"] is None else spec["value_len"]
        assert record["value_size"] == value_size == meta["value_size"], context
        assert isinstance(record["leader_epoch"], int), context
        assert record["leader_epoch"] >= 0, context
        if log_append_after is None:
            assert record["timestamp_type"] == "CreateTime", context
            if spec["want_timestamp"] is not None:
                assert meta["timestamp"] == spec["want_timestamp"], context
        else:
            assert record["timestamp_type"] == "LogAppendTime", context
            assert meta["timestamp"] >= log_append_after, f"{context}: {meta['timestamp']}"
        assert record["timestamp"] == meta["timestamp"], context
        offsets[meta["partition"]].append(meta["offset"])
    for partition, in_send_order in offsets.items():
        if order == "contiguous":
            assert in_send_order == list(range(len(in_send_order))), f"partition {partition}"
        elif order == "increasing":
            assert in_send_order == sorted(in_send_order), f"partition {partition}"
