"""DescribeCluster (key 60).

Behavior:
- Lists the registered brokers with their endpoint on the listener the request
  came in on (brokers without one are left out) and rack, the cluster id, and
  as "controller id" an unfenced broker, as a Kafka KRaft broker answers
  (clients cannot reach the controller quorum through it; see
  `strom.broker.admin.cluster`). Fenced brokers are listed only when v2's
  `include_fenced_brokers` asks for them, with `is_fenced`.
- `endpoint_type` (v1+): 1 (brokers) is what every Strom listener serves; 2
  (controllers) is MISMATCHED_ENDPOINT_TYPE, as any Kafka broker listener
  answers it (Strom binds no controller listener); any other value
  UNSUPPORTED_ENDPOINT_TYPE. At v0 both are INVALID_REQUEST.
- Cluster authorized operations, when asked for, are every cluster operation
  (no authorizer; see `strom.broker.admin.authz`).

Version notes: v0 is flexible; v1 adds endpoint_type (KIP-919); v2 adds
include_fenced_brokers and is_fenced (KIP-1073).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.authz import CLUSTER_OPERATIONS, authorized
from strom.broker.admin.cluster import broker_nodes, controller_id
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_cluster import DescribeClusterRequest, DescribeClusterResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState

API_KEY = 60
MIN_VERSION = 0
MAX_VERSION = 2

BROKERS, CONTROLLERS = 1, 2
ENDPOINT_TYPES = {BROKERS: "BROKER", CONTROLLERS: "CONTROLLER"}
Broker = DescribeClusterResponse.DescribeClusterBroker


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeClusterRequest
) -> DescribeClusterResponse:
    wanted = body.endpoint_type
    if wanted != BROKERS:
        v0 = request.api_version == 0
        if wanted in ENDPOINT_TYPES:
            code = ErrorCode.INVALID_REQUEST if v0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
            message = (
                f"The request was sent to an endpoint of type {ENDPOINT_TYPES[BROKERS]}, "
                f"but we wanted an endpoint of type {ENDPOINT_TYPES[wanted]}"
            )
        else:
            code = ErrorCode.INVALID_REQUEST if v0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            message = f"Unsupported endpoint type {wanted}"
        return DescribeClusterResponse(error_code=code, error_message=message)
    nodes = broker_nodes(
        broker, broker.image, request.listener, include_fenced=body.include_fenced_brokers
    )
    return DescribeClusterResponse(
        endpoint_type=BROKERS,
        cluster_id=broker.cluster_id,
        controller_id=controller_id(broker, nodes),
        brokers=[Broker(*n) for n in nodes],
        cluster_authorized_operations=authorized(
            body.include_cluster_authorized_operations, CLUSTER_OPERATIONS
        ),
    )
