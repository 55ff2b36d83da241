"""A seeded, deterministic simulation of a KRaft quorum running the real Raft core.

Like Kafka's RaftEventSimulationTest: N voters and an observer, each a real `RaftCore` over a
`MemoryRaftStore`, driven by one event queue on a simulated clock. The network loses, delays
(and so reorders) and duplicates messages, and is partitioned (symmetric and one-way) and healed;
nodes crash (the writes not yet acknowledged are lost, except a random prefix that happened to
reach the disk) and restart from their store alone; a leader is cut off from the rest, or, in
some scenarios, crashes right after its election or its first commit; clients propose entries
to whoever leads; nodes snapshot their state and the leader resigns now and then. A fifth of the
seeds run leadership churn (`Scenario.for_seed`), where the Raft paper's Figure 8 happens.

After every event the invariants are checked: at most one leader per epoch; every entry below a
node's high watermark equals the entry first reported committed at that offset (and snapshots
carry the same state); a high watermark never goes back within a process lifetime; a log never
truncates an entry that is committed; a new leader holds every entry committed in an earlier
epoch. After the chaos the network heals and every node restarts:
a leader must be elected and an entry proposed after the heal committed on every node within a
bounded simulated time.

    python -m tests.raft.simulate --seeds 1000000      # long mode, prints failing seeds
    python -m tests.raft.simulate --seed 1234 -v       # replay one seed with a trace
    python -m tests.raft.simulate --bug commit-without-own-epoch --seeds 1000

`run_seed(seed, bugs=...)` (`--bug`) plants known bugs in every core (`RaftConfig.planted_bugs`), to show
that the checks catch them.
"""

from __future__ import annotations

import argparse
import hashlib
import heapq
import random
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import NoReturn

from strom.coordinator.raft.core import PlantedBug, RaftConfig, RaftCore, RaftSafetyError
from strom.coordinator.raft.effects import (
    AppendEntries,
    HighWatermark,
    InstallSnapshot,
    LeaderChange,
    PersistQuorumState,
    Send,
    SnapshotLoaded,
    TruncateTo,
    Write,
)
from strom.coordinator.raft.messages import (
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
    RaftMessage,
    VoteResponse,
)
from strom.coordinator.raft.states import Role
from strom.storage.raft.raft_store import Entry, MemoryRaftStore

RESPONSES = (
    VoteResponse,
    BeginQuorumEpochResponse,
    EndQuorumEpochResponse,
    FetchResponse,
    FetchSnapshotResponse,
)


class InvariantViolation(AssertionError):
    """A Raft safety or liveness property failed in a simulation."""


@dataclass(frozen=True)
class Scenario:
    voters: int = 3
    observers: int = 1
    chaos_ms: int = 8_000
    """Simulated time with faults."""
    recovery_bound_ms: int = 20_000
    """After healing, a leader and committed progress must come within this."""
    fault_every_ms: int = 400
    propose_every_ms: int = 60
    snapshot_every_ms: int = 1_500
    max_delay_ms: int = 25
    disk_delay_ms: int = 6
    """Writes take up to this long to become durable (a crash loses what is not)."""
    fetch_max_bytes: int = 1 << 20
    """Small values split replication into many fetches (more interleavings)."""
    timeout_scale: float = 1.0
    """The Raft timeouts as a fraction of Kafka's defaults (election 1000 ms, fetch 2000 ms,
    long poll 500 ms): small values pack more elections into the chaos."""
    crash_new_leader: float = 0.0
    """How likely a node that has just become leader crashes before it has replicated much
    (within a round trip or two and a disk write): leadership changing hands while new
    epochs' entries are on a minority only, the ground of the Raft paper's Figure 8."""

    @classmethod
    def for_seed(cls, seed: int) -> Scenario:
        """The scenario a seed runs: its own cluster size, disk speed, fetch size, fault rate
        and timeouts. One seed in five runs leadership churn: three voters, timeouts a tenth
        of Kafka's, replication an entry per fetch, and new leaders crashing before their
        epoch has spread or right at their first commit, so that epochs follow one another
        with entries on minorities only (the Raft paper's Figure 8)."""
        rng = random.Random(seed ^ 0x5EED)
        if rng.random() < 0.2:
            return cls(
                voters=3,
                disk_delay_ms=rng.choice((6, 40, 150)),
                fetch_max_bytes=100,
                fault_every_ms=rng.choice((80, 200, 500)),
                crash_new_leader=rng.choice((0.6, 0.9)),
                timeout_scale=0.1,
            )
        return cls(
            voters=rng.choice((3, 3, 5)),
            disk_delay_ms=rng.choice((2, 6, 40, 150)),
            fetch_max_bytes=rng.choice((100, 200, 1 << 20)),
            fault_every_ms=rng.choice((80, 200, 500)),
            crash_new_leader=rng.choice((0.0, 0.0, 0.3)),
        )


