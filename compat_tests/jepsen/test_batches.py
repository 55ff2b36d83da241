"""The batch-header scan tells a client re-send (new producer epoch, sequence 0) apart."""

from pathlib import Path

from compat_tests.jepsen.batches import scan
from strom.wire.records import Record
from strom.wire.records.builder import build_batch


def _batch(values: list[str], base: int, epoch: int) -> bytearray:
    records = [Record(None, v.encode()) for v in values]
    return build_batch(
        records,
        base_offset=base,
        producer_id=7,
        producer_epoch=epoch,
        base_sequence=0,
        partition_leader_epoch=1,
    )


def test_scan_reports_each_copy_with_its_producer_epoch(tmp_path: Path) -> None:
    log = tmp_path / "node-1" / "data" / "jepsen-queue-1" / "00000000000000000000.log"
    log.parent.mkdir(parents=True)
    other = _batch(["1-0"], 0, 0)
    first = _batch(["0-5", "0-6"], 1, 2)
    again = _batch(["0-5", "0-6"], 3, 4)
    log.write_bytes(bytes(other + first + again))
    found = scan(tmp_path, 1, ["0-6"])
    assert [(b.base_offset, b.producer_epoch, b.base_sequence) for b in found] == [
        (1, 2, 0),
        (3, 4, 0),
    ]
    assert {(b.node, b.partition_leader_epoch, b.producer_id) for b in found} == {("node-1", 1, 7)}
    assert found[0].describe().startswith("node-1 [1, 2] leader epoch 1 producer 7 epoch 2 seq 0")
