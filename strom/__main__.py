"""The `strom` command (`python -m strom` too).

`strom serve`, `strom format` and `strom random-uuid` are the broker's (`strom.broker.process.
cli`); they need nothing beyond Strom's own install. Every other command (`topic`, `group`,
`produce`, `consume`, `cluster`, `config`, `completion`) is the client command line,
`strom.cli`, an extra: without it they stop with one line naming the pip command.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Sequence

BROKER_COMMANDS = ("serve", "format", "random-uuid")
INSTALL_HINT = "pip install 'strom[cli]'"


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if args and args[0] in BROKER_COMMANDS:
        from strom.broker.process.cli import main as broker_main

        return broker_main(args)
    try:
        from strom.cli import app
    except ModuleNotFoundError as exc:
        if exc.name is None or exc.name.split(".")[0] not in ("click", "rich", "confluent_kafka"):
            raise
        return _without_cli(args, exc.name.split(".")[0])
    if "_STROM_COMPLETE" in os.environ:
        return app.run_completion()
    return app.main(args)


def _without_cli(args: list[str], missing: str) -> int:
    """The broker's commands still work; the client ones say how to get them."""
    if not args or args[0] in ("-h", "--help", "--version"):
        from strom.broker.process.cli import main as broker_main

        try:
            code = broker_main(args or ["--help"])
        except SystemExit as exc:  # argparse's --help and --version
            code = int(exc.code or 0)
        if args[:1] != ["--version"]:
            print(f"\nThe client commands (topic, group, produce, consume, cluster, config) "
                  f"need the CLI extra: {INSTALL_HINT}")  # fmt: skip
        return code
    sys.stderr.write(
        f"strom: error: 'strom {args[0]}' needs the CLI extra ({missing} is not installed): "
        f"{INSTALL_HINT}\n"
    )
    return 1


if __name__ == "__main__":
    raise SystemExit(main())
