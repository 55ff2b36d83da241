"""Keep the partition logs in step with the metadata image.

The controller decides which topics and partitions exist and where their
replicas are; the broker only follows: a partition with a replica on this node
gets a log (a follower replica's too: the replica fetcher appends to it),
one that is deleted or whose replicas no longer include this node loses it (as
Kafka's ReplicaManager deletes a replica removed from a broker), and a topic
config change reaches its logs without a restart. Then the `ReplicationManager` makes the
leader/follower transitions of the image (strom.broker.replication.replication_manager). Which of those logs serve
clients -- only the ones this node leads -- is `strom.broker.data.lookup`'s
concern; the group coordinator follows the leadership of `__consumer_offsets`
after each image (`GroupDriver.follow`).

Deciding is cheap and happens on the event loop; creating the new logs' files
happens in a worker thread (`follow_image`), and the logs are registered back on
the loop. Until then a produce to a just-created partition gets the retriable
NOT_LEADER_OR_FOLLOWER, as from a Kafka leader that has not yet opened its log.

A partition that cannot be opened (EMFILE, no online log dir) is retried on the
next metadata change. Meanwhile it, like a log whose disk failed, is reported to
the controller by `report_storage` (Kafka's BrokerHeartbeat offlineLogDirs; see
strom.coordinator.controller.liveness), so Metadata shows it offline with no
leader instead of a leader that answers NOT_LEADER_OR_FOLLOWER forever. The
broker reports after following each image, when a produce or flush meets a
storage error, and every BROKER_HEARTBEAT_INTERVAL_S (failures in worker threads).
"""

from __future__ import annotations

import collections
import logging
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING

import trio

from strom.broker import runtime
from strom.broker.replication.replication_manager import ReplicationManager
from strom.config import BrokerConfig, ConfigError
from strom.coordinator.metadata.image import TOPIC_RESOURCE
from strom.storage.log.log_config import LogConfig

if TYPE_CHECKING:
    from strom.broker.core_state import BrokerCore
    from strom.coordinator.metadata.delta import MetadataDelta
    from strom.coordinator.metadata.image import MetadataImage
    from strom.storage.log.log_manager import LogManager
    from strom.storage.log.partition import PartitionLog

log = logging.getLogger("strom.partitions")

BROKER_HEARTBEAT_INTERVAL_S = 2.0
"""Kafka's broker.heartbeat.interval.ms default."""


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
    failed: list[tuple[tuple[str, int], OSError]] = field(default_factory=list)
    """Partitions that could not be placed (no online log dir)."""


def touched_topics(image: MetadataImage, delta: MetadataDelta | None) -> set[str] | None:
    """The topics a metadata change concerns, whose partitions alone need following; None when
    it may concern every partition here (the first image, broker registrations or fencing,
    broker-level configs, features): following one change then costs what it changed, not the
    partitions of the cluster (a million of them)."""
    if delta is None or delta.changed_brokers or delta.changed_features:
        return None
    if any(kind != TOPIC_RESOURCE for kind, _name in delta.changed_configs):
        return None
    names = {name for _kind, name in delta.changed_configs}
    names.update(topic.name for topic in delta.deleted_topics.values())
    for topic_id in delta.created_topics:
        topic = image.topic_by_id(topic_id)
        if topic is not None:
            names.add(topic.name)
    for topic_id in {topic_id for topic_id, _index in delta.changed_partitions}:
        topic = image.topic_by_id(topic_id)
        if topic is not None:
            names.add(topic.name)
    return names


def _plan(state: BrokerCore, image: MetadataImage, topics: set[str] | None = None) -> _Plan:
    """Decide on the event loop; apply config changes at once (they touch no files).
    `topics`: only these topics changed (`touched_topics`); None: any may have."""
    plan = _Plan()
    wanted: set[tuple[str, int]] = set()
    planned: collections.Counter[Path] = collections.Counter()
    broker = image.broker_config_layers(state.config).effective()
    if topics is None:
        scan = list(image.topics_by_name.values())
    else:
        scan = [t for name in sorted(topics) if (t := image.topics_by_name.get(name)) is not None]
    for topic in scan:
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
                plan.failed.append((key, exc))
                continue
            plan.create.append((directory, topic.name, partition.partition_id, config))
    plan.delete = [
        (p.topic, p.partition)
        for p in state.logs.partitions(topics)
        if (p.topic, p.partition) not in wanted
    ]
    for gone in [
        tp for tp in state.logs.unopened
        if tp not in wanted and (topics is None or tp[0] in topics)
    ]:  # fmt: skip
        del state.logs.unopened[gone]
    return plan


_Opened = tuple[list[tuple[Path, "PartitionLog"]], list[tuple[tuple[str, int], OSError]]]


def _open_all(logs: LogManager, plan: _Plan) -> _Opened:
    """The file work of the new logs (a worker thread may run this): the logs opened,
    and the partitions that could not be (recorded back on the event loop)."""
    opened, failed = [], []
    for directory, topic, partition, config in plan.create:
        try:
            opened.append((directory, logs.open_new(directory, topic, partition, config)))
        except OSError as exc:  # e.g. EMFILE: the other partitions must still follow
            failed.append(((topic, partition), exc))
    return opened, failed


