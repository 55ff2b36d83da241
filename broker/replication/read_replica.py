"""Which replica a consumer should read a partition from (KIP-392, "fetch from the closest
replica"), as the partition's leader decides it.

Kafka lets the leader name a `preferred_read_replica` in its Fetch v11+ answer; the consumer
then fetches that partition from the named follower until it errs or the leader names another.
The choice is `replica.selector.class`'s: unset or `LeaderSelector` always keeps the leader (so
nothing is named), `RackAwareReplicaSelector` picks a replica on the consumer's `rack_id`.

The candidates are Kafka's (ReplicaManager.findPreferredReadReplica): the leader itself, and
every follower that is in the committed ISR (a lagging follower would keep a consumer behind
forever), whose log holds the fetch offset (log start <= offset <= log end, as its last fetch
told the leader), and which is alive on the request's listener (registered, unfenced, with an
endpoint there). Among those on the client's rack the leader wins if it is one of them;
otherwise the most caught-up (largest log end, then most recently caught up). No rack, no
candidate on it, or the leader chosen: nothing is named (-1) and the leader serves the fetch.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass

from strom.config.broker import RACK_AWARE_SELECTOR

NO_PREFERRED_REPLICA = -1


@dataclass(frozen=True, slots=True)
class ReplicaView:
    """A candidate: its broker, rack, log end and how long since it was last caught up."""

    broker_id: int
    rack: str | None
    log_end_offset: int
    since_caught_up_ms: int


def select_read_replica(
    selector: str | None, client_rack: str, leader: ReplicaView, followers: Iterable[ReplicaView]
) -> int:
    """The preferred read replica's broker id, or NO_PREFERRED_REPLICA (read from the leader).

    `followers` are the eligible ones only (see the module docstring)."""
    if selector != RACK_AWARE_SELECTOR or not client_rack:
        return NO_PREFERRED_REPLICA
    if leader.rack == client_rack:
        return NO_PREFERRED_REPLICA
    same_rack = [f for f in followers if f.rack == client_rack]
    if not same_rack:
        return NO_PREFERRED_REPLICA
    best = max(same_rack, key=lambda f: (f.log_end_offset, -f.since_caught_up_ms))
    return best.broker_id
