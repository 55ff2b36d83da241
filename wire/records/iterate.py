"""Walk a buffer of concatenated v2 batches (a produce request, a fetch response, a segment).

Only the 61-byte header of each batch is unpacked: records are never touched
and each batch comes back as a zero-copy memoryview of the caller's buffer, so
the broker can validate and patch it in place. A fetch response may legally end
in a partial batch; the iterator stops there and reports it.
"""

from __future__ import annotations

from typing import NoReturn

from strom.wire.errors import ProtocolError, truncated
from strom.wire.primitives import INT32, Buffer
from strom.wire.records.batch import (
    HEADER,
    HEADER_SIZE,
    LENGTH_OFFSET,
    LOG_OVERHEAD,
    MAGIC,
    MAGIC_OFFSET,
    MIN_BATCH_LENGTH,
    BatchHeader,
    verify_crc,
)


class BatchIterator:
    """Iterate `(header, view)` over concatenated batches; each view is a zero-copy slice.

    A fetch response may end in a partial batch. With `allow_partial` (the
    default) iteration stops there and `partial` is set; otherwise it raises
    CORRUPT_MESSAGE. `consumed` is the number of bytes of whole batches
    yielded so far, i.e. where the next batch (or the partial tail) starts.
    """

    __slots__ = ("_allow_partial", "_check_crc", "_end", "_view", "consumed", "partial")

    def __init__(self, buf: Buffer, *, allow_partial: bool = True, check_crc: bool = False) -> None:
        self._view = memoryview(buf).cast("B") if isinstance(buf, memoryview) else memoryview(buf)
        self._end = len(self._view)
        self._allow_partial = allow_partial
        self._check_crc = check_crc
        self.consumed = 0
        self.partial = False

    def __iter__(self) -> BatchIterator:
        return self

    def __next__(self) -> tuple[BatchHeader, memoryview]:
        pos = self.consumed
        remaining = self._end - pos
        if remaining == 0:
            raise StopIteration
        view = self._view
        if remaining >= HEADER_SIZE:
            header = BatchHeader(*HEADER.unpack_from(view, pos))
            length = header.batch_length
        elif remaining >= LOG_OVERHEAD:
            header = None
            (length,) = INT32.unpack_from(view, pos + LENGTH_OFFSET)
        else:
            self._stop_partial()
        if length < MIN_BATCH_LENGTH:
            raise ProtocolError(f"record batch length {length} is too small")
        if remaining > MAGIC_OFFSET and view[pos + MAGIC_OFFSET] != MAGIC:
            raise ProtocolError(f"record batch magic is {view[pos + MAGIC_OFFSET]}, expected 2")
        end = pos + LOG_OVERHEAD + length
        if header is None or end > self._end:
            self._stop_partial()
        batch = view[pos:end]
        if self._check_crc:
            verify_crc(batch)
        self.consumed = end
        return header, batch

    def _stop_partial(self) -> NoReturn:
        if not self._allow_partial:
            raise truncated("record batch")
        self.partial = True
        raise StopIteration

    @property
    def remaining(self) -> int:
        """Bytes not yet consumed (the partial tail once iteration has stopped)."""
        return self._end - self.consumed


def iter_batches(
    buf: Buffer, *, allow_partial: bool = True, check_crc: bool = False
) -> BatchIterator:
    """Iterate the batches in `buf`; see `BatchIterator`."""
    return BatchIterator(buf, allow_partial=allow_partial, check_crc=check_crc)
