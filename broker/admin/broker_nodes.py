"""The brokers Metadata and DescribeCluster list, and the id they give as "controller".

Brokers: every registered broker with an endpoint on the listener the request
arrived on (a broker without that listener is left out, as Kafka's
KRaftMetadataCache.getAliveBrokerNodes / getBrokerNodes do), with its rack;
fenced brokers only when the caller asks (DescribeCluster v2
`include_fenced_brokers`). This node's own endpoint is the one it bound (the
registration holds what it advertised, which may say port 0 in tests).

Controller id: clients cannot reach a KRaft controller through a broker
listener (KIP-590), so a Kafka broker answers Metadata's and DescribeCluster's
`controller_id` with a random unfenced broker (KafkaApis: `controllerId` from
`metadataCache.getRandomAliveBrokerId`; KRaftMetadataCache.getControllerId says
so: "we want the client to send requests destined for the controller to a random
broker"); only a controller listener's DescribeCluster (KIP-919) names the
quorum leader. Strom follows that, with one preference that stays inside
Kafka's answer: when the active controller is itself a listed broker (a combined
node) its id is given, saving the forwarding hop; otherwise a random listed
unfenced broker, -1 if there is none. Strom draws among the brokers listed on
the request's listener rather than every unfenced broker, so the id always
resolves to a node in the same response.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, NamedTuple

from strom.broker import runtime

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore
    from strom.coordinator.metadata.image import MetadataImage

NO_CONTROLLER = -1


class BrokerNode(NamedTuple):
    broker_id: int
    host: str
    port: int
    rack: str | None
    fenced: bool


def broker_nodes(
    broker: BrokerCore, image: MetadataImage, listener: str, *, include_fenced: bool = False
) -> list[BrokerNode]:
    """Registered brokers reachable on `listener`, by id (unfenced only unless asked)."""
    out = []
    for reg in image.brokers():
        if reg.fenced and not include_fenced:
            continue
        if reg.broker_id == broker.node_id:
            mine = next((e for e in broker.endpoints if e.name == listener), None)
            host_port = (mine.host, mine.port) if mine else None
        else:
            found = reg.endpoint(listener)
            host_port = (found.host, found.port) if found else None
        if host_port is not None:
            out.append(BrokerNode(reg.broker_id, *host_port, reg.rack, reg.fenced))
    return out


def controller_id(broker: BrokerCore, nodes: list[BrokerNode]) -> int:
    """What Metadata and DescribeCluster report as the controller (see the module docstring)."""
    alive = [n.broker_id for n in nodes if not n.fenced]
    if not alive:
        return NO_CONTROLLER
    active = broker.controller.active_controller_id
    if active in alive:
        return active
    return runtime.current().random.choice(alive)


def current_leader(
    broker: BrokerCore, image: MetadataImage, topic: str, index: int, listener: str
) -> tuple[int, int, BrokerNode | None]:
    """A partition's leader id and epoch as the image has them, and the leader's endpoint on
    `listener` if it is an unfenced broker there: what Kafka's KIP-951 fields carry with
    NOT_LEADER_OR_FOLLOWER (Produce v10+, Fetch v16+), so clients redirect without a
    Metadata round trip. (-1, -1, None) for a partition that does not exist."""
    partition = image.partition(topic, index)
    if partition is None:
        return NO_CONTROLLER, -1, None
    leader = partition.leader
    node = next((n for n in broker_nodes(broker, image, listener) if n.broker_id == leader), None)
    return leader, partition.leader_epoch, node
