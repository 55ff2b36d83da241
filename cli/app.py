"""The `strom` command line's client commands, on click.

    strom [--brokers HOST:PORT,...] [--format text|json] [--timeout SECONDS] [-X key=value]
          topic|group|produce|consume|cluster|config|completion ...

Exit codes: 0 done; 1 the cluster answered an error, or a check failed (`cluster health`);
2 bad arguments; 3 the cluster could not be reached or did not answer in time. A failure is
one line on stderr, `strom: error: ...`, never a traceback.

`strom serve`, `strom format` and `strom random-uuid` are the broker's (`strom.__main__`
sends them there before this module is imported); they are listed here for `--help` and
completion only.
"""

from __future__ import annotations

import os
import sys
from collections.abc import Callable, Sequence

import click
from click.shell_completion import get_completion_class

from strom.cli import cluster, configs, groups, records, topics
from strom.cli.context import Context
from strom.cli.output import Output
from strom.cli.session import EXIT_FAILED, EXIT_USAGE, CliError, Session

DEFAULT_BROKERS = "127.0.0.1:9092"
BROKER_COMMANDS = ("serve", "format", "random-uuid")


def _extra(values: Sequence[str]) -> dict[str, str]:
    pairs = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key:
            raise click.BadParameter(f"expected key=value, got {item!r}", param_hint="-X")
        pairs[key.strip()] = value
    return pairs


@click.group(
    context_settings={"help_option_names": ["-h", "--help"], "max_content_width": 100},
)
@click.option(
    "--brokers", "-b", envvar="STROM_BROKERS", default=DEFAULT_BROKERS, show_default=True,
    help="Bootstrap servers, host:port,... (env STROM_BROKERS).",
)  # fmt: skip
@click.option(
    "--format", "-o", "fmt", type=click.Choice(["text", "json"]), default="text",
    show_default=True, help="Tables for people, or JSON for scripts.",
)  # fmt: skip
@click.option(
    "--timeout", type=click.FloatRange(min=0.1), default=10.0, show_default=True,
    help="Seconds to wait for the cluster's answers.",
)  # fmt: skip
@click.option(
    "-X", "extra", multiple=True, metavar="KEY=VALUE",
    help="A librdkafka client property (repeatable), e.g. -X client.id=ops.",
)  # fmt: skip
@click.version_option(package_name="strom", prog_name="strom", message="%(prog)s %(version)s")
@click.pass_context
def cli(ctx: click.Context, brokers: str, fmt: str, timeout: float, extra: tuple[str, ...]) -> None:
    """Strom: a Kafka-compatible broker, and a command line for any Kafka cluster."""
    ctx.obj = Context(Session(brokers, timeout, _extra(extra)), Output(json=fmt == "json"))


def _broker_command(name: str, summary: str) -> click.Command:
    @click.command(
        name,
        help=f"{summary} (the broker's own command: strom {name} --help).",
        context_settings={"ignore_unknown_options": True, "allow_extra_args": True},
        add_help_option=False,
    )
    def command() -> None:  # strom.__main__ runs these before click is involved
        raise click.UsageError(f"run 'strom {name}' directly")

    return command


cli.add_command(_broker_command("serve", "Run the broker"))
cli.add_command(_broker_command("format", "Format the storage directories"))
cli.add_command(_broker_command("random-uuid", "Print a new cluster id"))


@cli.command("completion")
@click.argument("shell", type=click.Choice(["bash", "zsh", "fish"]))
def completion(shell: str) -> None:
    """Print the shell completion script; load it with eval "$(strom completion bash)"."""
    cls = get_completion_class(shell)
    assert cls is not None
    click.echo(cls(cli, {}, "strom", "_STROM_COMPLETE").source())


for command in (topics.topic, groups.group, records.produce, records.consume, cluster.cluster,
                configs.config):  # fmt: skip
    cli.add_command(command)


def main(argv: Sequence[str] | None = None) -> int:
    """Run a client command; returns the exit code (see the module docstring)."""
    args = _format_first(list(sys.argv[1:] if argv is None else argv))
    try:
        cli.main(args=args, prog_name="strom", standalone_mode=False)
    except CliError as exc:
        _fail(str(exc))
        return exc.code
    except click.exceptions.Exit as exc:
        return int(exc.exit_code)
    except click.ClickException as exc:
        _fail(exc.format_message())
        return exc.exit_code if exc.exit_code else EXIT_USAGE
    except click.Abort:
        _fail("interrupted")
        return 130
    except KeyboardInterrupt:
        return 130
    except BrokenPipeError:  # `strom consume ... | head`
        sys.stderr.close()
        return 0
    return 0


def _format_first(args: list[str]) -> list[str]:
    """`--format json` is accepted after the subcommand too (`strom topic list --format
    json`): moved in front, where the group reads it."""
    for index, arg in enumerate(args):
        if arg == "--":
            break
        if arg.startswith("--format="):
            return [arg, *args[:index], *args[index + 1 :]]
        if arg == "--format" and index + 1 < len(args):
            return [arg, args[index + 1], *args[:index], *args[index + 2 :]]
    return args


def _fail(message: str) -> None:
    text = " ".join(message.split())
    sys.stderr.write(f"strom: error: {text}\n")


def completion_requested() -> bool:
    return "_STROM_COMPLETE" in os.environ


def run_completion() -> int:
    """Answer the shell's completion request (click's protocol)."""
    return _exit_code(lambda: cli.main(prog_name="strom", complete_var="_STROM_COMPLETE"))


def _exit_code(run: Callable[[], object]) -> int:
    try:
        run()
    except SystemExit as exc:
        return int(exc.code or 0)
    return EXIT_FAILED
