"""Test-only switches that put back bugs Strom has fixed, so a test can prove it catches them.

A fault-injection run that never fails proves little unless it is shown to fail when the
code is wrong. Each name below turns one fixed bug back on; the queue test's scenarios
(`compat_tests/jepsen/scenarios.py`) run with one planted and must report the violation the
bug causes. Never set outside those tests: `strom serve` plants what `STROM_PLANTED_BUGS`
(comma-separated names) lists and logs a warning that it did; an unknown name stops it.

The switch is process-wide (`plant`), read by `planted(name)` where the old code was.
"""

from __future__ import annotations

import contextlib
import os
from collections.abc import Iterable, Iterator

ENV = "STROM_PLANTED_BUGS"

BUGS: dict[str, str] = {
    "isr-forgets-unanswered-proposal": (
        "a partition leader drops an ISR change whose AlterPartition got no answer or a "
        "NOT_CONTROLLER, and counts only the old ISR for the high watermark (the change may "
        "have committed)"
    ),
    "isr-trusts-old-incarnation": (
        "a partition leader keeps a restarted follower's previous log end offset and proposes "
        "it into the ISR with the broker epoch of the metadata, not the one its fetches named "
        "(KIP-903 bypassed)"
    ),
    "restart-keeps-leader-epoch": (
        "a restarted broker replacing its previous incarnation keeps leading, in the same "
        "leader epoch, the partitions whose only ISR member it is; and a second live process "
        "naming the same log directories replaces the first"
    ),
    "hw-ignores-followers": (
        "a partition leader moves the high watermark to its own log end offset without "
        "waiting for the ISR, so acks=all is answered before any follower has the records"
    ),
}

_active: frozenset[str] = frozenset()


def plant(names: Iterable[str]) -> frozenset[str]:
    """Turn these bugs on (and every other off); returns the previous set."""
    global _active
    wanted = frozenset(names)
    unknown = wanted - BUGS.keys()
    if unknown:
        raise ValueError(f"unknown planted bug(s) {sorted(unknown)}; known: {sorted(BUGS)}")
    previous, _active = _active, wanted
    return previous


def planted(name: str) -> bool:
    """Whether the bug `name` (a key of BUGS) is planted in this process."""
    if name not in BUGS:
        raise KeyError(name)
    return name in _active


def from_environment() -> frozenset[str]:
    """The names `STROM_PLANTED_BUGS` lists (empty when unset)."""
    return frozenset(n.strip() for n in os.environ.get(ENV, "").split(",") if n.strip())


@contextlib.contextmanager
def planting(*names: str) -> Iterator[None]:
    """Plant `names` for the duration of a block (unit tests)."""
    previous = plant(names)
    try:
        yield
    finally:
        plant(previous)
