"""LogManager: directories, create/delete, checkpoints, markers, flush policy; LogConfig."""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest

from strom.config import BrokerConfig, effective_topic_config
from strom.storage import LogConfig, LogManager, disk
from strom.storage.log.checkpoint import read_offsets
from strom.storage.log.datadir import (
    CLEAN_SHUTDOWN_FILE,
    HIGH_WATERMARK_FILE,
    LOG_START_FILE,
    RECOVERY_POINT_FILE,
    parse_log_dir_name,
)
from strom.storage.log.partition import PartitionLog
from tests.log.helpers import T0, Clock, batch, decode_all, get_log, manager, read_everything


def test_create_is_idempotent_and_spreads_over_dirs(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = manager(dirs)
    first = m.create("t", 0, LogConfig())
    assert m.create("t", 0, LogConfig()) is first
    m.create("t", 1, LogConfig())
    m.create("my-topic", 2, LogConfig())
    assert sorted(p.name for p in dirs[0].iterdir()) == ["my-topic-2", "t-0"]
    assert sorted(p.name for p in dirs[1].iterdir()) == ["t-1"]
    assert m.get("my-topic", 2) is not None
    assert m.get("t", 9) is None
    assert m.dir_of("t", 1) == dirs[1]
    assert sorted(p.name for p in m.partitions()) == ["my-topic-2", "t-0", "t-1"]


def test_close_writes_checkpoints_and_marker_then_load_restores(tmp_path: Path) -> None:
    m = manager([tmp_path])
    a = m.create("t", 0, LogConfig())
    b = m.create("u-v", 3, LogConfig())
    for i in range(4):
        a.append(batch([b"a%d" % i]), 0, T0)
    b.append(batch([b"b"]), 0, T0)
    a.delete_records_before(2)
    m.close()
    assert (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    assert read_offsets(tmp_path / RECOVERY_POINT_FILE) == {("t", 0): 4, ("u-v", 3): 1}
    assert read_offsets(tmp_path / LOG_START_FILE) == {("t", 0): 2, ("u-v", 3): 0}
    assert (tmp_path / RECOVERY_POINT_FILE).read_text() == "0\n2\nt 0 4\nu-v 3 1\n"
    m2 = manager([tmp_path])
    assert not (tmp_path / CLEAN_SHUTDOWN_FILE).exists()
    a2 = m2.get("t", 0)
    assert a2 is not None
    assert a2.log_start_offset == 2
    assert a2.recovery_point == 4
    assert read_everything(a2) == [(2, b"a2"), (3, b"a3")]


def test_the_marker_carries_the_broker_epoch_to_the_next_start(tmp_path: Path) -> None:
    dirs = [tmp_path / "a", tmp_path / "b"]
    m = manager(dirs)
    assert m.previous_broker_epoch == -1  # a first start: no marker
    m.broker_epoch = 42
    m.close()
    assert (dirs[0] / CLEAN_SHUTDOWN_FILE).read_text() == '{"version":0,"brokerEpoch":42}'
    m2 = manager(dirs)
    assert m2.previous_broker_epoch == 42
    m2.close()  # never registered: -1
    assert manager(dirs).previous_broker_epoch == -1
    m3 = manager(dirs)  # the previous one was not closed: no markers
    assert m3.previous_broker_epoch == -1
    m3.broker_epoch = 7
    m3.close()
    (dirs[1] / CLEAN_SHUTDOWN_FILE).unlink()  # one directory without its marker: unclean
    assert manager(dirs).previous_broker_epoch == -1


def test_delete_renames_then_removes(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    log.append(batch(), 0, T0)
    result = log.read(0, 100)
    m.delete("t", 0)
    assert m.get("t", 0) is None
    m.wait_for_deletions()
    assert list(tmp_path.iterdir()) == []
    m.delete("t", 0)  # idempotent
    assert m.create("t", 0, LogConfig()).log_end_offset == 0
    del result


def test_read_result_outlives_segment_deletion(tmp_path: Path) -> None:
    m = manager([tmp_path], config=LogConfig(segment_bytes=200))
    log = m.create("t", 0, LogConfig(segment_bytes=200))
    for _i in range(6):
        log.append(batch([b"x" * 60]), 0, T0)
    pending = log.read(0, 100)
    expected = pending.read_bytes()
    log.delete_records_before(5)
    assert not pending.path or not pending.path.exists()
    assert pending.read_bytes() == expected  # the fd is still open: sendfile would still work


def test_deleted_directories_are_removed_off_the_calling_thread(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """An rmtree of a big log must not hold the event loop: a deleter thread does it."""
    removers: list[threading.Thread] = []
    rmtree = disk.current().rmtree

    def spy(path: Path) -> None:
        removers.append(threading.current_thread())
        rmtree(path)

    monkeypatch.setattr(disk.current(), "rmtree", spy)
    m = manager([tmp_path])
    m.create("t", 0, LogConfig()).append(batch(), 0, T0)
    m.delete("t", 0)
    m.wait_for_deletions()
    assert removers
    assert all(t is not threading.current_thread() for t in removers)
    assert list(tmp_path.iterdir()) == []


def test_a_new_partition_dir_is_made_durable_by_its_first_flush(tmp_path: Path) -> None:
    """No fsync of the data dir at creation (the event loop): the first flush does it."""
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    assert log.parent_unsynced
    log.append(batch(), 0, T0)
    log.flush()
    assert not _parent_unsynced(log)
    m.close()
    assert not _parent_unsynced(get_log(manager([tmp_path])))  # an existing dir: nothing owed


def _parent_unsynced(log: PartitionLog) -> bool:
    """(A call, so that mypy does not carry the narrowed attribute.)"""
    return log.parent_unsynced


def test_flush_due_policies(tmp_path: Path) -> None:
    clock = Clock()
    m = manager([tmp_path], clock)
    by_count = m.create("count", 0, LogConfig(flush_messages=3))
    by_time = m.create("time", 0, LogConfig(flush_ms=1000))
    never = m.create("never", 0, LogConfig(segment_bytes=200))
    assert m.flush_due(T0) == []
    for log in (by_count, by_time, never):
        log.append(batch([b"a", b"b"]), 0, T0)
    assert m.flush_due(T0) == []
    by_count.append(batch(), 0, T0)
    assert m.flush_due(T0) == [by_count]
    assert set(m.flush_due(T0 + 1000)) == {by_count, by_time}
    never.append(batch([b"x" * 80]), 0, T0)  # rolls: Kafka flushes the old segment soon
    assert never in m.flush_due(T0)
    for log in m.flush_due(T0 + 1000):
        worker = threading.Thread(target=log.flush)  # flush is meant for a worker thread
        worker.start()
        worker.join()
    assert m.flush_due(T0 + 10**9) == []
    assert by_count.recovery_point == 3
    assert never.recovery_point == never.log_end_offset


def test_flush_due_looks_only_at_logs_that_asked(tmp_path: Path) -> None:
    """The flush loop runs every 50 ms: its cost must follow the traffic, not the partitions."""
    m = manager([tmp_path])
    logs = [m.create("t", p, LogConfig()) for p in range(50)]
    for log in logs:
        log.append(batch(), 0, T0)
    assert m.flush_due(T0 + 10**9) == []
    assert len(m._flush_candidates) == 0  # default policies: nothing to watch until a roll
    timed = m.create("timed", 0, LogConfig())
    timed.append(batch(), 0, T0)
    timed.update_config(LogConfig(flush_ms=10))  # a dynamic config change takes effect
    assert m.flush_due(T0 + 10**9) == [timed]
    timed.flush()
    assert m.flush_due(T0 + 10**9) == []
    assert len(m._flush_candidates) == 0


def test_load_logs_progress_and_skips_foreign_entries(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    m = manager([tmp_path])
    m.create("t", 0, LogConfig()).append(batch(), 0, T0)
    m.close()
    (tmp_path / "not_a_partition").mkdir()
    (tmp_path / "t-x").mkdir()
    with caplog.at_level(logging.INFO, logger="strom.storage"):
        m2 = manager([tmp_path])
    assert [p.name for p in m2.partitions()] == ["t-0"]
    assert "loading 1 logs" in caplog.text
    assert "clean shutdown" in caplog.text


def test_parse_log_dir_name() -> None:
    assert parse_log_dir_name("a-b-c-12") == ("a-b-c", 12)
    assert parse_log_dir_name("t-0.abc-delete") is None
    assert parse_log_dir_name("t-") is None
    assert parse_log_dir_name("-1") is None


def test_manager_needs_a_dir() -> None:
    with pytest.raises(ValueError, match="at least one"):
        LogManager([], Clock())


def test_log_config_from_topic_config() -> None:
    assert LogConfig.from_topic_config(effective_topic_config(BrokerConfig(), {})) == LogConfig()
    broker = BrokerConfig.from_properties({"log.roll.hours": "2", "log.segment.bytes": "5000"})
    config = LogConfig.for_topic(
        broker, {"message.timestamp.type": "LogAppendTime", "cleanup.policy": "compact,delete"}
    )
    assert config.segment_ms == 7_200_000
    assert config.segment_bytes == 5000
    assert config.log_append_time
    assert config.compact
    assert config.delete
    with pytest.raises(ValueError, match="timestamp"):
        LogConfig(message_timestamp_type="Nope")


def test_flush_in_worker_thread_while_appending(tmp_path: Path) -> None:
    """flush() only holds the lock to copy fds, so appends and rolls race it safely."""
    config = LogConfig(segment_bytes=2000)
    m = manager([tmp_path], config=config)
    log = m.create("t", 0, config)
    stop = threading.Event()
    errors: list[BaseException] = []

    def flusher() -> None:
        try:
            while not stop.is_set():
                log.flush()
        except BaseException as exc:  # pragma: no cover - reported below
            errors.append(exc)

    worker = threading.Thread(target=flusher)
    worker.start()
    try:
        for i in range(300):
            log.append(batch([b"v%d" % i] * 3), 0, T0)
            if i % 50 == 49:
                log.delete_records_before(i)
    finally:
        stop.set()
        worker.join()
    assert errors == []
    log.flush()
    assert log.recovery_point == log.log_end_offset == 900
    m.close()
    assert get_log(manager([tmp_path], config=config)).log_end_offset == 900


def test_read_result_outlives_topic_deletion(tmp_path: Path) -> None:
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    log.append(batch([b"still here"]), 0, T0)
    pending = log.read(0, 100)
    m.delete("t", 0)
    assert decode_all(pending.read_bytes()) == [(0, b"still here")]
    other = m.create("u", 0, LogConfig())
    other.append(batch([b"other"]), 0, T0)
    assert decode_all(pending.read_bytes()) == [(0, b"still here")]


def test_a_replicated_log_reopens_at_its_checkpointed_high_watermark(tmp_path: Path) -> None:
    """replication-offset-checkpoint: a log past its high watermark may hold a tail no other
    replica has, so a replicated log restarts with the checkpointed high watermark, not its
    end (`restore_high_watermark`, called when the broker gives the log its first role)."""
    m = manager([tmp_path])
    log = m.create("t", 0, LogConfig())
    log.high_watermark_follows_appends = False
    for i in range(4):
        log.append(batch([b"a%d" % i]), 0, T0)
    log.update_high_watermark(3)
    log.restore_high_watermark()  # a log created in this run: nothing to restore
    assert log.high_watermark == 3
    m.close()
    assert read_offsets(tmp_path / HIGH_WATERMARK_FILE) == {("t", 0): 3}
    reopened = get_log(manager([tmp_path]), "t", 0)
    assert reopened.high_watermark == 4  # single-replica reading: everything appended
    reopened.restore_high_watermark()
    assert reopened.high_watermark == 3
    reopened.update_high_watermark(4)
    reopened.restore_high_watermark()  # once only
    assert reopened.high_watermark == 4
