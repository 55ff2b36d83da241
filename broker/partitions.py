"""Keep the partition logs in step with the metadata image.

The controller decides which topics and partitions exist; the broker only
follows: a partition assigned to this node gets a log, a deleted one loses
it, and a topic config change reaches its logs without a restart.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from broker.config import BrokerConfig, ConfigError
from broker.log.config import LogConfig
from coordinator.controller.dynamic import effective_config

if TYPE_CHECKING:
    from broker.state import BrokerState
    from coordinator.metadata.image import MetadataImage

log = logging.getLogger("strom.partitions")


def log_config(broker: BrokerConfig, image: MetadataImage, topic: str) -> LogConfig:
    """A topic's storage config: its overrides on top of the broker's effective config
    (static config plus dynamic broker configs from the image)."""
    try:
        return LogConfig.for_topic(broker, image.topic_config_overrides(topic))
    except ConfigError as exc:  # the controller validated them; never refuse to serve
        log.error("topic %s has an invalid stored config (%s); using broker defaults", topic, exc)
        return LogConfig.for_topic(broker, {})


def sync_partitions(state: BrokerState, image: MetadataImage) -> None:
    wanted: set[tuple[str, int]] = set()
    broker = effective_config(state.config, image, state.node_id)
    for topic in image.topics_by_name.values():
        config = log_config(broker, image, topic.name)
        for partition in topic.partitions.values():
            if state.node_id not in partition.replicas:
                continue
            key = (topic.name, partition.partition_id)
            wanted.add(key)
            existing = state.logs.get(*key)
            try:
                if existing is None:
                    state.logs.create(topic.name, partition.partition_id, config)
                elif existing.config != config:
                    existing.update_config(config)
            except OSError as exc:  # e.g. EMFILE: the other partitions must still follow
                log.error(
                    "cannot open the log of %s-%d: %s (raise the open-files limit, ulimit -n, "
                    "or use fewer partitions); it retries on the next metadata change",
                    topic.name, partition.partition_id, exc,
                )  # fmt: skip
    for partition_log in list(state.logs.partitions()):
        if (partition_log.topic, partition_log.partition) not in wanted:
            log.info("deleting log of %s-%d", partition_log.topic, partition_log.partition)
            state.logs.delete(partition_log.topic, partition_log.partition)
