"""Formatted storage: `meta.properties` in every directory, `bootstrap.checkpoint` beside them.

Kafka's `kafka-storage format` writes `meta.properties` into every log directory and the
metadata directory, and refuses to start on directories that belong to another cluster or
node. `strom format` does the same (`format_directories`). A single node (a one-voter quorum)
also formats itself on first start (`ensure_meta_properties`: cluster id from `cluster.id`,
else the one already in another of its directories, else a fresh one), so it needs no separate
step. A member of a multi-node quorum never does (`check_quorum_member`): a voter that lost its
storage would otherwise rejoin with no memory of its votes and an empty log, so it could vote
twice in an epoch or help elect a leader that lacks committed metadata.

`meta.properties`, as Kafka's v1 file: Java properties lines `version=1`, `cluster.id=`,
`node.id=`, `directory.id=` (each directory its own id, Kafka's Uuid string). Every
directory of a node carries the same cluster and node id; a node's directories disagreeing,
or disagreeing with `cluster.id`, stops start-up.

`bootstrap.checkpoint` (metadata directory only, written by `strom format` as Kafka does): the
feature levels the cluster starts with, as bytes the caller encodes
(`strom.coordinator.metadata.kraft_checkpoint.encode_bootstrap`). The controller reads it on
the first start, before the metadata log has any record.

A controller's metadata directory also gets its Raft state when formatted:
`__cluster_metadata-0/quorum-state` (`strom.storage.raft.quorum_state`) at epoch 0 with the
configured voters, what a replica that never voted holds. So a voter's metadata directory
with `meta.properties` but no quorum-state lost its Raft state after it was formatted: it is
refused at start, and `strom format` formats it again (a new directory id).

Crash safety: every file is replaced atomically and durably (strom.storage.durable): a crash
leaves the old file or the new one, and at most a `.tmp`/`.part` beside it, which is never
read and is overwritten by the next write. A directory whose `meta.properties` is missing is
unformatted: formatting writes its other files first and `meta.properties` last.
"""

from __future__ import annotations

import base64
import binascii
import uuid
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path

from strom.storage import disk
from strom.storage.durable import atomic_replace
from strom.storage.raft.quorum_state import FILE_NAME as QUORUM_STATE
from strom.storage.raft.quorum_state import write_quorum_state
from strom.storage.raft.raft_disk import LOG_DIR_NAME
from strom.storage.raft.raft_store import QuorumState

FILE_NAME = "meta.properties"
BOOTSTRAP_FILE = "bootstrap.checkpoint"
PART_SUFFIX = ".part"
"""KRaft's suffix for a checkpoint file being written."""


