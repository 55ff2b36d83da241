"""`strom topic`: create, list, describe, alter-config, add-partitions, delete."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import click
from confluent_kafka import TopicPartition
from confluent_kafka.admin import (
    AlterConfigOpType,
    ConfigEntry,
    ConfigResource,
    NewPartitions,
    NewTopic,
    OffsetSpec,
    ResourceType,
)

from strom.cli.context import Context, pass_context
from strom.cli.session import CliError, Session


def key_values(values: Sequence[str], option: str) -> dict[str, str]:
    """KEY=VALUE options as a dict (a usage error names the bad one)."""
    pairs: dict[str, str] = {}
    for item in values:
        key, sep, value = item.partition("=")
        if not sep or not key.strip():
            raise click.BadParameter(f"expected KEY=VALUE, got {item!r}", param_hint=option)
        pairs[key.strip()] = value
    return pairs


@click.group()
def topic() -> None:
    """Create, list, describe, change and delete topics."""


@topic.command()
@click.argument("names", nargs=-1, required=True)
@click.option(
    "-p",
    "--partitions",
    type=click.IntRange(min=1),
    help="Partitions (default: the broker's num.partitions).",
)
@click.option(
    "-r",
    "--replicas",
    type=click.IntRange(min=1),
    help="Replication factor (default: the broker's default.replication.factor).",
)
@click.option(
    "-c",
    "--config",
    "configs",
    multiple=True,
    metavar="KEY=VALUE",
    help="A topic config (repeatable).",
)
@click.option("--if-not-exists", is_flag=True, help="An existing topic is not an error.")
@pass_context
def create(
    ctx: Context, names: tuple[str, ...], partitions: int | None, replicas: int | None,
    configs: tuple[str, ...], if_not_exists: bool,
) -> None:  # fmt: skip
    """Create topics."""
    session = ctx.session
    settings = key_values(configs, "--config")
    new = [NewTopic(n, partitions or -1, replicas or -1, config=settings) for n in names]
    futures = session.admin.create_topics(
        new, operation_timeout=session.timeout, request_timeout=session.timeout
    )
    rows = []
    failures = []
    for name, future in futures.items():
        try:
            session.wait(future, f"creating {name}")
            rows.append({"topic": name, "status": "created"})
        except CliError as exc:
            if if_not_exists and "TOPIC_ALREADY_EXISTS" in str(exc):
                rows.append({"topic": name, "status": "exists"})
            else:
                rows.append({"topic": name, "status": "failed", "error": str(exc)})
                failures.append(exc)
    _report(ctx, rows, ("topic", "status", "error"))
    if failures:
        raise CliError("; ".join(str(f) for f in failures), max(f.code for f in failures))


def _report(ctx: Context, rows: list[dict[str, Any]], columns: Sequence[str]) -> None:
    if ctx.out.json:
        ctx.out.data(rows)
    else:
        ctx.out.table([c.upper() for c in columns], ([r.get(c) for c in columns] for r in rows))


@topic.command("list")
@click.option(
    "-i", "--internal", is_flag=True, help="Include internal topics (__consumer_offsets, ...)."
)
@pass_context
def list_topics(ctx: Context, internal: bool) -> None:
    """List topics with their partition and replica counts."""
    metadata = ctx.session.metadata()
    rows = []
    for name, meta in sorted(metadata.topics.items()):
        if name.startswith("__") and not internal:
            continue
        partitions = meta.partitions.values()
        replicas = max((len(p.replicas) for p in partitions), default=0)
        rows.append({"name": name, "partitions": len(meta.partitions), "replicas": replicas})
    _report(ctx, rows, ("name", "partitions", "replicas"))


def describe_topic_data(session: Session, name: str) -> dict[str, Any]:
    metadata = session.metadata()  # all topics: naming one would let the broker auto-create it
    meta = metadata.topics.get(name)
    if meta is None or meta.error is not None:
        error = meta.error if meta is not None else None
        reason = error.name() if error is not None else "UNKNOWN_TOPIC_OR_PART"
        raise CliError(f"topic {name}: {reason}")
    specs: dict[TopicPartition, Any] = {}
    for pid in meta.partitions:
        specs[TopicPartition(name, pid, 0)] = OffsetSpec.earliest()
    earliest = session.admin.list_offsets(specs, request_timeout=session.timeout) if specs else {}
    latest = session.admin.list_offsets(
        {TopicPartition(name, pid, 0): OffsetSpec.latest() for pid in meta.partitions},
        request_timeout=session.timeout,
    ) if specs else {}  # fmt: skip
    starts = {
        tp.partition: session.wait(f, f"offsets of {name}").offset for tp, f in earliest.items()
    }
    ends = {tp.partition: session.wait(f, f"offsets of {name}").offset for tp, f in latest.items()}
    resource = ConfigResource(ResourceType.TOPIC, name)
    entries = session.wait(
        session.admin.describe_configs([resource])[resource], f"configs of {name}"
    )
    partitions = [
        {
            "partition": p.id,
            "leader": p.leader,
            "replicas": list(p.replicas),
            "isr": list(p.isrs),
            "log_start_offset": starts.get(p.id),
            "high_watermark": ends.get(p.id),
            "error": p.error.name() if p.error is not None else None,
        }
        for p in sorted(meta.partitions.values(), key=lambda p: p.id)
    ]
    configs = {
        e.name: e.value for e in sorted(entries.values(), key=lambda e: e.name) if not e.is_default
    }
    return {
        "name": name,
        "partitions": partitions,
        "replication_factor": max((len(p["replicas"]) for p in partitions), default=0),
        "configs": configs,
    }


@topic.command()
@click.argument("names", nargs=-1, required=True)
@pass_context
def describe(ctx: Context, names: tuple[str, ...]) -> None:
    """Partitions (leader, replicas, ISR, offsets) and non-default configs of topics."""
    described = [describe_topic_data(ctx.session, n) for n in names]
    if ctx.out.json:
        ctx.out.data(described if len(described) > 1 else described[0])
        return
    for data in described:
        ctx.out.pairs(
            [("NAME", data["name"]), ("PARTITIONS", len(data["partitions"])),
             ("REPLICAS", data["replication_factor"])],
        )  # fmt: skip
        if data["configs"]:
            ctx.out.table(("CONFIG", "VALUE"), sorted(data["configs"].items()), title="\nCONFIGS")
        ctx.out.table(
            ("PARTITION", "LEADER", "REPLICAS", "ISR", "LOG-START", "HIGH-WATERMARK", "ERROR"),
            (
                (p["partition"], p["leader"], _ids(p["replicas"]), _ids(p["isr"]),
                 p["log_start_offset"], p["high_watermark"], p["error"])
                for p in data["partitions"]
            ),
            title="\nPARTITIONS",
        )  # fmt: skip


def _ids(values: Sequence[int]) -> str:
    return "[" + ",".join(str(v) for v in values) + "]"


@topic.command("alter-config")
@click.argument("names", nargs=-1, required=True)
@click.option(
    "-s", "--set", "sets", multiple=True, metavar="KEY=VALUE", help="Set a config (repeatable)."
)
@click.option(
    "-d",
    "--delete",
    "deletes",
    multiple=True,
    metavar="KEY",
    help="Remove an override (repeatable).",
)
@pass_context
def alter_config(
    ctx: Context, names: tuple[str, ...], sets: tuple[str, ...], deletes: tuple[str, ...]
) -> None:
    """Set or remove topic config overrides (IncrementalAlterConfigs)."""
    alter_configs(ctx, ResourceType.TOPIC, names, key_values(sets, "--set"), deletes)


def alter_configs(
    ctx: Context, kind: Any, names: Sequence[str], sets: dict[str, str], deletes: Sequence[str]
) -> None:
    if not sets and not deletes:
        raise click.UsageError("nothing to change: give --set KEY=VALUE or --delete KEY")
    resources = []
    for name in names:
        entries = [
            ConfigEntry(k, v, incremental_operation=AlterConfigOpType.SET) for k, v in sets.items()
        ]
        entries += [
            ConfigEntry(k, None, incremental_operation=AlterConfigOpType.DELETE) for k in deletes
        ]
        resources.append(ConfigResource(kind, name, incremental_configs=entries))
    futures = ctx.session.admin.incremental_alter_configs(
        resources, request_timeout=ctx.session.timeout
    )
    ctx.session.wait_all({r.name: f for r, f in futures.items()}, "altering")
    rows = [{"name": n, "set": sets, "deleted": list(deletes)} for n in names]
    if ctx.out.json:
        ctx.out.data(rows)
    else:
        changes = [f"{k}={v}" for k, v in sets.items()] + [f"-{k}" for k in deletes]
        ctx.out.table(("NAME", "CHANGES"), ((n, " ".join(changes)) for n in names))


@topic.command("add-partitions")
@click.argument("names", nargs=-1, required=True)
@click.option("-n", "--num", type=click.IntRange(min=1), help="Partitions to add.")
@click.option(
    "--to", "total", type=click.IntRange(min=1), help="The partition count to reach instead."
)
@pass_context
def add_partitions(
    ctx: Context, names: tuple[str, ...], num: int | None, total: int | None
) -> None:
    """Add partitions to topics (CreatePartitions)."""
    if (num is None) == (total is None):
        raise click.UsageError(
            "give exactly one of --num N (partitions to add) or --to N (the new count)"
        )
    session = ctx.session
    metadata = session.metadata()
    wanted: dict[str, int] = {}
    for name in names:
        meta = metadata.topics.get(name)
        if meta is None:
            raise CliError(f"topic {name}: UNKNOWN_TOPIC_OR_PART")
        wanted[name] = total if total is not None else len(meta.partitions) + (num or 0)
    futures = session.admin.create_partitions(
        [NewPartitions(n, c) for n, c in wanted.items()],
        operation_timeout=session.timeout, request_timeout=session.timeout,
    )  # fmt: skip
    session.wait_all(futures, "adding partitions to")
    _report(
        ctx, [{"topic": n, "partitions": c} for n, c in wanted.items()], ("topic", "partitions")
    )


@topic.command()
@click.argument("names", nargs=-1, required=True)
@pass_context
def delete(ctx: Context, names: tuple[str, ...]) -> None:
    """Delete topics."""
    session = ctx.session
    futures = session.admin.delete_topics(
        list(names), operation_timeout=session.timeout, request_timeout=session.timeout
    )
    session.wait_all(futures, "deleting")
    _report(ctx, [{"topic": n, "status": "deleted"} for n in names], ("topic", "status"))
