"""The `strom` command line: `strom serve [--config FILE] [--override key=value ...]`."""

from __future__ import annotations

import argparse
import signal
import sys
from importlib.metadata import version

import trio

from strom.broker.process import limits, malloc
from strom.broker.process.app import Broker
from strom.broker.process.logfmt import setup_logging
from strom.config import ConfigError, load_config


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
    args = parser.parse_args(argv)
    try:
        config = load_config(args.config, args.override)
    except (ConfigError, OSError) as exc:
        print(f"strom: configuration error: {exc}", file=sys.stderr)
        return 2
    setup_logging(config.python_log_level)
    malloc.tune()
    limits.raise_open_files()
    trio.run(_serve_until_signalled, Broker(config))
    return 0


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
