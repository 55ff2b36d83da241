"""`GroupCoordinator.unload`: this node stopped leading a `__consumer_offsets` partition.

Its groups are forgotten here (their state stays in the log for the next leader), parked
JoinGroup and SyncGroup responses and writes still in flight are answered NOT_COORDINATOR, and
the other groups carry on untouched. Loading the log again brings back what was written.
"""

from __future__ import annotations

from strom.coordinator.groups.api import CommitPartition, CommitRequest, CommitResult, JoinResult
from strom.coordinator.groups.model import GroupState
from strom.coordinator.groups.records import GroupRecord, OffsetRecord
from strom.wire.errors import ErrorCode
from tests.groups.sim import Sim


def _commit(sim: Sim, group: str, offset: int) -> int | CommitResult:
    req = CommitRequest(group, -1, "", [CommitPartition("t", 0, offset, 1, "")])
    return sim.call(lambda token: sim.machine.commit(sim.now, req, token))


def test_unload_answers_parked_requests_and_writes_not_coordinator() -> None:
    sim = Sim(initial_rebalance_delay_ms=60_000)
    parked = sim.join(sim.join_new(group="a"), group="a")
    assert isinstance(parked, int)  # waiting out the initial delay
    assert sim.answer(_commit(sim, "b", 5), CommitResult).errors == {("t", 0): ErrorCode.NONE}
    sim.log.hold = True
    in_flight = _commit(sim, "b", 6)
    assert isinstance(in_flight, int)
    other = _commit(sim, "c", 1)
    assert isinstance(other, int)

    dropped = sim.machine.unload(sim.now, lambda group_id: group_id in ("a", "b"))
    sim.settle()
    assert sorted(dropped) == ["a", "b"]
    assert sim.answer(parked, JoinResult).error == ErrorCode.NOT_COORDINATOR
    assert sim.answer(in_flight, CommitResult).errors == {("t", 0): ErrorCode.NOT_COORDINATOR}
    assert sorted(sim.machine.groups) == ["c"]

    # the unloaded write's outcome may still come back (an asynchronous append): ignored
    sim.log.hold = False
    sim.complete_writes()
    assert sim.answer(other, CommitResult).errors == {("t", 0): ErrorCode.NONE}
    assert sorted(sim.machine.groups) == ["c"]

    # loading the log again (the next leader does) brings back what was written
    again = Sim()
    again.machine.load(
        [r for r in sim.log.parsed() if isinstance(r, OffsetRecord | GroupRecord)], again.now
    )
    offsets = {
        g: {
            (t, p): e.offset
            for t, parts in again.machine.fetch_offsets(g, None)
            for p, e in parts
            if e is not None
        }
        for g in again.machine.groups
    }
    assert offsets["b"] == {("t", 0): 6}  # the append had happened; only the answer was lost
    assert again.state("b") is GroupState.EMPTY


def test_unload_of_nothing_changes_nothing() -> None:
    sim = Sim()
    sim.answer(_commit(sim, "g", 1), CommitResult)
    assert sim.machine.unload(sim.now, lambda _group_id: False) == []
    assert sorted(sim.machine.groups) == ["g"]
