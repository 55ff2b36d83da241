"""`meta.properties` in the metadata directory: which cluster and node it belongs to.

Kafka writes this file when storage is formatted and refuses to start on a
directory formatted for another cluster or node; Strom formats on first start
instead (cluster id from `cluster.id`, else a fresh one). Format, as Kafka's
v1 file: Java properties lines `version=1`, `cluster.id=`, `node.id=`,
`directory.id=`. Replaced atomically and durably (strom.storage.durable): a crash
leaves the old file or the new one, and at most a `meta.properties.tmp` beside it,
which is never read and is overwritten by the next write.
"""

from __future__ import annotations

import base64
import uuid
from collections.abc import Callable
from pathlib import Path

from strom.coordinator.metadata.records import MetadataError
from strom.storage.durable import atomic_replace

FILE_NAME = "meta.properties"


def kafka_uuid_string(value: uuid.UUID) -> str:
    """Kafka's Uuid.toString(): URL-safe base64 of the 16 bytes, unpadded (22 chars)."""
    return base64.urlsafe_b64encode(value.bytes).decode("ascii").rstrip("=")


def read_meta_properties(directory: Path) -> dict[str, str] | None:
    """The key/value pairs of `meta.properties`, or None when there is none."""
    path = directory / FILE_NAME
    if not path.exists():
        return None
    values: dict[str, str] = {}
    for line in path.read_text("utf-8").splitlines():
        text = line.strip()
        if text and not text.startswith(("#", "!")):
            key, _, value = text.partition("=")
            values[key.strip()] = value.strip()
    return values


def ensure_meta_properties(
    directory: Path, *, node_id: int, cluster_id: str | None, new_uuid: Callable[[], uuid.UUID]
) -> str:
    """Check or create `meta.properties`; returns the directory's cluster id.

    Raises MetadataError when the directory belongs to another node or cluster.
    """
    found = read_meta_properties(directory)
    if found is not None:
        stored_cluster = found.get("cluster.id", "")
        if not stored_cluster:
            raise MetadataError(f"{directory / FILE_NAME} has no cluster.id")
        if cluster_id is not None and cluster_id != stored_cluster:
            raise MetadataError(
                f"cluster.id {cluster_id} does not match {stored_cluster} stored in {directory}"
            )
        if found.get("node.id", str(node_id)) != str(node_id):
            raise MetadataError(
                f"node.id {node_id} does not match {found['node.id']} stored in {directory}"
            )
        return stored_cluster
    chosen = cluster_id or kafka_uuid_string(new_uuid())
    directory.mkdir(parents=True, exist_ok=True)
    body = (
        "#Written by Strom on first start\n"
        f"version=1\ncluster.id={chosen}\nnode.id={node_id}\n"
        f"directory.id={kafka_uuid_string(new_uuid())}\n"
    )
    atomic_replace(directory / FILE_NAME, body.encode("utf-8"))
    return chosen
