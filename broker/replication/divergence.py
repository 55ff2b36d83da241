"""Where a follower's log parts from its leader's, by leader epochs (KIP-101, KIP-595's Fetch).

A follower that led, or followed a leader that lost its place, may hold a tail no other replica
has. Before copying more it must cut that tail, and the leader epoch history of both logs says
where (offsets alone cannot: the same offset may hold different records under different epochs).

- The follower sends its log end offset and the epoch of its last batch (`last_fetched_epoch`).
- The leader looks up where that epoch ends in its own history. If it knows a smaller epoch
  only, or the epoch ends before the follower's offset, the logs diverge: it answers the
  `diverging_epoch` (epoch, end offset) and no records (`diverging_epoch`).
- The follower cuts at the end of that epoch in its own history, or at the leader's end for it
  if that comes first. When the follower's history has a different epoch there, it cannot yet
  tell and cuts only to its own end for that epoch, then fetches again with its now-last epoch
  (`truncation_point`, Kafka's AbstractFetcherThread rule).

Both sides are plain functions of a `PartitionLog`'s epoch history, so the rule is tested
directly; the fetcher and the Fetch handler call them.
"""

from __future__ import annotations

from dataclasses import dataclass

from strom.storage.log.epoch import UNDEFINED_EPOCH, UNDEFINED_EPOCH_OFFSET
from strom.storage.log.partition import PartitionLog


@dataclass(frozen=True, slots=True)
class Truncation:
    """Cut the follower's log at `offset`; `complete` False: fetch again to find out more."""

    offset: int
    complete: bool


def diverging_epoch(
    leader: PartitionLog, fetch_offset: int, last_fetched_epoch: int
) -> tuple[int, int] | None:
    """Leader side: (epoch, end offset) to answer instead of records, or None to serve.

    A fetch that names no epoch (-1: an old client, or an empty log) is served as it is.
    """
    if last_fetched_epoch < 0:
        return None
    epoch, end_offset = leader.end_offset_for_epoch(last_fetched_epoch)
    if epoch < last_fetched_epoch or end_offset < fetch_offset:
        return epoch, end_offset
    return None


def truncation_point(
    follower: PartitionLog, leader_epoch: int, leader_end_offset: int
) -> Truncation:
    """Follower side: where to cut after the leader answered (`leader_epoch`, `leader_end_offset`)
    for the follower's last fetched epoch (a diverging epoch, or OffsetForLeaderEpoch's answer).
    """
    end = follower.log_end_offset
    if leader_epoch == UNDEFINED_EPOCH or leader_end_offset == UNDEFINED_EPOCH_OFFSET:
        # The leader knows no epoch this old: nothing it holds can be trusted to match, but the
        # high watermark was replicated to every in-sync member, so keep up to it.
        return Truncation(min(follower.high_watermark, end), True)
    own_epoch, own_end = follower.end_offset_for_epoch(leader_epoch)
    if own_epoch == UNDEFINED_EPOCH:
        # Our history starts after that epoch: we hold none of it that could be compared.
        return Truncation(min(leader_end_offset, end), True)
    if own_epoch != leader_epoch:
        # We never had the leader's epoch: cut to where our largest smaller epoch ends and ask
        # again with that one as our last.
        return Truncation(min(own_end, end), False)
    return Truncation(min(leader_end_offset, own_end, end), True)