@dataclass
class _Node:
    node_id: int
    store: MemoryRaftStore
    rng: random.Random
    core: RaftCore | None = None
    incarnation: int = 0
    pending: list[Write] = field(default_factory=list)
    flush_scheduled: bool = False
    timer_token: int = 0
    timer_at: int = -1
    hw_seen: int = 0
    checked: int = 0
    applied_hash: bytes = b""
    applied_to: int = 0
    led_epoch: int = -1
    """The epoch this node was last seen leading (leader completeness is checked once each)."""
    committed_epoch: int = -1
    """The last epoch in which this node, leading, moved its high watermark."""


def _chain(previous: bytes, entry: Entry) -> bytes:
    digest = hashlib.blake2b(previous, digest_size=16)
    digest.update(b"%d:%d:%d:" % (entry.epoch, entry.offset, entry.control))
    digest.update(entry.data)
    return digest.digest()


class Simulation:
    def __init__(
        self,
        seed: int,
        scenario: Scenario,
        *,
        trace: bool = False,
        bugs: frozenset[PlantedBug] = frozenset(),
    ) -> None:
        self.seed = seed
        self.scenario = scenario
        self.trace = trace
        self.rng = random.Random(seed)
        self.now = 0
        self._queue: list[tuple[int, int, Callable[[], None]]] = []
        self._seq = 0
        self.voter_ids = frozenset(range(1, scenario.voters + 1))
        kafka, scale = RaftConfig(), scenario.timeout_scale
        self.config = RaftConfig(
            election_timeout_ms=round(kafka.election_timeout_ms * scale),
            fetch_timeout_ms=round(kafka.fetch_timeout_ms * scale),
            election_backoff_max_ms=round(kafka.election_backoff_max_ms * scale),
            request_timeout_ms=round(kafka.request_timeout_ms * scale),
            fetch_max_wait_ms=round(kafka.fetch_max_wait_ms * scale),
            fetch_max_bytes=scenario.fetch_max_bytes,
            planted_bugs=bugs,
        )
        ids = list(range(1, scenario.voters + scenario.observers + 1))
        self.nodes = {
            i: _Node(i, MemoryRaftStore(), random.Random(self.rng.getrandbits(64))) for i in ids
        }
        self.cut: set[tuple[int, int]] = set()
        self.loss = 0.0
        self.duplicate = 0.0
        self.healed_at: int | None = None
        self.committed: list[Entry] = []
        self.commit_epochs: list[int] = []
        """commit_epochs[n]: the epoch of the leader that committed offset n (the first node
        to report it committed is its leader: followers learn the high watermark from it)."""
        self.chain: list[bytes] = [b""]
        """chain[n]: the state after applying committed offsets [0, n)."""
        self.leaders: dict[int, int] = {}
        self.proposed = 0
        self.after_heal: set[bytes] = set()
        self.events = 0
        self.done = False

    # --- the event queue ----------------------------------------------------------------------

    def at(self, when: int, action: Callable[[], None]) -> None:
        self._seq += 1
        heapq.heappush(self._queue, (when, self._seq, action))

    def log(self, text: str) -> None:
        if self.trace:
            print(f"{self.now:>7} {text}")

    def fail(self, text: str) -> NoReturn:
        raise InvariantViolation(f"seed {self.seed} at {self.now} ms: {text}")

    def run(self) -> None:
        for node in self.nodes.values():
            self._start(node)
        self.at(self.rng.randrange(self.scenario.fault_every_ms), self._fault)
        self.at(self.scenario.propose_every_ms, self._propose)
        self.at(self.scenario.snapshot_every_ms, self._snapshot)
        self.at(self.scenario.chaos_ms, self._heal)
        deadline = self.scenario.chaos_ms + self.scenario.recovery_bound_ms
        while self._queue and not self.done:
            when, _, action = heapq.heappop(self._queue)
            if when > deadline:
                break
            self.now = when
            self.events += 1
            action()
        if not self.done:
            self.fail(
                f"no leader with committed progress {self.scenario.recovery_bound_ms} ms "
                f"after the network healed: {self._describe()}"
            )

    def _describe(self) -> str:
        parts = []
        for node in self.nodes.values():
            core = node.core
            if core is None:
                parts.append(f"{node.node_id}:down")
            else:
                parts.append(
                    f"{node.node_id}:{core.role.value}(e{core.epoch},l{core.leader_id},"
                    f"end{core.log.end_offset},hw{core.high_watermark})"
                )
        return " ".join(parts)

    # --- nodes ----------------------------------------------------------------------------------

    def _start(self, node: _Node) -> None:
        recovered = node.store.load()
        node.core = RaftCore(
            node.node_id, self.voter_ids, recovered, node.rng, self.now, self.config
        )
        node.hw_seen = node.core.high_watermark
        node.checked = node.core.log.start_offset
        node.applied_to = node.checked
        node.applied_hash = recovered.snapshot_data if recovered.snapshot is not None else b""
        node.timer_at = -1
        self.log(f"node {node.node_id} starts: {node.core.role.value} epoch {node.core.epoch}")
        self._after_input(node)

    def _crash(self, node: _Node) -> None:
        # writes handed to the disk but not acknowledged: a random prefix made it
        survivors = self.rng.randrange(len(node.pending) + 1)
        for write in node.pending[:survivors]:
            self._apply(node, write)
        node.pending.clear()
        node.flush_scheduled = False
        node.core = None
        node.incarnation += 1
        node.timer_token += 1
        self.log(f"node {node.node_id} crashes ({survivors} unacknowledged writes survive)")

    def _after_input(self, node: _Node) -> None:
        core = node.core
        assert core is not None
        for effect in core.take_effects():
            if isinstance(effect, Send):
                self._transmit(node, effect.dest, effect.message)
            elif isinstance(effect, PersistQuorumState | AppendEntries | TruncateTo):
                node.pending.append(effect)
            elif isinstance(effect, InstallSnapshot):
                if effect.snapshot.end_offset >= len(self.chain):
                    self.fail(
                        f"node {node.node_id} installs {effect.snapshot} beyond the known commits"
                    )
                if effect.data != self.chain[effect.snapshot.end_offset]:
                    self.fail(f"node {node.node_id} snapshot {effect.snapshot} has the wrong state")
                node.pending.append(effect)
            elif isinstance(effect, SnapshotLoaded):
                node.applied_to = effect.snapshot.end_offset
                node.applied_hash = core.log.snapshot_data
            elif isinstance(effect, LeaderChange):
                self.log(
                    f"node {node.node_id} sees leader {effect.leader_id} in epoch {effect.epoch}"
                )
            elif isinstance(effect, HighWatermark):
                pass
        if node.pending and not node.flush_scheduled:
            node.flush_scheduled = True
            incarnation = node.incarnation
            self.at(
                self.now + self.rng.randrange(self.scenario.disk_delay_ms + 1),
                lambda: self._flush(node, incarnation),
            )
        self._check(node)
        deadline = core.next_deadline()
        if deadline != node.timer_at:
            node.timer_at = deadline
            node.timer_token += 1
            token = node.timer_token
            self.at(max(deadline, self.now), lambda: self._timer(node, token))

    def _timer(self, node: _Node, token: int) -> None:
        if node.core is None or token != node.timer_token:
            return
        node.timer_at = -1
        node.core.tick(self.now)
        self._after_input(node)

    def _apply(self, node: _Node, write: Write) -> None:
        store = node.store
        if isinstance(write, PersistQuorumState):
            store.write_quorum_state(write.state)
        elif isinstance(write, AppendEntries):
            store.append(list(write.entries))
        elif isinstance(write, TruncateTo):
            self._check_dropped(node, store.entries[write.offset - store.log_start :])
            store.truncate_to(write.offset)
        else:
            if write.reset_log:
                # entries the snapshot covers may go; committed ones past its end may not
                self._check_dropped(
                    node, [e for e in store.entries if e.offset >= write.snapshot.end_offset]
                )
            store.install_snapshot(write.snapshot, write.data, reset_log=write.reset_log)

    def _check_dropped(self, node: _Node, dropped: list[Entry]) -> None:
        for entry in dropped:
            if entry.offset < len(self.committed) and self.committed[entry.offset] == entry:
                self.fail(f"node {node.node_id} drops committed entry {entry}")

    def _flush(self, node: _Node, incarnation: int) -> None:
        if node.incarnation != incarnation or node.core is None:
            return
        node.flush_scheduled = False
        if not node.pending:
            return
        for write in node.pending:
            self._apply(node, write)
        seq = node.pending[-1].seq
        node.pending.clear()
        node.core.writes_durable(seq, self.now)
        self._after_input(node)

    # --- the network ----------------------------------------------------------------------------

    def _transmit(self, src: _Node, dest: int, message: RaftMessage) -> None:
        if (src.node_id, dest) in self.cut or self.rng.random() < self.loss:
            return
        copies = 2 if self.rng.random() < self.duplicate else 1
        target = self.nodes[dest]
        for _ in range(copies):
            delay = 1 + self.rng.randrange(self.scenario.max_delay_ms)
            self.at(
                self.now + delay,
                lambda: self._deliver(src.node_id, target, message, target.incarnation),
            )

    def _deliver(self, src: int, dest: _Node, message: RaftMessage, incarnation: int) -> None:
        if dest.core is None or (src, dest.node_id) in self.cut:
            return
        if isinstance(message, RESPONSES) and incarnation != dest.incarnation:
            return  # the connection that asked died with the process
        dest.core.receive(src, message, self.now)
        self._after_input(dest)

    # --- faults and clients -------------------------------------------------------------------

    def _fault(self) -> None:
        if self.healed_at is not None:
            return
        self.at(self.now + 1 + self.rng.randrange(2 * self.scenario.fault_every_ms), self._fault)
        rng = self.rng
        ids = sorted(self.nodes)
        choice = rng.randrange(11)
        if choice == 0:
            side = {i for i in ids if rng.random() < 0.5}
            self.cut = {(a, b) for a in ids for b in ids if (a in side) != (b in side)}
            self.log(f"partition {sorted(side)} | {sorted(set(ids) - side)}")
        elif choice == 1:
            a, b = rng.sample(ids, 2)
            self.cut.add((a, b))
            self.log(f"one-way cut {a} -> {b}")
        elif choice in (2, 3):
            self.cut.clear()
            self.log("network heals")
        elif choice == 4:
            self.loss = rng.choice((0.0, 0.01, 0.05, 0.2))
            self.duplicate = rng.choice((0.0, 0.02, 0.1))
            self.log(f"loss {self.loss} duplication {self.duplicate}")
        elif choice == 5:
            alive = [n for n in self.nodes.values() if n.core is not None]
            if alive:
                self._crash(rng.choice(alive))
        elif choice == 6:
            # the leader crashes, and half the time comes straight back (a bounce)
            leaders = [n for n in self.nodes.values() if n.core and n.core.role is Role.LEADER]
            if leaders:
                node = rng.choice(leaders)
                self._crash(node)
                if rng.random() < 0.5:
                    self._start(node)
        elif choice == 7:
            leaders = [n for n in self.nodes.values() if n.core and n.core.role is Role.LEADER]
            if leaders:
                node = rng.choice(leaders)
                assert node.core is not None
                self.log(f"node {node.node_id} resigns")
                node.core.resign(self.now)
                self._after_input(node)
        elif choice == 10:
            # the leader is cut off from every other node; it goes on taking proposals that
            # can never commit until it notices (check-quorum)
            leaders = [n for n in self.nodes.values() if n.core and n.core.role is Role.LEADER]
            if leaders:
                alone = rng.choice(leaders).node_id
                self.cut = {(a, b) for a in ids for b in ids if (a == alone) != (b == alone)}
                self.log(f"leader {alone} isolated")
        dead = [n for n in self.nodes.values() if n.core is None]
        if dead and rng.random() < 0.5:
            self._start(rng.choice(dead))

    def _heal(self) -> None:
        self.healed_at = self.now
        self.cut.clear()
        self.loss = self.duplicate = 0.0
        self.log("chaos over: network healed, every node restarts")
        for node in self.nodes.values():
            if node.core is None:
                self._start(node)
        self.at(self.now + 100, self._progress)

    def _propose(self) -> None:
        self.at(
            self.now + 1 + self.rng.randrange(2 * self.scenario.propose_every_ms), self._propose
        )
        leaders = [n for n in self.nodes.values() if n.core and n.core.role is Role.LEADER]
        if not leaders:
            return
        node = self.rng.choice(leaders)
        assert node.core is not None
        if node.core.log.end_offset - node.core.high_watermark > 40:
            return  # back-pressure, as a controller applies it: replication is behind
        self.proposed += 1
        payload = b"%d-%d" % (self.seed, self.proposed)
        count = 1 + (self.rng.random() < 0.2) * self.rng.randrange(1, 5)
        payloads = [payload + b".%d" % i for i in range(count)]
        if node.core.propose(payloads, self.now) is not None and self.healed_at is not None:
            self.after_heal.update(payloads)
        self._after_input(node)

    def _snapshot(self) -> None:
        self.at(
            self.now + 1 + self.rng.randrange(2 * self.scenario.snapshot_every_ms), self._snapshot
        )
        alive = [n for n in self.nodes.values() if n.core is not None]
        if not alive:
            return
        node = self.rng.choice(alive)
        core = node.core
        assert core is not None
        end = node.applied_to
        if end > core.log.start_offset + 5:
            core.snapshot(end, node.applied_hash)
            self.log(f"node {node.node_id} snapshots at {end}")
            self._after_input(node)

    def _progress(self) -> None:
        self.at(self.now + 100, self._progress)
        cores = [n.core for n in self.nodes.values()]
        if any(core is None for core in cores):
            return
        leaders = [c for c in cores if c is not None and c.role is Role.LEADER]
        if len(leaders) != 1:
            return
        leader = leaders[0]
        for core in cores:
            assert core is not None
            if core.epoch != leader.epoch or core.leader_id != leader.node_id:
                return
        target = next((e.offset for e in self.committed if e.data in self.after_heal), None)
        if target is None:
            return
        if all(c is not None and c.high_watermark > target for c in cores):
            self.done = True

    # --- invariants -----------------------------------------------------------------------------

    def _check_leader_complete(self, node: _Node, core: RaftCore) -> None:
        """A new leader holds every entry committed in an earlier epoch (Raft's leader
        completeness; one committed in this epoch or later may be missing from a leader that
        was elected late, by votes that took long to arrive)."""
        for offset in range(core.log.start_offset, len(self.committed)):
            if self.commit_epochs[offset] >= core.epoch:
                continue
            held = core.log.entry(offset)
            if held != self.committed[offset]:
                self.fail(
                    f"node {node.node_id} leads epoch {core.epoch} with {held} at {offset}, "
                    f"where {self.committed[offset]} was committed in epoch "
                    f"{self.commit_epochs[offset]}"
                )

    def _crash_soon(self, node: _Node, *, at_once: bool = False) -> None:
        """Crash `node` at once or within about a round trip and a disk write, before what it
        just did has reached many others."""
        incarnation = node.incarnation
        delay = 0
        if not at_once:
            delay = self.rng.randrange(
                2 * self.scenario.max_delay_ms + self.scenario.disk_delay_ms + 1
            )

        def crash() -> None:
            if node.core is not None and node.incarnation == incarnation and self.healed_at is None:
                self._crash(node)

        self.at(self.now + delay, crash)

    def _check(self, node: _Node) -> None:
        core = node.core
        assert core is not None
        if core.role is Role.LEADER:
            other = self.leaders.setdefault(core.epoch, node.node_id)
            if other != node.node_id:
                self.fail(f"nodes {other} and {node.node_id} both lead epoch {core.epoch}")
            if node.led_epoch != core.epoch:
                node.led_epoch = core.epoch
                self._check_leader_complete(node, core)
                if self.healed_at is None and self.rng.random() < self.scenario.crash_new_leader:
                    self._crash_soon(node)
        hw = core.high_watermark
        if hw < node.hw_seen:
            self.fail(f"node {node.node_id} high watermark went back {node.hw_seen} -> {hw}")
        first_commit = (
            hw > node.hw_seen and core.role is Role.LEADER and node.committed_epoch != core.epoch
        )
        node.hw_seen = hw
        if node.checked >= hw:
            return
        log = core.log
        committed = self.committed
        for offset in range(max(node.checked, log.start_offset), hw):
            entry = log.entry(offset)
            if entry is None:
                self.fail(f"node {node.node_id} reports {offset} committed but does not hold it")
            if offset < len(committed):
                if committed[offset] != entry:
                    self.fail(
                        f"node {node.node_id} has {entry} committed where "
                        f"{committed[offset]} was committed"
                    )
            elif offset == len(committed):
                committed.append(entry)
                self.commit_epochs.append(core.epoch)
                self.chain.append(_chain(self.chain[-1], entry))
            else:
                self.fail(f"node {node.node_id} commits {offset} past a gap at {len(committed)}")
        node.checked = hw
        if first_commit:
            # a new leader's first commit: the moment its epoch's entries may still be on a
            # minority only (nothing of it is committed unless one of them is)
            node.committed_epoch = core.epoch
            if self.healed_at is None and self.rng.random() < self.scenario.crash_new_leader:
                self._crash_soon(node, at_once=True)
        # the node's state machine applies what is committed
        while node.applied_to < hw:
            entry = log.entry(node.applied_to)
            assert entry is not None
            node.applied_hash = _chain(node.applied_hash, entry)
            node.applied_to += 1


