"""`ReplicaIndex`: which partitions each broker leads or is an in-sync (or eligible) replica of,
and which partitions have no leader (Kafka's BrokersToIsrs / BrokersToElrs).

Fencing a broker, its controlled shutdown and its unfencing each touch only the partitions it
holds or that are leaderless; without an index each had to scan every partition of the
image, which at a million partitions holds the controller's event loop for a second or more
per broker (and a restart of 300 brokers unfences 300 times).

The index belongs to one image. It is built on first use (`replica_index`, or in steps by
`replica_index_steps`, which yields every BUILD_SLICE partitions: a million take seconds,
which a controller's event loop must not wait for) and then carried
from an image to the next one the controller adopts (`carry`), updated with the delta's
changed partitions only: the older image gives it up (it would be rebuilt if asked again).
Iteration follows the image's own order (topics as created, partitions by index), so the
records a command writes do not depend on the index's history.
"""

from __future__ import annotations

import uuid
from collections.abc import Generator, Iterator
from typing import TYPE_CHECKING

from strom.coordinator.metadata.image import NO_LEADER, MetadataImage, PartitionImage, TopicImage

if TYPE_CHECKING:
    from strom.coordinator.metadata.delta import MetadataDelta

TopicParts = dict[uuid.UUID, set[int]]
BUILD_SLICE = 1000
"""Partitions indexed between two yields of `replica_index_steps` (a few milliseconds)."""


class ReplicaIndex:
    """Partition ids by broker and topic (leader, ISR or ELR member), and leaderless ones."""

    __slots__ = ("by_broker", "leaderless")

    def __init__(self) -> None:
        self.by_broker: dict[int, TopicParts] = {}
        self.leaderless: TopicParts = {}

    @classmethod
    def build(cls, image: MetadataImage) -> ReplicaIndex:
        """The index of `image`, built at once."""
        steps = cls.build_steps(image)
        while True:
            try:
                next(steps)
            except StopIteration as done:
                index: ReplicaIndex = done.value
                return index

    @classmethod
    def build_steps(cls, image: MetadataImage) -> Generator[None, None, ReplicaIndex]:
        """The index of `image`, built in steps (see the module docstring)."""
        index = cls()
        count = 0
        for topic in image.topics_by_id.values():
            for partition in topic.partitions.values():
                index._add(topic.topic_id, partition)
                count += 1
                if count % BUILD_SLICE == 0:
                    yield
        return index

    def _add(self, topic_id: uuid.UUID, p: PartitionImage) -> None:
        for broker in _members(p):
            self.by_broker.setdefault(broker, {}).setdefault(topic_id, set()).add(p.partition_id)
        if p.leader == NO_LEADER:
            self.leaderless.setdefault(topic_id, set()).add(p.partition_id)

    def _remove(self, topic_id: uuid.UUID, p: PartitionImage) -> None:
        for broker in _members(p):
            _discard(self.by_broker.get(broker), topic_id, p.partition_id)
        if p.leader == NO_LEADER:
            _discard(self.leaderless, topic_id, p.partition_id)

    def update(self, delta: MetadataDelta, image: MetadataImage) -> None:
        """From `delta.base`'s index to `image`'s (the image `delta` built)."""
        base = delta.base
        for topic_id, gone in delta.deleted_topics.items():
            for partition in gone.partitions.values():
                self._remove(topic_id, partition)
        for topic_id, index in delta.changed_partitions:
            old_topic = base.topics_by_id.get(topic_id)
            old = None if old_topic is None else old_topic.partitions.get(index)
            new = image.topics_by_id[topic_id].partitions[index]
            if old is not None:
                if _members(old) == _members(new) and (old.leader == NO_LEADER) == (
                    new.leader == NO_LEADER
                ):
                    continue
                self._remove(topic_id, old)
            self._add(topic_id, new)

    def held_by(
        self, image: MetadataImage, broker_id: int
    ) -> Iterator[tuple[TopicImage, PartitionImage]]:
        """The partitions `broker_id` leads or is an ISR or ELR member of, in image order."""
        return _in_order(image, self.by_broker.get(broker_id, {}))

    def without_leader(self, image: MetadataImage) -> Iterator[tuple[TopicImage, PartitionImage]]:
        """The partitions with no leader, in image order."""
        return _in_order(image, self.leaderless)


def _members(p: PartitionImage) -> set[int]:
    members = {*p.isr, *p.elr}
    if p.leader != NO_LEADER:
        members.add(p.leader)
    return members


def _discard(parts: TopicParts | None, topic_id: uuid.UUID, index: int) -> None:
    if parts is None:
        return
    ids = parts.get(topic_id)
    if ids is None:
        return
    ids.discard(index)
    if not ids:
        del parts[topic_id]


def _in_order(
    image: MetadataImage, parts: TopicParts
) -> Iterator[tuple[TopicImage, PartitionImage]]:
    if not parts:
        return
    for topic_id, topic in image.topics_by_id.items():
        ids = parts.get(topic_id)
        if ids:
            for index in sorted(ids):
                yield topic, topic.partitions[index]


def replica_index(image: MetadataImage) -> ReplicaIndex:
    """`image`'s index, built now if it has none."""
    index = image.replica_index_cache
    if not isinstance(index, ReplicaIndex):
        index = ReplicaIndex.build(image)
        object.__setattr__(image, "replica_index_cache", index)
    return index


def replica_index_steps(image: MetadataImage) -> Generator[None, None, ReplicaIndex]:
    """`image`'s index, built in steps if it has none (yielding every BUILD_SLICE
    partitions)."""
    index = image.replica_index_cache
    if not isinstance(index, ReplicaIndex):
        index = yield from ReplicaIndex.build_steps(image)
        object.__setattr__(image, "replica_index_cache", index)
    return index


def carry(delta: MetadataDelta, image: MetadataImage) -> None:
    """Move `delta.base`'s index, if it has one, to `image` (built by `delta`), updated."""
    index = delta.base.replica_index_cache
    if image is delta.base or not isinstance(index, ReplicaIndex):
        return
    object.__setattr__(delta.base, "replica_index_cache", None)
    index.update(delta, image)
    object.__setattr__(image, "replica_index_cache", index)
