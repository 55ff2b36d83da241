"""Request fault injection, for test harnesses only: make the next N requests of an API fail
with a chosen error (for a topic or partition), or answer late.

How it is enabled, and why it cannot be by accident: only a process started with the
environment variable `STROM_TEST_FAULT_INJECTION` naming a Unix socket that a test harness
listens on (`strom.broker.testing.faults.FaultControl`) has it. At start-up the broker
removes the variable (so nothing it starts inherits it), connects to that socket and takes
its rules from there alone: no config key, no Kafka request and no listener can turn it on
or change a rule. If the variable is set and the socket cannot be reached, start-up stops
(fail closed), and a process with it on logs a warning at start. With it off, `Server` holds
None here and the request path pays one attribute test.

The rules (JSON lines from the harness, each answered with one line):
`{"op": "add", "api": 0, "error": 6, "count": 3, "topic": "t", "partition": 0,
"delay_ms": 0}` (count null: until cleared), `{"op": "clear"}`, `{"op": "list"}`.

What a failing rule does to a matching request:
- Produce: the matching partitions are not appended; each is answered with the error; the
  request's other partitions are appended as usual (acks=0: nothing is answered).
- Fetch, ListOffsets: the request runs; the matching partitions are answered with the error
  (no records), the others as usual. Metadata: likewise for the matching topics (the
  brokers stay in the answer).
- Any other API: the whole request is answered with the error: the response's top-level
  error code, or each topic's for CreateTopics and DeleteTopics; an API whose
  response has neither closes the connection (clients see a network error).
A rule with `delay_ms` holds a matching request that long first (with an error too, or
alone). A request matching several rules takes the first; each match uses up one of its count.
"""

from __future__ import annotations

import json
import logging
import os
from collections.abc import Awaitable, Callable, Iterator
from dataclasses import dataclass
from typing import Any

import trio

from strom.broker.handlers.request import Deferred
from strom.broker.network.error_response import error_response
from strom.wire.errors import ErrorCode, ProtocolError

log = logging.getLogger("strom.faults")

ENV = "STROM_TEST_FAULT_INJECTION"
PRODUCE, FETCH, LIST_OFFSETS, METADATA, CREATE_TOPICS, DELETE_TOPICS = 0, 1, 2, 3, 19, 20


@dataclass
class Rule:
    api_key: int
    error: int = 0
    delay_ms: int = 0
    remaining: int | None = 1
    topic: str | None = None
    partition: int | None = None

    @classmethod
    def parse(cls, raw: dict[str, Any]) -> Rule:
        rule = cls(
            api_key=int(raw["api"]),
            error=int(raw.get("error") or 0),
            delay_ms=int(raw.get("delay_ms") or 0),
            remaining=None if raw.get("count") is None else int(raw["count"]),
            topic=raw.get("topic"),
            partition=None if raw.get("partition") is None else int(raw["partition"]),
        )
        if rule.remaining is not None and rule.remaining < 1:
            raise ValueError("count must be at least 1 (or null: until cleared)")
        if rule.partition is not None and rule.topic is None:
            raise ValueError("a partition needs its topic")
        if not rule.error and not rule.delay_ms:
            raise ValueError("a rule needs an error or a delay")
        return rule

    def describe(self) -> dict[str, Any]:
        return {"api": self.api_key, "error": self.error, "delay_ms": self.delay_ms,
                "count": self.remaining, "topic": self.topic, "partition": self.partition}  # fmt: skip


Run = Callable[[Any], Awaitable[Any]]
TopicOfId = Callable[[Any], "str | None"]


