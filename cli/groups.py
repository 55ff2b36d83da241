"""`strom group`: list, describe (with lag), seek (reset offsets), delete."""

from __future__ import annotations

from typing import Any

import click
from confluent_kafka import ConsumerGroupTopicPartitions, TopicPartition
from confluent_kafka.admin import OffsetSpec

from strom.cli.context import Context, pass_context
from strom.cli.session import CliError, Session


@click.group()
def group() -> None:
    """List, describe, seek and delete consumer groups."""


def _state(value: Any) -> str:
    name = getattr(value, "name", str(value))
    return {"PREPARING_REBALANCING": "PreparingRebalance", "COMPLETING_REBALANCING":
            "CompletingRebalance"}.get(name, name.title().replace("_", ""))  # fmt: skip


@group.command("list")
@pass_context
def list_groups(ctx: Context) -> None:
    """List consumer groups and their states."""
    result = ctx.session.wait(
        ctx.session.admin.list_consumer_groups(request_timeout=ctx.session.timeout),
        "listing groups",
    )
    rows = sorted(
        ({"group": g.group_id, "state": _state(g.state)} for g in result.valid),
        key=lambda r: r["group"],
    )
    if ctx.out.json:
        ctx.out.data(rows)
    else:
        ctx.out.table(("GROUP", "STATE"), ((r["group"], r["state"]) for r in rows))


def end_offsets(
    session: Session, partitions: list[TopicPartition], spec: Any
) -> dict[tuple[str, int], int]:
    if not partitions:
        return {}
    futures = session.admin.list_offsets(
        {TopicPartition(tp.topic, tp.partition): spec for tp in partitions},
        request_timeout=session.timeout,
    )
    return {
        (tp.topic, tp.partition): session.wait(f, f"offsets of {tp.topic}").offset
        for tp, f in futures.items()
    }


def committed(session: Session, group_id: str) -> list[TopicPartition]:
    futures = session.admin.list_consumer_group_offsets([ConsumerGroupTopicPartitions(group_id)])
    result = session.wait(futures[group_id], f"offsets of group {group_id}")
    return [tp for tp in (result.topic_partitions or []) if tp.offset >= 0]


def describe_group_data(session: Session, group_id: str) -> dict[str, Any]:
    description = session.wait(
        session.admin.describe_consumer_groups([group_id], request_timeout=session.timeout)[
            group_id
        ],
        f"describing group {group_id}",
    )
    owners: dict[tuple[str, int], Any] = {}
    members = []
    for member in description.members:
        assigned = list(member.assignment.topic_partitions) if member.assignment else []
        for tp in assigned:
            owners[tp.topic, tp.partition] = member
        members.append({
            "member_id": member.member_id, "client_id": member.client_id, "host": member.host,
            "partitions": [f"{tp.topic}-{tp.partition}" for tp in assigned],
        })  # fmt: skip
    offsets = committed(session, group_id)
    ends = end_offsets(session, offsets, OffsetSpec.latest())
    partitions = []
    for tp in sorted(offsets, key=lambda t: (t.topic, t.partition)):
        end = ends.get((tp.topic, tp.partition))
        owner = owners.get((tp.topic, tp.partition))
        partitions.append({
            "topic": tp.topic, "partition": tp.partition, "committed": tp.offset,
            "log_end_offset": end, "lag": None if end is None else max(0, end - tp.offset),
            "member_id": owner.member_id if owner else None,
            "client_id": owner.client_id if owner else None,
        })  # fmt: skip
    coordinator = description.coordinator
    return {
        "group": group_id,
        "state": _state(description.state),
        "protocol": description.partition_assignor,
        "coordinator": coordinator.id if coordinator is not None else None,
        "members": members,
        "partitions": partitions,
        "total_lag": sum(p["lag"] or 0 for p in partitions),
    }


@group.command()
@click.argument("groups", nargs=-1, required=True)
@pass_context
def describe(ctx: Context, groups: tuple[str, ...]) -> None:
    """State, members, committed offsets and lag per partition."""
    with ctx.out.progress("describing groups", len(groups)) as advance:
        described = []
        for group_id in groups:
            described.append(describe_group_data(ctx.session, group_id))
            advance()
    if ctx.out.json:
        ctx.out.data(described if len(described) > 1 else described[0])
        return
    for data in described:
        ctx.out.pairs([
            ("GROUP", data["group"]), ("STATE", data["state"]),
            ("COORDINATOR", data["coordinator"]), ("MEMBERS", len(data["members"])),
            ("TOTAL-LAG", data["total_lag"]),
        ])  # fmt: skip
        ctx.out.table(
            ("TOPIC", "PARTITION", "CURRENT-OFFSET", "LOG-END-OFFSET", "LAG", "MEMBER-ID", "CLIENT-ID"),
            ((p["topic"], p["partition"], p["committed"], p["log_end_offset"], p["lag"],
              p["member_id"], p["client_id"]) for p in data["partitions"]),
            title="",
        )  # fmt: skip


