"""`epoch_bumps` finds each producer-epoch bump, and why, in a producer's librdkafka debug log
(`--producer-debug`): the lines below are librdkafka 2.16's, from a kept seed-7 run."""

from __future__ import annotations

from pathlib import Path

from compat_tests.jepsen.workload import epoch_bumps

LOG = """\
[ 744.38s] PRODUCE [jepsen-producer-0#producer-7] [thrd:127.0.0.1:40717/2]: 127.0.0.1:40717/2: jepsen-queue [2]: Produce MessageSet with 257 message(s) (4104 bytes, ApiVersion 10, MsgVersion 2, MsgId 24485, BaseSeq 24484, PID{Id:1000,Epoch:0}, uncompressed)
[ 744.44s] DRAIN [jepsen-producer-0#producer-7] [thrd:127.0.0.1:40717/2]: jepsen-queue [2] beginning partition drain: drain before retrying
[ 744.44s] ERRSEQ [jepsen-producer-0#producer-7] [thrd:127.0.0.1:40717/2]: 127.0.0.1:40717/2: ProduceRequest for jepsen-queue [2] with 257 message(s) failed due to skipped sequence numbers (PID{Id:1000,Epoch:0}, base seq 24484 > next seq 24482) caused by previous failed request (NOT_ENOUGH_REPLICAS, actions Retry,MsgNotPersisted, base seq 24483..24483, base msgid 24484, 0ms ago): recovering and retrying
[ 744.44s] DRAIN [jepsen-producer-0#producer-7] [thrd:127.0.0.1:40717/2]: Beginning partition drain in state Assigned for PID{Id:1000,Epoch:0} epoch bump for 2 partition(s) with in-flight requests: skipped sequence numbers
[ 744.45s] DRAIN [jepsen-producer-0#producer-7] [thrd:127.0.0.1:40717/2]: All partitions drained, bumped epoch to PID{Id:1000,Epoch:1}
[ 901.02s] DRAIN [jepsen-producer-0#producer-7] [thrd:main]: Beginning partition drain in state Assigned for PID{Id:1000,Epoch:1} epoch bump for 0 partition(s) with in-flight requests: 3 message(s) timed out on jepsen-queue [1]
"""


def test_each_bump_and_its_reason(tmp_path: Path) -> None:
    path = tmp_path / "producer-0.log"
    path.write_text(LOG)
    assert epoch_bumps(path) == [
        "t+744.44s: skipped sequence numbers",
        "t+901.02s: 3 message(s) timed out on jepsen-queue [1]",
    ]


def test_no_log_no_bumps(tmp_path: Path) -> None:
    assert epoch_bumps(tmp_path / "producer-1.log") == []
