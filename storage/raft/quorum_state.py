"""The `quorum-state` file: a Raft replica's election state, as Kafka writes it.

Location: `<metadata.log.dir>/__cluster_metadata-0/quorum-state`. Layout: one line of UTF-8 JSON,
Kafka's QuorumStateData (wire/kafka-protocol/raft/QuorumStateData.json) at version 0 in its JSON
form plus the `data_version` key Kafka's FileQuorumStateStore adds::

    {"clusterId":"","leaderId":1,"leaderEpoch":5,"votedId":-1,"appliedOffset":0,
     "currentVoters":[{"voterId":1},{"voterId":2},{"voterId":3}],"data_version":0}

`leaderId`/`votedId` are -1 when unknown/none; `currentVoters` is the static voter set.

Crash recovery: written via `quorum-state.tmp`, fsync, rename over the file, fsync of the
directory (`strom.storage.durable.atomic_replace`), so a crash leaves the old or the new state,
never a mix; a leftover `.tmp` is ignored and overwritten by the next write. No file means a
fresh replica (epoch 0, no leader, no vote). A file that does not parse is damage that must not
be guessed around (a replica that forgets its vote could vote twice): `read_quorum_state` raises
`QuorumStateError` naming the file.
"""

from __future__ import annotations

import json
from pathlib import Path

from strom.storage import disk
from strom.storage.durable import atomic_replace
from strom.storage.raft.raft_store import QuorumState

FILE_NAME = "quorum-state"
DATA_VERSION = 0


class QuorumStateError(Exception):
    """The quorum-state file exists but cannot be read."""


def encode_quorum_state(state: QuorumState) -> bytes:
    document = {
        "clusterId": "",
        "leaderId": state.leader_id,
        "leaderEpoch": state.leader_epoch,
        "votedId": state.voted_id,
        "appliedOffset": 0,
        "currentVoters": [{"voterId": v} for v in sorted(state.voters)],
        "data_version": DATA_VERSION,
    }
    return json.dumps(document, separators=(",", ":")).encode()


def decode_quorum_state(data: bytes) -> QuorumState:
    """Parse the file's bytes; ValueError if they are not a quorum state."""
    document = json.loads(data)
    if not isinstance(document, dict):
        raise ValueError("not a JSON object")
    voters = document.get("currentVoters") or []
    return QuorumState(
        leader_epoch=int(document.get("leaderEpoch", -1)),
        leader_id=int(document.get("leaderId", -1)),
        voted_id=int(document.get("votedId", -1)),
        voters=frozenset(int(v["voterId"]) for v in voters),
    )


def read_quorum_state(directory: Path) -> QuorumState | None:
    """The stored state, or None if this replica has never written one."""
    path = directory / FILE_NAME
    try:
        data = disk.read_file(path)
    except FileNotFoundError:
        return None
    try:
        state = decode_quorum_state(data)
    except (ValueError, KeyError, TypeError) as exc:
        raise QuorumStateError(
            f"{path} is damaged ({exc}); restore it from a backup or reformat this node"
        ) from exc
    # Kafka writes epoch -1 before any election; Strom's epochs start at 0
    if state.leader_epoch < 0:
        state = QuorumState(0, state.leader_id, state.voted_id, state.voters)
    return state


def write_quorum_state(directory: Path, state: QuorumState) -> None:
    """Replace the file atomically and durably (see the module docstring)."""
    atomic_replace(directory / FILE_NAME, encode_quorum_state(state))
