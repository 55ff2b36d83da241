"""confluent-kafka group plumbing: tracked in-process members and a killable child member."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
from collections.abc import Iterable
from typing import Any

from confluent_kafka import Consumer, Producer, TopicPartition

from compat_tests.helpers import Deadline

QUIET: dict[str, Any] = {"log_level": 3}


def produce(bootstrap: str, topic: str, partitions: int, per_partition: int, tag: str = "") -> None:
    producer = Producer({"bootstrap.servers": bootstrap, "linger.ms": 5, **QUIET})
    for p in range(partitions):
        for i in range(per_partition):
            producer.produce(topic, f"{tag}{p}-{i}".encode(), partition=p)
    assert producer.flush(30) == 0


class Member:
    """An in-process consumer that records its assignment changes and what it consumed."""

    def __init__(self, bootstrap: str, group: str, topics: Iterable[str], **config: Any) -> None:
        self.consumer = Consumer(
            {
                "bootstrap.servers": bootstrap,
                "group.id": group,
                "auto.offset.reset": "earliest",
                "enable.auto.commit": False,
                "session.timeout.ms": 6000,
                "heartbeat.interval.ms": 500,
                **QUIET,
                **config,
            }
        )
        self.cooperative = config.get("partition.assignment.strategy") == "cooperative-sticky"
        self.owned: set[int] = set()
        self.assigns: list[list[int]] = []
        self.revokes: list[list[int]] = []
        self.consumed: list[tuple[int, int]] = []
        self.consumer.subscribe(list(topics), on_assign=self._assign, on_revoke=self._revoke)

    def _assign(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        got = sorted(p.partition for p in partitions)
        self.assigns.append(got)
        if self.cooperative:
            consumer.incremental_assign(partitions)
            self.owned |= set(got)
        else:
            self.owned = set(got)

    def _revoke(self, consumer: Consumer, partitions: list[TopicPartition]) -> None:
        lost = sorted(p.partition for p in partitions)
        self.revokes.append(lost)
        if self.cooperative:
            consumer.incremental_unassign(partitions)
        self.owned -= set(lost)

    def poll(self, timeout: float = 0.05, commit: bool = True) -> None:
        msg = self.consumer.poll(timeout)
        if msg is None or msg.error():
            return
        partition, offset = msg.partition(), msg.offset()
        assert partition is not None
        assert offset is not None
        self.consumed.append((partition, offset))
        if commit:
            self.consumer.commit(message=msg, asynchronous=False)

    def close(self) -> None:
        self.consumer.close()


def poll_until(members: list[Member], check: Any, timeout: float, what: str) -> None:
    """Poll every member in turn until `check()` holds; fail with their assignments if not."""
    deadline = Deadline(timeout)
    while not check():
        if deadline.expired:
            owned = [sorted(m.owned) for m in members]
            raise AssertionError(f"timed out after {timeout}s waiting for {what}; owned={owned}")
        for member in members:
            member.poll()


def balanced(members: list[Member], partitions: int) -> bool:
    owned = [m.owned for m in members]
    every = sorted(p for o in owned for p in o)
    share = partitions // len(members)
    return every == list(range(partitions)) and all(len(o) == share for o in owned)


class ChildMember:
    """`compat_tests.groups.member` as a child process (SIGKILL = a crash, no LeaveGroup)."""

    def __init__(
        self, bootstrap: str, group: str, topic: str, client: str = "confluent", **config: Any
    ) -> None:
        args = [f"{k}={v}" for k, v in config.items()]
        module = "compat_tests.groups.member"
        self.process = subprocess.Popen(
            [sys.executable, "-m", module, client, bootstrap, group, topic, *args],
            stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
        )  # fmt: skip
        self.owned: set[int] = set()
        self.consumed: list[tuple[int, int]] = []
        self.errors: list[str] = []
        self._lock = threading.Lock()
        self._reader = threading.Thread(target=self._read, daemon=True)
        self._reader.start()

    def _read(self) -> None:
        assert self.process.stdout is not None
        for line in self.process.stdout:
            event = json.loads(line)
            with self._lock:
                if "assigned" in event:
                    self.owned = set(event["assigned"])
                elif "revoked" in event:
                    self.owned -= set(event["revoked"])
                elif "error" in event:
                    self.errors.append(event["error"])
                else:
                    partition, offset = event["consumed"]
                    self.consumed.append((partition, offset))

    def snapshot(self) -> tuple[set[int], list[tuple[int, int]]]:
        """What the member owns and consumed; fails the test once the member reported an error."""
        with self._lock:
            if self.errors:
                raise AssertionError(f"child member failed: {self.errors}")
            return set(self.owned), list(self.consumed)

    def kill(self) -> None:
        self.process.kill()
        self.process.wait()
        self._reader.join(5)
        if self.process.stdout is not None:
            self.process.stdout.close()
