"""The transactional checker on hand-made histories: each anomaly is flagged alone, valid
histories pass, and write cycles that concurrent writers explain are reported, not judged."""

from __future__ import annotations

from compat_tests.jepsen.nemesis import COORDINATOR_KINDS, LEADER_KINDS, TXN_WEIGHTS, schedule
from compat_tests.jepsen.txn_checker import (
    FINAL,
    Txn,
    TxnHistory,
    TxnOutcome,
    TxnRead,
    TxnSend,
    check,
    strongly_connected,
    summary,
)

Sent = tuple[str, int, int]
"""(value, partition, offset)."""


def txn(
    id: str,
    sends: list[Sent],
    *,
    reads: tuple[Sent, ...] = (),
    outcome: TxnOutcome = "committed",
    started: float = 0.0,
    finished: float | None = 1.0,
    offsets: dict[int, int] | None = None,
    intent: str = "commit",
) -> Txn:
    worker = int(id.split("-")[0])
    return Txn(
        id, worker, [TxnSend(v, p, o) for v, p, o in sends],
        [TxnRead(f"w{worker}", p, o, v) for v, p, o in reads], offsets or {},
        "abort" if intent == "abort" else "commit", outcome, "", started,
        finished if outcome != "indeterminate" else None,
    )  # fmt: skip


def final(*records: Sent) -> list[TxnRead]:
    return [TxnRead(FINAL, p, o, v) for v, p, o in records]


def valid() -> TxnHistory:
    """Worker 0 commits a, b; worker 1 reads a, commits c; worker 0 aborts x on purpose;
    worker 1 commits d. Markers take an offset after each transaction's records."""
    t00 = txn("0-0", [("a", 0, 0), ("b", 1, 0)], started=0, finished=1, offsets={0: 0, 1: 0})
    t10 = txn("1-0", [("c", 0, 2)], reads=(("a", 0, 0),), started=2, finished=3,
              offsets={0: 1, 1: 0})  # fmt: skip
    t01 = txn("0-1", [("x", 1, 2)], outcome="aborted", intent="abort", started=4, finished=5,
              offsets={0: 2, 1: 1})  # fmt: skip
    t11 = txn("1-1", [("d", 1, 4)], started=6, finished=7, offsets={0: 3, 1: 1})
    live = [
        TxnRead("w1", 0, 0, "a"), TxnRead("w0", 1, 0, "b"), TxnRead("w1", 0, 2, "c"),
        TxnRead("w0", 1, 4, "d"),
    ]  # fmt: skip
    return TxnHistory(
        [t00, t10, t01, t11], live + final(("a", 0, 0), ("c", 0, 2), ("b", 1, 0), ("d", 1, 4)),
        2, {0: 4, 1: 6}, group_offsets={0: {0: 0, 1: 0}, 1: {0: 3, 1: 1}},
    )  # fmt: skip


def test_a_valid_history_passes() -> None:
    report = check(valid())
    assert report.ok, summary(report)
    assert (report.txns, report.committed, report.aborted, report.aborted_on_purpose) == (4, 3, 1, 1)
    assert (report.read_final, report.read_live) == (4, 4)
    assert report.edges == {"ww": 2, "wr": 1}
    assert report.cycles == []
    assert summary(report).endswith("VALID")


def test_a_committed_value_never_read_is_lost() -> None:
    history = valid()
    history.reads = [r for r in history.reads if not (r.consumer == FINAL and r.value == "d")]
    report = check(history)
    assert report.lost == ["d"]
    assert report.violations == {"lost": 1}
    assert summary(report).endswith("INVALID: lost 1")


def test_a_value_read_then_gone_is_lost_even_of_unknown_outcome() -> None:
    history = valid()
    history.txns.append(txn("0-2", [("e", 0, 5)], outcome="indeterminate", started=8))
    history.reads.insert(0, TxnRead("w1", 0, 5, "e"))
    report = check(history)
    assert report.lost == ["e"]
    assert "lost" in report.violations


