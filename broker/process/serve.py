"""`strom serve`: load the configuration, then run the broker until SIGTERM or SIGINT.

Apart from the command line's parsing (`strom.broker.process.cli`), so that `strom format`
and `strom random-uuid` start without loading the broker. Exit codes: 0 after a graceful
shutdown, 1 on a start-up or fatal failure (one line says what to do), 2 on a bad
configuration.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
from collections.abc import Iterator
from pathlib import Path

import trio

from strom.broker.drivers.raft import RaftStoreFailure
from strom.broker.process import limits, malloc, socket_activation
from strom.broker.process.app import Broker, StartupError
from strom.broker.process.logfmt import setup_logging
from strom.config import ConfigError, load_config, planted
from strom.storage import disk
from strom.storage.disk.journal import JOURNAL_ENV, ROOT_ENV, JournalingDisk

log = logging.getLogger("strom.broker")


def run(args: argparse.Namespace) -> int:
    """`strom serve --config FILE --override KEY=VALUE ...`; returns the exit code."""
    setup_logging(logging.INFO)
    try:
        inherited = socket_activation.inherited_sockets()
    except socket_activation.ActivationError as exc:
        log.error("%s", exc)
        return 1
    try:
        config = load_config(args.config, args.override)
    except (ConfigError, OSError) as exc:
        log.error("configuration error: %s", exc)
        socket_activation.close_all(inherited)
        return 2
    setup_logging(config.python_log_level)
    try:
        _planted_bugs()
    except ValueError as exc:
        log.error("%s: %s", planted.ENV, exc)
        socket_activation.close_all(inherited)
        return 2
    _journaling_disk()
    malloc.tune()
    limits.raise_open_files()
    try:
        trio.run(_serve_until_signalled, Broker(config, inherited))
    except Exception as exc:  # every start-up or fatal failure ends in one line, not a traceback
        log.debug("the broker stopped on an error", exc_info=exc)
        log.error("%s", describe_failure(exc))
        return 1
    return 0


def _planted_bugs() -> None:
    """Test mode: STROM_PLANTED_BUGS puts fixed bugs back (strom.config.planted)."""
    names = planted.from_environment()
    if names:
        planted.plant(names)
        log.warning("test mode: planted bugs %s (%s)", ", ".join(sorted(names)), planted.ENV)


def _journaling_disk() -> None:
    """Test mode: with STROM_DISK_JOURNAL set, storage runs on a JournalingDisk, so a test can
    cut this process's power after killing it (strom.storage.disk.journal)."""
    journal = os.environ.get(JOURNAL_ENV)
    if not journal:
        return
    root = Path(os.environ.get(ROOT_ENV, ""))
    disk.use(JournalingDisk(Path(journal), root))
    log.warning("test mode: every change to %s is journaled to %s (for simulated power cuts)",
                root, journal)  # fmt: skip


def describe_failure(exc: BaseException) -> str:
    """One line for a fatal error: what failed and what to do about it."""
    leaves = list(_leaves(exc))
    messages = []
    for leaf in leaves:
        if isinstance(leaf, StartupError | RaftStoreFailure):  # each says what to do
            messages.append(str(leaf))
        elif isinstance(leaf, OSError):
            where = f" ({leaf.filename})" if leaf.filename else ""
            messages.append(
                f"{leaf.strerror or leaf}{where}: check the data directories, their permissions "
                "and free space"
            )
        else:
            messages.append(
                f"unexpected {type(leaf).__name__}: {leaf} (set strom.log.level=DEBUG for the "
                "traceback, and please report it)"
            )
    return "; ".join(dict.fromkeys(messages))


def _leaves(exc: BaseException) -> Iterator[BaseException]:
    if isinstance(exc, BaseExceptionGroup):
        for inner in exc.exceptions:
            yield from _leaves(inner)
    else:
        yield exc


async def _serve_until_signalled(broker: Broker) -> None:
    """Run the broker; SIGTERM or SIGINT starts a graceful shutdown."""
    with trio.open_signal_receiver(signal.SIGTERM, signal.SIGINT) as signals:
        async with trio.open_nursery() as nursery:

            async def on_signal() -> None:
                async for _ in signals:
                    broker.shutdown()

            nursery.start_soon(on_signal)
            await broker.run()
            nursery.cancel_scope.cancel()

