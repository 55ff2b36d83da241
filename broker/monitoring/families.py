"""The broker's metrics as Prometheus families, named as Strimzi's JMX-exporter rules name
Kafka's MBeans, so dashboards and alerts written for Kafka read Strom unchanged.

Strimzi's `kafka-metrics.yaml` lower-cases `kafka.<domain><type=T, name=N, k=v><>Attr` into
`kafka_<domain>_<t>_<n>` with the keys as labels: a `...PerSec` meter's `Count` becomes a
counter `..._<n without PerSec>_total`, a gauge's `Value` a gauge, a `...Percent` gauge
`..._percent`, and Kafka Metrics (`raft-metrics`, `socket-server-metrics`) keep their
attribute names with `-` as `_`. Kafka's request time histograms (Yammer) become Prometheus
histograms of the same name (`_bucket`, `_sum`, `_count`; the `_count` is the series Strimzi's
rule gives), so `histogram_quantile` works on them.

Everything is computed at scrape time from the recorder (`recorder.BrokerMetrics`), the
metadata image, the partition logs and the Raft replica; nothing here runs on the request
path. prometheus_client is imported by this module only.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

from prometheus_client.core import (
    CounterMetricFamily,
    GaugeMetricFamily,
    HistogramMetricFamily,
    Metric,
    UnknownMetricFamily,
)
from prometheus_client.registry import Collector

from strom.broker.metrics.recorder import Histogram, TopicCounters
from strom.config.resolve import topic_min_insync_replicas
from strom.wire.errors import ErrorCode
from strom.wire.messages import APIS

if TYPE_CHECKING:
    from strom.broker.network.server import Server
    from strom.broker.state import BrokerState

_TOPIC_METERS: tuple[tuple[str, str, str], ...] = (
    ("bytes_in", "bytesin", "Bytes appended by producers"),
    ("messages_in", "messagesin", "Records appended by producers"),
    ("bytes_out", "bytesout", "Record bytes sent to consumers"),
    ("replication_bytes_out", "replicationbytesout", "Record bytes sent to follower replicas"),
    ("total_produce_requests", "totalproducerequests", "Produce requests, per topic they name"),
    (
        "failed_produce_requests",
        "failedproducerequests",
        "Produce requests with a failed partition",
    ),
    ("total_fetch_requests", "totalfetchrequests", "Fetch requests, per topic they name"),
    ("failed_fetch_requests", "failedfetchrequests", "Fetch requests with a failed partition"),
)
_GROUP_STATES = (
    ("Stable", "numgroupsstable"),
    ("PreparingRebalance", "numgroupspreparingrebalance"),
    ("CompletingRebalance", "numgroupscompletingrebalance"),
    ("Empty", "numgroupsempty"),
    ("Dead", "numgroupsdead"),
)


def _api_name(key: int) -> str:
    info = APIS.get(key)
    return info.name if info is not None else str(key)


def _error_name(code: int) -> str:
    try:
        return ErrorCode(code).name
    except ValueError:
        return str(code)


class BrokerCollector(Collector):
    """prometheus_client collector of one broker; registered on a registry of its own."""

    def __init__(self, state: BrokerState, server: Server | None = None) -> None:
        self.state = state
        self.server = server
        self._cpu_mark = (time.monotonic(), time.thread_time())

    def collect(self) -> Iterator[Metric]:
        yield from self._broker_topic_metrics()
        yield from self._request_metrics()
        yield from self._replica_manager()
        yield from self._controller()
        yield from self._raft()
        yield from self._groups()
        yield from self._logs()
        yield from self._network()

    # --- kafka.server:type=BrokerTopicMetrics ------------------------------------------------

    def _broker_topic_metrics(self) -> Iterator[Metric]:
        metrics = self.state.metrics
        metrics.forget_topics(self.state.image.topics_by_name)
        everything = metrics.topics.get("") or TopicCounters()
        for attr, name, doc in _TOPIC_METERS:
            family = CounterMetricFamily(
                f"kafka_server_brokertopicmetrics_{name}", doc, labels=["topic"]
            )
            plain = CounterMetricFamily(f"kafka_server_brokertopicmetrics_{name}", doc)
            plain.add_metric([], getattr(everything, attr))
            for topic, counters in sorted(metrics.topics.items()):
                if topic:
                    family.add_metric([topic], getattr(counters, attr))
            family.samples = plain.samples + family.samples  # one family: all topics, then each
            yield family

    # --- kafka.network:type=RequestMetrics ---------------------------------------------------

    def _request_metrics(self) -> Iterator[Metric]:
        metrics = self.state.metrics
        requests = CounterMetricFamily(
            "kafka_network_requestmetrics_requests",
            "Requests answered, per API and version",
            labels=["request", "version"],
        )
        for (key, version), count in sorted(metrics.requests.items()):
            requests.add_metric([_api_name(key), str(version)], count)
        yield requests
        for name, doc, table in (
            ("totaltimems", "Time from a request read to its response ready, ms",
             metrics.total_time),
            ("requestqueuetimems", "Time a read request waited before its handler ran, ms",
             metrics.queue_time),
        ):  # fmt: skip
            family = HistogramMetricFamily(
                f"kafka_network_requestmetrics_{name}", doc, labels=["request"]
            )
            for key, histogram in sorted(table.items()):
                family.add_metric([_api_name(key)], _buckets(histogram), histogram.sum)
            yield family
        errors = CounterMetricFamily(
            "kafka_network_requestmetrics_errors",
            "Error codes answered, per API and error",
            labels=["request", "error"],
        )
        for (key, code), count in sorted(metrics.errors.items()):
            errors.add_metric([_api_name(key), _error_name(code)], count)
        yield errors

    # --- kafka.server:type=ReplicaManager ----------------------------------------------------

    def _replica_manager(self) -> Iterator[Metric]:
        state = self.state
        me = state.node_id
        image = state.image
        leaders = under_replicated = under_min_isr = at_min_isr = 0
        for topic in image.topics_by_name.values():
            min_isr: int | None = None
            for partition in topic.partitions.values():
                if partition.leader != me:
                    continue
                leaders += 1
                isr = len(partition.isr)
                if isr < len(partition.replicas):
                    under_replicated += 1
                if min_isr is None:
                    min_isr = topic_min_insync_replicas(
                        state.config, image.topic_config_overrides(topic.name)
                    )
                if isr < min_isr:
                    under_min_isr += 1
                elif isr == min_isr:
                    at_min_isr += 1
        hosted = sum(1 for _ in state.logs.partitions())
        offline = len(state.logs.offline_partitions())
        for name, value, doc in (
            ("partitioncount", hosted, "Partitions with a replica on this broker"),
            ("leadercount", leaders, "Partitions this broker leads"),
            ("underreplicatedpartitions", under_replicated,
             "Partitions led here whose ISR is smaller than their replica set"),
            ("underminisrpartitioncount", under_min_isr,
             "Partitions led here whose ISR is below min.insync.replicas"),
            ("atminisrpartitioncount", at_min_isr,
             "Partitions led here whose ISR is exactly min.insync.replicas"),
            ("offlinereplicacount", offline, "Replicas on this broker that cannot serve"),
        ):  # fmt: skip
            yield GaugeMetricFamily(f"kafka_server_replicamanager_{name}", doc, value=value)
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrshrinks",
            "ISR shrinks of partitions led here",
            value=state.metrics.isr_shrinks,
        )
        yield CounterMetricFamily(
            "kafka_server_replicamanager_isrexpands",
            "ISR expansions of partitions led here",
            value=state.metrics.isr_expands,
        )

    # --- kafka.controller:type=KafkaController, ControllerStats; broker-metadata-metrics ----

    def _controller(self) -> Iterator[Metric]:
        state = self.state
        controller = state.controller
        image = state.image
        provenance = image.provenance
        now_ms = time.time_ns() // 1_000_000
        lag_ms = max(0, now_ms - provenance.timestamp) if provenance.timestamp >= 0 else 0
        if "broker" in state.config.roles:
            yield GaugeMetricFamily(
                "kafka_server_brokermetadatametrics_last_applied_record_offset",
                "Offset of the last metadata record this broker applied",
                value=provenance.offset,
            )
            yield GaugeMetricFamily(
                "kafka_server_brokermetadatametrics_last_applied_record_timestamp",
                "Timestamp of the last metadata record this broker applied",
                value=provenance.timestamp,
            )
            yield GaugeMetricFamily(
                "kafka_server_brokermetadatametrics_last_applied_record_lag_ms",
                "Now minus the timestamp of the last metadata record applied",
                value=lag_ms,
            )
        if "controller" not in state.config.roles:
            return
        active = controller.is_active
        brokers = image.brokers()
        fenced = sum(1 for b in brokers if b.fenced)
        offline = topics = partitions = imbalance = 0
        for topic in image.topics_by_name.values():
            topics += 1
            for partition in topic.partitions.values():
                partitions += 1
                if partition.leader < 0:
                    offline += 1
                elif partition.replicas and partition.leader != partition.replicas[0]:
                    imbalance += 1
        raft = state.raft
        committed = (raft.high_watermark - 1) if raft is not None else provenance.offset

        def only_active(value: int) -> int:
            return value if active else 0  # Kafka: the gauges of an inactive controller are 0

        for name, value, doc in (
            ("activecontrollercount", int(active), "1 on the active controller, else 0"),
            ("offlinepartitionscount", only_active(offline), "Partitions without a leader"),
            ("globaltopiccount", only_active(topics), "Topics in the cluster"),
            ("globalpartitioncount", only_active(partitions), "Partitions in the cluster"),
            ("preferredreplicaimbalancecount", only_active(imbalance),
             "Partitions not led by their preferred replica"),
            ("fencedbrokercount", only_active(fenced), "Registered brokers that are fenced"),
            ("activebrokercount", only_active(len(brokers) - fenced),
             "Registered brokers that are unfenced"),
            ("lastappliedrecordoffset", provenance.offset,
             "Offset of the last metadata record the controller applied"),
            ("lastcommittedrecordoffset", committed, "Offset of the last committed metadata record"),
            ("lastappliedrecordtimestamp", provenance.timestamp,
             "Timestamp of the last metadata record applied"),
            ("lastappliedrecordlagms", lag_ms,
             "Now minus the timestamp of the last metadata record applied"),
        ):  # fmt: skip
            yield GaugeMetricFamily(f"kafka_controller_kafkacontroller_{name}", doc, value=value)
        elections = self.state.metrics.elections
        # Strimzi's name for the Yammer timer's Count: `_count`, not a counter's `_total`
        yield UnknownMetricFamily(
            "kafka_controller_controllerstats_leaderelectionrateandtimems_count",
            "Leader elections (a partition's leader changed to another broker)",
            value=elections.leader,
        )
        yield CounterMetricFamily(
            "kafka_controller_controllerstats_uncleanleaderelections",
            "Leader elections of a replica outside the ISR",
            value=elections.unclean,
        )

    # --- kafka.server:type=raft-metrics ------------------------------------------------------

    def _raft(self) -> Iterator[Metric]:
        raft = self.state.raft
        if raft is None:
            return
        core = raft.core
        role = core.role.name.lower() if core is not None else "unattached"
        yield GaugeMetricFamily(
            "kafka_server_raftmetrics_current_epoch", "The Raft epoch", value=raft.epoch
        )
        yield GaugeMetricFamily(
            "kafka_server_raftmetrics_current_leader",
            "The Raft leader's id (-1: none known)",
            value=raft.leader_id,
        )
        if core is not None:
            yield GaugeMetricFamily(
                "kafka_server_raftmetrics_high_watermark",
                "The metadata log's high watermark",
                value=core.high_watermark,
            )
            yield GaugeMetricFamily(
                "kafka_server_raftmetrics_log_end_offset",
                "The metadata log's end offset on this node",
                value=core.log.end_offset,
            )
        state_family = GaugeMetricFamily(
            "kafka_server_raftmetrics_current_state",
            "This node's Raft role (1 for the current one)",
            labels=["current_state"],
        )
        state_family.add_metric([role], 1)
        yield state_family
        latency = raft.commit_latency
        average, maximum = latency.window()
        yield GaugeMetricFamily(
            "kafka_server_raftmetrics_commit_latency_avg",
            "Average time from append to commit on the leader, ms, over the last 30 s",
            value=average,
        )
        yield GaugeMetricFamily(
            "kafka_server_raftmetrics_commit_latency_max",
            "Longest time from append to commit on the leader, ms, over the last 30 s",
            value=maximum,
        )

    # --- groups ------------------------------------------------------------------------------

    def _groups(self) -> Iterator[Metric]:
        driver = self.state.groups  # not started yet (it starts on first need): no groups
        groups = {} if driver is None else driver.machine.groups
        counts = dict.fromkeys((s for s, _ in _GROUP_STATES), 0)
        for group in groups.values():
            counts[group.state.value] = counts.get(group.state.value, 0) + 1
        yield GaugeMetricFamily(
            "kafka_coordinator_group_groupmetadatamanager_numgroups",
            "Groups this broker coordinates",
            value=len(groups),
        )
        for state, name in _GROUP_STATES:
            yield GaugeMetricFamily(
                f"kafka_coordinator_group_groupmetadatamanager_{name}",
                f"Groups in state {state}",
                value=counts[state],
            )
        by_protocol = GaugeMetricFamily(
            "kafka_server_group_coordinator_metrics_group_count",
            "Groups this broker coordinates, per rebalance protocol",
            labels=["protocol"],
        )
        by_protocol.add_metric(["classic"], len(groups))
        yield by_protocol
        yield CounterMetricFamily(
            "kafka_server_group_coordinator_metrics_group_rebalance",
            "Rebalances started (groups entering PreparingRebalance)",
            value=0 if driver is None else driver.machine.membership.rebalances,
        )

    # --- kafka.log:type=Log ------------------------------------------------------------------

    def _logs(self) -> Iterator[Metric]:
        size = GaugeMetricFamily(
            "kafka_log_log_size", "Bytes of the partition's log", labels=["topic", "partition"]
        )
        segments = GaugeMetricFamily(
            "kafka_log_log_numlogsegments",
            "Segments of the partition's log",
            labels=["topic", "partition"],
        )
        end = GaugeMetricFamily(
            "kafka_log_log_logendoffset", "The log end offset", labels=["topic", "partition"]
        )
        start = GaugeMetricFamily(
            "kafka_log_log_logstartoffset", "The log start offset", labels=["topic", "partition"]
        )
        for log in self.state.logs.partitions():
            labels = [log.topic, str(log.partition)]
            parts = log.segments
            size.add_metric(labels, sum(s.size_bytes for s in parts))
            segments.add_metric(labels, len(parts))
            end.add_metric(labels, log.log_end_offset)
            start.add_metric(labels, log.log_start_offset)
        yield from (size, segments, end, start)

    # --- kafka.network:type=SocketServer; socket-server-metrics ------------------------------

    def _network(self) -> Iterator[Metric]:
        server = self.server
        connections = GaugeMetricFamily(
            "kafka_server_socket_server_metrics_connection_count",
            "Open connections, per listener",
            labels=["listener", "networkProcessor"],
        )
        if server is not None:
            for listener, count in sorted(server.connections_by_listener.items()):
                connections.add_metric([listener, "0"], count)
        yield connections
        metrics = self.state.metrics
        yield CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_creation",
            "Connections accepted",
            value=metrics.connections_created,
        )
        yield CounterMetricFamily(
            "kafka_server_socket_server_metrics_connection_close",
            "Connections closed",
            value=metrics.connections_closed,
        )
        yield GaugeMetricFamily(
            "kafka_network_socketserver_networkprocessoravgidle_percent",
            "Share of time the event loop thread was idle since the previous scrape (0-1)",
            value=self._idle_ratio(),
        )

    def _idle_ratio(self) -> float:
        """1 - (CPU time of this thread / wall time) since the last scrape: the event loop's
        idle share, measured without any work on the request path."""
        wall, cpu = time.monotonic(), time.thread_time()
        last_wall, last_cpu = self._cpu_mark
        self._cpu_mark = (wall, cpu)
        elapsed = wall - last_wall
        if elapsed <= 0:
            return 1.0
        return min(1.0, max(0.0, 1.0 - (cpu - last_cpu) / elapsed))


def _buckets(histogram: Histogram) -> list[tuple[str, float]]:
    return [(bound, float(count)) for bound, count in histogram.cumulative()]