def test_a_transaction_of_unknown_outcome_is_all_or_nothing() -> None:
    history = valid()
    history.txns.append(txn("0-2", [("e", 0, 4), ("f", 1, 5)], outcome="indeterminate", started=8))
    history.reads += final(("e", 0, 4))
    report = check(history)
    assert report.torn == ["0-2"]
    assert report.violations == {"torn": 1}
    history.reads += final(("f", 1, 5))
    report = check(history)
    assert report.ok, summary(report)
    assert report.indeterminate_visible == 1


def test_an_aborted_value_read_committed_is_an_aborted_read() -> None:
    history = valid()
    history.reads += final(("x", 1, 2))
    report = check(history)
    assert report.aborted_reads == [(FINAL, "x")]
    assert report.violations == {"aborted reads": 1}
    history = valid()
    history.reads.insert(2, TxnRead("w0", 1, 2, "x"))
    assert check(history).aborted_reads == [("w0", "x")]


def test_a_value_at_two_offsets_is_duplicated() -> None:
    history = valid()
    history.reads += final(("c", 0, 5))
    report = check(history)
    assert report.duplicated == {"c": [(0, 2), (0, 5)]}
    assert "duplicated" in report.violations


def test_two_values_at_one_offset_or_a_wrong_acknowledgement_is_inconsistent() -> None:
    history = valid()
    history.reads.insert(0, TxnRead("w1", 0, 2, "zz"))
    report = check(history)
    assert report.inconsistent == {(0, 2): ["c", "zz"]}
    assert report.unexpected == ["zz"]
    history = valid()
    history.txns[0].sends[0].offset = 1
    report = check(history)
    assert report.ack_mismatch == [("a", 0, 1, 0)]
    assert report.violations == {"inconsistent offsets": 1}


def test_a_consumer_must_receive_the_version_order_without_gaps_or_going_back() -> None:
    history = valid()
    history.reads = [r for r in history.reads if not (r.consumer == "w1" and r.value == "a")]
    report = check(history)
    assert report.poll_skips == [("w1", 0, "", "c")]
    assert report.violations == {"poll skips": 1}
    history = valid()
    history.reads.insert(3, TxnRead("w1", 0, 0, "a"))  # after c: back to the start
    report = check(history)
    assert report.nonmonotonic == [("w1", 0, "c", "a")]
    assert report.violations == {"nonmonotonic polls": 1}


def two_writers(*, overlap: bool) -> TxnHistory:
    """T1 (worker 0) and T2 (worker 1) both write p0 and p1, in opposite orders."""
    t1 = txn("0-0", [("a", 0, 0), ("b", 1, 1)], started=0, finished=3 if overlap else 1)
    t2 = txn("1-0", [("c", 0, 1), ("d", 1, 0)], started=2, finished=4)
    return TxnHistory([t1, t2], final(("a", 0, 0), ("c", 0, 1), ("d", 1, 0), ("b", 1, 1)), 2)


def test_a_write_cycle_of_transactions_one_after_the_other_is_g0() -> None:
    report = check(two_writers(overlap=False))
    assert [(c.kind, c.allowed) for c in report.cycles] == [("G0", False)]
    assert report.violations == {"G0": 1}
    assert "G0 1: G0: " in summary(report)


def test_concurrent_writers_may_form_g0_as_kafka_allows_unless_strict() -> None:
    report = check(two_writers(overlap=True))
    assert report.ok, summary(report)
    assert [(c.kind, c.allowed) for c in report.cycles] == [("G0", True)]
    assert "cycles concurrent writers explain" in summary(report)
    assert check(two_writers(overlap=True), strict=True).violations == {"G0": 1}


def test_one_workers_transactions_never_interleave() -> None:
    t1 = txn("0-0", [("a", 0, 0), ("b", 1, 1)], started=0, finished=3)
    t2 = txn("0-1", [("c", 0, 1), ("d", 1, 0)], started=2, finished=4)
    history = TxnHistory([t1, t2], final(("a", 0, 0), ("c", 0, 1), ("d", 1, 0), ("b", 1, 1)), 2)
    assert check(history).violations == {"G0": 1}


