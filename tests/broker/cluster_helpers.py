"""Multi-broker metadata images on one in-process node: extra brokers that register with the
node's controller (as remote brokers will) but run nowhere, and topics placed on them."""

from __future__ import annotations

import uuid
from collections.abc import Sequence

from strom.broker.state import BrokerState
from strom.broker.testing.embedded import EmbeddedBroker
from strom.wire.errors import ErrorCode
from strom.wire.messages.broker_heartbeat import BrokerHeartbeatRequest
from strom.wire.messages.broker_registration import BrokerRegistrationRequest
from strom.wire.messages.create_topics import CreateTopicsRequest

CLUSTER_OVERRIDES = {
    # the extra brokers never heartbeat again: keep their leases for the whole test
    "broker.session.timeout.ms": "600000",
}


def state_of(broker: EmbeddedBroker) -> BrokerState:
    state = broker.broker.state
    assert state is not None
    return state


def peer_port(broker_id: int) -> int:
    """The (unbound) port an extra broker advertises."""
    return 19000 + broker_id


async def register(
    state: BrokerState,
    broker_id: int,
    *,
    listeners: Sequence[str] = ("PLAINTEXT",),
    rack: str | None = None,
    unfence: bool = True,
    incarnation: int | None = None,
    log_dirs: Sequence[uuid.UUID] = (),
) -> int:
    """Register broker `broker_id` with the node's controller (unfenced unless told not to);
    its epoch. `incarnation` names a new incarnation (a restart) of the broker, `log_dirs` its
    directories' ids."""
    request = BrokerRegistrationRequest(
        broker_id=broker_id,
        cluster_id=state.cluster_id,
        incarnation_id=uuid.UUID(int=broker_id if incarnation is None else incarnation),
        listeners=[
            BrokerRegistrationRequest.Listener(name, "127.0.0.1", peer_port(broker_id), 0)
            for name in listeners
        ],
        features=[BrokerRegistrationRequest.Feature("metadata.version", 7, 25)],
        rack=rack,
        log_dirs=list(log_dirs),
    )
    registered = await state.controller.broker_registration(request)
    assert registered.error_code == ErrorCode.NONE, registered
    if unfence:
        beat = BrokerHeartbeatRequest(
            broker_id=broker_id,
            broker_epoch=registered.broker_epoch,
            current_metadata_offset=state.image.provenance.offset,
        )
        answer = await state.controller.broker_heartbeat(beat)
        assert (answer.error_code, answer.is_fenced) == (ErrorCode.NONE, False), answer
    return registered.broker_epoch


async def fence(state: BrokerState, broker_id: int, epoch: int) -> None:
    """Fence a registered broker (its heartbeat asks to be fenced)."""
    beat = BrokerHeartbeatRequest(
        broker_id=broker_id,
        broker_epoch=epoch,
        current_metadata_offset=state.image.provenance.offset,
        want_fence=True,
    )
    answer = await state.controller.broker_heartbeat(beat)
    assert answer.error_code == ErrorCode.NONE, answer


async def create_placed(state: BrokerState, name: str, replicas: Sequence[Sequence[int]]) -> None:
    """Create `name` with partition i on `replicas[i]` (the first replica leads)."""
    assignments = [
        CreateTopicsRequest.CreatableReplicaAssignment(partition_index=i, broker_ids=list(ids))
        for i, ids in enumerate(replicas)
    ]
    topic = CreateTopicsRequest.CreatableTopic(
        name=name, num_partitions=-1, replication_factor=-1, assignments=assignments
    )
    response = await state.controller.create_topics(
        CreateTopicsRequest(topics=[topic], timeout_ms=10_000), 7
    )
    assert response.topics[0].error_code == ErrorCode.NONE, response
