"""The `strom` command line.

- `strom serve [--config FILE] [--override key=value ...]`: run the broker.
- `strom format --cluster-id ID [--config FILE] [--ignore-formatted] [--standalone |
  --initial-controllers ... | --no-initial-controllers]`: format the storage directories as
  `kafka-storage format` does (see `strom.broker.process.storage_tool`).
- `strom random-uuid`: print a new cluster id, as `kafka-storage random-uuid`.
"""

from __future__ import annotations

import argparse
import logging
import os
import signal
import sys
from collections.abc import Iterator
from importlib.metadata import version
from pathlib import Path

import trio

from strom.broker.drivers.raft import RaftStoreFailure
from strom.broker.process import limits, malloc, socket_activation
from strom.broker.process.app import Broker, StartupError
from strom.broker.process.logfmt import setup_logging
from strom.broker.process.storage_tool import add_storage_commands, run_storage_command
from strom.config import ConfigError, load_config, planted
from strom.storage import disk
from strom.storage.disk.journal import JOURNAL_ENV, ROOT_ENV, JournalingDisk

log = logging.getLogger("strom.broker")


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `strom` console script."""
    parser = argparse.ArgumentParser(prog="strom", description="Strom, a Kafka-compatible broker")
    parser.add_argument("--version", action="version", version=f"strom {version('strom')}")
    sub = parser.add_subparsers(dest="command", required=True)
    serve = sub.add_parser("serve", help="run the broker")
    serve.add_argument("--config", metavar="FILE", help="a Kafka-style server.properties file")
    serve.add_argument(
        "--override",
        metavar="KEY=VALUE",
        action="append",
        default=[],
        help="override a config key (repeatable), as kafka-server-start does",
    )
    add_storage_commands(sub)
    args = parser.parse_args(argv)
    if args.command != "serve":
        return run_storage_command(args)
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


if __name__ == "__main__":
    sys.exit(main())