class FormatError(Exception):
    """Directories that are not formatted as this node needs; the message says what to do."""


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, unpadded (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def new_cluster_id(new_uuid: Callable[[], uuid.UUID] = uuid.uuid4) -> str:
    """A random Kafka Uuid string that does not start with '-', as Kafka's Uuid.randomUuid()
    draws again: command-line tools would take `-t -Px...` for an option."""
    while True:
        text = kafka_uuid_string(new_uuid())
        if not text.startswith("-") and text != kafka_uuid_string(uuid.UUID(int=0)):
            return text


def parse_kafka_uuid(text: str) -> uuid.UUID:
    """Kafka's Uuid.fromString; ValueError with Kafka's reason when `text` is not one."""
    if len(text) > 24:
        raise ValueError(
            f"Input string with prefix `{text[:24]}` is too long to be decoded as a base64 UUID"
        )
    try:
        raw = base64.urlsafe_b64decode(text + "=" * (-len(text) % 4))
    except (binascii.Error, ValueError) as exc:
        raise ValueError(f"Input string `{text}` is not valid base64") from exc
    if len(raw) != 16:
        raise ValueError(
            f"Input string `{text}` decoded as {len(raw)} bytes, which is not equal to the "
            "expected 16 bytes of a base64-encoded UUID"
        )
    return uuid.UUID(bytes=raw)


def read_meta_properties(directory: Path) -> dict[str, str] | None:
    """The key/value pairs of `meta.properties`, or None when there is none."""
    path = directory / FILE_NAME
    if not disk.exists(path):
        return None
    values: dict[str, str] = {}
    for line in disk.read_file(path).decode("utf-8").splitlines():
        text = line.strip()
        if text and not text.startswith(("#", "!")):
            key, _, value = text.partition("=")
            values[key.strip()] = value.strip()
    return values


def log_directory_ids(data_dirs: Iterable[str | Path]) -> list[uuid.UUID]:
    """The `directory.id` of each formatted data directory (BrokerRegistration's LogDirs):
    the controller takes a registration naming a directory of a still-registered incarnation
    as proof that the incarnation is gone, since only one process holds a directory's lock."""
    ids = []
    for directory in data_dirs:
        props = read_meta_properties(Path(directory))
        if props is not None and (text := props.get("directory.id")):
            ids.append(parse_kafka_uuid(text))
    return ids


def write_meta_properties(
    directory: Path, *, cluster_id: str, node_id: int, directory_id: uuid.UUID, by: str
) -> None:
    disk.makedirs(directory)
    body = (
        f"#Written by {by}\n"
        f"version=1\ncluster.id={cluster_id}\nnode.id={node_id}\n"
        f"directory.id={kafka_uuid_string(directory_id)}\n"
    )
    atomic_replace(directory / FILE_NAME, body.encode("utf-8"))


def _lost_raft_state(metadata_dir: Path) -> bool:
    """A formatted voter's metadata directory whose `__cluster_metadata-0` is gone or empty
    (one that holds files but no quorum-state is the single-node log of an older Strom, which
    formatting must not touch)."""
    log_dir = metadata_dir / LOG_DIR_NAME
    return not disk.is_dir(log_dir) or not disk.listdir(log_dir)


def _node_directories(data_dirs: Iterable[str | Path], metadata_dir: str | Path) -> list[Path]:
    """Every directory of the node, each once, sorted (Kafka's format order)."""
    return sorted({Path(d) for d in data_dirs} | {Path(metadata_dir)})


def _check_formatted(
    found: Mapping[Path, Mapping[str, str]], *, node_id: int, cluster_id: str | None
) -> str | None:
    """The cluster id the formatted directories agree on (None: none is formatted)."""
    agreed: tuple[Path, str] | None = None
    seen_ids: dict[str, Path] = {}
    for directory, props in found.items():
        stored = props.get("cluster.id", "")
        if not stored:
            raise FormatError(f"{directory / FILE_NAME} has no cluster.id; format it again")
        if cluster_id is not None and stored != cluster_id:
            raise FormatError(
                f"cluster.id {cluster_id} does not match {stored} stored in {directory}: the "
                f"directory belongs to another cluster; use cluster.id={stored} or other "
                "directories"
            )
        if agreed is not None and stored != agreed[1]:
            raise FormatError(
                f"{directory} belongs to cluster {stored} but {agreed[0]} to {agreed[1]}: "
                "a node's log.dirs and metadata.log.dir must belong to one cluster"
            )
        agreed = agreed or (directory, stored)
        if props.get("node.id", str(node_id)) != str(node_id):
            raise FormatError(
                f"node.id {node_id} does not match {props['node.id']} stored in {directory}: "
                f"use node.id={props['node.id']} or other directories"
            )
        directory_id = props.get("directory.id")
        if directory_id is not None:
            if directory_id in seen_ids:
                raise FormatError(
                    f"{directory} and {seen_ids[directory_id]} have the same directory.id "
                    f"{directory_id}: one is a copy of the other; format one of them again"
                )
            seen_ids[directory_id] = directory
    return None if agreed is None else agreed[1]


def check_quorum_member(metadata_dir: str | Path, *, voter: bool, cluster_id: str | None) -> None:
    """Start-up of a member of a multi-node quorum: its metadata directory must have been
    formatted by `strom format` and, for a voter, still hold its Raft state. FormatError
    saying what to run otherwise (see the module docstring for why)."""
    directory = Path(metadata_dir)
    props = read_meta_properties(directory)
    known = (props or {}).get("cluster.id") or cluster_id
    command = (
        f"`strom format --config <this node's configuration> --cluster-id {known or '<ID>'} "
        "--ignore-formatted`"
        + ("" if known else " (ID: the cluster.id in another node's meta.properties)")
    )
    if props is None:
        raise FormatError(
            f"{directory} is not formatted (no {FILE_NAME}), and a member of a multi-node "
            "quorum never formats itself: one that lost its storage must not rejoin unnoticed; "
            f"run {command} on this node first"
        )
    if voter and _lost_raft_state(directory):
        raise FormatError(
            f"{directory} is formatted but holds no Raft state "
            f"({LOG_DIR_NAME}/{QUORUM_STATE}): this voter lost its metadata log and votes, and "
            f"must not rejoin unnoticed; to rejoin it empty, run {command}"
        )


def ensure_meta_properties(
    data_dirs: Iterable[str | Path],
    metadata_dir: str | Path,
    *,
    node_id: int,
    cluster_id: str | None,
    new_uuid: Callable[[], uuid.UUID],
) -> str:
    """Start-up: check every directory's `meta.properties`, format the unformatted ones with
    the node's cluster id; returns it. FormatError (one line) when they disagree."""
    directories = _node_directories(data_dirs, metadata_dir)
    found = {d: p for d in directories if (p := read_meta_properties(d)) is not None}
    chosen = _check_formatted(found, node_id=node_id, cluster_id=cluster_id)
    chosen = chosen or cluster_id or new_cluster_id(new_uuid)
    for directory in directories:
        if directory not in found:
            write_meta_properties(
                directory,
                cluster_id=chosen,
                node_id=node_id,
                directory_id=new_uuid(),
                by="Strom on first start",
            )
    return chosen


def format_directories(
    data_dirs: Iterable[str | Path],
    metadata_dir: str | Path,
    *,
    cluster_id: str,
    node_id: int,
    new_uuid: Callable[[], uuid.UUID],
    ignore_formatted: bool,
    bootstrap: bytes,
    voters: frozenset[int] | None,
    metadata_directory_id: uuid.UUID | None = None,
) -> list[tuple[Path, str]]:
    """`kafka-storage format`: write `meta.properties` into every unformatted directory,
    `bootstrap` as `bootstrap.checkpoint` into the metadata directory and, on a controller
    (`voters`: the quorum's voter ids), its initial Raft state; returns (directory,
    description) for each one formatted, in order. FormatError when a directory is already
    formatted (unless `ignore_formatted`) or belongs to another cluster or node.
    `metadata_directory_id`: the metadata directory's id when `--initial-controllers` names it
    (KIP-853)."""
    try:
        parse_kafka_uuid(cluster_id)
    except ValueError as exc:
        raise FormatError(
            f"Cluster ID string {cluster_id} does not appear to be a valid UUID: {exc}"
        ) from exc
    if node_id < 0:
        raise FormatError("You must specify a valid non-negative node ID.")
    metadata = Path(metadata_dir)
    directories = _node_directories(data_dirs, metadata)
    found = {d: p for d in directories if (p := read_meta_properties(d)) is not None}
    _check_formatted(found, node_id=node_id, cluster_id=cluster_id)
    if voters is not None and metadata in found and _lost_raft_state(metadata):
        del found[metadata]  # a voter's directory that lost its Raft state: format it again
    if found and not ignore_formatted:
        raise FormatError(
            f"Log directory {next(iter(found))} is already formatted. Use --ignore-formatted "
            "to ignore this directory and format the others."
        )
    formatted = []
    for directory in directories:
        if directory in found:
            continue
        disk.makedirs(directory)
        directory_id = new_uuid()
        if directory == metadata:
            atomic_replace(directory / BOOTSTRAP_FILE, bootstrap, temp_suffix=PART_SUFFIX)
            if voters is not None:
                raft = directory / LOG_DIR_NAME
                disk.makedirs(raft)
                write_quorum_state(raft, QuorumState(voters=voters))
            directory_id = metadata_directory_id or directory_id
        write_meta_properties(
            directory,
            cluster_id=cluster_id,
            node_id=node_id,
            directory_id=directory_id,
            by="strom format",
        )
        kind = "metadata directory" if directory == metadata else "data directory"
        formatted.append((directory, kind))
    return formatted


def read_bootstrap(directory: Path) -> bytes | None:
    """The bytes of `bootstrap.checkpoint` (None when there is none)."""
    path = directory / BOOTSTRAP_FILE
    if not disk.exists(path):
        return None
    return disk.read_file(path)
