"""Topics the broker creates on its own behalf: auto-created ones and the internal topics.

Both go through the controller exactly like a client's CreateTopics request (one
path, one request version), so names and configs are validated the same way.
A topic that already exists counts as created: another request may have won.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Protocol

from strom.coordinator.controller.result import ApiError
from strom.wire.errors import ErrorCode

if TYPE_CHECKING:
    from strom.config import BrokerConfig
    from strom.coordinator.metadata.image import MetadataImage
    from strom.wire.messages.create_topics import CreateTopicsRequest, CreateTopicsResponse


class TopicController(Protocol):
    """What creating topics needs of the controller driver: its image and CreateTopics."""

    @property
    def image(self) -> MetadataImage: ...

    async def create_topics(
        self, request: CreateTopicsRequest, version: int
    ) -> CreateTopicsResponse: ...

log = logging.getLogger("strom.topics")

CONSUMER_OFFSETS = "__consumer_offsets"
TRANSACTION_STATE = "__transaction_state"
INTERNAL_TOPICS = frozenset({CONSUMER_OFFSETS, TRANSACTION_STATE})
CREATE_TOPICS_VERSION = 7
"""The CreateTopics version of the broker's own requests (the newest it serves)."""


def is_internal_topic(name: str) -> bool:
    return name in INTERNAL_TOPICS


@dataclass(frozen=True)
class NewTopic:
    """A topic to create; -1 counts take the broker defaults (num.partitions, ...)."""

    name: str
    partitions: int = -1
    replication: int = -1
    configs: Mapping[str, str] = field(default_factory=dict)


def internal_topic(config: BrokerConfig, name: str) -> NewTopic:
    """How Kafka creates an internal topic, from the broker settings that shape it."""
    if name == CONSUMER_OFFSETS:
        return NewTopic(
            name,
            config.offsets_topic_num_partitions,
            config.offsets_topic_replication_factor,
            {
                "cleanup.policy": "compact",
                "segment.bytes": str(config.offsets_topic_segment_bytes),
                "compression.type": "producer",
            },
        )
    if name == TRANSACTION_STATE:
        return NewTopic(
            name,
            config.transaction_state_log_num_partitions,
            config.transaction_state_log_replication_factor,
            {
                "cleanup.policy": "compact",
                "min.insync.replicas": str(config.transaction_state_log_min_isr),
                "segment.bytes": str(config.transaction_state_log_segment_bytes),
                "compression.type": "uncompressed",
            },
        )
    raise ValueError(f"{name} is not an internal topic")


async def create_topics(
    controller: TopicController, topics: Sequence[NewTopic]
) -> dict[str, ApiError]:
    """Create topics through the controller; each name's outcome (NONE if it now exists)."""
    from strom.wire.messages.create_topics import (
        CreateTopicsRequest,  # rarely needed: not at start-up
    )

    request = CreateTopicsRequest(
        topics=[
            CreateTopicsRequest.CreatableTopic(
                name=topic.name,
                num_partitions=topic.partitions,
                replication_factor=topic.replication,
                configs=[
                    CreateTopicsRequest.CreatableTopicConfig(name=k, value=v)
                    for k, v in topic.configs.items()
                ],
            )
            for topic in topics
        ],
        timeout_ms=30_000,
    )
    response = await controller.create_topics(request, CREATE_TOPICS_VERSION)
    return {
        result.name: (
            ApiError(ErrorCode.NONE)
            if result.error_code == ErrorCode.TOPIC_ALREADY_EXISTS
            else ApiError(ErrorCode(result.error_code), result.error_message)
        )
        for result in response.topics
    }


async def auto_create_topics(
    controller: TopicController, names: list[str]
) -> dict[str, ErrorCode]:
    """Create topics with the broker defaults, as Metadata and Produce auto-creation do."""
    results = await create_topics(controller, [NewTopic(n) for n in dict.fromkeys(names)])
    return {name: error.code for name, error in results.items()}


async def create_internal_topic(controller: TopicController, topic: NewTopic) -> ErrorCode:
    """Create an internal topic on first use: NONE if it exists (or now does), else
    COORDINATOR_NOT_AVAILABLE, which clients retry."""
    if controller.image.topic(topic.name) is not None:
        return ErrorCode.NONE
    error = (await create_topics(controller, [topic]))[topic.name]
    if error.code != ErrorCode.NONE:
        log.error("could not create %s: %s %s", topic.name, error.code.name, error.message)
        return ErrorCode.COORDINATOR_NOT_AVAILABLE
    return ErrorCode.NONE
