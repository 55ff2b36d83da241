"""The broker's request counters, updated on the request path.

One `BrokerMetrics` per broker (on `BrokerState.metrics`). `Server.dispatch` calls
`record_request` once per answered request when `metrics.listener` is set (nothing exports
them otherwise): that is the only hook on the hot path. It counts
the request per API and version, puts its total and queue time in per-API histograms, and for
Produce and Fetch walks the response's topics once to count bytes and messages per topic, and
failed requests (Kafka's BrokerTopicMetrics). Everything is a plain `int`/`float` in a dict or
list, touched from the trio thread only, so no locks; `families` reads it at scrape time.

Why not prometheus_client's Counter and Histogram here: each `inc`/`observe` takes a lock
and looks its labels up through several layers; a dict increment costs a fraction of it, and
the library stays off the import path of a broker that does not export metrics.
"""

from __future__ import annotations

import bisect
import struct
import time
from collections import deque
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Any

TIME_BUCKETS_MS: tuple[float, ...] = (
    0.5, 1, 2.5, 5, 10, 25, 50, 100, 250, 500, 1000, 2500, 5000, 10000, 30000,
)  # fmt: skip
"""Upper bounds of the request time histograms, in ms (Kafka reports request times in ms)."""

PRODUCE_KEY = 0
FETCH_KEY = 1
_RECORDS_COUNT_AT = 57
"""Offset of a RecordBatch header's records count (int32); the batch length is at 8."""
_BATCH_OVERHEAD = 12
"""baseOffset (8) + batchLength (4): bytes of a batch not counted in its batchLength."""


_INT32 = struct.Struct(">i")


class Histogram:
    """Counts per bucket (the last is +Inf), the sum and the count of observations."""

    __slots__ = ("buckets", "count", "sum")

    def __init__(self) -> None:
        self.buckets = [0] * (len(TIME_BUCKETS_MS) + 1)
        self.sum = 0.0
        self.count = 0

    def observe(self, value: float) -> None:
        self.buckets[bisect.bisect_left(TIME_BUCKETS_MS, value)] += 1
        self.sum += value
        self.count += 1

    def cumulative(self) -> list[tuple[str, int]]:
        """(upper bound, observations at or below it) as Prometheus buckets are."""
        out, running = [], 0
        for bound, n in zip((*TIME_BUCKETS_MS, float("inf")), self.buckets, strict=True):
            running += n
            out.append(("+Inf" if bound == float("inf") else repr(float(bound)), running))
        return out


@dataclass(slots=True)
class TopicCounters:
    """BrokerTopicMetrics of one topic (and of all topics, under the empty name)."""

    bytes_in: int = 0
    messages_in: int = 0
    bytes_out: int = 0
    replication_bytes_out: int = 0
    total_produce_requests: int = 0
    failed_produce_requests: int = 0
    total_fetch_requests: int = 0
    failed_fetch_requests: int = 0


@dataclass(slots=True)
class Elections:
    """Leader elections seen in the metadata this controller node applied."""

    leader: int = 0
    unclean: int = 0

    def follow(self, image: Any, delta: Any, active: bool) -> None:
        """Count the partitions of `delta` whose leader moved to another broker (unclean:
        to one outside the previous ISR). Only the active controller counts, as in Kafka."""
        if not active:
            return
        base = delta.base
        for topic_id, index in delta.changed_partitions:
            before_topic = base.topic_by_id(topic_id)
            after_topic = image.topic_by_id(topic_id)
            if before_topic is None or after_topic is None:
                continue
            before, after = before_topic.partition(index), after_topic.partition(index)
            if before is None or after is None or after.leader < 0:
                continue
            if after.leader != before.leader:
                self.leader += 1
                if after.leader not in before.isr:
                    self.unclean += 1


class CommitLatency:
    """Time from a metadata append to its commit on the Raft leader (Kafka's
    commit-latency-avg and -max, over a 30 s window)."""

    WINDOW_S = 30.0

    def __init__(self) -> None:
        self._pending: deque[tuple[int, float]] = deque(maxlen=4096)
        self._done: deque[tuple[float, float]] = deque(maxlen=4096)

    def proposed(self, offset: int) -> None:
        self._pending.append((offset, time.monotonic()))

    def committed(self, high_watermark: int) -> None:
        pending = self._pending
        if not pending or pending[0][0] >= high_watermark:
            return
        now = time.monotonic()
        while pending and pending[0][0] < high_watermark:
            _, began = pending.popleft()
            self._done.append((now, (now - began) * 1000))

    def lost_leadership(self) -> None:
        self._pending.clear()

    def window(self) -> tuple[float, float]:
        """(average, max) in ms over the window; (0, 0) with no commit in it."""
        horizon = time.monotonic() - self.WINDOW_S
        done = self._done
        while done and done[0][0] < horizon:
            done.popleft()
        if not done:
            return 0.0, 0.0
        values = [latency for _, latency in done]
        return sum(values) / len(values), max(values)


