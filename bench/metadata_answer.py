"""A broker's answer to a full Metadata request (every topic) against a large image.

    python bench/metadata_answer.py                                   # 1,000 x 1,000, 300 brokers
    python bench/metadata_answer.py --partitions 200000 --profile     # and where the time goes

Builds the image of the control-plane benchmark (`bench/control_plane.py`, as
`bench/snapshot_load.py` builds it): `--brokers` unfenced brokers (`--fenced` of them fenced,
so that some leaders read -1 and some replicas offline), topics of 1,000 partitions,
replication factor 3. Then, in this process and without sockets, it times best of `--repeat`:

- `handle`: the Metadata handler building the `MetadataResponse` for all topics (a request
  as a client sends it, on the PLAINTEXT listener, no authorizer);
- `encode`: the response's frame as the server writes it (`encode_response`);
- `release`: the response freed once written;
- `broker total`: the three in one round, as a broker spends them (with Python's cycle
  collector on, as in a broker: collections set off by one phase may fall in the next);
- `decode`: the client's side, decoding the body (for scale; not the broker's time).

Prints this process's CPU time (not wall time: the machine is shared), in seconds and
microseconds per partition, and the size and a digest of the answer (the same on any code
that answers the same). With `--profile`, cProfile's top functions for one handle and one
encode. A single process; no network.
"""

from __future__ import annotations

import argparse
import cProfile
import hashlib
import pstats
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from functools import partial
from pathlib import Path
from typing import TYPE_CHECKING, Any, cast

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from bench.snapshot_load import build_image  # noqa: E402
from strom.broker.handlers import metadata  # noqa: E402
from strom.broker.handlers.request import RequestContext  # noqa: E402
from strom.config import BrokerConfig, Listener  # noqa: E402
from strom.coordinator.controller.liveness import OfflineReplicas  # noqa: E402
from strom.coordinator.metadata.image import MetadataImage  # noqa: E402
from strom.wire.connection import encode_response  # noqa: E402
from strom.wire.formats.metadata.fence_broker_record import FenceBrokerRecord  # noqa: E402
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse  # noqa: E402

if TYPE_CHECKING:
    from strom.broker.state import BrokerState


@dataclass
class _Controller:
    active_controller_id: int = 0


@dataclass
class BenchState:
    """The parts of `BrokerState` a Metadata request for all topics reads (broker 0)."""

    image: MetadataImage
    config: BrokerConfig = field(default_factory=BrokerConfig)
    node_id: int = 0
    cluster_id: str = "bench-cluster"
    endpoints: list[Listener] = field(default_factory=lambda: [Listener("PLAINTEXT", "h", 9000)])
    offline_replicas: OfflineReplicas = field(default_factory=OfflineReplicas)
    controller: _Controller = field(default_factory=_Controller)
    authorizer: None = None


def fence(image: MetadataImage, count: int) -> MetadataImage:
    """The image with the last `count` brokers fenced."""
    ids = sorted(image.brokers_by_id)[len(image.brokers_by_id) - count :]
    return image.apply_all(
        [FenceBrokerRecord(id=b, epoch=image.brokers_by_id[b].epoch) for b in ids if count]
    )


def answer(state: BenchState, version: int) -> MetadataResponse:
    """The handler's answer; run without an event loop (trio.run would keep the answer alive
    in its outcome until a cycle collection), as for all topics it never waits."""
    context = RequestContext(3, version, 1, "bench", "127.0.0.1", 1, "PLAINTEXT")
    body = MetadataRequest(topics=None, allow_auto_topic_creation=False)
    step = metadata.handle(cast("BrokerState", state), context, body)
    try:
        step.send(None)
    except StopIteration as done:
        response: MetadataResponse = done.value
        return response
    step.close()
    raise RuntimeError("the Metadata handler waited for something")


def encode(response: MetadataResponse, version: int) -> bytes:
    return b"".join(encode_response(3, version, 1, response))


def _timed(call: Callable[[], Any]) -> tuple[float, Any]:
    began = time.process_time()
    out = call()
    return time.process_time() - began, out


def _profile(call: Callable[[], Any], top: int) -> None:
    profiler = cProfile.Profile()
    profiler.runcall(call)
    pstats.Stats(profiler).sort_stats("tottime").print_stats(top)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=1_000_000)
    parser.add_argument("--brokers", type=int, default=300)
    parser.add_argument("--fenced", type=int, default=0, help="brokers fenced (of --brokers)")
    parser.add_argument("--version", type=int, default=12, help="Metadata version (12: Java's)")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--profile", action="store_true", help="cProfile one handle and encode")
    args = parser.parse_args(argv)

    began = time.process_time()
    image = fence(build_image(args.partitions, args.brokers), args.fenced)
    count = sum(len(t.partitions) for t in image.topics_by_id.values())
    print(f"{len(image.topics_by_id)} topics, {count} partitions, {args.brokers} brokers "
          f"({args.fenced} fenced), v{args.version}; image built in "
          f"{time.process_time() - began:.1f} s CPU")  # fmt: skip
    phases = ("handle", "encode", "release", "broker total", "decode")
    best = dict.fromkeys(phases, float("inf"))
    data = b""
    for _ in range(args.repeat):
        state = BenchState(image)
        began = time.process_time()
        response = answer(state, args.version)
        handled = time.process_time()
        data = encode(response, args.version)
        encoded = time.process_time()
        del response
        released = time.process_time()
        spans = (handled - began, encoded - handled, released - encoded, released - began)
        for name, span in zip(phases, spans, strict=False):
            best[name] = min(best[name], span)
        body = memoryview(data)[8 if args.version < 9 else 9 :]
        took_decode, decoded = _timed(partial(MetadataResponse.decode, body, args.version))
        best["decode"] = min(best["decode"], took_decode)
        assert sum(len(t.partitions) for t in decoded.topics) == count
        del decoded
    digest = hashlib.sha256(data).hexdigest()[:16]
    print(f"answer {len(data)} bytes ({len(data) / count:.1f} B/partition), sha256 {digest}")
    for name, took in best.items():
        print(f"{name:16} {took:6.2f} s  {took / count * 1e6:5.2f} us/partition")
    if args.profile:
        state = BenchState(image)
        _profile(lambda: answer(state, args.version), 15)
        response = answer(state, args.version)
        _profile(lambda: encode(response, args.version), 10)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
