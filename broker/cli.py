"""The `strom` command line."""

from __future__ import annotations

import argparse
import sys
from importlib.metadata import version


def main(argv: list[str] | None = None) -> int:
    """Entry point of the `strom` console script."""
    parser = argparse.ArgumentParser(prog="strom", description="Strom, a Kafka-compatible broker")
    parser.add_argument("--version", action="store_true", help="print the version and exit")
    sub = parser.add_subparsers(dest="command")
    sub.add_parser("serve", help="run the broker")
    args = parser.parse_args(argv)
    if args.version or args.command is None:
        print(f"strom {version('strom')}")
        return 0
    print(f"strom {version('strom')}: the broker is not implemented yet")
    return 0


if __name__ == "__main__":
    sys.exit(main())
