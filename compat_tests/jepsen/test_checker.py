"""The queue checker on hand-made histories: each property caught alone, a valid history passes."""

from __future__ import annotations

import itertools

from compat_tests.jepsen.checker import History, Read, Send, check, summary
from compat_tests.jepsen.nemesis import HARD_WEIGHTS, LONG_KINDS, POWER_KINDS, choose, schedule


def acked(value: str, partition: int, offset: int, producer: int = 0, seq: int = 0) -> Send:
    return Send(value, producer, partition, seq, "acked", offset)


def valid() -> History:
    """Producer 0 sent a0..a2 to p0, producer 1 sent b0, b1 to p1; all acked, all read."""
    sends = [
        acked("a0", 0, 0, 0, 0),
        acked("a1", 0, 1, 0, 1),
        acked("a2", 0, 2, 0, 2),
        acked("b0", 1, 0, 1, 0),
        acked("b1", 1, 1, 1, 1),
    ]
    reads = [Read(s.partition, s.offset or 0, s.value) for s in sends]
    live = [Read(0, 0, "a0", "live"), Read(0, 1, "a1", "live")]
    return History(sends, reads + live, 2, {0: 3, 1: 2})


def test_a_valid_history_passes() -> None:
    report = check(valid())
    assert report.ok, summary(report)
    assert (report.sent, report.acked, report.read_final, report.read_live) == (5, 5, 5, 2)
    assert report.live_progress == {0: 2}
    assert summary(report).endswith("VALID")


def test_an_acknowledged_value_never_read_is_lost() -> None:
    history = valid()
    history.reads = [r for r in history.reads if r.value != "b1"]
    history.end_offsets = {0: 3, 1: 1}
    report = check(history)
    assert report.lost == ["b1"]
    assert report.vanished == []
    assert report.violations == {"lost": 1}
    assert "LOST 1" in summary(report)
    assert summary(report).endswith("INVALID: lost 1")


def test_a_value_read_live_then_gone_is_lost_even_unacknowledged() -> None:
    history = valid()
    history.sends.append(Send("a3", 0, 0, 3, "indeterminate", error="_MSG_TIMED_OUT"))
    history.reads.append(Read(0, 3, "a3", "live"))
    report = check(history)
    assert report.lost == ["a3"]
    assert report.vanished == ["a3"]
    assert report.unacked_present == 1


def test_unacknowledged_values_may_be_present_or_absent() -> None:
    history = valid()
    history.sends += [
        Send("a3", 0, 0, 3, "indeterminate", error="_MSG_TIMED_OUT"),
        Send("a4", 0, 0, 4, "failed", error="NOT_ENOUGH_REPLICAS"),
    ]
    history.reads.append(Read(0, 3, "a3"))
    history.end_offsets[0] = 4
    report = check(history)
    assert report.ok, summary(report)
    assert (report.indeterminate, report.failed, report.unacked_present) == (1, 1, 1)
    assert report.errors == {"_MSG_TIMED_OUT": 1, "NOT_ENOUGH_REPLICAS": 1}


def test_a_value_at_two_offsets_is_duplicated() -> None:
    history = valid()
    history.reads.append(Read(0, 3, "a2"))
    history.end_offsets[0] = 4
    report = check(history)
    assert report.duplicated == {"a2": [(0, 2), (0, 3)]}
    assert report.violations == {"duplicated": 1}


def test_values_of_one_producer_out_of_send_order_are_reordered() -> None:
    history = valid()
    history.sends[1].offset, history.sends[2].offset = 2, 1
    history.reads = [
        Read(0, 0, "a0"), Read(0, 1, "a2"), Read(0, 2, "a1"), Read(1, 0, "b0"), Read(1, 1, "b1"),
    ]  # fmt: skip
    report = check(history)
    assert report.reordered == [(0, 0, "a1", "a2")]
    assert report.violations == {"reordered": 1}


def test_other_producers_may_interleave() -> None:
    sends = [acked("a0", 0, 0, 0, 0), acked("b0", 0, 1, 1, 0), acked("a1", 0, 2, 0, 1)]
    reads = [Read(0, 0, "a0"), Read(0, 1, "b0"), Read(0, 2, "a1")]
    assert check(History(sends, reads, 1, {0: 3})).ok


def test_unacknowledged_values_out_of_order_are_not_reordering() -> None:
    sends = [acked("a0", 0, 1, 0, 0), Send("a1", 0, 0, 1, "indeterminate", error="x")]
    reads = [Read(0, 0, "a1"), Read(0, 1, "a0")]
    report = check(History(sends, reads, 1, {0: 2}))
    assert report.ok, summary(report)


def test_skipped_offsets_are_holes() -> None:
    history = valid()
    history.reads = [r for r in history.reads if (r.partition, r.offset) != (0, 1)]
    history.sends[1].outcome, history.sends[1].offset = "indeterminate", None
    report = check(history)
    assert report.holes == {0: [(1, 2)]}
    assert report.violations == {"offset holes": 1}


def test_reads_short_of_the_end_offset_are_holes() -> None:
    history = valid()
    history.end_offsets[1] = 5
    report = check(history)
    assert report.holes == {1: [(2, 5)]}
    assert report.violations == {"offset holes": 3}


def test_one_offset_with_two_values_is_inconsistent() -> None:
    history = valid()
    history.reads.append(Read(0, 1, "b0", "live"))
    report = check(history)
    assert report.inconsistent == {(0, 1): ["a1", "b0"]}
    assert "inconsistent offsets" in report.violations


