"""The end check on the replicas themselves: every node's log of each partition, batch by batch,
up to the high watermark.

The final read asks the leaders only, so two replicas holding different records below the
high watermark (a follower that kept a tail the leader lost, a restarted leader appending in
an epoch its followers already had) would go unseen until the next leader change. Followers
copy the leader's batches byte for byte, so below the high watermark every replica must hold
the same batches, bytes and all. This reads each node's segment files of the topic (they are
append-only; reading them while the node runs is safe up to what was written) and compares.

A replica that does not reach the high watermark within the wait (it is still catching up) is
reported as behind, a liveness note, and compared on what it holds.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field
from pathlib import Path

from strom.wire.records.iterate import iter_batches

WAIT_S = 60.0


@dataclass(frozen=True)
class Batch:
    base_offset: int
    last_offset: int
    leader_epoch: int
    producer_id: int
    producer_epoch: int
    base_sequence: int
    crc: int
    data: bytes

    def describe(self) -> str:
        return (
            f"[{self.base_offset}, {self.last_offset}] leader epoch {self.leader_epoch} "
            f"producer {self.producer_id}/{self.producer_epoch} seq {self.base_sequence} "
            f"crc {self.crc:08x}"
        )


@dataclass
class ReplicaCheck:
    compared: dict[int, int] = field(default_factory=dict)
    """Partition -> batches compared (those below the high watermark, on the leader)."""
    divergent: list[str] = field(default_factory=list)
    """Replicas holding a different batch (or none) where another holds one, below the high
    watermark: a violation."""
    behind: list[str] = field(default_factory=list)
    """Replicas that did not reach the high watermark in time (liveness)."""


def batches(directory: Path, below: int) -> list[Batch]:
    """The whole batches in a partition directory's segments that end below `below`."""
    out: list[Batch] = []
    for segment in sorted(directory.glob("*.log")):
        data = segment.read_bytes()
        for header, view in iter_batches(data, allow_partial=True):
            last = header.base_offset + header.last_offset_delta
            if last >= below:
                return out
            out.append(
                Batch(
                    header.base_offset, last, header.partition_leader_epoch, header.producer_id,
                    header.producer_epoch, header.base_sequence, header.crc, bytes(view),
                )
            )
    return out


def compare(
    data_dirs: dict[int, Path], topic: str, high_watermarks: dict[int, int], wait_s: float = WAIT_S
) -> ReplicaCheck:
    """Compare every node's batches of each partition below its high watermark (see the
    module docstring); `data_dirs` maps node id -> its log.dirs directory."""
    check = ReplicaCheck()
    for partition, hw in sorted(high_watermarks.items()):
        held = _caught_up(data_dirs, f"{topic}-{partition}", hw, wait_s)
        reference = max(held.values(), key=len)
        check.compared[partition] = len(reference)
        for node, mine in sorted(held.items()):
            end = mine[-1].last_offset + 1 if mine else 0
            if end < (reference[-1].last_offset + 1 if reference else 0):
                check.behind.append(f"p{partition} node {node} holds up to {end} of {hw}")
            for index, batch in enumerate(mine):
                theirs = reference[index]
                if batch.data != theirs.data:
                    owner = next(n for n, b in held.items() if b is reference)
                    check.divergent.append(
                        f"p{partition} node {node} {batch.describe()} vs node {owner} "
                        f"{theirs.describe()}"
                    )
                    break
    return check


def _caught_up(
    data_dirs: dict[int, Path], name: str, hw: int, wait_s: float
) -> dict[int, list[Batch]]:
    """Each node's batches below `hw`, once every node holds as many (or at the deadline)."""
    deadline = time.monotonic() + wait_s
    while True:
        held = {node: batches(root / name, hw) for node, root in data_dirs.items()}
        ends = {b[-1].last_offset if b else -1 for b in held.values()}
        if len(ends) == 1 or time.monotonic() > deadline:
            return held
        time.sleep(0.5)  # polling the files against the deadline
