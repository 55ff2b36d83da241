"""A response chunk that is a range of a segment file, sent with `os.sendfile` (zero copy).

The fetch path (`fetch_read`) puts these among a response's chunks in place of record bytes;
the network layer (`strom.broker.network.send`) recognises them and sends the file range.
"""

from __future__ import annotations

from strom.storage import ReadResult


class FileChunk:
    """A records value whose bytes are a segment file range, sent with sendfile."""

    __slots__ = ("result",)

    def __init__(self, result: ReadResult) -> None:
        self.result = result

    def __len__(self) -> int:
        return self.result.size
