"""The follower's handling of its leader's Fetch answers (`LeaderFetcher`), on real logs and a
stand-in for the broker: what it asks for, appends byte for byte, high watermark, divergence."""

from __future__ import annotations

import dataclasses
import uuid
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import trio

from strom.broker.replication.fetcher import FetchTarget, LeaderFetcher
from strom.config import BrokerConfig
from strom.config.quorum import Address
from strom.storage import LogConfig
from strom.storage.log.partition import PartitionLog
from strom.wire.errors import ErrorCode
from strom.wire.messages.fetch import FetchResponse
from tests.log.helpers import T0, batch, get_log, manager, open_log, read_everything

pytestmark = pytest.mark.trio

TOPIC_ID = uuid.UUID(int=7)
Key = tuple[str, int]
KEY: Key = ("t", 0)


class _Logs:
    def __init__(self, log: PartitionLog) -> None:
        self.log = log

    def get(self, topic: str, index: int) -> PartitionLog | None:
        return self.log if (topic, index) == KEY else None

    def truncate_to(self, topic: str, index: int, offset: int, *, checkpoint: bool = True) -> None:
        assert (topic, index) == KEY
        self.log.truncate_to(offset)

    def checkpoint_partitions(self, keys: list[tuple[str, int]]) -> None:
        assert set(keys) <= {KEY}


def _fetcher(
    log: PartitionLog, leader_epoch: int = 1, logs: Any = None, keys: tuple[Key, ...] = (KEY,)
) -> LeaderFetcher:
    broker: Any = SimpleNamespace(
        node_id=2,
        config=BrokerConfig.from_properties({}),
        logs=_Logs(log) if logs is None else logs,
        clock=lambda: T0,
        controller=SimpleNamespace(broker_epoch=42),
    )
    manager: Any = SimpleNamespace(
        broker=broker,
        targets={key: FetchTarget(TOPIC_ID, 1, leader_epoch) for key in keys},
        targets_changed=trio.Event(),
        high_watermark_listeners=[],
    )
    return LeaderFetcher(manager, 1)


def _answer(partition: FetchResponse.PartitionData) -> FetchResponse:
    return FetchResponse(
        responses=[FetchResponse.FetchableTopicResponse(topic_id=TOPIC_ID, partitions=[partition])]
    )


async def test_the_request_names_the_replica_and_the_local_log(tmp_path: Path) -> None:
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"a"]), 0, T0)
    fetcher = _fetcher(log)
    request = fetcher._request(fetcher._mine(), 0.0)
    assert (request.replica_state.replica_id, request.replica_state.replica_epoch) == (2, 42)
    assert request.replica_id == -1
    [topic] = request.topics
    assert topic.topic_id == TOPIC_ID
    [p] = topic.partitions
    assert (p.fetch_offset, p.last_fetched_epoch, p.current_leader_epoch) == (1, 0, 1)


