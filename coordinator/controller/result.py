"""What every controller command returns, and how per-item failures are carried.

A command never touches the image it reads: it returns the records to append
and the response to send once they are durable. `ControllerError` aborts one
item (a topic, a resource) with a Kafka error code and message; commands
catch it per item, the way Kafka's controller maps ApiException to ApiError.
When the records cannot be made durable, `fail_unwritten` turns the planned
response into the answer Kafka's controller gives for a failed event: every
item that would have succeeded gets UNKNOWN_SERVER_ERROR with the cause. A
node that is not the active controller answers with `not_controller`.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Generator
from dataclasses import dataclass, field
from typing import Generic, NamedTuple, TypeVar

from strom.config import BrokerConfig
from strom.config.dynamic import BrokerLayers
from strom.coordinator.metadata.image import MetadataImage
from strom.wire.errors import ErrorCode
from strom.wire.message import Message, Struct
from strom.wire.messages.alter_partition_reassignments import AlterPartitionReassignmentsResponse
from strom.wire.messages.elect_leaders import ElectLeadersResponse
from strom.wire.messages.list_partition_reassignments import ListPartitionReassignmentsResponse

R = TypeVar("R")
T = TypeVar("T")
M = TypeVar("M", bound=Message)

NOT_CONTROLLER_MESSAGE = "this node is not the active controller"

DEFAULT_MESSAGES: dict[ErrorCode, str] = {
    ErrorCode.UNKNOWN_TOPIC_OR_PARTITION: "This server does not host this topic-partition.",
    ErrorCode.UNKNOWN_TOPIC_ID: "This server does not host this topic ID.",
}
"""Kafka's default messages, for errors it reports without a specific one."""


class ApiError(NamedTuple):
    """An error code and its message (None: no message on the wire)."""

    code: ErrorCode
    message: str | None = None

    @classmethod
    def default(cls, code: ErrorCode) -> ApiError:
        """The error with Kafka's default message for its code."""
        return cls(code, DEFAULT_MESSAGES.get(code))


NO_ERROR = ApiError(ErrorCode.NONE)


class ControllerError(Exception):
    """Fail one item of a command with `error`."""

    def __init__(self, code: ErrorCode, message: str | None = None) -> None:
        super().__init__(message or code.name)
        self.error = ApiError(code, message)


@dataclass(frozen=True)
class ControllerResult(Generic[R]):
    """Records to append (all or none, as one batch) and the response once they are."""

    response: R
    records: list[Message] = field(default_factory=list)


Planning = Generator[None, None, ControllerResult[R]]
"""A command planned in steps: it yields between slices of its work (PLAN_SLICE partitions)
and returns its result, so that a host can let its event loop run meanwhile (a CreateTopics
of 10,000 partitions plans for a good part of a second). `finish` runs one to its end."""

PLAN_SLICE = 500
"""Partitions a command plans between two yields (a few milliseconds)."""


def finish(steps: Generator[None, None, T]) -> T:
    """Run work done in steps (a `Planning`, `Controller.stage_steps`) to its end, at once."""
    while True:
        try:
            next(steps)
        except StopIteration as done:
            result: T = done.value
            return result


def fail_unwritten(response: R, error: ApiError) -> R:
    """`response` with each item that planned a change (error 0) failed with `error`.

    Works on every command's response: its top-level lists hold one result per
    topic or resource, each with an `error_code` (and usually an `error_message`);
    a response that is one result (BrokerRegistration, BrokerHeartbeat) carries the
    error in its own `error_code`.
    """
    if isinstance(response, Message) and "error_code" in response.FIELDS:
        if getattr(response, "error_code", None) == ErrorCode.NONE:
            response.error_code = error.code  # type: ignore[attr-defined]
        return response
    if isinstance(response, Message):
        for name in response.FIELDS:
            items = getattr(response, name)
            if not isinstance(items, list):
                continue
            for item in items:
                if getattr(item, "error_code", None) != ErrorCode.NONE:
                    continue
                item.error_code = error.code
                if "error_message" in item.FIELDS:
                    item.error_message = error.message
    return response


def _fail_not_controller(item: Struct) -> None:
    item.error_code = ErrorCode.NOT_CONTROLLER  # type: ignore[attr-defined]
    if "error_message" in item.FIELDS:
        item.error_message = NOT_CONTROLLER_MESSAGE  # type: ignore[attr-defined]


def not_controller(response: M) -> M:
    """`response` as a controller that is not the active one answers: NOT_CONTROLLER in its
    top-level error code if it has one (ElectLeaders and the reassignment APIs also in every
    partition; ListPartitionReassignments lists nothing), else in every item."""
    if "error_code" in response.FIELDS:
        _fail_not_controller(response)
        if isinstance(response, ElectLeadersResponse):
            for result in response.replica_election_results:
                for partition in result.partition_result:
                    _fail_not_controller(partition)
        elif isinstance(response, AlterPartitionReassignmentsResponse):
            for topic in response.responses:
                for reassignment in topic.partitions:
                    _fail_not_controller(reassignment)
        elif isinstance(response, ListPartitionReassignmentsResponse):
            response.topics = []
        return response
    for name in response.FIELDS:
        items = getattr(response, name)
        if not isinstance(items, list):
            continue
        for item in items:
            if isinstance(item, Struct) and "error_code" in item.FIELDS:
                _fail_not_controller(item)
    return response


@dataclass(frozen=True)
class Context:
    """What a command may read: the image, configuration, and the id source."""

    image: MetadataImage
    config: BrokerConfig
    """The static configuration overlaid with this node's dynamic broker configs."""
    layers: BrokerLayers
    """Where `config` comes from: the static file and the stored dynamic overrides."""
    node_id: int
    new_uuid: Callable[[], uuid.UUID]

    @property
    def static_config(self) -> BrokerConfig:
        """The configuration from the file alone (for keys Kafka never changes at runtime)."""
        return self.layers.static
