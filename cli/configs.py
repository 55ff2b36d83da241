"""`strom config get|set`: broker, topic and group configs (DescribeConfigs,
IncrementalAlterConfigs)."""

from __future__ import annotations

import click
from confluent_kafka.admin import ConfigResource, ConfigSource, ResourceType

from strom.cli.context import Context, pass_context
from strom.cli.session import CliError
from strom.cli.topics import alter_configs, key_values

_KINDS = {"broker": ResourceType.BROKER, "group": ResourceType.GROUP, "topic": ResourceType.TOPIC}


@click.group()
def config() -> None:
    """Read and change broker, topic and group configs."""


def _source(entry: object) -> str:
    """Kafka's config source name (DYNAMIC_TOPIC_CONFIG, STATIC_BROKER_CONFIG, ...)."""
    source = getattr(entry, "source", None)
    try:
        return str(ConfigSource(source).name)
    except ValueError:
        return str(source)


@config.command()
@click.argument("kind", type=click.Choice(sorted(_KINDS)))
@click.argument("name")
@click.argument("keys", nargs=-1)
@click.option(
    "-a",
    "--all",
    "show_all",
    is_flag=True,
    help="Include defaults (default: only keys set somewhere).",
)
@pass_context
def get(ctx: Context, kind: str, name: str, keys: tuple[str, ...], show_all: bool) -> None:
    """Configs of a broker (by id), a topic or a group; only KEYS if given."""
    session = ctx.session
    resource = ConfigResource(_KINDS[kind], name)
    entries = session.wait(
        session.admin.describe_configs([resource], request_timeout=session.timeout)[resource],
        f"configs of {kind} {name}",
    )
    if keys:
        missing = [k for k in keys if k not in entries]
        if missing:
            raise CliError(f"{kind} {name} has no config {', '.join(missing)}")
        chosen = [entries[k] for k in keys]
    else:
        chosen = [e for e in entries.values() if show_all or not e.is_default]
    rows = [
        {"name": e.name, "value": None if e.is_sensitive else e.value, "source": _source(e),
         "read_only": e.is_read_only, "sensitive": e.is_sensitive}
        for e in sorted(chosen, key=lambda e: e.name)
    ]  # fmt: skip
    if ctx.out.json:
        ctx.out.data(rows)
    else:
        ctx.out.table(
            ("NAME", "VALUE", "SOURCE"), ((r["name"], r["value"], r["source"]) for r in rows)
        )


@config.command("set")
@click.argument("kind", type=click.Choice(sorted(_KINDS)))
@click.argument("name")
@click.argument("settings", nargs=-1, metavar="KEY=VALUE...")
@click.option(
    "-d",
    "--delete",
    "deletes",
    multiple=True,
    metavar="KEY",
    help="Remove a dynamic value (repeatable).",
)
@pass_context
def set_(
    ctx: Context, kind: str, name: str, settings: tuple[str, ...], deletes: tuple[str, ...]
) -> None:
    """Set or remove configs of a broker (an id, or "" for the cluster default), a topic or a
    group."""
    alter_configs(ctx, _KINDS[kind], [name], key_values(settings, "KEY=VALUE"), deletes)
