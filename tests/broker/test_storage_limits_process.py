"""Real resource exhaustion against a `strom serve` child: its open-files limit lowered
with prlimit(1) while it runs, and its data on a tiny tmpfs that fills up."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest
import trio

from strom.broker.testing.client import KafkaClient
from strom.broker.testing.embedded import BrokerProcess
from strom.wire.errors import ErrorCode
from tests.broker.test_create_topics import create, topic
from tests.broker.test_produce_helpers import batch, produce
from tests.broker.test_storage_failures import metadata, partition_states
from tests.tinyfs import fill, tiny_filesystem

pytestmark = pytest.mark.trio


def _set_soft_nofile(pid: int, soft: int) -> None:
    """Set a running process's soft open-files limit (the hard one stays: raising it back
    would need CAP_SYS_RESOURCE)."""
    if shutil.which("prlimit") is None:
        pytest.fail("prlimit (util-linux) is needed to lower a running broker's file limit")
    subprocess.run(["prlimit", f"--pid={pid}", f"--nofile={soft}:"], check=True)


def _soft_nofile(pid: int) -> int:
    for line in Path(f"/proc/{pid}/limits").read_text().splitlines():
        if line.startswith("Max open files"):
            return int(line.split()[3])
    raise AssertionError("no open-files limit in /proc/<pid>/limits")


def _open_fds(pid: int) -> int:
    return len(os.listdir(f"/proc/{pid}/fd"))


async def _output_lines(broker: BrokerProcess, text: str) -> list[str]:
    """The broker's output lines holding `text`, once there is one: a thread drains the
    child's pipe, so a line logged before an answer may reach `output` after it."""
    for _ in range(1000):
        found = [line for line in broker.output if text in line]
        if found:
            return found
        await trio.sleep(0.01)
    raise AssertionError(f"no output line holds {text!r}")


async def test_partitions_beyond_the_file_limit_are_offline_not_led(tmp_path: Path) -> None:
    with BrokerProcess(tmp_path / "data") as broker:
        assert broker.process is not None
        pid = broker.process.pid
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            # the handlers these requests need are imported on first use: before the limit
            await metadata(client, "warm-up")
            await produce(client, "warm-up", batch([b"x"]))
            normal = _soft_nofile(pid)
            _set_soft_nofile(pid, _open_fds(pid) + 20)  # room for a few partitions, not 100
            [result] = await create(client, topic("many", 100))
            assert result.error_code == ErrorCode.NONE  # the topic exists, not all its logs
            states = await partition_states(client, "many")
            led = [s for s in states if s[1:] == (ErrorCode.NONE, 1, [])]
            offline = [s for s in states if s[1:] == (ErrorCode.LEADER_NOT_AVAILABLE, -1, [1])]
            assert led
            assert offline
            assert len(led) + len(offline) == 100
            first_offline = offline[0][0]
            refused = await produce(client, "many", batch([b"x"]), partition=first_offline)
            assert refused.error_code == ErrorCode.KAFKA_STORAGE_ERROR
            [line] = await _output_lines(broker, "cannot open the logs")
            assert "Too many open files" in line  # one line, not one per partition
            _set_soft_nofile(pid, normal)
            await create(client, topic("next"))  # a metadata change retries the opens
            assert all(s[1:] == (0, 1, []) for s in await partition_states(client, "many"))
            taken = await produce(client, "many", batch([b"x"]), partition=first_offline)
            assert taken.error_code == ErrorCode.NONE
        finally:
            await client.aclose()


async def test_a_full_disk_shows_partitions_offline_and_refuses_metadata_writes(
    tmp_path: Path,
) -> None:
    with (
        tiny_filesystem(tmp_path / "tiny", size="2m") as root,
        BrokerProcess(root / "data") as broker,
    ):
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            [result] = await create(client, topic("t", 2))
            assert result.error_code == ErrorCode.NONE
            assert (await produce(client, "t", batch([b"ok"]))).error_code == 0
            filler = fill(root)
            big = batch([os.urandom(64 * 1024)])
            code = ErrorCode.NONE
            for _ in range(64):  # until the page cache slack is used up too
                code = ErrorCode((await produce(client, "t", big)).error_code)
                if code != ErrorCode.NONE:
                    break
            assert code == ErrorCode.KAFKA_STORAGE_ERROR
            states = await partition_states(client, "t")
            assert states[0] == (0, ErrorCode.LEADER_NOT_AVAILABLE, -1, [1])
            [refused] = await create(client, topic("u", 200))
            assert refused.error_code == ErrorCode.UNKNOWN_SERVER_ERROR
            # a one-partition topic's records still fit the metadata log's last page, its
            # new log does not: the topic exists and its partition is offline, not led
            [auto] = (await metadata(client, "auto", auto_create=True)).topics
            assert auto.error_code == ErrorCode.NONE
            assert await partition_states(client, "auto") == [
                (0, ErrorCode.LEADER_NOT_AVAILABLE, -1, [1])
            ]
            filler.unlink()
            [result] = await create(client, topic("u", 200))  # usable again
            assert result.error_code == ErrorCode.NONE
            assert await partition_states(client, "auto") == [(0, ErrorCode.NONE, 1, [])]
        finally:
            await client.aclose()
        assert broker.stop() == 0
        assert not [line for line in broker.output if "Traceback" in line]
        broker.start()  # no torn tail, nothing lost that was acknowledged
        client = await KafkaClient.connect(broker.bootstrap)
        try:
            response = await metadata(client, "t", "u", "auto")
            assert [(t.name, t.error_code) for t in response.topics] == [
                ("t", 0),
                ("u", 0),
                ("auto", 0),
            ]
            assert "torn tail" not in "\n".join(broker.output)
        finally:
            await client.aclose()
