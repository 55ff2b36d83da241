"""Keep the partition logs in step with the metadata image.

The controller decides which topics and partitions exist; the broker only
follows: a partition assigned to this node gets a log, a deleted one loses
it, and a topic config change reaches its logs without a restart.

Deciding is cheap and happens on the event loop; creating the new logs' files
happens in a worker thread (`follow_image`), and the logs are registered back on
the loop. Until then a produce to a just-created partition gets the retriable
NOT_LEADER_OR_FOLLOWER, as from a Kafka leader that has not yet opened its log.
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from strom.config import BrokerConfig, ConfigError
from strom.storage.config import LogConfig

if TYPE_CHECKING:
    from strom.broker.state import BrokerState
    from strom.coordinator.metadata.image import MetadataImage
    from strom.storage.manager import LogManager
    from strom.storage.partition import PartitionLog

log = logging.getLogger("strom.partitions")


def log_config(broker: BrokerConfig, image: MetadataImage, topic: str) -> LogConfig:
    """A topic's storage config: its overrides on top of the broker's effective config
    (static config plus dynamic broker configs from the image)."""
    try:
        return LogConfig.for_topic(broker, image.topic_config_overrides(topic))
    except ConfigError as exc:  # the controller validated them; never refuse to serve
        log.error("topic %s has an invalid stored config (%s); using broker defaults", topic, exc)
        return LogConfig.for_topic(broker, {})


@dataclass
class _Plan:
    """What following an image takes: logs to create (with their data dir), to delete."""

    create: list[tuple[Path, str, int, LogConfig]] = field(default_factory=list)
    delete: list[tuple[str, int]] = field(default_factory=list)


def _plan(state: BrokerState, image: MetadataImage) -> _Plan:
    """Decide on the event loop; apply config changes at once (they touch no files)."""
    plan = _Plan()
    wanted: set[tuple[str, int]] = set()
    planned: collections.Counter[Path] = collections.Counter()
    broker = image.broker_config_layers(state.config).effective()
    for topic in image.topics_by_name.values():
        config = log_config(broker, image, topic.name)
        for partition in topic.partitions.values():
            if state.node_id not in partition.replicas:
                continue
            key = (topic.name, partition.partition_id)
            wanted.add(key)
            existing = state.logs.get(*key)
            if existing is not None:
                if existing.config != config:
                    existing.update_config(config)
                continue
            try:
                directory = state.logs.place(planned)
            except OSError as exc:
                _cannot_open(key, exc)
                continue
            plan.create.append((directory, topic.name, partition.partition_id, config))
    plan.delete = [
        (p.topic, p.partition)
        for p in state.logs.partitions()
        if (p.topic, p.partition) not in wanted
    ]
    return plan


def _open_all(logs: LogManager, plan: _Plan) -> list[tuple[Path, PartitionLog]]:
    """The file work of the new logs (a worker thread may run this)."""
    opened = []
    for directory, topic, partition, config in plan.create:
        try:
            opened.append((directory, logs.open_new(directory, topic, partition, config)))
        except OSError as exc:  # e.g. EMFILE: the other partitions must still follow
            _cannot_open((topic, partition), exc)
    return opened


def _finish(state: BrokerState, plan: _Plan, opened: list[tuple[Path, PartitionLog]]) -> None:
    for directory, partition_log in opened:
        state.logs.adopt(directory, partition_log)
    for topic, partition in plan.delete:
        log.info("deleting log of %s-%d", topic, partition)
        state.logs.delete(topic, partition)


async def follow_image(state: BrokerState, image: MetadataImage) -> None:
    """Follow `image` while serving: creating a partition is a directory and a few files
    (~1.4 ms each here), so new logs are opened in a worker thread, not on the event loop.
    The controller awaits this before answering, so a CreateTopics response still means
    the logs exist."""
    plan = _plan(state, image)
    opened = await trio.to_thread.run_sync(_open_all, state.logs, plan) if plan.create else []
    _finish(state, plan, opened)


def _cannot_open(key: tuple[str, int], exc: OSError) -> None:
    log.error(
        "cannot open the log of %s-%d: %s (raise the open-files limit, ulimit -n, "
        "or use fewer partitions); it retries on the next metadata change",
        key[0], key[1], exc,
    )  # fmt: skip
