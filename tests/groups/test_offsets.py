"""Offset commits, fetches, deletes, retention and group deletion on the pure state machine."""

from __future__ import annotations

from strom.coordinator.groups.api import CommitPartition, CommitRequest, CommitResult
from strom.coordinator.groups.model import GroupState
from strom.coordinator.groups.records import GroupRecord, OffsetRecord
from strom.wire.errors import ErrorCode
from tests.groups.sim import Sim

DAY = 24 * 3600 * 1000


def commit(
    sim: Sim,
    offset: int = 5,
    *,
    group: str = "g",
    generation: int = -1,
    member: str = "",
    instance: str | None = None,
    metadata: str | None = "meta",
    retention: int = -1,
    v9: bool = False,
    partitions: tuple[int, ...] = (0,),
) -> dict[tuple[str, int], ErrorCode]:
    req = CommitRequest(
        group, generation, member,
        [CommitPartition("t", p, offset, 3, metadata) for p in partitions],
        instance, retention, v9,
    )  # fmt: skip
    return sim.answer(
        sim.call(lambda token: sim.machine.commit(sim.now, req, token)), CommitResult
    ).errors


def fetched(sim: Sim, group: str = "g") -> dict[tuple[str, int], int]:
    return {
        (topic, p): entry.offset
        for topic, parts in sim.machine.fetch_offsets(group, None)
        for p, entry in parts
        if entry is not None
    }


def test_simple_commit_creates_an_empty_group() -> None:
    sim = Sim()
    assert commit(sim) == {("t", 0): ErrorCode.NONE}
    assert sim.state() is GroupState.EMPTY
    assert sim.group().protocol_type is None
    [(topic, [(partition, entry)])] = sim.machine.fetch_offsets("g", [("t", [0])])
    assert (topic, partition) == ("t", 0)
    assert entry is not None
    assert (entry.offset, entry.leader_epoch, entry.metadata) == (5, 3, "meta")
    assert sim.machine.fetch_offsets("g", [("t", [1])]) == [("t", [(1, None)])]
    assert sim.machine.fetch_offsets("unknown", [("t", [0])]) == [("t", [(0, None)])]


def test_member_commits_check_member_and_generation() -> None:
    sim = Sim()
    (a, b), gen = sim.form(2)
    assert commit(sim, generation=gen, member=a) == {("t", 0): ErrorCode.NONE}
    assert commit(sim, generation=gen - 1, member=a) == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert commit(sim, generation=gen, member="x") == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}
    assert commit(sim) == {("t", 0): ErrorCode.UNKNOWN_MEMBER_ID}  # simple commit, active group
    assert commit(sim, generation=gen, group="") == {("t", 0): ErrorCode.INVALID_GROUP_ID}
    sim.join(b, protocols=[("range", b"v2")])  # PreparingRebalance: commits still allowed
    assert commit(sim, 6, generation=gen, member=a) == {("t", 0): ErrorCode.NONE}
    assert fetched(sim) == {("t", 0): 6}


def test_commit_while_completing_rebalance() -> None:
    sim = Sim()
    a = sim.join_new()
    gen = sim.joined(sim.join(a)).generation
    assert commit(sim, generation=gen, member=a) == {("t", 0): ErrorCode.REBALANCE_IN_PROGRESS}


def test_commit_to_a_missing_group_with_a_generation() -> None:
    sim = Sim()
    assert commit(sim, generation=3, member="m") == {("t", 0): ErrorCode.ILLEGAL_GENERATION}
    assert commit(sim, generation=3, member="m", v9=True) == {
        ("t", 0): ErrorCode.GROUP_ID_NOT_FOUND
    }
    assert "g" not in sim.machine.groups


def test_static_commit_fencing() -> None:
    sim = Sim()
    member = sim.joined(sim.join(instance="i")).member_id
    gen = sim.group().generation
    sim.sync(member, gen, {member: b""}, instance="i")
    assert commit(sim, generation=gen, member=member, instance="i")[("t", 0)] == ErrorCode.NONE
    assert commit(sim, generation=gen, member="old", instance="i")[("t", 0)] == (
        ErrorCode.FENCED_INSTANCE_ID
    )


def test_metadata_too_large_and_null_metadata() -> None:
    sim = Sim(offset_metadata_max_bytes=10)
    out = commit(sim, metadata="x" * 11, partitions=(0,))
    assert out == {("t", 0): ErrorCode.OFFSET_METADATA_TOO_LARGE}
    assert commit(sim, metadata=None, partitions=(1,)) == {("t", 1): ErrorCode.NONE}
    [(_, [(_, entry)])] = sim.machine.fetch_offsets("g", [("t", [1])])
    assert entry is not None
    assert entry.metadata == ""


def test_commit_is_acknowledged_only_once_written() -> None:
    sim = Sim()
    commit(sim, 1)
    sim.log.fail = ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert commit(sim, 2) == {("t", 0): ErrorCode.COORDINATOR_NOT_AVAILABLE}
    sim.log.fail = ErrorCode.MESSAGE_TOO_LARGE  # Kafka 4's coordinator: UNKNOWN_SERVER_ERROR
    assert commit(sim, 3) == {("t", 0): ErrorCode.UNKNOWN_SERVER_ERROR}
    assert fetched(sim) == {("t", 0): 1}


