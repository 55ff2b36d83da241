"""The cyclic garbage collector, paused around bulk loads.

A load that builds hundreds of thousands of long-lived objects (a metadata snapshot of a
million partitions holds about a million) makes the collector walk everything built so far
each time the heap has grown by a quarter since the last full collection: about five walks
of the final heap over one load, each 0.3 s of CPU at a million objects. Paused, the load
pays none of them; the collector's first full collection after it walks the heap once.
Reference counting frees everything that is not in a cycle meanwhile, so a pause only
defers cyclic garbage, for as long as the load takes.
"""

from __future__ import annotations

import gc
from collections.abc import Iterator
from contextlib import contextmanager

_pauses = 0
_was_enabled = False


@contextmanager
def collector_paused() -> Iterator[None]:
    """No cyclic collection inside. Nested and overlapping pauses (two tasks loading at once)
    share one: the collector comes back when the last ends, if it was on before the first."""
    global _pauses, _was_enabled
    if _pauses == 0:
        _was_enabled = gc.isenabled()
        gc.disable()
    _pauses += 1
    try:
        yield
    finally:
        _pauses -= 1
        if _pauses == 0 and _was_enabled:
            gc.enable()
