"""A harness around the pure state machine: a fake clock, an in-memory log, parked replies.

Writes the state machine emits are appended to `MemoryLog` and reported back at once, as the
driver does, unless `log.hold` is set: then they wait in `held` for `complete_writes()`.
"""

from __future__ import annotations

import itertools
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TypeVar

from strom.coordinator.groups import records
from strom.coordinator.groups.api import (
    GroupConfig,
    JoinRequest,
    JoinResult,
    KeyValue,
    OffsetDeleteResult,
    Released,
    SyncRequest,
    SyncResult,
    Write,
)
from strom.coordinator.groups.coordinator import GroupCoordinator
from strom.coordinator.groups.model import Group, GroupState
from strom.wire.errors import ErrorCode

R = TypeVar("R")


@dataclass
class MemoryLog:
    """What was written, per group; `fail` makes appends fail with that error, `hold` waits.
    Transactional batches keep their producer id (`producers`, -1 for plain ones), and
    `mark` appends a transaction marker, as the partition leader writes them."""

    written: list[tuple[str, KeyValue]] = field(default_factory=list)
    producers: list[int] = field(default_factory=list)
    markers: dict[int, list[records.TxnMarker]] = field(default_factory=dict)
    """Position in `written` -> the markers written before that record."""
    fail: ErrorCode = ErrorCode.NONE
    hold: bool = False

    def append(
        self, group_id: str, pairs: list[KeyValue], producer: tuple[int, int] | None = None
    ) -> ErrorCode:
        if self.fail:
            return self.fail
        self.written += [(group_id, kv) for kv in pairs]
        self.producers += [-1 if producer is None else producer[0]] * len(pairs)
        return ErrorCode.NONE

    def mark(self, producer_id: int, commit: bool) -> None:
        self.markers.setdefault(len(self.written), []).append(
            records.TxnMarker(producer_id, commit)
        )

    def parsed(self) -> list[records.LoadedRecord]:
        out: list[records.LoadedRecord] = []
        for index, ((_, (key, value)), producer) in enumerate(
            zip(self.written, self.producers, strict=True)
        ):
            out += self.markers.get(index, [])
            parsed = records.parse_record(key, value, producer)
            assert parsed is not None
            out.append(parsed)
        out += self.markers.get(len(self.written), [])
        return out


