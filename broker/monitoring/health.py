"""Liveness and readiness, as the metrics listener answers them.

Live: the process's event loop answers (the check runs on it). Ready, for a node with the
broker role: registered with the controller, unfenced, and caught up with the metadata log
(the broker follows the image and, on a quorum member, has applied everything the quorum
committed); for a controller-only node: its Raft replica knows a leader and has applied what
is committed. Kubernetes' and Docker's probes read the status code: 200 or 503.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from strom.broker.state import BrokerState

MAX_METADATA_LAG = 0
"""Committed metadata records a ready node may still have to apply."""


@dataclass
class Readiness:
    ready: bool
    checks: dict[str, bool | int | str] = field(default_factory=dict)
    reason: str = ""


def readiness(state: BrokerState | None, serving: bool) -> Readiness:
    """Whether this node should get traffic, with the checks that decided it."""
    if state is None:
        return Readiness(False, {"started": False}, "starting: the metadata is not open yet")
    checks: dict[str, bool | int | str] = {}
    reasons: list[str] = []
    raft = state.raft
    if raft is not None and raft.core is not None:
        lag = max(0, raft.high_watermark - raft.applied)
        checks["metadata_lag"] = lag
        checks["raft_leader"] = raft.leader_id
        if raft.leader_id < 0:
            reasons.append("no controller quorum leader known")
        if lag > MAX_METADATA_LAG:
            reasons.append(f"{lag} committed metadata records not applied yet")
    if "broker" in state.config.roles:
        lifecycle = state.controller.local_broker
        registered = lifecycle.broker_epoch >= 0
        checks["registered"] = registered
        checks["unfenced"] = not lifecycle.fenced
        checks["serving"] = serving
        if not registered:
            reasons.append("not registered with the controller")
        elif lifecycle.fenced:
            reasons.append("fenced by the controller")
        elif not serving:
            reasons.append("client listeners not serving yet")
    return Readiness(not reasons, checks, "; ".join(reasons))
