"""The `strom` command line.

- `strom serve [--config FILE] [--override key=value ...]`: run the broker.
- `strom format --cluster-id ID [--config FILE] [--ignore-formatted] [--standalone |
  --initial-controllers ... | --no-initial-controllers]`: format the storage directories as
  `kafka-storage format` does (see `strom.broker.process.storage_tool`).
- `strom random-uuid`: print a new cluster id, as `kafka-storage random-uuid`.
"""

from __future__ import annotations

import argparse
import gc
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from importlib.metadata import version

from strom.broker.collector import collector_paused


@contextmanager
def _loading_modules() -> Iterator[None]:
    """Imports without the cyclic collector. Loading the broker allocates some 70,000 objects
    and frees next to none, so collections during it only slow start-up (by 10-20 %); what it
    builds lives as long as the process, so it is frozen out of every later collection too."""
    with collector_paused():
        try:
            yield
        finally:
            gc.freeze()


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `strom` console script."""
    with _loading_modules():
        from strom.broker.process.storage_tool import add_storage_commands, run_storage_command
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
    # Imported here: the broker's modules take a second to load, which format and
    # random-uuid do not need.
    with _loading_modules():
        from strom.broker.process import serve as serving
    return serving.run(args)


if __name__ == "__main__":
    sys.exit(main())