def test_transactions_that_read_each_other_are_g1c() -> None:
    """Pure wr: each read the other's value (concurrent or not)."""
    t1 = txn("0-0", [("a", 0, 0)], reads=(("b", 1, 0),), started=0, finished=3)
    t2 = txn("1-0", [("b", 1, 0)], reads=(("a", 0, 0),), started=1, finished=4)
    history = TxnHistory([t1, t2], final(("a", 0, 0), ("b", 1, 0)), 2)
    report = check(history)
    assert [(c.kind, c.allowed) for c in report.cycles] == [("G1c", False)]
    assert report.violations == {"G1c": 1}
    assert report.cycles[0].describe() in ("G1c: 0-0 -wr-> 1-0 -wr-> 0-0", "G1c: 1-0 -wr-> 0-0 -wr-> 1-0")


def test_a_reader_whose_write_precedes_what_it_read_is_g1c_even_when_concurrent() -> None:
    """T2 read T1's value, so T1 committed before T2 wrote: T2's value cannot come first."""
    t1 = txn("0-0", [("a", 0, 0), ("b", 1, 1)], started=0, finished=3)
    t2 = txn("1-0", [("c", 1, 0)], reads=(("a", 0, 0),), started=1, finished=4)
    history = TxnHistory([t1, t2], final(("a", 0, 0), ("c", 1, 0), ("b", 1, 1)), 2)
    report = check(history)
    assert report.violations == {"G1c": 1}
    assert report.cycles[0].steps == [("0-0", "1-0", "wr"), ("1-0", "0-0", "ww")]


def test_offsets_of_an_aborted_transaction_must_not_be_held() -> None:
    history = valid()
    assert history.group_offsets is not None
    history.group_offsets[0] = {0: 2, 1: 1}  # 0-1's, aborted
    report = check(history)
    assert report.violations == {"group offsets": 1}
    assert "worker 0's group holds" in report.group_offsets[0]


def test_an_unfinished_final_read_is_a_violation_a_stuck_worker_is_reported() -> None:
    history = valid()
    history.final_complete = False
    assert check(history).violations == {"final read incomplete": 1}
    history = valid()
    history.stuck = ["worker 1 stuck in send_offsets_to_transaction since t+40.0s"]
    report = check(history)
    assert report.ok
    assert "STUCK WORKERS (liveness, not judged" in summary(report)


def test_tarjan_finds_every_component_with_a_cycle() -> None:
    edges = [("a", "b", "ww"), ("b", "a", "ww"), ("b", "c", "ww"), ("c", "d", "wr"),
             ("d", "e", "ww"), ("e", "c", "ww"), ("e", "f", "ww")]  # fmt: skip
    assert sorted(map(sorted, strongly_connected(edges))) == [["a", "b"], ["c", "d", "e"]]
    chain = [(str(i), str(i + 1), "ww") for i in range(5000)]  # no recursion limit
    assert strongly_connected(chain) == []
    assert strongly_connected([*chain, ("5000", "0", "wr")]) == [{str(i) for i in range(5001)}]


def test_the_txn_mix_hits_leaders_and_the_coordinator() -> None:
    plan = schedule(5, 200, 3, mix="txn")
    assert plan == schedule(5, 200, 3, mix="txn")
    assert {f.kind for f in plan} == set(TXN_WEIGHTS)
    assert {f.kind for f in plan} <= LEADER_KINDS | COORDINATOR_KINDS
    assert any(f.long for f in plan if f.kind in ("pause-leader", "pause-coordinator"))
    assert not any(f.long for f in plan if f.kind in ("kill-leader", "kill-coordinator"))
    assert {f.also for f in plan if f.also} <= set(TXN_WEIGHTS)
    assert "the transaction coordinator" in next(
        f.describe() for f in plan if f.kind in COORDINATOR_KINDS
    )
