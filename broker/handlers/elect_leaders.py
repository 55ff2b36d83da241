"""ElectLeaders (key 43).

Behavior:
- A thin layer over the controller (`Controller.elect_leaders`, see
  `strom.coordinator.controller.leadership`): PREFERRED (0) moves leadership to a partition's
  first replica when it is in the ISR and active; UNCLEAN (1) gives a leaderless partition a
  leader, from outside the ISR if need be (ISR = the new leader, RECOVERING), whatever the
  topic's `unclean.leader.election.enable` says. Per-partition errors as Kafka's KRaft
  controller: ELECTION_NOT_NEEDED, PREFERRED_LEADER_NOT_AVAILABLE,
  ELIGIBLE_LEADERS_NOT_AVAILABLE, UNKNOWN_TOPIC_OR_PARTITION; one result entry per requested
  topic entry. Null partitions: every topic gets an entry, leaving out the partitions that need
  no election. Another election type: INVALID_REQUEST on every entry and the top level.
- `timeout_ms` is the controller deadline (see `strom.broker.admin.deadline`): past it every
  named partition (and, v1+, the top level) answers REQUEST_TIMED_OUT and nothing changes.
- On a broker that is not the active controller the request is forwarded to it
  (`strom.broker.admin.forwarding`), as Kafka's brokers do.

Version notes: v0 is always PREFERRED (no election type, no top-level error); v1 adds both;
v2 is flexible.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.forwarding import forward_or_run
from strom.wire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 43
MIN_VERSION = 0
MAX_VERSION = 2


async def handle(
    broker: BrokerState, request: RequestContext, body: ElectLeadersRequest
) -> ElectLeadersResponse:
    return await forward_or_run(
        broker,
        request,
        body,
        ElectLeadersResponse,
        timeout_ms=body.timeout_ms,
        run=broker.controller.elect_leaders,
    )