def _targets(session: Session, group_id: str, topics: tuple[str, ...]) -> list[TopicPartition]:
    if not topics:
        found = committed(session, group_id)
        if not found:
            raise CliError(
                f"group {group_id} has no committed offsets: name the topics with --topic"
            )
        return [TopicPartition(tp.topic, tp.partition) for tp in found]
    metadata = session.metadata()
    out = []
    for name in topics:
        topic, _, only = name.partition(":")
        meta = metadata.topics.get(topic)
        if meta is None or meta.error is not None:
            raise CliError(f"topic {topic}: UNKNOWN_TOPIC_OR_PART")
        wanted = {int(p) for p in only.split(",")} if only else set(meta.partitions)
        out += [TopicPartition(topic, p) for p in sorted(wanted)]
    return out


@group.command()
@click.argument("group_id")
@click.option("--to", "target", required=True, metavar="start|end|OFFSET|@TIMESTAMP_MS",
              help="Where to: the earliest or latest offsets, an offset, or the first offset at "
              "or after a timestamp (ms).")  # fmt: skip
@click.option("-t", "--topic", "topics", multiple=True, metavar="TOPIC[:P,P...]",
              help="Topics (and partitions) to seek; default: those the group has offsets for.")  # fmt: skip
@click.option("--dry-run", is_flag=True, help="Show the new offsets without committing them.")
@pass_context
def seek(ctx: Context, group_id: str, target: str, topics: tuple[str, ...], dry_run: bool) -> None:
    """Reset a group's committed offsets (the group must have no active members)."""
    session = ctx.session
    partitions = _targets(session, group_id, topics)
    if target in ("start", "earliest", "end", "latest") or target.startswith("@"):
        if target.startswith("@"):
            try:
                spec = OffsetSpec.for_timestamp(int(target[1:]))
            except ValueError:
                raise click.BadParameter(f"bad timestamp {target!r}", param_hint="--to") from None
        else:
            spec = OffsetSpec.earliest() if target in ("start", "earliest") else OffsetSpec.latest()
        resolved = end_offsets(session, partitions, spec)
        if target.startswith("@"):  # no offset at or after it: the end, as kafka-consumer-groups
            latest = end_offsets(
                session,
                [tp for tp in partitions if resolved.get((tp.topic, tp.partition), -1) < 0],
                OffsetSpec.latest(),
            )
            resolved.update(latest)
        new = dict(resolved)
    else:
        try:
            offset = int(target)
        except ValueError:
            raise click.BadParameter(
                f"expected start, end, an offset or @timestamp, got {target!r}", param_hint="--to"
            ) from None
        new = {(tp.topic, tp.partition): offset for tp in partitions}
    rows = [{"topic": t, "partition": p, "offset": o} for (t, p), o in sorted(new.items())]
    if not dry_run:
        request = ConsumerGroupTopicPartitions(
            group_id, [TopicPartition(t, p, o) for (t, p), o in sorted(new.items())]
        )
        result = session.wait(
            session.admin.alter_consumer_group_offsets([request], request_timeout=session.timeout)[
                group_id
            ],
            f"seeking group {group_id}",
        )
        failed = [tp for tp in (result.topic_partitions or []) if tp.error is not None]
        if failed:
            first = failed[0]
            raise CliError(
                f"seeking group {group_id}: {first.topic}-{first.partition}: {first.error.name()}"
            )
    if ctx.out.json:
        ctx.out.data({"group": group_id, "dry_run": dry_run, "offsets": rows})
    else:
        ctx.out.table(
            ("TOPIC", "PARTITION", "NEW-OFFSET"),
            ((r["topic"], r["partition"], r["offset"]) for r in rows),
        )


@group.command()
@click.argument("groups", nargs=-1, required=True)
@pass_context
def delete(ctx: Context, groups: tuple[str, ...]) -> None:
    """Delete groups (they must have no active members)."""
    session = ctx.session
    futures = session.admin.delete_consumer_groups(list(groups), request_timeout=session.timeout)
    session.wait_all(futures, "deleting group")
    if ctx.out.json:
        ctx.out.data([{"group": g, "status": "deleted"} for g in groups])
    else:
        ctx.out.table(("GROUP", "STATUS"), ((g, "deleted") for g in groups))
