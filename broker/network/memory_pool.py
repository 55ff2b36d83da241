"""A broker-wide bound on the memory held by requests being read: `queued.max.request.bytes`.

Kafka's memory-pool semantics: when a connection has read a frame's size prefix it reserves
that many bytes before reading the body; when the pool is spent, reading from that connection
waits (its socket stays unread, so TCP pushes back on the client) until a request handled
elsewhere gives its bytes back. Like Kafka's non-strict pool, a reservation succeeds while any
memory is left, so one frame may overshoot: memory held by request bodies stays under the
pool's capacity plus one `socket.request.max.bytes`. Small frames that arrive whole in one
read are not reserved: per connection they are bounded by the read size.
"""

from __future__ import annotations

import trio


class RequestMemoryPool:
    def __init__(self, capacity: int) -> None:
        self.capacity = capacity
        self.available = capacity
        self._freed = trio.lowlevel.ParkingLot()

    async def reserve(self, size: int) -> None:
        """Take `size` bytes, waiting while none are left."""
        while self.available <= 0:
            await self._freed.park()
        self.available -= size

    def release(self, size: int) -> None:
        if size:  # most requests reserved nothing (they came whole in one read)
            self.available += size
            if self._freed:
                self._freed.unpark_all()


class UnboundedPool(RequestMemoryPool):
    """`queued.max.request.bytes=-1` (Kafka's default): no bound, nothing to count."""

    def __init__(self) -> None:
        super().__init__(0)

    async def reserve(self, size: int) -> None:
        return

    def release(self, size: int) -> None:
        return


def request_memory_pool(queued_max_request_bytes: int) -> RequestMemoryPool:
    if queued_max_request_bytes <= 0:
        return UnboundedPool()
    return RequestMemoryPool(queued_max_request_bytes)
