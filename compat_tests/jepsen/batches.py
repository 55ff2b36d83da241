"""Which batches hold given values in a kept run (`--keep DIR`): the evidence for a duplicate.

The checker sees only the clients' history; whether a duplicate came from the broker (a retry
appended twice under one producer epoch, a divergent tail kept by a new leader) or from the
client (librdkafka bumping the producer epoch after messages timed out and re-sending batches
that were possibly already written, under the new epoch from sequence 0) shows only in the
batch headers: partition leader epoch, producer id, producer epoch, base sequence. This reads
every node's segment files of a partition and prints those headers for the batches holding
the values asked for.

    python -m compat_tests.jepsen.batches DIR PARTITION VALUE [VALUE ...]
"""

from __future__ import annotations

import sys
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from pathlib import Path

from strom.wire.records.builder import decode_batch
from strom.wire.records.iterate import iter_batches

TOPIC = "jepsen-queue"


@dataclass(frozen=True)
class BatchInfo:
    node: str
    base_offset: int
    last_offset: int
    partition_leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    first_value: str
    last_value: str

    def describe(self) -> str:
        return (
            f"{self.node} [{self.base_offset}, {self.last_offset}] leader epoch "
            f"{self.partition_leader_epoch} producer {self.producer_id} epoch "
            f"{self.producer_epoch} seq {self.base_sequence}: {self.first_value}..{self.last_value}"
        )


def batches_with(data: bytes, values: Iterable[str], node: str = "") -> Iterator[BatchInfo]:
    """The batches of one segment file's bytes holding any of `values`."""
    wanted = set(values)
    for header, raw in iter_batches(data):
        _, records = decode_batch(raw, header, check_crc=False)
        found = [r.value.decode() for r in records if r.value is not None]
        if wanted.intersection(found):
            yield BatchInfo(
                node,
                header.base_offset,
                header.base_offset + header.last_offset_delta,
                header.partition_leader_epoch,
                header.producer_id,
                header.producer_epoch,
                header.base_sequence,
                found[0],
                found[-1],
            )


def scan(root: Path, partition: int, values: Iterable[str]) -> list[BatchInfo]:
    """Every kept node's batches of `partition` holding any of `values`."""
    wanted = list(values)
    out: list[BatchInfo] = []
    for node in sorted(p for p in root.iterdir() if p.is_dir()):
        for segment in sorted(node.glob(f"data/{TOPIC}-{partition}/*.log")):
            out.extend(batches_with(segment.read_bytes(), wanted, node.name))
    return out


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__)
        return 2
    for info in scan(Path(argv[0]), int(argv[1]), argv[2:]):
        print(info.describe())
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
