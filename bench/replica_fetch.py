"""What one follower Fetch of one record costs, piece by piece, in one process (no sockets).

    python bench/replica_fetch.py                                 # this checkout alone
    git archive main | tar -x -C /tmp/main && (cd /tmp/main && python setup.py build_ext --inplace)
    nice -n 15 python bench/replica_fetch.py --tree main=/tmp/main --tree perf=. --rounds 5

The replication round of a single-record acks=all produce, with the network taken out: an
in-process node (`EmbeddedBroker`) leads partition 0 of a topic on replicas [1, 2]; a real
`LeaderFetcher` with its own `PartitionLog` plays broker 2. Each iteration appends one
100-byte single-record batch on the leader, then runs one follower round through the code
the broker runs, each piece timed alone with the process CPU clock:

- follower `request`: the fetcher's next FetchRequest (its session, the changed partition);
- follower `encode`: that request framed as the connection sends it;
- leader `decode`: the frame received and decoded (`wire.Connection`);
- leader `dispatch`: what the connection loop calls: the handler (the follower's session,
  its fetch offset recorded, the high watermark moved, the log read) and the response's
  encoding, with request metrics recorded as in a node with `metrics.listener`;
- follower `decode`: the response frame decoded;
- follower `apply`: the replicated append and the high watermark.

With `--partitions N --records R` each iteration appends one R-record batch to each of N
partitions led by the node and followed by broker 2, and one round carries them all: the pieces
are then per partition (what a round's cost grows by with each partition it carries, as at a
thousand partitions written, where each partition has one batch a round).

With several `--tree`s each round runs every tree's worker (a fresh process, rotating order),
and the table gives per tree the median over rounds of each piece's median µs per call, and
per later tree the median of per-round ratios to the first. Process CPU time: on a shared
machine it excludes waiting for a core, but not a cold cache after someone else ran.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

PIECES = ("request", "encode", "decode", "dispatch", "fdecode", "apply")
LABELS = {
    "request": "follower: build FetchRequest",
    "encode": "follower: encode request frame",
    "decode": "leader: decode request frame",
    "dispatch": "leader: handler + encode response",
    "fdecode": "follower: decode response frame",
    "apply": "follower: replicated append + HW",
}


def worker(iterations: int, warmup: int, partitions: int = 1, records: int = 1) -> dict[str, float]:
    """Run in the tree under test (its root first on sys.path); medians in µs per partition."""
    import tempfile
    from types import SimpleNamespace

    import trio

    from strom.broker.network.server import Server
    from strom.broker.replication.fetcher import FETCH_VERSION, FetchTarget, LeaderFetcher
    from strom.broker.testing.embedded import open_broker
    from strom.config import BrokerConfig
    from strom.config.quorum import Address
    from strom.storage import LogConfig, PartitionLog
    from strom.wire.connection import ClientConnection, Connection, Request
    from strom.wire.records import Record, build_batch
    from tests.broker.cluster_helpers import CLUSTER_OVERRIDES, create_placed, register, state_of

    clock = time.process_time_ns
    samples: dict[str, list[int]] = {p: [] for p in PIECES}
    keys = [("rep", i) for i in range(partitions)]

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            async with open_broker(Path(tmp) / "leader", CLUSTER_OVERRIDES) as broker:
                state = state_of(broker)
                epoch = await register(state, 2)
                await register(state, 3)
                await create_placed(state, "rep", [[1, 2]] * partitions)
                topic = state.image.topic("rep")
                assert topic is not None
                leader_logs = [state.logs.get(*key) for key in keys]
                server = Server(state)
                server.recording = True
                listener = state.config.inter_broker_listener
                follower_logs = {
                    key: PartitionLog.open(
                        Path(tmp) / "follower" / f"rep-{key[1]}", *key, LogConfig(),
                        clock=state.clock,
                    )
                    for key in keys
                }  # fmt: skip
                follower: Any = SimpleNamespace(
                    node_id=2,
                    config=BrokerConfig.from_properties({}),
                    logs=SimpleNamespace(get=lambda t, i: follower_logs.get((t, i))),
                    clock=state.clock,
                    controller=SimpleNamespace(broker_epoch=epoch),
                )
                manager: Any = SimpleNamespace(
                    broker=follower,
                    targets={key: FetchTarget(topic.topic_id, 1, 0) for key in keys},
                    targets_changed=trio.Event(),
                    high_watermark_listeners=[],
                )
                fetcher = LeaderFetcher(manager, 1)
                client = ClientConnection("broker-2-fetcher")
                server_conn = Connection()
                address = Address("127.0.0.1", 1)
                batch = bytes(build_batch([Record(b"k", b"v" * 100, (), 1_700_000_000_000)] * records))
                for i in range(warmup + iterations):
                    timed = i >= warmup
                    for key, leader_log in zip(keys, leader_logs, strict=True):
                        assert leader_log is not None
                        leader_log.append(bytearray(batch), 0, state.clock())
                        if state.replication.leader_appended(key) is not None:
                            state.waiters.appended(*key)
                    correlation = i + 1
                    now = trio.current_time()
                    t0 = clock()
                    request = fetcher._request(fetcher._fetched_now(now), now)
                    t1 = clock()
                    frame = client.send_request(request, FETCH_VERSION, correlation_id=correlation)
                    t2 = clock()
                    server_conn.receive_data(frame)
                    event = server_conn.next_event()
                    t3 = clock()
                    assert isinstance(event, Request)
                    chunks = await server.dispatch(event, "127.0.0.1", 1, listener)
                    t4 = clock()
                    assert isinstance(chunks, list)  # a Fetch is never deferred
                    raw = b"".join(_materialized(c) for c in chunks)
                    t5 = clock()
                    client.receive_data(raw)
                    answer = client.next_response()
                    t6 = clock()
                    assert isinstance(answer, tuple)
                    response: Any = answer[1]
                    assert response.error_code == 0, response
                    fetcher._answered(request, response)
                    t7 = clock()
                    await fetcher._apply(fetcher._fetched_now(now), response, address)
                    t8 = clock()
                    if timed:
                        for piece, spent in zip(
                            PIECES, (t1 - t0, t2 - t1, t3 - t2, t4 - t3, t6 - t5, t8 - t7),
                            strict=True,
                        ):
                            samples[piece].append(spent)
                for key, leader_log in zip(keys, leader_logs, strict=True):
                    assert leader_log is not None
                    assert follower_logs[key].log_end_offset == leader_log.log_end_offset
                    assert leader_log.high_watermark == leader_log.log_end_offset - records
                    follower_logs[key].close()

    import gc

    gc.collect()
    trio.run(main)
    return {p: statistics.median(v) / 1000 / partitions for p, v in samples.items()}


def _materialized(chunk: Any) -> bytes:
    """A response chunk's bytes; a records range of a segment file (sent by sendfile) read."""
    from strom.broker.data.file_chunk import FileChunk

    if type(chunk) is FileChunk:
        return chunk.result.read_bytes()
    return chunk if isinstance(chunk, bytes) else bytes(chunk)


