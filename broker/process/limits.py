"""Raise the process's open-files soft limit to its hard limit at start-up.

A partition holds one fd (its active segment's `.log`; strom.storage.log.segment),
every connection one more, and a fetch of an older segment one while its
response is sent. Distributions often start processes at a soft limit of
1,024 while allowing far more; Kafka's operations guide asks for a high
`ulimit -n` instead, which an unprivileged process may grant itself up to the
hard limit, so `strom serve` does that, and logs it.
"""

from __future__ import annotations

import logging
import resource

log = logging.getLogger("strom.limits")

NR_OPEN_DEFAULT = 1 << 20
"""Linux's default fs.nr_open: the most a hard limit of "unlimited" can mean for NOFILE."""


def raise_open_files() -> int:
    """Set RLIMIT_NOFILE's soft limit to the hard one; the soft limit in force afterwards."""
    soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    target = NR_OPEN_DEFAULT if hard == resource.RLIM_INFINITY else hard
    if soft != resource.RLIM_INFINITY and soft >= target:
        return soft
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (target, hard))
    except (ValueError, OSError) as exc:
        log.warning("open files limit stays at %d (hard limit %d): %s", soft, hard, exc)
        return soft
    log.info("open files limit raised from %d to %d (the hard limit)", soft, target)
    return target
