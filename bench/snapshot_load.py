"""Encoding and loading a large metadata snapshot, and applying metadata entries: Strom's
fast paths for partitions against record-by-record work through the generated codec.

    python bench/snapshot_load.py --partitions 200000

Builds the image the control-plane benchmark's controllers hold (`bench/control_plane.py`: 30
brokers, topics of 1,000 partitions, replication factor 3, every replica in the ISR), then
times, alternating, best of `--repeat` each:

- encoding it as Raft snapshot data: `encode_snapshot` against each record through the
  generated codec (how snapshots were encoded before the fast path for partitions);
- decoding that data: `decode_snapshot` against each record through the generated codec and
  `MetadataDelta.replay` (how they were loaded before);
- the same records as Raft entries (`encode_entries`, as a controller's commands write them),
  replayed into a delta by `EntryReplay` against `decode_entry` plus `MetadataDelta.replay`.

Prints this process's CPU time (not wall time: the machine is shared) in microseconds per
partition, and the ratios. A single process; no network.

With `--node`, also a node's restart on that snapshot: a single node (a one-voter quorum) is
started once, the snapshot is put in its Raft store as the latest (as a snapshot written or
fetched would be), and it is started again: the time (wall and CPU) until the image is loaded
and until its broker is unfenced, and the most CPU time the event loop's thread spent without
running another task while the snapshot loaded (a task that only yields measures it).
"""

from __future__ import annotations

import argparse
import random
import struct
import sys
import time
import uuid
from collections.abc import Callable
from pathlib import Path

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:
    sys.path.insert(0, str(_ROOT))

from strom.coordinator.metadata.image import MetadataImage, Provenance  # noqa: E402
from strom.coordinator.metadata.kraft_checkpoint import image_records  # noqa: E402
from strom.coordinator.metadata.metadata_records import decode_record, encode_record  # noqa: E402
from strom.coordinator.metadata.raft_entries import (  # noqa: E402
    EntryReplay,
    decode_entry,
    decode_snapshot,
    encode_entries,
    encode_snapshot,
)
from strom.wire.formats.metadata.feature_level_record import FeatureLevelRecord  # noqa: E402
from strom.wire.formats.metadata.partition_record import PartitionRecord  # noqa: E402
from strom.wire.formats.metadata.register_broker_record import RegisterBrokerRecord  # noqa: E402
from strom.wire.formats.metadata.topic_record import TopicRecord  # noqa: E402
from strom.wire.message import Message  # noqa: E402
from strom.wire.primitives import read_uvarint, uvarint  # noqa: E402

PER_TOPIC = 1000


