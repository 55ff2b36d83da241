"""The CPU one request costs a server, back to back on one connection: Strom beside trio's floor.

    python bench/request_floor.py              # 5,000 requests a round, 3 rounds
    python bench/request_floor.py -n 20000

One blocking client connection sends a request, waits for its answer, and sends the next; the
server's CPU time (/proc, user and system) over the round is divided by the requests. Three
servers, one after the other, in one run:

- `trio floor`: the least a trio server can do per request: a task reading size-prefixed
  frames from its stream and answering each with a canned 300-byte frame (trio's own
  `SocketStream`, no parsing). No Kafka server on trio can cost less per request.
- `strom ApiVersions` (v3): framing, decoding, dispatch and an answer; the handler lists every
  API it serves.
- `strom Produce` (v9, acks=1, one 100-byte record to a 1-partition topic): the data path.

A replicated single-record acks=all write is five such request handlings across a 3-node
cluster (`docs/performance.md`, "Where a replicated record's CPU goes"); their floor on trio
times 500 a second is what the goal of 10 % of a core at 500 single records a second is
measured against.
"""

from __future__ import annotations

import argparse
import os
import statistics
import struct
import subprocess
import sys
import time
from collections.abc import Callable
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/request_floor.py` from a checkout
    sys.path.insert(0, str(_ROOT))

from bench.harness import StromSpec, cpu_seconds, start_broker  # noqa: E402
from bench.wireclient import WireClient, produce_request, record_batch  # noqa: E402
from bench.workloads import create_topic  # noqa: E402
from strom.wire.message import Message  # noqa: E402
from strom.wire.messages.api_versions import ApiVersionsRequest  # noqa: E402

_TRIO_SERVER = """
import struct, sys, trio
ANSWER = struct.pack(">i", 300) + bytes(300)
async def serve(stream):
    buf = bytearray()
    while True:
        data = await stream.receive_some(65536)
        if not data:
            return
        buf += data
        while len(buf) >= 4 and len(buf) >= 4 + struct.unpack_from(">i", buf)[0]:
            del buf[: 4 + struct.unpack_from(">i", buf)[0]]
            await stream.send_all(ANSWER)
async def main():
    listeners = await trio.open_tcp_listeners(0, host="127.0.0.1")
    print(listeners[0].socket.getsockname()[1], flush=True)
    await trio.serve_listeners(serve, listeners)
trio.run(main)
"""


def _rounds(pid: int, call: Callable[[], object], n: int, rounds: int) -> list[float]:
    """Server CPU µs per request, per round, after a warm-up of 500."""
    for _ in range(500):
        call()
    out = []
    for _ in range(rounds):
        before = cpu_seconds(pid)
        for _ in range(n):
            call()
        out.append((cpu_seconds(pid) - before) / n * 1e6)
    return out


def trio_floor(n: int, rounds: int) -> list[float]:
    server = subprocess.Popen(
        [sys.executable, "-c", _TRIO_SERVER], stdout=subprocess.PIPE, text=True
    )
    try:
        assert server.stdout is not None
        port = int(server.stdout.readline())
        with WireClient(f"127.0.0.1:{port}") as client:
            request = struct.pack(">i", 30) + bytes(30)

            def call() -> None:
                client.sock.sendall(request)
                got = b""
                while len(got) < 304:
                    got += client.sock.recv(304 - len(got))

            return _rounds(server.pid, call, n, rounds)
    finally:
        server.kill()
        server.wait()


def strom(n: int, rounds: int) -> dict[str, list[float]]:
    with start_broker(StromSpec()) as broker:
        create_topic(broker.bootstrap, "floor", 1)
        batch = record_batch(1, 100)
        bodies: dict[str, tuple[Message, int]] = {
            "strom ApiVersions": (ApiVersionsRequest("floor", "1"), 3),
            "strom Produce": (produce_request("floor", 0, batch, acks=1), 9),
        }
        out = {}
        with WireClient(broker.bootstrap) as client:
            for label, (body, version) in bodies.items():
                out[label] = _rounds(broker.pid, lambda: client.call(body, version), n, rounds)  # noqa: B023
        return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("-n", type=int, default=5000, help="requests a round (default 5,000)")
    parser.add_argument("--rounds", type=int, default=3)
    args = parser.parse_args()
    started = time.perf_counter()
    results = {"trio floor": trio_floor(args.n, args.rounds), **strom(args.n, args.rounds)}
    floor = statistics.median(results["trio floor"])
    print("| server | CPU µs per request, median (rounds) | / trio floor |")
    print("|---|--:|--:|")
    for label, values in results.items():
        median = statistics.median(values)
        rounds = ", ".join(f"{v:.0f}" for v in values)
        print(f"| {label} | {median:.0f} ({rounds}) | {median / floor:.2f} |")
    print(f"(5 handlings x 500/s at the trio floor: {5 * 500 * floor / 1e4:.0f} % of a core; "
          f"load average {os.getloadavg()[0]:.1f}; {time.perf_counter() - started:.0f} s)")  # fmt: skip


if __name__ == "__main__":
    main()
