"""The cleaner's key -> latest offset map over a log's dirty section, in bounded memory.

Kafka sizes its map by `log.cleaner.dedupe.buffer.size` (24 bytes per entry:
an MD5 of the key plus an offset). A Python dict costs far more per entry, so
the capacity here is computed from a measured per-entry cost instead
(`ENTRY_BYTES`, a dict slot, a 16-byte key object and a large int, including
the transient doubling of a resize), which keeps the real memory of a full map
at or below `buffer size x log.cleaner.io.buffer.load.factor`.

Keys of up to 16 bytes are stored as they are; longer ones by their 16-byte
BLAKE2b digest, so an entry never holds a large key. Two keys sharing a digest
would make the older one look superseded: the same (2^-128) risk Kafka takes.
"""

from __future__ import annotations

import hashlib

ENTRY_BYTES = 160
"""Measured peak bytes per entry of a dict[bytes(16), int] filled to capacity."""
DIGEST_BYTES = 16


def map_key(key: bytes) -> bytes:
    """What the map stores for `key`."""
    if len(key) <= DIGEST_BYTES:
        return key
    return hashlib.blake2b(key, digest_size=DIGEST_BYTES).digest()


class OffsetMap:
    """key -> the largest offset seen for it; `room_for` says when the memory budget is spent."""

    def __init__(self, memory_bytes: int, load_factor: float = 0.9) -> None:
        self.capacity = max(1, int(memory_bytes * min(max(load_factor, 0.01), 1.0)) // ENTRY_BYTES)
        self._offsets: dict[bytes, int] = {}

    def __len__(self) -> int:
        return len(self._offsets)

    def room_for(self, entries: int) -> bool:
        """Whether `entries` more keys could be added without passing the capacity."""
        return len(self._offsets) + entries <= self.capacity

    def put(self, key: bytes, offset: int) -> None:
        """Record `offset` for `key` (callers feed offsets in increasing order)."""
        self._offsets[map_key(key)] = offset

    def latest(self, key: bytes) -> int:
        """The latest offset recorded for `key`, or -1 if it was not seen."""
        return self._offsets.get(map_key(key), -1)