def loop_worker(records: int, rate: float) -> dict[str, float]:
    """The whole round over loopback TCP in one process: a real `LeaderFetcher.run` (broker 2)
    fetching from the in-process node, which a paced task appends single records to and which
    waits, as an acks=all Produce does, until the follower's next Fetch moves the high
    watermark past each. Process CPU µs per record (leader's and follower's work together,
    the appends and trio's loop included)."""
    import tempfile
    from types import SimpleNamespace

    import trio

    from strom.broker.replication.fetcher import FetchTarget, LeaderFetcher
    from strom.broker.testing.embedded import open_broker
    from strom.storage import LogConfig, PartitionLog
    from strom.wire.records import Record, build_batch
    from tests.broker.cluster_helpers import CLUSTER_OVERRIDES, create_placed, register, state_of

    key = ("rep", 0)
    out: dict[str, float] = {}

    async def main() -> None:
        with tempfile.TemporaryDirectory() as tmp:
            async with open_broker(Path(tmp) / "leader", CLUSTER_OVERRIDES) as broker:
                state = state_of(broker)
                epoch = await register(state, 2)
                await register(state, 3)
                await create_placed(state, "rep", [[1, 2]])
                topic = state.image.topic("rep")
                assert topic is not None
                leader_log = state.logs.get(*key)
                assert leader_log is not None
                follower_log = PartitionLog.open(
                    Path(tmp) / "follower" / "rep-0", "rep", 0, LogConfig(), clock=state.clock
                )
                follower: Any = SimpleNamespace(
                    node_id=2,
                    config=state.config,
                    image=state.image,
                    logs=SimpleNamespace(get=lambda t, i: follower_log if (t, i) == key else None),
                    clock=state.clock,
                    controller=SimpleNamespace(broker_epoch=epoch),
                )
                manager: Any = SimpleNamespace(
                    broker=follower,
                    targets={key: FetchTarget(topic.topic_id, state.node_id, 0)},
                    targets_changed=trio.Event(),
                    high_watermark_listeners=[],
                )
                fetcher = LeaderFetcher(manager, state.node_id)
                record = Record(b"k", b"v" * 100, (), 1_700_000_000_000)
                interval = 1 / rate

                async def one() -> None:
                    leader_log.append(build_batch([record]), 0, state.clock())
                    target = leader_log.log_end_offset
                    if state.replication.leader_appended(key) is not None:
                        state.waiters.appended(*key)
                    late = await state.waiters.settle(
                        [key], lambda k: k, lambda k: leader_log.high_watermark >= target, 5000
                    )
                    assert not late, "the follower did not acknowledge within 5 s"

                async with trio.open_nursery() as nursery:
                    nursery.start_soon(fetcher.run)
                    for _ in range(max(records // 10, 50)):  # warm-up: session, lazy imports
                        await one()
                    await trio.sleep(interval)
                    started, cpu = trio.current_time(), time.process_time()
                    for i in range(records):
                        await one()
                        await trio.sleep_until(started + (i + 1) * interval)
                    out["cpu_us_per_record"] = (time.process_time() - cpu) / records * 1e6
                    nursery.cancel_scope.cancel()
                await fetcher.connection_close()
                follower_log.close()

    trio.run(main)
    return out


def run_tree(
    path: Path, iterations: int, warmup: int, loop: float = 0, partitions: int = 1, records: int = 1
) -> dict[str, float]:
    env = {**os.environ, "PYTHONPATH": str(path)}
    code = (
        f"import sys; sys.path.insert(0, {str(path)!r}); "
        "import strom, json; "
        f"assert strom.__file__.startswith({str(path)!r}), strom.__file__; "
        "from importlib import util; "
        f"spec = util.spec_from_file_location('replica_fetch_bench', {str(Path(__file__))!r}); "
        "mod = util.module_from_spec(spec); spec.loader.exec_module(mod); "
        + (f"print(json.dumps(mod.loop_worker({iterations}, {loop})))" if loop else
           f"print(json.dumps(mod.worker({iterations}, {warmup}, {partitions}, {records})))")
    )
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=path, env=env, capture_output=True, text=True
    )
    if out.returncode:
        sys.exit(f"the worker in {path} failed:\n{out.stderr}")
    result: dict[str, float] = json.loads(out.stdout.strip().splitlines()[-1])
    return result


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--tree", action="append", default=[], help="NAME=PATH (repeatable)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--iterations", type=int, default=2000)
    parser.add_argument("--warmup", type=int, default=300)
    parser.add_argument(
        "--loop", type=float, default=0, metavar="RATE",
        help="the whole round over loopback at RATE records/s (--iterations records)",
    )  # fmt: skip
    parser.add_argument("--partitions", type=int, default=1,
                        help="partitions carried by each round (pieces per partition)")  # fmt: skip
    parser.add_argument("--records", type=int, default=1, help="records in each batch")
    args = parser.parse_args()
    if args.loop and (args.partitions != 1 or args.records != 1):
        parser.error("--loop runs one partition of single records")
    trees = [(t.split("=", 1)[0], Path(t.split("=", 1)[1]).resolve()) for t in args.tree]
    if not trees:
        trees = [("this", Path(__file__).resolve().parent.parent)]
    results: dict[str, list[dict[str, float]]] = {name: [] for name, _ in trees}
    for r in range(args.rounds):
        order = trees[r % len(trees) :] + trees[: r % len(trees)]
        for name, path in order:
            results[name].append(run_tree(
                path, args.iterations, args.warmup, args.loop, args.partitions, args.records
            ))  # fmt: skip
            print(f"round {r + 1} {name}: " + ", ".join(
                f"{p} {v:.1f}" for p, v in results[name][-1].items()), file=sys.stderr)  # fmt: skip
    first = trees[0][0]
    header = "| piece (µs per call, median of rounds, min-max) | " + " | ".join(
        n for n, _ in trees
    ) + " |"
    print(header)
    print("|---" * (len(trees) + 1) + "|")
    pieces = list(results[first][0])
    for piece in pieces if args.loop else (*pieces, "total"):
        cells = []
        for name, _ in trees:
            values = [sum(x.values()) if piece == "total" else x[piece] for x in results[name]]
            cell = f"{statistics.median(values):.1f} ({min(values):.1f}-{max(values):.1f})"
            if name != first:
                ratios = [
                    (sum(a.values()) / sum(b.values())) if piece == "total" else a[piece] / b[piece]
                    for a, b in zip(results[name], results[first], strict=True)
                ]
                cell += f", x{statistics.median(ratios):.2f}"
            cells.append(cell)
        print(f"| {LABELS.get(piece, piece)} | " + " | ".join(cells) + " |")


if __name__ == "__main__":
    main()