def build_image(partitions: int, brokers: int, seed: int = 1) -> MetadataImage:
    """The benchmark's image: `brokers` unfenced brokers, topics of PER_TOPIC partitions."""
    rng = random.Random(seed)
    records: list[Message] = [FeatureLevelRecord("metadata.version", 21)]
    for b in range(brokers):
        records.append(
            RegisterBrokerRecord(
                broker_id=b, incarnation_id=uuid.UUID(int=rng.getrandbits(128)),
                broker_epoch=10 + b,
                end_points=[RegisterBrokerRecord.BrokerEndpoint("PLAINTEXT", "h", 9000 + b, 0)],
                fenced=False,
            )
        )  # fmt: skip
    for t in range(max(1, partitions // PER_TOPIC)):
        topic_id = uuid.UUID(int=rng.getrandbits(128))
        records.append(TopicRecord(f"topic-{t:06d}", topic_id))
        for p in range(PER_TOPIC):
            replicas = [(t * PER_TOPIC + p + i) % brokers for i in range(3)]
            records.append(
                PartitionRecord(
                    partition_id=p, topic_id=topic_id, replicas=replicas, isr=list(replicas),
                    leader=replicas[0], leader_epoch=0, partition_epoch=0,
                )
            )  # fmt: skip
    return MetadataImage.EMPTY.apply_all(records, Provenance(len(records), 3, 0))


def generic_encode(image: MetadataImage) -> bytes:
    """Record by record through the generated codec (how snapshots were encoded before)."""
    p = image.provenance
    parts = [struct.pack(">4sqiq", b"SQC1", p.offset, p.epoch, p.timestamp)]
    for record in image_records(image):
        framed = encode_record(record)
        parts.append(uvarint(len(framed)) + framed)
    return b"".join(parts)


def generic_decode(data: bytes) -> MetadataImage:
    """Record by record through the generated codec and `MetadataDelta.replay`."""
    offset, epoch, timestamp = struct.unpack_from(">qiq", data, 4)
    delta = MetadataImage.EMPTY.delta()
    pos, view = 24, memoryview(data)
    while pos < len(view):
        length, pos = read_uvarint(view, pos)
        delta.replay(decode_record(view[pos : pos + length])[0])
        pos += length
    return delta.apply(Provenance(offset, epoch, timestamp))


def replay_entries(entries: list[bytes]) -> MetadataImage:
    delta = MetadataImage.EMPTY.delta()
    replay = EntryReplay()
    for entry in entries:
        replay.replay(delta, entry)
    return delta.apply()


def generic_entries(entries: list[bytes]) -> MetadataImage:
    delta = MetadataImage.EMPTY.delta()
    for entry in entries:
        delta.replay(decode_entry(entry)[2])
    return delta.apply()


async def node_restart(image: MetadataImage, data: bytes, directory: Path) -> dict[str, float]:
    """A single node restarted on `data` as its latest snapshot (see the module docstring)."""
    import trio

    from strom.broker.drivers.quorum_controller import QuorumController
    from strom.config import BrokerConfig
    from strom.storage.raft.raft_disk import DiskRaftStore
    from strom.storage.raft.raft_store import SnapshotId

    config = BrokerConfig.from_properties({"log.dir": str(directory)})
    first = await QuorumController.open(config)
    async with trio.open_nursery() as nursery:
        await nursery.start(first.run)
        await first.start()
        await first.close()
    store = DiskRaftStore(Path(config.metadata_dir), frozenset({config.node_id}))
    recovered = store.load()
    end, epoch = store.end_offset + 1, recovered.quorum.leader_epoch
    stamped = image.apply_all([], Provenance(end - 1, epoch, 0))
    store.install_snapshot(SnapshotId(end, epoch), encode_snapshot(stamped), reset_log=True)

    node = await QuorumController.open(config)
    stall = 0.0
    out: dict[str, float] = {}

    async def watch() -> None:
        """The most CPU the event loop's thread spent between two turns of this task (CPU
        time, so that the machine's other load, which stops the whole process, does not
        count)."""
        nonlocal stall
        last = time.thread_time()
        while True:
            await trio.lowlevel.checkpoint()
            now = time.thread_time()
            stall, last = max(stall, now - last), now

    began, cpu = trio.current_time(), time.process_time()
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch)
        await nursery.start(node.run)
        while node.raft.applied < end:
            await trio.lowlevel.checkpoint()
        out["loaded_s"] = round(trio.current_time() - began, 2)
        out["loaded_cpu_s"] = round(time.process_time() - cpu, 2)
        out["longest_loop_stall_while_loading_cpu_ms"] = round(stall * 1000, 1)
        await node.start()
        out["unfenced_s"] = round(trio.current_time() - began, 2)
        await node.close()
        nursery.cancel_scope.cancel()
    assert node.image.topic_names() == image.topic_names()  # (broker 1 registered anew)
    return out


def _best(
    decoders: dict[str, Callable[[], MetadataImage]], expected: MetadataImage, repeat: int
) -> dict[str, float]:
    best = dict.fromkeys(decoders, float("inf"))
    for _ in range(repeat):
        for name, decode in decoders.items():
            began = time.process_time()
            loaded = decode()
            best[name] = min(best[name], time.process_time() - began)
            assert loaded.topics_by_name == expected.topics_by_name
            del loaded
    return best


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--partitions", type=int, default=200_000)
    parser.add_argument("--brokers", type=int, default=30)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--node", action="store_true", help="also a node restarted on it")
    args = parser.parse_args(argv)
    image = build_image(args.partitions, args.brokers)
    count = sum(len(t.partitions) for t in image.topics_by_id.values())
    encoded = dict.fromkeys(("encode_snapshot", "generic encode"), float("inf"))
    for _ in range(args.repeat):
        for name, encode in (("encode_snapshot", encode_snapshot), ("generic encode", generic_encode)):
            began = time.process_time()
            data = encode(image)
            encoded[name] = min(encoded[name], time.process_time() - began)
    assert data == encode_snapshot(image)
    print(f"{count} partitions, snapshot {len(data)} bytes ({len(data) / count:.1f} B/partition)")
    best = _best(
        {"decode_snapshot": lambda: decode_snapshot(data)[0], "generic": lambda: generic_decode(data)},
        image, args.repeat,
    )  # fmt: skip
    entries = encode_entries(list(image_records(image)), 0)
    best |= _best(
        {"EntryReplay": lambda: replay_entries(entries), "decode_entry": lambda: generic_entries(entries)},
        image, args.repeat,
    )  # fmt: skip
    for name, took in (encoded | best).items():
        print(f"{name:16} {took:6.2f} s  {took / count * 1e6:5.2f} us/partition")
    print(f"ratio encode_snapshot / generic encode: "
          f"{encoded['encode_snapshot'] / encoded['generic encode']:.2f}")  # fmt: skip
    print(f"ratio decode_snapshot / generic: {best['decode_snapshot'] / best['generic']:.2f}")
    print(f"ratio EntryReplay / decode_entry: {best['EntryReplay'] / best['decode_entry']:.2f}")
    if args.node:
        import tempfile

        import trio

        with tempfile.TemporaryDirectory(prefix="strom-snapshot-load-") as tmp:
            print("a node restarted on it:", trio.run(node_restart, image, data, Path(tmp)))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
