"""Admin requests only the active controller may execute, forwarded to it by a broker.

In a KRaft cluster a broker changes no metadata itself: CreateTopics, DeleteTopics,
CreatePartitions, AlterConfigs and IncrementalAlterConfigs (the part its own preprocessing does
not answer), ElectLeaders, AlterPartitionReassignments and ListPartitionReassignments go to the
active controller, as Kafka's ForwardingManager sends them, and the controller's response goes
back to the client; DescribeQuorum on a broker listener goes there too (only the Raft leader
knows the voters' progress). Each handler does this behind one check,
`if not broker.controller.is_active`; on a single node (and on the active controller) the
request is executed in-process instead.

Strom sends the decoded request, re-encoded at the version the client used (the controller
serves the same version ranges), straight to the active controller's CONTROLLER listener;
Kafka wraps the client's bytes in an Envelope (API 58) to carry the principal, which Strom,
without authentication, does not need. Where the active controller is comes from the
controller's quorum view (`active_controller_id`, `controller_address`). A connection failure
or a response carrying NOT_CONTROLLER is retried against the (possibly new) active controller
with backoff (`strom.broker.drivers.controller_channel`), as Kafka's NodeToControllerChannel
does, for at most FORWARD_RETRY_TIMEOUT_MS (Kafka's KRaft broker gives its forwarding channel
60 s) and, for the topic APIs, no longer than the client's `timeout_ms` (past it the
controller would time the request out anyway); at least one attempt is always made. When the
time is up the broker answers as Kafka's forwarding manager does on a timeout: every entry
REQUEST_TIMED_OUT, no message. A request that reached a controller listener of a controller
that is not active is not forwarded further: every entry answers NOT_CONTROLLER, as Kafka's
ControllerApis does, so the sender retries elsewhere. The broker's one `ControllerForwarder`
(`strom.broker.drivers.controller_forwarder`, `BrokerCore.forwarder`) does the sending.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Protocol, TypeVar

from strom.broker.admin.deadline import before_deadline
from strom.broker.drivers.lifecycle import ControllerUnavailable
from strom.wire.errors import ErrorCode
from strom.wire.message import Message
from strom.wire.messages.alter_client_quotas import (
    AlterClientQuotasRequest,
    AlterClientQuotasResponse,
)
from strom.wire.messages.alter_configs import AlterConfigsRequest, AlterConfigsResponse
from strom.wire.messages.alter_partition_reassignments import (
    AlterPartitionReassignmentsRequest,
    AlterPartitionReassignmentsResponse,
)
from strom.wire.messages.alter_user_scram_credentials import (
    AlterUserScramCredentialsRequest,
    AlterUserScramCredentialsResponse,
)
from strom.wire.messages.create_acls import CreateAclsRequest, CreateAclsResponse
from strom.wire.messages.create_partitions import CreatePartitionsRequest, CreatePartitionsResponse
from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse
from strom.wire.messages.delete_acls import DeleteAclsRequest, DeleteAclsResponse
from strom.wire.messages.delete_topics import DeleteTopicsRequest, DeleteTopicsResponse
from strom.wire.messages.describe_quorum import DescribeQuorumRequest, DescribeQuorumResponse
from strom.wire.messages.elect_leaders import ElectLeadersRequest, ElectLeadersResponse
from strom.wire.messages.incremental_alter_configs import (
    IncrementalAlterConfigsRequest,
    IncrementalAlterConfigsResponse,
)
from strom.wire.messages.list_partition_reassignments import (
    ListPartitionReassignmentsRequest,
    ListPartitionReassignmentsResponse,
)

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore
    from strom.coordinator.metadata.image import MetadataImage

log = logging.getLogger("strom.forwarding")

R = TypeVar("R", bound=Message)
Q = TypeVar("Q", bound=Message)


class Received(Protocol):
    """What `forward` needs of the request it forwards (a handler's RequestContext)."""

    @property
    def api_version(self) -> int: ...

    @property
    def listener(self) -> str: ...


async def forward(
    broker: BrokerCore, request: Received, body: Message, response_type: type[R]
) -> R:
    """Answer `body` by the active controller (see the module docstring); never raises for an
    unreachable controller: the entries then answer REQUEST_TIMED_OUT (NOT_CONTROLLER when the
    request came to this controller's own controller listener)."""
    if request.listener in broker.config.controller_listeners:
        return error_response(body, request.api_version, ErrorCode.NOT_CONTROLLER, response_type)
    try:
        return await broker.forwarder.forward(
            body, request.api_version, response_type, getattr(body, "timeout_ms", None)
        )
    except ControllerUnavailable as exc:
        log.warning("forwarding %s to the controller failed: %s", body.NAME, exc)
        return error_response(body, request.api_version, ErrorCode.REQUEST_TIMED_OUT, response_type)


async def forward_or_run(
    broker: BrokerCore,
    request: Received,
    body: Q,
    response_type: type[R],
    *,
    timeout_ms: int,
    run: Callable[[Q, int], Awaitable[R]],
) -> R:
    """A controller request with only a deadline to honour here (ElectLeaders, the reassignment
    APIs): forwarded when this node is not the active controller, else `run(body, version)` if
    it starts within `timeout_ms` (see `strom.broker.admin.deadline`); past it every entry
    answers REQUEST_TIMED_OUT and nothing changes."""
    if not broker.controller.is_active:
        return await forward(broker, request, body, response_type)
    version = request.api_version
    response = await before_deadline(timeout_ms, lambda: run(body, version))
    if response is None:
        return error_response(body, version, ErrorCode.REQUEST_TIMED_OUT, response_type)
    return response


def error_response(body: Message, version: int, code: ErrorCode, response_type: type[R]) -> R:
    """`body`'s response with every entry failed with `code` (no message, as Kafka's
    getErrorResponse for these errors)."""
    make = _FAILURES.get(type(body))
    if make is None:
        raise TypeError(f"{body.NAME} is not forwarded to the controller")
    response = make(body, version, code)
    assert isinstance(response, response_type)
    return response


def _create_topics(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, CreateTopicsRequest)
    result = CreateTopicsResponse.CreatableTopicResult
    return CreateTopicsResponse(
        topics=[result(name=t.name, error_code=code, error_message=None) for t in body.topics]
    )


def _delete_topics(body: Message, version: int, code: int) -> Message:
    assert isinstance(body, DeleteTopicsRequest)
    result = DeleteTopicsResponse.DeletableTopicResult
    states = (
        body.topics
        if version >= 6
        else [DeleteTopicsRequest.DeleteTopicState(name=n) for n in body.topic_names]
    )
    return DeleteTopicsResponse(responses=[result(s.name, s.topic_id, code, None) for s in states])


def _create_partitions(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, CreatePartitionsRequest)
    result = CreatePartitionsResponse.CreatePartitionsTopicResult
    return CreatePartitionsResponse(results=[result(t.name, code, None) for t in body.topics])


def _alter_configs(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, AlterConfigsRequest)
    result = AlterConfigsResponse.AlterConfigsResourceResponse
    return AlterConfigsResponse(
        responses=[result(code, None, r.resource_type, r.resource_name) for r in body.resources]
    )


def _incremental_alter_configs(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, IncrementalAlterConfigsRequest)
    result = IncrementalAlterConfigsResponse.AlterConfigsResourceResponse
    return IncrementalAlterConfigsResponse(
        responses=[result(code, None, r.resource_type, r.resource_name) for r in body.resources]
    )


def _elect_leaders(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, ElectLeadersRequest)
    result = ElectLeadersResponse.ReplicaElectionResult
    partition = ElectLeadersResponse.PartitionResult
    return ElectLeadersResponse(
        error_code=code,
        replica_election_results=[
            result(t.topic, [partition(p, code, None) for p in t.partitions])
            for t in body.topic_partitions or []
        ],
    )


def _alter_partition_reassignments(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, AlterPartitionReassignmentsRequest)
    response = AlterPartitionReassignmentsResponse
    return response(
        error_code=code,
        error_message=None,
        responses=[
            response.ReassignableTopicResponse(
                t.name,
                [
                    response.ReassignablePartitionResponse(p.partition_index, code, None)
                    for p in t.partitions
                ],
            )
            for t in body.topics
        ],
    )


def _list_partition_reassignments(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, ListPartitionReassignmentsRequest)
    return ListPartitionReassignmentsResponse(error_code=code, error_message=None)


def _describe_quorum(_body: Message, _version: int, code: int) -> Message:
    return DescribeQuorumResponse(error_code=code)


def _create_acls(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, CreateAclsRequest)
    result = CreateAclsResponse.AclCreationResult
    return CreateAclsResponse(results=[result(code, None) for _ in body.creations])


def _delete_acls(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, DeleteAclsRequest)
    result = DeleteAclsResponse.DeleteAclsFilterResult
    return DeleteAclsResponse(filter_results=[result(code, None, []) for _ in body.filters])


def _alter_client_quotas(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, AlterClientQuotasRequest)
    return AlterClientQuotasResponse(entries=[
        AlterClientQuotasResponse.EntryData(code, None, [
            AlterClientQuotasResponse.EntityData(e.entity_type, e.entity_name) for e in entry.entity
        ])
        for entry in body.entries
    ])  # fmt: skip


def _alter_user_scram_credentials(body: Message, _version: int, code: int) -> Message:
    assert isinstance(body, AlterUserScramCredentialsRequest)
    result = AlterUserScramCredentialsResponse.AlterUserScramCredentialsResult
    users = dict.fromkeys([d.name for d in body.deletions] + [u.name for u in body.upsertions])
    return AlterUserScramCredentialsResponse(results=[result(u, code, None) for u in users])


_FAILURES: dict[type[Message], Callable[[Message, int, int], Message]] = {
    CreateTopicsRequest: _create_topics,
    DeleteTopicsRequest: _delete_topics,
    CreatePartitionsRequest: _create_partitions,
    AlterConfigsRequest: _alter_configs,
    IncrementalAlterConfigsRequest: _incremental_alter_configs,
    ElectLeadersRequest: _elect_leaders,
    AlterPartitionReassignmentsRequest: _alter_partition_reassignments,
    ListPartitionReassignmentsRequest: _list_partition_reassignments,
    DescribeQuorumRequest: _describe_quorum,
    AlterUserScramCredentialsRequest: _alter_user_scram_credentials,
    CreateAclsRequest: _create_acls,
    AlterClientQuotasRequest: _alter_client_quotas,
    DeleteAclsRequest: _delete_acls,
}
"""The admin requests a broker forwards, and how each answers when it cannot."""


class ForwardingTopicCreator:
    """The broker's own topic creations (auto-creation, internal topics), sent where a client's
    CreateTopics goes: the local controller when it is active, else the active controller."""

    def __init__(self, broker: BrokerCore) -> None:
        self._broker = broker

    @property
    def image(self) -> MetadataImage:
        return self._broker.image

    async def create_topics(
        self, request: CreateTopicsRequest, version: int
    ) -> CreateTopicsResponse:
        if self._broker.controller.is_active:
            return await self._broker.controller.create_topics(request, version)
        try:
            return await self._broker.forwarder.forward(
                request, version, CreateTopicsResponse, request.timeout_ms
            )
        except ControllerUnavailable as exc:
            log.warning("creating %s through the controller failed: %s",
                        ", ".join(t.name for t in request.topics), exc)  # fmt: skip
            return error_response(request, version, ErrorCode.REQUEST_TIMED_OUT, CreateTopicsResponse)

