"""`strom cluster`: info, health, quorum."""

from __future__ import annotations

import time
from typing import Any

import click

from strom.cli.context import Context, pass_context
from strom.cli.quorum import describe_quorum, error_name
from strom.cli.session import EXIT_FAILED, CliError


@click.group()
def cluster() -> None:
    """The cluster's id, brokers, health and controller quorum."""


@cluster.command()
@pass_context
def info(ctx: Context) -> None:
    """Cluster id, active controller and brokers."""
    session = ctx.session
    described = session.wait(
        session.admin.describe_cluster(request_timeout=session.timeout), "describing the cluster"
    )
    controller = described.controller.id if described.controller is not None else None
    brokers = sorted(
        ({"id": n.id, "host": n.host, "port": n.port, "rack": n.rack} for n in described.nodes),
        key=lambda b: b["id"],
    )
    data = {"cluster_id": described.cluster_id, "controller": controller, "brokers": brokers}
    if ctx.out.json:
        ctx.out.data(data)
        return
    ctx.out.pairs([("CLUSTER", described.cluster_id), ("CONTROLLER", controller)])
    ctx.out.table(
        ("ID", "HOST", "PORT", "RACK"),
        ((f"{b['id']}*" if b["id"] == controller else b["id"], b["host"], b["port"], b["rack"])
         for b in brokers),
        title="",
    )  # fmt: skip


def health_data(ctx: Context) -> dict[str, Any]:
    metadata = ctx.session.metadata()
    live = sorted(metadata.brokers)
    leaderless, under_replicated = [], []
    referenced: set[int] = set()
    for name, topic in sorted(metadata.topics.items()):
        for p in topic.partitions.values():
            referenced.update(p.replicas)
            if p.leader < 0:
                leaderless.append(f"{name}-{p.id}")
            elif len(p.isrs) < len(p.replicas):
                under_replicated.append(f"{name}-{p.id}")
    down = sorted(referenced - set(live))
    healthy = not leaderless and not under_replicated and not down and metadata.controller_id >= 0
    return {
        "healthy": healthy,
        "controller": metadata.controller_id if metadata.controller_id >= 0 else None,
        "brokers": live,
        "down_brokers": down,
        "leaderless_partitions": leaderless,
        "under_replicated_partitions": under_replicated,
    }


@cluster.command()
@click.option(
    "--watch", is_flag=True, help="Check again every second until healthy (or --timeout)."
)
@pass_context
def health(ctx: Context, watch: bool) -> None:
    """Healthy means: a controller, no broker down, every partition led and fully in sync.
    Exit code 1 when unhealthy."""
    deadline = time.monotonic() + ctx.session.timeout
    data = health_data(ctx)
    while watch and not data["healthy"] and time.monotonic() < deadline:
        time.sleep(1)
        data = health_data(ctx)
    if ctx.out.json:
        ctx.out.data(data)
    else:
        ctx.out.pairs([
            ("HEALTHY", data["healthy"]),
            ("CONTROLLER", data["controller"]),
            ("BROKERS", ",".join(map(str, data["brokers"])) or None),
            ("DOWN BROKERS", ",".join(map(str, data["down_brokers"])) or None),
            ("LEADERLESS PARTITIONS", _few(data["leaderless_partitions"])),
            ("UNDER-REPLICATED PARTITIONS", _few(data["under_replicated_partitions"])),
        ])  # fmt: skip
    if not data["healthy"]:
        if ctx.out.json:  # the JSON says why; no error line, only the exit code
            raise click.exceptions.Exit(EXIT_FAILED)
        raise CliError("the cluster is not healthy", EXIT_FAILED)


def _few(items: list[str], shown: int = 10) -> str | None:
    if not items:
        return None
    more = f" (+{len(items) - shown} more)" if len(items) > shown else ""
    return ",".join(items[:shown]) + more


@cluster.command()
@pass_context
def quorum(ctx: Context) -> None:
    """The KRaft controller quorum: leader, epoch, high watermark, each voter's lag."""
    response = describe_quorum(ctx.session.bootstrap, ctx.session.timeout)
    if response.error_code:
        raise CliError(f"DescribeQuorum: {error_name(response.error_code)}")
    (topic,) = response.topics
    (partition,) = topic.partitions
    if partition.error_code:
        raise CliError(f"DescribeQuorum: {error_name(partition.error_code)}")
    now = int(time.time() * 1000)

    def replicas(states: list[Any], role: str) -> list[dict[str, Any]]:
        return [{
            "id": r.replica_id, "role": role, "log_end_offset": r.log_end_offset,
            "lag": max(0, partition.high_watermark - r.log_end_offset),
            "last_fetch_ms_ago": now - r.last_fetch_timestamp if r.last_fetch_timestamp >= 0 else None,
            "last_caught_up_ms_ago": now - r.last_caught_up_timestamp if r.last_caught_up_timestamp >= 0 else None,
        } for r in states]  # fmt: skip

    members = replicas(partition.current_voters, "voter") + replicas(
        partition.observers, "observer"
    )
    for member in members:
        if member["id"] == partition.leader_id:
            member["role"] = "leader"
    data = {
        "leader": partition.leader_id, "epoch": partition.leader_epoch,
        "high_watermark": partition.high_watermark, "replicas": members,
    }  # fmt: skip
    if ctx.out.json:
        ctx.out.data(data)
        return
    ctx.out.pairs([("LEADER", partition.leader_id), ("EPOCH", partition.leader_epoch),
                   ("HIGH WATERMARK", partition.high_watermark)])  # fmt: skip
    ctx.out.table(
        ("ID", "ROLE", "LOG-END-OFFSET", "LAG", "LAST-FETCH", "LAST-CAUGHT-UP"),
        ((m["id"], m["role"], m["log_end_offset"], m["lag"], _ago(m["last_fetch_ms_ago"]),
          _ago(m["last_caught_up_ms_ago"])) for m in members),
        title="",
    )  # fmt: skip


def _ago(ms: int | None) -> str | None:
    return None if ms is None else f"{ms} ms ago"
