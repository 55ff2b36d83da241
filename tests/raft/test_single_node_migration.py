"""The single-node metadata log of older Strom versions becomes the one-voter quorum's Raft
state, once, crash-safely.

The input is `tests/controller/fixtures/single-node-log/`: a data directory written by Strom's
single node before it became a one-voter quorum (commit 1934506; how, in
`make_single_node_log.py.txt` beside it): topics `orders` (3 partitions, retention.ms) and
`late`, a topic created and deleted after the snapshot, broker and topic configs, a producer
id block, and a metadata snapshot at offset 12 with the log's tail after it.
compat_tests/durability/test_single_node_upgrade.py starts `strom serve` on it.
"""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from strom.broker.drivers.quorum_controller import _migrate_single_node_log
from strom.coordinator.metadata.image import BROKER_RESOURCE, MetadataImage
from strom.coordinator.metadata.raft_entries import decode_snapshot
from strom.coordinator.metadata.single_node_log import image_of
from strom.storage.raft import single_node_log
from strom.storage.raft.raft_disk import LOG_DIR_NAME, DiskRaftStore
from strom.storage.raft.raft_log import RaftLogDir

FIXTURE = Path(__file__).resolve().parents[1] / "controller" / "fixtures" / "single-node-log"
VOTERS = frozenset({1})


def _copy(tmp_path: Path) -> Path:
    data = tmp_path / "data"
    shutil.copytree(FIXTURE, data)
    return data


def _old_image(data: Path) -> MetadataImage:
    found = single_node_log.read(data)
    assert found is not None
    return image_of(found.snapshot, found.batches)


def _raft_image(data: Path) -> MetadataImage:
    recovered = DiskRaftStore(data, VOTERS).load()
    assert recovered.snapshot is not None
    assert recovered.entries == []
    return decode_snapshot(recovered.snapshot_data)[0]


def test_the_fixture_holds_what_the_old_node_wrote(tmp_path: Path) -> None:
    image = _old_image(_copy(tmp_path))
    assert image.topic_names() == ["__consumer_offsets", "late", "orders"]
    orders = image.topic("orders")
    assert orders is not None
    assert orders.num_partitions == 3
    assert image.topic_config_overrides("orders") == {
        "retention.ms": "123456789",
        "segment.ms": "3600000",
    }
    assert image.configs[(BROKER_RESOURCE, "1")] == {"log.retention.ms": "604800001"}
    assert image.next_producer_id == 1000
    assert image.provenance.offset == 22


def test_the_old_log_becomes_the_snapshot_of_a_one_voter_raft_log(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    before = _old_image(data)
    _migrate_single_node_log(data, 1)
    assert _raft_image(data) == before
    recovered = DiskRaftStore(data, VOTERS).load()
    assert recovered.snapshot is not None
    assert recovered.snapshot.end_offset == before.provenance.offset + 1
    assert recovered.quorum.leader_epoch == before.provenance.epoch
    assert recovered.quorum.voters == VOTERS
    assert single_node_log.read(data) is None  # once
    assert sorted(p.name for p in data.iterdir() if p.name.startswith(LOG_DIR_NAME)) == [
        LOG_DIR_NAME
    ]


class Crash(Exception):
    """The process dies here."""


@pytest.mark.parametrize(
    "where", ["staging", "before the old log moves", "between the renames", "before the cleanup"]
)
def test_a_crash_during_the_migration_is_finished_on_the_next_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    data = _copy(tmp_path)
    before = _old_image(data)
    renames: list[Path] = []
    real_rename, real_rmtree = Path.rename, shutil.rmtree

    def rename(self: Path, target: Path) -> Path:
        if where == "before the old log moves" or (where == "between the renames" and renames):
            raise Crash
        renames.append(self)
        return real_rename(self, target)

    def rmtree(path: Path, *args: object, **kwargs: object) -> None:
        if where == "before the cleanup" and Path(path).name.endswith(".single-node"):
            raise Crash
        real_rmtree(path, *args, **kwargs)  # type: ignore[arg-type]

    def write_snapshot(*args: object) -> None:
        raise Crash

    monkeypatch.setattr(Path, "rename", rename)
    monkeypatch.setattr(shutil, "rmtree", rmtree)
    if where == "staging":
        monkeypatch.setattr(RaftLogDir, "write_snapshot", write_snapshot)
    with pytest.raises(Crash):
        _migrate_single_node_log(data, 1)
    monkeypatch.undo()

    _migrate_single_node_log(data, 1)  # the next start
    assert _raft_image(data) == before
    assert single_node_log.read(data) is None
    assert sorted(p.name for p in data.iterdir() if p.name.startswith(LOG_DIR_NAME)) == [
        LOG_DIR_NAME
    ]


def test_a_raft_log_is_never_taken_for_an_old_one(tmp_path: Path) -> None:
    data = _copy(tmp_path)
    _migrate_single_node_log(data, 1)
    store = DiskRaftStore(data, VOTERS)
    store.load()
    assert not single_node_log.holds_single_node_log(data)
    (data / LOG_DIR_NAME / "quorum-state").unlink()  # a log without it is an old one
    assert single_node_log.holds_single_node_log(data)
