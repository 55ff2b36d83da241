"""Making one trio run replay exactly from a seed.

trio's scheduler is not deterministic by default: each batch of runnable tasks runs in the
order they became runnable, reversed half of the time by trio's own `random.Random`
(`trio._core._run._r`), and the order in which a cancelled scope reschedules its tasks is a
set's (of tasks hashed by address). trio has a switch for this, made for Hypothesis:
`_ALLOW_DETERMINISTIC_SCHEDULING` sorts each batch by task creation order before shuffling
it with `_r`; seeding `_r` makes the shuffle replay. The other order trio leaves to
addresses, expiring deadlines that fall at the same instant, only decides in which order their
tasks land in the next batch, which the sort then fixes.

What else could differ between two runs of one seed is kept out elsewhere: the clocks, worker
threads, randomness and UUIDs go through `strom.broker.runtime` (a test keeps broker code from
going around it, `test_contract.py`); str hashing is fixed for the process
(`PYTHONHASHSEED`, checked by `require_fixed_hash_seed`) so sets of names iterate alike; the
garbage collector starts each run from a clean slate.
"""

from __future__ import annotations

import contextlib
import gc
import os
import random
import sys
from collections.abc import Iterator

import trio._core._run as trio_run

HASH_SEED = "0"


def hash_seed_fixed() -> bool:
    return os.environ.get("PYTHONHASHSEED") == HASH_SEED


def require_fixed_hash_seed() -> None:
    """Re-run this process with PYTHONHASHSEED fixed if it is not (sets of str iterate in an
    order that depends on it)."""
    if not hash_seed_fixed():
        os.environ["PYTHONHASHSEED"] = HASH_SEED
        os.execv(sys.executable, [sys.executable, *sys.orig_argv[1:]])


@contextlib.contextmanager
def deterministic_scheduling(seed: int) -> Iterator[None]:
    """trio runs its tasks in an order drawn from `seed` (see the module docstring)."""
    flag = "_ALLOW_DETERMINISTIC_SCHEDULING"
    previous_flag = getattr(trio_run, flag)
    previous_state = trio_run._r.getstate()
    setattr(trio_run, flag, True)
    trio_run._r.seed(seed)
    random_state = random.getstate()
    random.seed(seed)  # anything still on the module's generator draws the same
    gc.collect()
    try:
        yield
    finally:
        setattr(trio_run, flag, previous_flag)
        trio_run._r.setstate(previous_state)
        random.setstate(random_state)
