"""glibc malloc tuning for the broker process.

Requests and fetch responses are large byte objects (a produce request is
often a megabyte). glibc serves blocks over its mmap threshold (128 KiB at
first) with a fresh `mmap` and returns them with `munmap` on free, so every
such object costs page faults on all its pages: in py-spy that showed as a
fifth of produce CPU on a plain `bytearray(records)` copy. Raising the mmap
threshold makes these blocks come from the heap, where freed ones are reused
with their pages already mapped; the trim threshold bounds how much free memory
the heap keeps at its top before giving it back.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger("strom.malloc")

M_TRIM_THRESHOLD = -1
M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 16 * 1024 * 1024
TRIM_THRESHOLD = 32 * 1024 * 1024


def tune() -> bool:
    """Apply the thresholds; False (and no change) where glibc's mallopt is missing."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not ok:
        log.debug("mallopt refused the thresholds")
    return ok
