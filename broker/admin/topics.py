"""Topic helpers shared by handlers: internal topics and auto-creation."""

from __future__ import annotations

from typing import TYPE_CHECKING

from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.broker.state import BrokerState

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})
CREATE_TOPICS_VERSION = 7


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


async def auto_create_topics(broker: BrokerState, names: list[str]) -> dict[str, ErrorCode]:
    """Create topics with the broker defaults, as Metadata and Produce auto-creation do.

    Goes through the controller exactly like a CreateTopics request, so names
    and configs are validated the same way. Returns each topic's error code.
    """
    from strom.wire.messages.create_topics import (
        CreateTopicsRequest,  # rarely needed: not at start-up
    )

    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(name=name, num_partitions=-1, replication_factor=-1)
            for name in dict.fromkeys(names)
        ],
        timeout_ms=30_000,
    )
    response = await broker.controller.create_topics(request, CREATE_TOPICS_VERSION)
    return {
        result.name: (
            ErrorCode.NONE
            if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
            else ErrorCode(result.error_code)
        )
        for result in response.topics
    }