class Sim:
    """Drives a GroupCoordinator the way the trio driver does, with time under test control."""

    def __init__(self, **config: int) -> None:
        defaults = {"initial_rebalance_delay_ms": 0, "min_session_timeout_ms": 1000}
        self.config = GroupConfig(**{**defaults, **config})
        self.log = MemoryLog()
        ids = itertools.count(1)
        self.machine = GroupCoordinator(self.config, lambda: f"id{next(ids)}")
        self.now = 1_000_000
        self._tokens = itertools.count(1)
        self.replies: dict[int, Released] = {}
        self.held: list[Write] = []

    def settle(self) -> None:
        self.machine.tick(self.now)
        self.held += self.machine.take_writes()
        if not self.log.hold:
            self.complete_writes()
        self._collect()

    def complete_writes(self, error: ErrorCode | None = None) -> None:
        """Append the held writes in order (or fail them with `error`) and report each outcome."""
        while self.held:
            write = self.held.pop(0)
            outcome = (
                self.log.append(write.group_id, write.records, write.producer)
                if error is None
                else error
            )
            self.machine.write_completed(self.now, write.token, outcome)
            self.held += self.machine.take_writes()
        self._collect()

    def _collect(self) -> None:
        for token, result in self.machine.take_replies():
            assert token not in self.replies, "a waiter was answered twice"
            self.replies[token] = result

    def token(self) -> int:
        return next(self._tokens)

    def call(self, request: Callable[[int], R | None]) -> R | int:
        """Run a request that may park: its immediate result, or its waiter token."""
        token = self.token()
        result = request(token)
        self.settle()
        return token if result is None else result

    def answer(self, outcome: R | int, kind: type[R]) -> R:
        """The result of `call`: immediate, or released since (it must have been)."""
        if isinstance(outcome, kind):  # before the int check: an ErrorCode is an int too
            return outcome
        assert isinstance(outcome, int)
        result = self.replies.get(outcome)
        assert isinstance(result, kind), f"not answered with a {kind.__name__}: {result}"
        return result

    def advance(self, ms: int) -> None:
        """Move the clock, firing every deadline on the way in order."""
        target = self.now + ms
        while True:
            deadline = self.machine.next_deadline()
            if deadline is None or deadline > target:
                break
            self.now = max(self.now, deadline)
            self.settle()
        self.now = target
        self.settle()

    def group(self, group_id: str = "g") -> Group:
        return self.machine.groups[group_id]

    def state(self, group_id: str = "g") -> GroupState | None:
        group = self.machine.groups.get(group_id)
        return None if group is None else group.state

    # --- requests ---------------------------------------------------------------------------

    def join(
        self,
        member_id: str = "",
        *,
        group: str = "g",
        protocols: list[tuple[str, bytes]] | None = None,
        protocol_type: str = "consumer",
        session: int = 10_000,
        rebalance: int = 30_000,
        instance: str | None = None,
        client: str = "c",
        v4: bool = True,
        v9: bool = True,
    ) -> int | JoinResult:
        """The immediate result, or the waiter token when the response was parked."""
        token = next(self._tokens)
        req = JoinRequest(
            group, member_id, protocol_type, protocols or [("range", b"m")], session, rebalance,
            instance, client, "/127.0.0.1", v4, v9,
        )  # fmt: skip
        result = self.machine.join(self.now, req, token)
        self.settle()
        return token if result is None else result

    def join_new(self, **kw: object) -> str:
        """A dynamic member's KIP-394 first round: returns the id it must rejoin with."""
        first = self.join(**kw)  # type: ignore[arg-type]
        assert isinstance(first, JoinResult)
        assert first.error == ErrorCode.MEMBER_ID_REQUIRED
        return first.member_id

    def sync(
        self,
        member_id: str,
        generation: int,
        assignments: dict[str, bytes] | None = None,
        *,
        group: str = "g",
        instance: str | None = None,
    ) -> int | SyncResult:
        token = next(self._tokens)
        req = SyncRequest(group, member_id, generation, assignments or {}, instance)
        result = self.machine.sync(self.now, req, token)
        self.settle()
        return token if result is None else result

    def heartbeat(
        self, member_id: str, generation: int, *, group: str = "g", instance: str | None = None
    ) -> ErrorCode:
        error = self.machine.heartbeat(self.now, group, member_id, generation, instance)
        self.settle()
        return error

    def leave(
        self, *members: tuple[str, str | None], group: str = "g"
    ) -> tuple[ErrorCode, list[ErrorCode]]:
        out = self.machine.leave(self.now, group, list(members))
        self.settle()
        return out

    def delete_groups(self, *group_ids: str) -> dict[str, ErrorCode]:
        out = {}
        for group_id in group_ids:
            token = self.token()
            result = self.machine.delete_group(self.now, group_id, token)
            self.settle()
            out[group_id] = self.answer(token if result is None else result, ErrorCode)
        return out

    def delete_offsets(self, group: str, partitions: list[tuple[str, int]]) -> OffsetDeleteResult:
        outcome = self.call(
            lambda token: self.machine.delete_offsets(self.now, group, partitions, token)
        )
        return self.answer(outcome, OffsetDeleteResult)

    def expire(self) -> int:
        """Offset retention now; its writes complete (unless held)."""
        expired = self.machine.expire_offsets(self.now)
        self.settle()
        return expired

    def reply(self, token: int | JoinResult | SyncResult) -> Released | None:
        if isinstance(token, int):
            return self.replies.get(token)
        return token

    def joined(self, token: int | JoinResult) -> JoinResult:
        result = self.reply(token)
        assert isinstance(result, JoinResult), f"join not answered: {result}"
        return result

    def synced(self, token: int | SyncResult) -> SyncResult:
        result = self.reply(token)
        assert isinstance(result, SyncResult), f"sync not answered: {result}"
        return result

    def form(self, count: int, *, group: str = "g", session: int = 10_000) -> tuple[list[str], int]:
        """Bring `count` dynamic members to one Stable generation; (member ids, generation)."""
        ids = [self.join_new(group=group, session=session, client=f"c{i}") for i in range(count)]
        tokens = {m: self.join(m, group=group, session=session) for m in ids}
        for _ in range(10):
            g = self.machine.groups[group]
            answered = {m: self.reply(t) for m, t in tokens.items()}
            if g.state is GroupState.COMPLETING_REBALANCE and all(answered.values()):
                break
            if g.state is GroupState.PREPARING_REBALANCE:
                for m, result in answered.items():
                    if result is not None:  # it finished an earlier, smaller generation
                        tokens[m] = self.join(m, group=group, session=session)
            self.advance(self.config.initial_rebalance_delay_ms)
        results = [self.joined(tokens[m]) for m in ids]
        gen, leader = results[0].generation, results[0].leader
        assert {r.generation for r in results} == {gen}
        assignments = {m: f"a-{m}".encode() for m in ids}
        waits = [self.sync(m, gen, group=group) for m in ids if m != leader]
        assert self.synced(self.sync(leader, gen, assignments, group=group)).error == ErrorCode.NONE
        for w in waits:
            assert self.synced(w).error == ErrorCode.NONE
        assert self.state(group) is GroupState.STABLE
        return ids, gen