async def test_a_fetch_session_names_only_what_changed(tmp_path: Path) -> None:
    """KIP-227 on the follower: a full Fetch first, then incremental ones carrying the
    leader's session id and the next epoch and naming only partitions whose fetch state
    changed; a partition backing off is forgotten; a session error starts over."""
    log = open_log(tmp_path / "t-0")
    log.append(batch([b"a"]), 0, T0)
    fetcher = _fetcher(log)
    first = fetcher._request(fetcher._mine(), 0.0)
    assert (first.session_id, first.session_epoch) == (0, 0)
    assert [p.partition for t in first.topics for p in t.partitions] == [0]
    fetcher._answered(first, FetchResponse(session_id=123))
    idle = fetcher._request(fetcher._mine(), 1.0)
    assert (idle.session_id, idle.session_epoch) == (123, 1)
    assert idle.topics == []
    assert idle.forgotten_topics_data == []
    fetcher._answered(idle, FetchResponse(session_id=123))
    leader = open_log(tmp_path / "leader" / "t-0")
    leader.append(batch([b"a"]), 0, T0)
    leader.append(batch([b"b"]), 1, T0)
    chunk = leader.read(1, 1 << 20).read_bytes()
    answer = _answer(FetchResponse.PartitionData(0, ErrorCode.NONE, high_watermark=1, records=chunk))
    await fetcher._apply(fetcher._mine(), answer, Address("127.0.0.1", 1))
    moved = fetcher._request(fetcher._mine(), 2.0)
    assert (moved.session_id, moved.session_epoch) == (123, 2)
    [topic] = moved.topics
    assert [(p.partition, p.fetch_offset) for p in topic.partitions] == [(0, 2)]
    fetcher._answered(moved, FetchResponse(session_id=123))
    error = _answer(
        FetchResponse.PartitionData(0, ErrorCode.KAFKA_STORAGE_ERROR, high_watermark=-1)
    )
    await fetcher._apply(fetcher._mine(), error, Address("127.0.0.1", 1))  # backs off
    backing_off = fetcher._request(fetcher._fetched_now(trio.current_time()), 3.0)
    assert backing_off.topics == []
    [gone] = backing_off.forgotten_topics_data
    assert (gone.topic_id, gone.partitions) == (TOPIC_ID, [0])
    fetcher._session.reset()  # e.g. FETCH_SESSION_ID_NOT_FOUND
    again = fetcher._request(fetcher._mine(), 4.0)
    assert (again.session_id, again.session_epoch) == (0, 0)
    assert [p.fetch_offset for t in again.topics for p in t.partitions] == [2]


