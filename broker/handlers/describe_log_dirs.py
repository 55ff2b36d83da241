"""DescribeLogDirs (key 35).

Behavior:
- One result per configured data directory (absolute path). Topics null means
  every partition; otherwise only the named partitions count. As in Kafka,
  every topic with a log in the directory is listed, its partitions filtered
  to the requested ones (so a topic may appear with no partitions).
- Partition size is the sum of its segment files; offset lag is 0 (a single
  replica's log end is its high watermark); is_future_key is false.
- An offline directory answers KAFKA_STORAGE_ERROR with no topics.
- v4: total and usable bytes of the directory's file system (statvfs; usable
  is what an unprivileged writer may still use).

Version notes: v1 baseline; v2 flexible; v3 top-level error code; v4 total
and usable bytes.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import TYPE_CHECKING

from strom.broker import runtime
from strom.config import LONG_MAX
from strom.wire.errors import ErrorCode
from strom.wire.messages.describe_log_dirs import DescribeLogDirsRequest, DescribeLogDirsResponse

if TYPE_CHECKING:
    from strom.broker.handlers.request import RequestContext
    from strom.broker.state import BrokerState
    from strom.storage import PartitionLog

API_KEY = 35
MIN_VERSION = 1
MAX_VERSION = 4

Result = DescribeLogDirsResponse.DescribeLogDirsResult


async def handle(
    broker: BrokerState, request: RequestContext, body: DescribeLogDirsRequest
) -> DescribeLogDirsResponse:
    wanted: set[tuple[str, int]] | None = None
    if body.topics is not None:
        wanted = {(t.topic, p) for t in body.topics for p in t.partitions}
    logs = broker.logs
    by_dir: dict[Path, list[PartitionLog]] = {}
    for log in logs.partitions():
        directory = logs.dir_of(log.topic, log.partition)
        if directory is not None:
            by_dir.setdefault(directory, []).append(log)
    results = []
    for directory in dict.fromkeys(logs.dirs):
        path = str(directory.resolve())
        if directory in logs.offline_dirs:
            results.append(Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path))
            continue
        try:
            total, usable = await runtime.to_thread(_space, directory)
        except OSError:
            results.append(Result(error_code=ErrorCode.KAFKA_STORAGE_ERROR, log_dir=path))
            continue
        topics = _topics(by_dir.get(directory, []), wanted)
        results.append(Result(ErrorCode.NONE, path, topics, total, usable))
    return DescribeLogDirsResponse(error_code=ErrorCode.NONE, results=results)


def _topics(
    logs: list[PartitionLog], wanted: set[tuple[str, int]] | None
) -> list[DescribeLogDirsResponse.DescribeLogDirsTopic]:
    grouped: dict[str, list[PartitionLog]] = {}
    for log in sorted(logs, key=lambda p: (p.topic, p.partition)):
        grouped.setdefault(log.topic, []).append(log)
    return [
        DescribeLogDirsResponse.DescribeLogDirsTopic(
            name=topic,
            partitions=[
                DescribeLogDirsResponse.DescribeLogDirsPartition(
                    partition_index=log.partition,
                    partition_size=log.size_bytes(),
                    offset_lag=max(log.high_watermark - log.log_end_offset, 0),
                    is_future_key=False,
                )
                for log in members
                if wanted is None or (topic, log.partition) in wanted
            ],
        )
        for topic, members in grouped.items()
    ]


def _space(directory: Path) -> tuple[int, int]:
    """(total, usable) bytes of the file system; Kafka reports Long.MAX_VALUE on overflow."""
    stat = os.statvfs(directory)
    total = stat.f_blocks * stat.f_frsize
    usable = stat.f_bavail * stat.f_frsize
    return min(total, LONG_MAX), min(usable, LONG_MAX)