def test_an_acknowledgement_naming_another_offset_is_inconsistent() -> None:
    history = valid()
    history.sends[4].offset = 7
    report = check(history)
    assert report.ack_mismatch == [("b1", 1, 7, 1)]
    assert report.violations == {"inconsistent offsets": 1}


def test_a_value_nobody_sent_is_unexpected() -> None:
    history = valid()
    history.reads.append(Read(1, 2, "zz"))
    history.end_offsets[1] = 3
    report = check(history)
    assert report.unexpected == ["zz"]
    assert report.violations == {"unexpected values": 1}


def test_an_unfinished_final_read_is_a_violation() -> None:
    history = valid()
    history.final_complete = False
    assert check(history).violations == {"final read incomplete": 1}


def test_the_schedule_is_a_function_of_the_seed() -> None:
    assert schedule(7, 5, 3) == schedule(7, 5, 3)
    assert schedule(7, 5, 3) != schedule(8, 5, 3)
    plan = schedule(7, 5, 3, warmup=2.0)
    assert plan[0].start == 2.0
    assert all(b.start > a.start + a.hold for a, b in itertools.pairwise(plan))
    assert {f.partition for f in schedule(1, 50, 3)} == {0, 1, 2}


def test_choose_spreads_over_the_candidates() -> None:
    plan = schedule(3, 30, 3)
    assert {choose(f.pick, [3, 1, 2]) for f in plan} == {1, 2, 3}
    assert all(choose(f.pick, [2]) == 2 for f in plan)


def test_the_hard_mix_has_every_kind_long_faults_and_doubles() -> None:
    plan = schedule(42, 300, 3, mix="hard", whole_cluster_power_cuts=True)
    assert plan == schedule(42, 300, 3, mix="hard", whole_cluster_power_cuts=True)
    assert {f.kind for f in plan} == set(HARD_WEIGHTS)
    assert any(f.long for f in plan)
    assert all(f.kind in LONG_KINDS for f in plan if f.long)
    assert all(f.hold > 12 for f in plan if f.long)  # past the session (6 s) and the lag (10 s)
    assert any(f.also is not None for f in plan)
    assert not any(f.also in POWER_KINDS for f in plan)  # one disk at a time
    assert "power-cut-all" not in {f.kind for f in schedule(42, 300, 3, mix="hard")}


def test_replica_divergence_is_a_violation() -> None:
    history = valid()
    history.replicas_compared = {0: 3}
    assert check(history).ok
    history.replicas_divergent = ["p0 node 2 [5, 5] leader epoch 3 ... vs node 1 ..."]
    report = check(history)
    assert report.violations == {"replica divergence": 1}
    assert "REPLICAS DIVERGE 1" in summary(report)


def test_the_live_consumer_must_not_skip_or_rewind() -> None:
    history = valid()
    history.reads += [Read(1, 1, "b1", "live"), Read(0, 0, "a0", "live"), Read(0, 2, "a2", "live")]
    report = check(history)
    # p1 starts at 1 (skipping 0); p0 reads 0, 1, then 0 again (a rewind), then 2 (skipping 1)
    assert report.poll_skips == [(1, -1, 1), (0, 0, 2)]
    assert report.poll_rewinds == [(0, 1, 0)]
    assert report.violations == {"live consumer skips": 2, "live consumer rewinds": 1}
    assert "LIVE CONSUMER skipped 2x, rewound 1x" in summary(report)


def test_liveness_is_reported_not_judged() -> None:
    history = valid()
    for s, at in zip(history.sends, [1.0, 2.0, 9.0, 9.5, 10.0], strict=True):
        s.sent_at, s.acked_at = at - 0.5, at
    history.sends[4].sent_at = 12.0
    history.reads[5:] = [Read(0, 0, "a0", "live", 1.5), Read(0, 1, "a1", "live", 2.5)]
    report = check(history)
    assert report.ok, summary(report)
    assert report.last_send == 12.0
    assert report.ack_gap == (2.0, 9.0)
    assert report.read_gap == (2.5, 12.0)
    assert "longest stretch without an acknowledgement 7.0s (t+2.0s to t+9.0s)" in summary(report)


def test_a_live_consumer_that_stops_receiving_is_reported_not_judged() -> None:
    """p0 acknowledged a3..a5 from t+20s to t+40s, but the live consumer's last p0 read was
    a2 at t+5s: it stopped receiving (the long run's symptom); liveness, so still VALID."""
    history = valid()
    history.reads.append(Read(0, 2, "a2", "live", at=5.0))
    for i, at in enumerate((20.0, 30.0, 40.0), start=3):
        send = acked(f"a{i}", 0, i, 0, i)
        send.acked_at = at
        history.sends.append(send)
        history.reads.append(Read(0, i, send.value))
    history.end_offsets[0] = 6
    history.live_errors = {"p0 _TRANSPORT": 2}
    report = check(history)
    assert report.ok, summary(report)
    assert report.live_behind == {0: (2, 5.0, 3, 40.0)}
    text = summary(report)
    assert "LIVE CONSUMER STOPPED RECEIVING" in text
    assert "p0 last read offset 2 at t+5.0s, 3 acknowledged values after it" in text
    assert "live consumer errors: p0 _TRANSPORT x2" in text


def test_a_live_consumer_one_poll_behind_at_the_end_is_not_a_stall() -> None:
    history = valid()
    history.reads.append(Read(0, 2, "a2", "live", at=5.0))
    late = acked("a3", 0, 3, 0, 3)
    late.acked_at = 5.5  # acknowledged just before the live consumer was stopped
    history.sends.append(late)
    history.reads.append(Read(0, 3, "a3"))
    history.end_offsets[0] = 4
    report = check(history)
    assert report.live_behind == {}
    assert "STOPPED RECEIVING" not in summary(report)