async def test_records_are_appended_as_the_leader_wrote_them(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    for value in (b"a", b"b", b"c"):
        leader.append(batch([value]), 1, T0)
    follower = open_log(tmp_path / "follower" / "t-0")
    follower.high_watermark_follows_appends = False
    chunk = leader.read(0, 1 << 20).read_bytes()
    partition = FetchResponse.PartitionData(0, ErrorCode.NONE, high_watermark=2, records=chunk)
    fetcher = _fetcher(follower)
    await fetcher._apply(fetcher._mine(), _answer(partition), Address("127.0.0.1", 1))
    assert follower.log_end_offset == 3
    assert follower.high_watermark == 2  # the leader's, within the local log
    assert read_everything(follower) == read_everything(leader)
    assert follower.read(0, 1 << 20).read_bytes() == chunk  # byte for byte


@pytest.mark.parametrize(("flush_messages", "flushed"), [(1, 3), (10, 0)])
async def test_flush_messages_flushes_before_the_next_fetch(
    tmp_path: Path, flush_messages: int, flushed: int
) -> None:
    """flush.messages=1: what a follower appended is synced before its next fetch tells the
    leader it holds it (Kafka flushes inside the append), so acks=all means synced on every
    ISR member; with more unflushed messages allowed nothing is synced yet."""
    leader = open_log(tmp_path / "leader" / "t-0")
    for value in (b"a", b"b", b"c"):
        leader.append(batch([value]), 1, T0)
    config = dataclasses.replace(LogConfig(), flush_messages=flush_messages)
    follower = open_log(tmp_path / "follower" / "t-0", config)
    follower.high_watermark_follows_appends = False
    chunk = leader.read(0, 1 << 20).read_bytes()
    partition = FetchResponse.PartitionData(0, ErrorCode.NONE, high_watermark=2, records=chunk)
    fetcher = _fetcher(follower)
    await fetcher._apply(fetcher._mine(), _answer(partition), Address("127.0.0.1", 1))
    assert follower.log_end_offset == 3
    assert follower.recovery_point == flushed


async def test_the_log_start_follows_the_leaders_up_to_the_high_watermark(
    tmp_path: Path,
) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    for value in (b"a", b"b", b"c", b"d"):
        leader.append(batch([value]), 1, T0)
    follower = open_log(tmp_path / "follower" / "t-0")
    follower.high_watermark_follows_appends = False
    woken: list[tuple[str, int]] = []
    fetcher = _fetcher(follower)
    fetcher.manager.high_watermark_listeners.append(lambda *key: woken.append(key))
    chunk = leader.read(0, 1 << 20).read_bytes()
    partition = FetchResponse.PartitionData(
        0, ErrorCode.NONE, high_watermark=2, log_start_offset=3, records=chunk
    )  # the leader deleted below 3; this follower has committed only below 2
    await fetcher._apply(fetcher._mine(), _answer(partition), Address("127.0.0.1", 1))
    assert (follower.log_start_offset, follower.high_watermark) == (2, 2)
    assert woken == [KEY]
    partition = FetchResponse.PartitionData(
        0, ErrorCode.NONE, high_watermark=4, log_start_offset=3, records=b""
    )
    await fetcher._apply(fetcher._mine(), _answer(partition), Address("127.0.0.1", 1))
    assert (follower.log_start_offset, follower.high_watermark) == (3, 4)
    partition.log_start_offset = 1  # an older answer never moves it back
    await fetcher._apply(fetcher._mine(), _answer(partition), Address("127.0.0.1", 1))
    assert follower.log_start_offset == 3


async def test_a_diverging_epoch_truncates(tmp_path: Path) -> None:
    follower = open_log(tmp_path / "t-0")
    for epoch in (0, 0, 1, 1):
        follower.append(batch([b"x"]), epoch, T0)
    partition = FetchResponse.PartitionData(
        0, ErrorCode.NONE, high_watermark=2,
        diverging_epoch=FetchResponse.EpochEndOffset(epoch=0, end_offset=2),
    )  # fmt: skip
    fetcher = _fetcher(follower, leader_epoch=2)
    await fetcher._apply(fetcher._mine(), _answer(partition), Address("127.0.0.1", 1))
    assert follower.log_end_offset == 2
    assert follower.latest_epoch() == 0


async def test_partitions_cut_in_one_answer_share_one_checkpoint(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A failover cuts many partitions in one answer: each truncation is on disk at once, but
    the directory's checkpoints (every partition's offsets) are written once for all of them,
    not once each (quadratic in the partitions a broker follows)."""
    logs = manager([tmp_path])
    keys = tuple(("t", index) for index in range(3))
    for _topic, index in keys:
        follower = logs.create("t", index, LogConfig())
        for epoch in (0, 0, 1, 1):
            follower.append(batch([b"x"]), epoch, T0)
    written: list[Path] = []
    monkeypatch.setattr(logs, "_checkpoint_dir", written.append)
    fetcher = _fetcher(get_log(logs, "t", 0), leader_epoch=2, logs=logs, keys=keys)
    diverged = FetchResponse.EpochEndOffset(epoch=0, end_offset=2)
    partitions = [
        FetchResponse.PartitionData(
            index, ErrorCode.NONE, high_watermark=2, diverging_epoch=diverged
        )
        for _topic, index in keys
    ]
    answer = FetchResponse(responses=[
        FetchResponse.FetchableTopicResponse(topic="t", topic_id=TOPIC_ID, partitions=partitions)
    ])  # fmt: skip
    await fetcher._apply(fetcher._mine(), answer, Address("127.0.0.1", 1))
    assert [get_log(logs, *key).log_end_offset for key in keys] == [2, 2, 2]
    assert written == [tmp_path]


async def test_an_error_backs_the_partition_off(tmp_path: Path) -> None:
    follower = open_log(tmp_path / "t-0")
    fetcher = _fetcher(follower)
    partition = FetchResponse.PartitionData(0, ErrorCode.FENCED_LEADER_EPOCH)
    await fetcher._apply(fetcher._mine(), _answer(partition), Address("127.0.0.1", 1))
    assert KEY in fetcher._delayed


async def test_an_answer_for_an_older_epoch_is_ignored(tmp_path: Path) -> None:
    leader = open_log(tmp_path / "leader" / "t-0")
    leader.append(batch([b"a"]), 1, T0)
    follower = open_log(tmp_path / "follower" / "t-0")
    fetcher = _fetcher(follower)
    sent = fetcher._mine()
    fetcher.manager.targets = {KEY: FetchTarget(TOPIC_ID, 1, 2)}  # the image moved on
    partition = FetchResponse.PartitionData(
        0, ErrorCode.NONE, high_watermark=1, records=leader.read(0, 1 << 20).read_bytes()
    )
    await fetcher._apply(sent, _answer(partition), Address("127.0.0.1", 1))
    assert follower.log_end_offset == 0


async def test_a_backing_off_fetcher_sleeps_past_a_forgotten_partitions_delay(
    tmp_path: Path,
) -> None:
    """Every partition it follows backs off, and a partition it no longer follows from this
    leader left an expired delay behind: the fetcher waits for its own partitions' delays, not
    the expired one (it spun at one instant, found by the whole-cluster simulation's guard
    against busy loops)."""
    fetcher = _fetcher(open_log(tmp_path))
    broker: Any = fetcher.manager.broker
    broker.image = SimpleNamespace(broker=lambda _node: None)  # the leader is not registered
    now = trio.current_time()
    fetcher._delayed = {KEY: now + 5.0, ("gone", 0): now - 1.0}
    rounds = 0
    mine = fetcher._mine

    def counted() -> dict[tuple[str, int], FetchTarget]:
        nonlocal rounds
        rounds += 1
        return mine()

    fetcher._mine = counted  # type: ignore[method-assign]
    with trio.move_on_after(0.3):
        await fetcher.run()
    assert rounds < 10, f"{rounds} rounds of the fetch loop in 0.3 s while every partition waits"


async def test_a_partition_whose_epoch_moved_on_while_another_was_handled_is_ignored(
    tmp_path: Path,
) -> None:
    """One answer, two partitions: the first is out of range (the follower asks the leader for
    its offsets: the fetcher waits), and while it waits the image moves the second one on to a
    new leader epoch. The second partition's records, fetched in the old epoch, are not
    appended (as when the image had moved on before the answer came)."""
    leader = open_log(tmp_path / "leader" / "t-1")
    leader.append(batch([b"a"]), 1, T0)
    logs = {KEY: open_log(tmp_path / "t-0"), ("t", 1): open_log(tmp_path / "t-1")}
    fetcher = _fetcher(logs[KEY])
    broker: Any = fetcher.broker
    broker.logs = SimpleNamespace(get=lambda topic, index: logs.get((topic, index)))
    manager: Any = fetcher.manager
    manager.targets = {KEY: FetchTarget(TOPIC_ID, 1, 1), ("t", 1): FetchTarget(TOPIC_ID, 1, 1)}
    sent = fetcher._mine()

    async def out_of_range(key: Any, target: Any, address: Any) -> None:
        await trio.lowlevel.checkpoint()  # ListOffsets to the leader
        manager.targets = {**manager.targets, ("t", 1): FetchTarget(TOPIC_ID, 1, 2)}

    fetcher._out_of_range = out_of_range  # type: ignore[method-assign]
    answer = FetchResponse(
        responses=[
            FetchResponse.FetchableTopicResponse(
                topic_id=TOPIC_ID,
                partitions=[
                    FetchResponse.PartitionData(0, ErrorCode.OFFSET_OUT_OF_RANGE),
                    FetchResponse.PartitionData(
                        1, ErrorCode.NONE, high_watermark=1, records=leader.read(0, 1 << 20).read_bytes()
                    ),
                ],
            )
        ]
    )
    await fetcher._apply(sent, answer, Address("127.0.0.1", 1))
    assert logs[("t", 1)].log_end_offset == 0