def _finish(state: BrokerCore, plan: _Plan, outcome: _Opened, *, first: bool) -> None:
    opened, failed = outcome
    for directory, partition_log in opened:
        state.logs.adopt(directory, partition_log)
    _cannot_open(state.logs, plan.failed + failed)
    for topic, partition in plan.delete:
        if first:  # found on disk, unknown to the first image: kept aside, as Kafka's strays
            kept = state.logs.set_aside(topic, partition)
            log.warning(
                "the log of %s-%d is not placed on this node by the cluster metadata; set "
                "aside as %s, not deleted (remove it by hand once you no longer need it)",
                topic, partition, kept,
            )  # fmt: skip
            continue
        log.info("deleting log of %s-%d", topic, partition)
        state.logs.delete(topic, partition)


async def follow_image(
    state: BrokerCore,
    replication: ReplicationManager,
    image: MetadataImage,
    delta: MetadataDelta | None = None,
    *,
    first: bool = False,
) -> None:
    """Follow `image` while serving: creating a partition is a directory and a few files
    (~1.4 ms each here), so new logs are opened in a worker thread, not on the event loop.
    The controller awaits this before answering, so a CreateTopics response still means
    the logs exist. With the `delta` that made `image`, only the topics it touched are
    followed (`touched_topics`). `first`: the first image this process follows, against the
    logs found on disk: those it does not place here are set aside, not deleted (a deletion
    is acted on only once seen as a change of an image this process already followed)."""
    topics = touched_topics(image, delta)
    if topics is not None and state.logs.unopened:
        # partitions that could not be opened are retried at every change (module docstring)
        topics |= {name for name, _index in state.logs.unopened}
    if topics is not None and not topics:
        replication.follow(image, topics)  # nothing here changed (e.g. a producer-id block)
        return
    plan = _plan(state, image, topics)
    outcome: _Opened = ([], [])
    if plan.create:
        # existing logs change roles now, not after the new ones are opened: meanwhile the
        # handlers already read this image (a new leader must not commit at append)
        replication.follow(image, topics)
        outcome = await runtime.to_thread(_open_all, state.logs, plan)
    _finish(state, plan, outcome, first=first)
    replication.follow(image, topics)
    report_storage(state)
    if state.coordinators is not None:  # coordinate the groups of the offsets partitions led
        state.coordinators.follow()  # here, and the transactions of the transaction-state ones


class ImageFollower:
    """Follows each published change (`QuorumController.subscribe_deltas`): only the topics
    its delta touched when the delta was made against the image followed last, every
    partition otherwise (the first image, changes published while it was being followed, a
    snapshot loaded, a change whose following failed)."""

    def __init__(self, state: BrokerCore, replication: ReplicationManager) -> None:
        self.state = state
        self.replication = replication
        self.followed: MetadataImage | None = None

    async def __call__(self, image: MetadataImage, delta: MetadataDelta | None = None) -> None:
        in_step = delta is not None and self.followed is not None and delta.base is self.followed
        await follow_image(
            self.state, self.replication, image, delta if in_step else None,
            first=self.followed is None,
        )  # fmt: skip
        self.followed = image


def report_storage(state: BrokerCore) -> None:
    """Tell the controller which partitions hosted here cannot serve (see the module
    docstring); cheap and synchronous, so a failing produce reports before it answers."""
    image = state.image
    offline = []
    for name, index in state.logs.offline_partitions():
        topic = image.topic(name)
        if topic is not None:
            offline.append((topic.topic_id, index))
    if state.controller.heartbeat(offline):
        log.warning(
            "reported %d partition%s offline to the controller",
            len(offline), "" if len(offline) == 1 else "s",
        )  # fmt: skip


async def heartbeat_loop(state: BrokerCore) -> None:
    """Report every BROKER_HEARTBEAT_INTERVAL_S, catching failures met in worker threads
    (flushes, the cleaner's swaps, checkpoints)."""
    while True:
        await trio.sleep(BROKER_HEARTBEAT_INTERVAL_S)
        report_storage(state)


def _cannot_open(logs: LogManager, failed: list[tuple[tuple[str, int], OSError]]) -> None:
    """Record partitions that could not be opened; one line for those new this time."""
    new = [(key, exc) for key, exc in failed if logs.cannot_open(key[0], key[1], str(exc))]
    if not new:
        return
    names = ", ".join(f"{t}-{p}" for (t, p), _ in new[:5])
    more = f" and {len(new) - 5} more" if len(new) > 5 else ""
    log.error(
        "cannot open the logs of %d partition%s (%s%s): %s (raise the open-files limit, "
        "ulimit -n, or use fewer partitions); reported offline, retried on the next metadata "
        "change",
        len(new), "" if len(new) == 1 else "s", names, more, new[0][1].strerror or new[0][1],
    )  # fmt: skip
