"""What every client's compatibility tests share: sample records, deadlines, topic names.

The tests never sleep to synchronise: they poll the thing they wait for against a deadline
(`Deadline`, `wait_until`) and fail with what they last saw when it runs out.
"""

from __future__ import annotations

import time
import uuid
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from pathlib import Path
from typing import TypeVar

T = TypeVar("T")

CODECS = ("none", "gzip", "snappy", "lz4", "zstd")
"""Every compression codec of the Kafka protocol, by its client-config name."""

Header = tuple[str, bytes | None]

_CODEC_IDS = dict(enumerate(CODECS))
"""RecordBatch attributes bits 0-2."""


@dataclass(frozen=True, order=True)
class Rec:
    """One record as a test expects it back: where it is and everything it carries."""

    partition: int
    offset: int
    key: bytes | None
    value: bytes | None
    headers: tuple[Header, ...]
    timestamp: int


def topic_name(label: str) -> str:
    """A fresh topic name, so tests never see each other's data."""
    return f"compat-{label}-{uuid.uuid4().hex[:10]}"


def now_ms() -> int:
    return int(time.time() * 1000)


def sample_records(
    partitions: int,
    per_partition: int,
    *,
    base_ts: int,
    ts_step: int = 1,
    null_header_values: bool = True,
) -> list[Rec]:
    """Records exercising the awkward corners of the record format.

    Keys: absent, empty, binary and text. Values: tombstones, empty, binary, non-ASCII, and
    large compressible ones (so a codec really shrinks a batch). Headers: none, one, repeated
    keys in order, non-ASCII keys, empty values and (when the client can send them) null values.
    Timestamps grow by `ts_step` within each partition, so a timestamp names an offset.
    """
    out: list[Rec] = []
    for p in range(partitions):
        for i in range(per_partition):
            out.append(
                Rec(
                    partition=p,
                    offset=i,
                    key=_key(p, i),
                    value=_value(p, i),
                    headers=_headers(i, null_header_values),
                    timestamp=base_ts + i * ts_step,
                )
            )
    return out


def _key(p: int, i: int) -> bytes | None:
    if i % 7 == 3 and _value(p, i) is not None:  # never both null: some clients refuse that
        return None
    if i % 11 == 5:
        return b""
    return f"key-{p}-{i}".encode() + bytes([i % 256, 0, 255])


def _value(p: int, i: int) -> bytes | None:
    if i % 13 == 6:
        return None
    if i % 17 == 8:
        return b""
    if i % 5 == 0:
        return (f"strøm record {p}/{i} " * 40).encode()
    if i % 5 == 1:
        return bytes((i + j) % 256 for j in range(64))
    return f"værdi-{p}-{i}-中文-😀".encode()


def _headers(i: int, null_values: bool) -> tuple[Header, ...]:
    kind = i % 4
    if kind == 0:
        return ()
    if kind == 1:
        return (("trace", f"t-{i}".encode()),)
    if kind == 2:
        return (("dup", b"first"), ("dup", b"second"), ("ünïcødé", "wert-ä".encode()))
    return (("empty", b""), ("null", None if null_values else b"not-null"))


def by_partition(records: Iterable[Rec]) -> dict[int, list[Rec]]:
    out: dict[int, list[Rec]] = {}
    for rec in records:
        out.setdefault(rec.partition, []).append(rec)
    return out


class Deadline:
    """A point in time a test gives up at."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self.at = time.monotonic() + seconds

    @property
    def remaining(self) -> float:
        return max(0.0, self.at - time.monotonic())

    @property
    def expired(self) -> bool:
        return time.monotonic() >= self.at


def wait_until(
    check: Callable[[], T | None], *, timeout: float, what: str, interval: float = 0.05
) -> T:
    """Call `check` until it returns something other than None/False; fail at the deadline.

    This polls an observable condition (not a fixed sleep standing in for one).
    """
    deadline = Deadline(timeout)
    last: T | None = None
    while True:
        last = check()
        if last is not None and last is not False:
            return last
        if deadline.expired:
            raise AssertionError(f"timed out after {timeout}s waiting for {what}")
        time.sleep(min(interval, deadline.remaining))


def stored_codecs(data_dir: Path, topic: str) -> set[str]:
    """The compression codecs of the record batches the broker stored for `topic`.

    With a topic's default `compression.type=producer`, Strom keeps batches on disk exactly as
    produced (docs/storage.md), so the codec a client chose shows in the segment files; with any
    other value, Kafka (and Strom) recompress to that codec. Segment files hold whole
    RecordBatch v2 batches back to back: baseOffset int64, batchLength int32, ..., attributes
    int16 at byte 21.
    """
    found: set[str] = set()
    for segment in sorted(data_dir.glob(f"{topic}-*/*.log")):
        data = segment.read_bytes()
        pos = 0
        while pos + 23 <= len(data):
            length = int.from_bytes(data[pos + 8 : pos + 12], "big", signed=True)
            if length <= 0:
                break
            assert data[pos + 16] == 2, f"{segment}: magic {data[pos + 16]} at byte {pos}"
            attributes = int.from_bytes(data[pos + 21 : pos + 23], "big")
            found.add(_CODEC_IDS[attributes & 0x7])
            pos += 12 + length
    return found