class FaultInjector:
    """The broker's end of a harness's fault control socket."""

    def __init__(self, stream: trio.abc.Stream) -> None:
        self.stream = stream
        self.rules: list[Rule] = []

    @classmethod
    async def from_environment(cls) -> FaultInjector | None:
        """The injector the harness asked for, or None (the variable is removed once read)."""
        path = os.environ.pop(ENV, None)
        if path is None:
            return None
        try:
            stream = await trio.open_unix_socket(path)
        except OSError as exc:
            raise OSError(
                f"{ENV} names {path}, which cannot be reached ({exc.strerror}); it is set by "
                "Strom's test harness only: unset it"
            ) from exc
        log.warning("request fault injection is ON (%s, set by a test harness)", ENV)
        return cls(stream)

    async def run(self) -> None:
        """Take rules from the harness until it hangs up (then the rules stay as they are)."""
        buffer = b""
        async with self.stream:
            while True:
                try:
                    data = await self.stream.receive_some(65536)
                except (trio.BrokenResourceError, trio.ClosedResourceError):
                    return
                if not data:
                    return
                buffer += data
                while b"\n" in buffer:
                    line, buffer = buffer.split(b"\n", 1)
                    reply = self._command(line)
                    await self.stream.send_all(json.dumps(reply).encode() + b"\n")

    def _command(self, line: bytes) -> dict[str, Any]:
        try:
            command = json.loads(line)
            op = command["op"]
            if op == "add":
                self.rules.append(Rule.parse(command["rule"]))
            elif op == "clear":
                self.rules.clear()
            elif op != "list":
                raise ValueError(f"unknown op {op!r}")
        except (ValueError, KeyError, TypeError) as exc:
            return {"ok": False, "error": f"{type(exc).__name__}: {exc}"}
        return {"ok": True, "rules": [r.describe() for r in self.rules]}

    # --- the request path ----------------------------------------------------------------

    async def handle(
        self, key: int, version: int, body: Any, topic_of_id: TopicOfId, run: Run
    ) -> Any:
        """The response to one request, through the first matching rule (or `run` alone)."""
        rule = self._match(key, body, topic_of_id)
        if rule is None:
            return await run(body)
        run = _answered(run)  # a rule sees and changes the whole answer, never a deferred one
        if rule.delay_ms:
            await trio.sleep(rule.delay_ms / 1000)
        if not rule.error:
            return await run(body)
        if key == PRODUCE:
            return await self._fail_produce(rule, body, run)
        if key in (FETCH, LIST_OFFSETS):
            response = await run(body)
            _fail_partitions(key, rule, response, topic_of_id)
            return response
        if key == METADATA:  # the brokers stay in the answer: only topics fail
            response = await run(body)
            for topic in response.topics:
                if rule.topic is None or topic.name == rule.topic:
                    topic.error_code, topic.partitions = rule.error, []
            return response
        return _fail_whole(key, version, rule.error, body)

    def _match(self, key: int, body: Any, topic_of_id: TopicOfId) -> Rule | None:
        for index, rule in enumerate(self.rules):
            if rule.api_key != key:
                continue
            if rule.topic is not None and not any(
                topic == rule.topic
                and (rule.partition is None or partition in (None, rule.partition))
                for topic, partition in _touched(key, body, topic_of_id)
            ):
                continue
            if rule.remaining is not None:
                rule.remaining -= 1
                if rule.remaining == 0:
                    del self.rules[index]
            return rule
        return None

    async def _fail_produce(self, rule: Rule, body: Any, run: Run) -> Any:
        from strom.wire.messages.produce import ProduceResponse

        failed: dict[str, list[int]] = {}
        kept_topics = []
        for topic in body.topic_data:
            kept = []
            for part in topic.partition_data:
                if _hits(rule, topic.name, part.index):
                    failed.setdefault(topic.name, []).append(part.index)
                else:
                    kept.append(part)
            if kept:
                topic.partition_data = kept
                kept_topics.append(topic)
        body.topic_data = kept_topics
        if not kept_topics:
            response = None if body.acks == 0 else ProduceResponse(responses=[])
        else:
            response = await run(body)
        if response is None:  # acks=0: nothing is answered
            return None
        for name, indexes in failed.items():
            response.responses.append(ProduceResponse.TopicProduceResponse(name, [
                ProduceResponse.PartitionProduceResponse(i, rule.error, base_offset=-1) for i in indexes
            ]))  # fmt: skip
        return response


def _answered(run: Run) -> Run:
    """`run`, with a deferred answer (`Deferred`, a pipelined Produce) waited for."""

    async def answered(body: Any) -> Any:
        response = await run(body)
        return await response.finish() if isinstance(response, Deferred) else response

    return answered


def _hits(rule: Rule, topic: str, partition: int) -> bool:
    return (rule.topic is None or rule.topic == topic) and (
        rule.partition is None or rule.partition == partition
    )


def _touched(
    key: int, body: Any, topic_of_id: TopicOfId
) -> Iterator[tuple[str | None, int | None]]:
    """(topic, partition or None) pairs a request names."""
    if key == PRODUCE:
        for topic in body.topic_data:
            for part in topic.partition_data:
                yield topic.name, part.index
    elif key == FETCH:
        for topic in body.topics:
            name = topic.topic or topic_of_id(topic.topic_id)
            for part in topic.partitions:
                yield name, part.partition
    elif key == LIST_OFFSETS:
        for topic in body.topics:
            for part in topic.partitions:
                yield topic.name, part.partition_index
    else:
        for attr in ("topics", "topic_data", "topic_names"):
            for item in getattr(body, attr, None) or ():
                name = (
                    item
                    if isinstance(item, str)
                    else getattr(item, "name", None) or getattr(item, "topic", None)
                )
                yield name, None


def _fail_partitions(key: int, rule: Rule, response: Any, topic_of_id: TopicOfId) -> None:
    if key == FETCH:
        for topic in response.responses:
            name = topic.topic or topic_of_id(topic.topic_id)
            for part in topic.partitions:
                if name is not None and _hits(rule, name, part.partition_index):
                    part.error_code, part.records = rule.error, None
                    part.high_watermark, part.last_stable_offset = -1, -1
    else:
        for topic in response.topics:
            for part in topic.partitions:
                if _hits(rule, topic.name, part.partition_index):
                    part.error_code, part.offset, part.timestamp = rule.error, -1, -1


def _fail_whole(key: int, version: int, error: int, body: Any) -> Any:
    code = ErrorCode(error)
    response = error_response(key, version, code)
    if response is not None:
        return response
    if key == CREATE_TOPICS:
        from strom.wire.messages.create_topics import CreateTopicsResponse

        return CreateTopicsResponse(topics=[
            CreateTopicsResponse.CreatableTopicResult(t.name, error_code=error) for t in body.topics
        ])  # fmt: skip
    if key == DELETE_TOPICS:
        from strom.wire.messages.delete_topics import DeleteTopicsResponse

        names = list(body.topic_names or []) or [t.name for t in body.topics or []]
        return DeleteTopicsResponse(responses=[
            DeleteTopicsResponse.DeletableTopicResult(n, error_code=error) for n in names
        ])  # fmt: skip
    raise ProtocolError(f"fault injected: closing the connection ({code.name})", code)