def run_seed(
    seed: int,
    scenario: Scenario | None = None,
    *,
    trace: bool = False,
    bugs: frozenset[PlantedBug] = frozenset(),
) -> Simulation:
    """Run one seed; `bugs` plants known bugs in every core (to show the checks catch them)."""
    if scenario is None:
        scenario = Scenario.for_seed(seed)
    simulation = Simulation(seed, scenario, trace=trace, bugs=bugs)
    try:
        simulation.run()
    except InvariantViolation:
        raise
    except RaftSafetyError as exc:
        raise InvariantViolation(f"seed {seed} at {simulation.now} ms: {exc}") from exc
    except Exception as exc:
        raise InvariantViolation(f"seed {seed} at {simulation.now} ms: {exc!r}") from exc
    return simulation


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seeds", type=int, default=1000, help="how many seeds to run")
    parser.add_argument("--start", type=int, default=0, help="the first seed")
    parser.add_argument("--seed", type=int, help="replay this one seed")
    parser.add_argument("-v", "--verbose", action="store_true", help="trace every event")
    parser.add_argument(
        "--bug",
        action="append",
        default=[],
        choices=[bug.value for bug in PlantedBug],
        help="plant a known bug in every core (to see the checks catch it)",
    )
    args = parser.parse_args(argv)
    bugs = frozenset(PlantedBug(value) for value in args.bug)
    planted = "".join(f" --bug {value}" for value in args.bug)
    seeds = [args.seed] if args.seed is not None else range(args.start, args.start + args.seeds)
    failures = 0
    began = time.process_time()
    events = 0
    for index, seed in enumerate(seeds, 1):
        try:
            events += run_seed(seed, trace=args.verbose, bugs=bugs).events
        except InvariantViolation as exc:
            failures += 1
            print(
                f"FAIL seed {seed}: {exc}  "
                f"(replay: python -m tests.raft.simulate --seed {seed} -v{planted})"
            )
        if index % 1000 == 0:
            print(
                f"{index} seeds, {failures} failures, {time.process_time() - began:.0f} s CPU",
                flush=True,
            )
    spent = time.process_time() - began
    print(f"{len(seeds)} seeds, {events} events, {failures} failures, {spent:.1f} s CPU")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