@dataclass
class BrokerMetrics:
    """The counters of one broker, as the request path leaves them."""

    requests: dict[tuple[int, int], int] = field(default_factory=dict)
    """(API key, version) -> requests answered (Kafka's RequestsPerSec{request,version})."""
    total_time: dict[int, Histogram] = field(default_factory=dict)
    """API key -> time from the request fully read to its response ready, ms (TotalTimeMs)."""
    queue_time: dict[int, Histogram] = field(default_factory=dict)
    """API key -> time from fully read to its handler starting, ms (RequestQueueTimeMs):
    requests pipelined on one connection wait for the ones before them."""
    errors: dict[tuple[int, int], int] = field(default_factory=dict)
    """(API key, error code) -> count, from top-level and per-partition error codes of Produce
    and Fetch, and top-level ones of the others (ErrorsPerSec{request,error})."""
    topics: dict[str, TopicCounters] = field(default_factory=dict)
    """Topic -> its counters; "" holds the totals over all topics (Kafka's MBean without a
    topic)."""
    elections: Elections = field(default_factory=Elections)
    isr_shrinks: int = 0
    isr_expands: int = 0
    connections_created: int = 0
    connections_closed: int = 0

    def record_request(
        self,
        api_key: int,
        version: int,
        request: Any,
        response: Any,
        queue_ms: float,
        total_ms: float,
        topic_of_id: Callable[[Any], str | None],
    ) -> None:
        """Count one answered request (`response` None: Produce with acks=0)."""
        key = (api_key, version)
        self.requests[key] = self.requests.get(key, 0) + 1
        total = self.total_time.get(api_key)
        if total is None:
            total = self.total_time[api_key] = Histogram()
            self.queue_time[api_key] = Histogram()
        total.observe(total_ms)
        self.queue_time[api_key].observe(queue_ms)
        if api_key == PRODUCE_KEY:
            self._produce(request, response)
        elif api_key == FETCH_KEY:
            self._fetch(request, response, topic_of_id)
        else:
            code = getattr(response, "error_code", 0)
            if code:
                self._error(api_key, code)

    def _error(self, api_key: int, code: int) -> None:
        key = (api_key, code)
        self.errors[key] = self.errors.get(key, 0) + 1

    def _topic(self, name: str) -> TopicCounters:
        counters = self.topics.get(name)
        if counters is None:
            counters = self.topics[name] = TopicCounters()
        return counters

    def _produce(self, request: Any, response: Any) -> None:
        everything = self._topic("")
        answers = response.responses if response is not None else ()
        for index, topic in enumerate(request.topic_data):
            codes = _codes(answers, index, topic.name)
            counters = self._topic(topic.name)
            counters.total_produce_requests += 1
            everything.total_produce_requests += 1
            failed = False
            for part in topic.partition_data:
                code = codes.get(part.index, 0) if codes else 0
                if code:
                    failed = True
                    self._error(PRODUCE_KEY, code)
                    continue
                records = part.records
                if records:
                    size = len(records)
                    messages = _records_count(records)
                    counters.bytes_in += size
                    counters.messages_in += messages
                    everything.bytes_in += size
                    everything.messages_in += messages
            if failed:
                counters.failed_produce_requests += 1
                everything.failed_produce_requests += 1

    def _fetch(self, request: Any, response: Any, topic_of_id: Callable[[Any], str | None]) -> None:
        everything = self._topic("")
        follower = _is_follower(request)
        for topic in response.responses:
            name = topic.topic or topic_of_id(topic.topic_id) or ""
            counters = self._topic(name) if name else everything
            failed = False
            size = 0
            for part in topic.partitions:
                if part.error_code:
                    failed = True
                    self._error(FETCH_KEY, part.error_code)
                if part.records is not None:
                    size += len(part.records)
            if follower:
                counters.replication_bytes_out += size
                everything.replication_bytes_out += size
            else:
                counters.bytes_out += size
                everything.bytes_out += size
            counters.total_fetch_requests += 1
            everything.total_fetch_requests += 1
            if failed:
                counters.failed_fetch_requests += 1
                everything.failed_fetch_requests += 1
        if response.error_code:
            self._error(FETCH_KEY, response.error_code)

    def isr_changed(self, before: int, after: int) -> None:
        """An ISR change of a partition led here was committed (sizes before and after)."""
        if after < before:
            self.isr_shrinks += 1
        elif after > before:
            self.isr_expands += 1

    def forget_topics(self, live: Iterable[str]) -> None:
        """Drop the counters of deleted topics (Kafka removes their MBeans)."""
        keep = set(live)
        for name in [n for n in self.topics if n and n not in keep]:
            del self.topics[name]


def _records_count(records: Any) -> int:
    """Records in a RecordBatch sequence, from each batch header (v2); no decoding."""
    count, position, end = 0, 0, len(records)
    unpack = _INT32.unpack_from
    while position + _RECORDS_COUNT_AT + 4 <= end:
        count += unpack(records, position + _RECORDS_COUNT_AT)[0]
        position += _BATCH_OVERHEAD + unpack(records, position + 8)[0]
    return count


def _codes(answers: Any, index: int, name: str) -> dict[int, int] | None:
    """Partition -> error code of the response's entry for topic `name` (None: all NONE).
    The response lists topics in the request's order; a name search covers any other."""
    answer = answers[index] if index < len(answers) else None
    if answer is None or answer.name != name:
        answer = next((a for a in answers if a.name == name), None)
        if answer is None:
            return None
    codes = None
    for part in answer.partition_responses:
        if part.error_code:
            if codes is None:
                codes = {}
            codes[part.index] = part.error_code
    return codes


def _is_follower(request: Any) -> bool:
    state = getattr(request, "replica_state", None)
    replica_id = getattr(state, "replica_id", -1) if state is not None else -1
    return max(replica_id, getattr(request, "replica_id", -1)) >= 0
