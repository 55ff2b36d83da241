"""DescribeCluster (key 60).

Behavior:
- Lists the registered brokers with their endpoint on the listener the request
  came in on (brokers without one are left out) and rack, the cluster id, and
  as "controller id" an unfenced broker, as a Kafka KRaft broker answers
  (clients cannot reach the controller quorum through it; see
  `strom.broker.admin.broker_nodes`). Fenced brokers are listed only when v2's
  `include_fenced_brokers` asks for them, with `is_fenced`.
- `endpoint_type` (v1+, KIP-919): a broker listener serves 1 (brokers), a
  controller listener 2 (controllers); the other type is
  MISMATCHED_ENDPOINT_TYPE, any other value UNSUPPORTED_ENDPOINT_TYPE. At v0
  (no endpoint_type: brokers) both are INVALID_REQUEST.
- On a controller listener (`kafka-metadata-quorum --bootstrap-controller`
  asks there first) the answer lists the controllers, as Kafka's
  ControllerApis does: each voter of `controller.quorum.voters` with its
  address, and as controller id the active controller (-1 while none is
  known).
- Cluster authorized operations, when asked for, are every cluster operation
  (no authorizer; see `strom.broker.admin.authz`).

Version notes: v0 is flexible; v1 adds endpoint_type (KIP-919); v2 adds
include_fenced_brokers and is_fenced (KIP-1073).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.broker.admin.authz import authorized
from strom.broker.admin.broker_nodes import broker_nodes, controller_id
from strom.coordinator.metadata.acls import CLUSTER_NAME, ResourceType
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
    served = CONTROLLERS if request.listener in broker.config.controller_listeners else BROKERS
    if wanted != served:
        v0 = request.api_version == 0
        if wanted in ENDPOINT_TYPES:
            code = ErrorCode.INVALID_REQUEST if v0 else ErrorCode.MISMATCHED_ENDPOINT_TYPE
            message = (
                f"The request was sent to an endpoint of type {ENDPOINT_TYPES[served]}, "
                f"but we wanted an endpoint of type {ENDPOINT_TYPES[wanted]}"
            )
        else:
            code = ErrorCode.INVALID_REQUEST if v0 else ErrorCode.UNSUPPORTED_ENDPOINT_TYPE
            message = f"Unsupported endpoint type {wanted}"
        return DescribeClusterResponse(error_code=code, error_message=message)
    if served == CONTROLLERS:
        active = broker.controller.active_controller_id
        return DescribeClusterResponse(
            endpoint_type=CONTROLLERS,
            cluster_id=broker.cluster_id,
            controller_id=-1 if active is None else active,
            brokers=[
                Broker(node_id, address.host, address.port, None)
                for node_id, address in sorted(broker.config.quorum_voters.items())
            ],
            cluster_authorized_operations=authorized(
                body.include_cluster_authorized_operations, broker, request, ResourceType.CLUSTER,
                CLUSTER_NAME,
            ),
        )
    nodes = broker_nodes(
        broker, broker.image, request.listener, include_fenced=body.include_fenced_brokers
    )
    return DescribeClusterResponse(
        endpoint_type=BROKERS,
        cluster_id=broker.cluster_id,
        controller_id=controller_id(broker, nodes),
        brokers=[Broker(*n) for n in nodes],
        cluster_authorized_operations=authorized(
            body.include_cluster_authorized_operations, broker, request, ResourceType.CLUSTER,
            CLUSTER_NAME,
        ),
    )
