"""The aborted-transaction index file (`.txnindex`) and the open-transaction bookkeeping."""

from __future__ import annotations

import struct
from pathlib import Path

import pytest

from strom.storage.log.open_txns import CompletedTxn, OpenTransactions
from strom.storage.log.txn_index import ENTRY_SIZE, AbortedTxn, TxnIndex


def test_entry_layout_is_kafkas_34_bytes(tmp_path: Path) -> None:
    index = TxnIndex(tmp_path / "00000000000000000000.txnindex", 0)
    index.append(AbortedTxn(7, 3, 9, 10))
    index.save()
    data = (tmp_path / "00000000000000000000.txnindex").read_bytes()
    assert ENTRY_SIZE == 34
    assert data == struct.pack(">hqqqq", 0, 7, 3, 9, 10)


def test_no_file_until_the_first_entry(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000000.txnindex"
    index = TxnIndex(path, 0)
    index.save()
    assert index.write_out() is None
    assert not path.exists()
    assert index.count == 0


def test_round_trip_and_lazy_load(tmp_path: Path) -> None:
    path = tmp_path / "00000000000000000100.txnindex"
    index = TxnIndex(path, 100)
    entries = [
        AbortedTxn(1, 90, 100, 101),
        AbortedTxn(2, 101, 105, 106),
        AbortedTxn(1, 106, 110, 111),
    ]
    for e in entries:
        index.append(e)
    assert index.pending == 3
    index.save()
    assert index.pending == 0
    again = TxnIndex(path, 100)
    assert again.count == 3
    assert again.entries() == entries
    assert again.sane(111)
    assert not again.sane(110)  # a marker past the segment's end


def test_markers_must_move_forward(tmp_path: Path) -> None:
    index = TxnIndex(tmp_path / "x.txnindex", 0)
    index.append(AbortedTxn(1, 0, 5, 6))
    with pytest.raises(ValueError, match="does not follow"):
        index.append(AbortedTxn(2, 1, 5, 6))


def test_collect_overlap_and_early_stop(tmp_path: Path) -> None:
    index = TxnIndex(tmp_path / "x.txnindex", 0)
    index.append(AbortedTxn(1, 0, 4, 5))
    index.append(AbortedTxn(2, 5, 9, 10))
    index.append(AbortedTxn(3, 11, 14, 15))
    out: list[AbortedTxn] = []
    assert index.collect(5, 10, out)  # stops at the entry whose LSO reaches 10
    assert out == [AbortedTxn(2, 5, 9, 10)]
    out = []
    assert not index.collect(0, 100, out)
    assert [t.producer_id for t in out] == [1, 2, 3]
    out = []
    index.collect(10, 12, out)
    assert out == [AbortedTxn(3, 11, 14, 15)]


def test_truncate_and_reset(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    index = TxnIndex(path, 0)
    for i in range(4):
        index.append(AbortedTxn(i, i * 10, i * 10 + 5, i * 10 + 6))
    index.save()
    index.truncate_to(25)  # entry 2's marker is at 25: it goes
    assert [t.producer_id for t in index.entries()] == [0, 1]
    assert path.stat().st_size == 2 * ENTRY_SIZE
    index.reset()
    assert index.count == 0
    assert not path.exists()


def test_sanity_check_refuses_torn_and_unknown_versions(tmp_path: Path) -> None:
    path = tmp_path / "x.txnindex"
    path.write_bytes(struct.pack(">hqqqq", 0, 1, 0, 5, 6) + b"\x00\x01")
    assert not TxnIndex(path, 0).sane(10)
    path.write_bytes(struct.pack(">hqqqq", 1, 1, 0, 5, 6))
    assert not TxnIndex(path, 0).sane(10)
    path.write_bytes(struct.pack(">hqqqq", 0, 1, 6, 5, 6))
    assert not TxnIndex(path, 0).sane(10)  # first offset after its marker
    path.write_bytes(struct.pack(">hqqqq", 0, 1, 0, 5, 6) * 2)
    assert not TxnIndex(path, 0).sane(10)  # markers not increasing


def test_open_transactions_first_unstable_offset() -> None:
    txns = OpenTransactions()
    assert txns.first_unstable_offset(0) is None
    txns.begin(1, 10)
    txns.begin(2, 12)
    assert txns.first_unstable_offset(0) == 10
    done = CompletedTxn(1, 10, 20, aborted=True)
    assert txns.last_stable_offset_after(done) == 12
    txns.complete(done, high_watermark=15)  # marker above the high watermark: still unstable
    assert txns.first_unstable_offset(0) == 10
    assert txns.first_undecided_offset() == 12
    txns.forget_below(21)
    assert txns.first_unstable_offset(0) == 12
    other = CompletedTxn(2, 12, 22, aborted=False)
    assert txns.last_stable_offset_after(other) == 23
    txns.complete(other, high_watermark=30)
    assert txns.first_unstable_offset(0) is None


def test_open_transactions_restore_sorts() -> None:
    txns = OpenTransactions()
    txns.restore({30: 3, 10: 1, 20: 2}, [CompletedTxn(4, 5, 40, False)])
    assert txns.first_unstable_offset(0) == 5
    txns.forget_below(41)
    assert txns.first_unstable_offset(0) == 10
    txns.begin(9, 15)  # out of order (a rebuild): still sorted
    assert list(txns._ongoing) == [10, 15, 20, 30]