def test_commit_records_and_reload() -> None:
    sim = Sim()
    (a, b), gen = sim.form(2)
    commit(sim, 7, generation=gen, member=a, partitions=(0, 1))
    records = sim.log.parsed()
    assert any(isinstance(r, GroupRecord) for r in records)
    offsets = [r for r in records if isinstance(r, OffsetRecord)]
    assert [(r.topic, r.partition, r.entry.offset) for r in offsets] == [  # type: ignore[union-attr]
        ("t", 0, 7),
        ("t", 1, 7),
    ]
    again = Sim()
    again.machine.load(records, sim.now + 5)
    group = again.group()
    assert group.state is GroupState.STABLE
    assert group.generation == gen
    assert set(group.members) == {a, b}
    assert group.members[b].assignment == f"a-{b}".encode()
    assert fetched(again) == {("t", 0): 7, ("t", 1): 7}
    again.now = sim.now + 5
    assert again.heartbeat(b, gen) == ErrorCode.NONE  # carries on without a rebalance


def test_delete_groups() -> None:
    sim = Sim()
    commit(sim, group="simple")
    (_a,), _ = sim.form(1)
    assert sim.delete_groups("simple", "g", "nope", "") == {
        "simple": ErrorCode.NONE,
        "g": ErrorCode.NON_EMPTY_GROUP,
        "nope": ErrorCode.GROUP_ID_NOT_FOUND,
        "": ErrorCode.INVALID_GROUP_ID,
    }
    assert "simple" not in sim.machine.groups
    tombstones = [
        r
        for r in sim.log.parsed()
        if isinstance(r, OffsetRecord | GroupRecord) and r.group_id == "simple"
    ]
    assert isinstance(tombstones[-1], GroupRecord)
    assert tombstones[-1].value is None
    assert isinstance(tombstones[-2], OffsetRecord)
    assert tombstones[-2].entry is None
    reloaded = Sim()
    reloaded.machine.load(sim.log.parsed(), sim.now)
    assert "simple" not in reloaded.machine.groups


def test_offset_delete() -> None:
    sim = Sim()
    commit(sim, partitions=(0, 1))
    out = sim.delete_offsets("g", [("t", 0), ("u", 0)])
    assert out.error == ErrorCode.NONE
    assert out.partitions == {("t", 0): ErrorCode.NONE, ("u", 0): ErrorCode.NONE}
    assert fetched(sim) == {("t", 1): 5}
    assert sim.delete_offsets("nope", [("t", 0)]).error == ErrorCode.GROUP_ID_NOT_FOUND


def test_offset_delete_of_subscribed_topic() -> None:
    sim = Sim()
    sub = b"\x00\x00" + b"\x00\x00\x00\x01" + b"\x00\x01t" + b"\xff\xff\xff\xff"
    member = sim.joined(sim.join(protocols=[("range", sub)], v4=False)).member_id
    sim.sync(member, 1, {member: b""})
    commit(sim, generation=1, member=member)
    commit(sim, generation=1, member=member, partitions=(0,))
    assert sim.group().subscribed_topics == frozenset({"t"})
    out = sim.delete_offsets("g", [("t", 0)])
    assert (out.error, out.partitions) == (
        ErrorCode.NONE,
        {("t", 0): ErrorCode.GROUP_SUBSCRIBED_TO_TOPIC},
    )


def test_retention_of_empty_groups_and_explicit_expiry() -> None:
    sim = Sim(offsets_retention_ms=7 * DAY)
    commit(sim, group="simple")
    commit(sim, group="explicit", retention=1000)
    (a,), gen = sim.form(1)
    commit(sim, group="g", generation=gen, member=a)
    sim.now += 1000
    assert sim.expire() == 1
    assert "explicit" not in sim.machine.groups
    sim.now += 7 * DAY
    sim.heartbeat(a, gen)
    sim.expire()
    assert "simple" not in sim.machine.groups
    assert fetched(sim) == {("t", 0): 5}  # a live group keeps its offsets
    sim.leave((a, None))
    sim.advance(0)
    assert sim.state() is GroupState.EMPTY
    sim.now += 7 * DAY - 1
    sim.expire()
    assert fetched(sim) == {("t", 0): 5}
    sim.now += 1
    sim.expire()
    assert "g" not in sim.machine.groups


def test_list_and_describe() -> None:
    sim = Sim()
    commit(sim, group="simple")
    sim.form(2)
    listed = {g.group_id: (g.protocol_type, g.state) for g in sim.machine.list_groups([], [])}
    assert listed == {"simple": ("", "Empty"), "g": ("consumer", "Stable")}
    assert [g.group_id for g in sim.machine.list_groups(["stable"], [])] == ["g"]
    assert sim.machine.list_groups([], ["consumer"]) == []
    assert len(sim.machine.list_groups([], ["Classic"])) == 2
    summary = sim.machine.describe("g")
    assert summary is not None
    assert (summary.state, summary.protocol_type, summary.protocol_data) == (
        "Stable",
        "consumer",
        "range",
    )
    assert all(m.assignment and m.metadata == b"m" for m in summary.members)
    assert sim.machine.describe("missing") is None
