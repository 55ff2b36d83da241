"""kcat (librdkafka's command-line client): produce, consume, query offsets, list metadata.

kcat must be installed (CI installs Debian's `kcat`): a missing binary fails these tests, it
never skips them. Topics are created with confluent-kafka's admin client, since kcat has no
command for it.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from typing import Any

import pytest

from compat_tests.confluent_kafka import ck
from compat_tests.helpers import CODECS, Rec, now_ms, stored_codecs, topic_name
from strom.broker.testing.embedded import BrokerProcess

RUN_TIMEOUT = 30.0


def kcat_binary() -> str:
    found = shutil.which("kcat") or shutil.which("kafkacat")
    if found is None:
        pytest.fail("kcat is not installed (Debian: apt-get install kcat); .ci/run installs it")
    return found


def kcat(bootstrap: str, *args: str, stdin: str | None = None) -> str:
    """Run kcat against the broker; fail with its stderr unless it exits 0."""
    done = subprocess.run(
        [kcat_binary(), "-b", bootstrap, "-q", "-m", "15", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=RUN_TIMEOUT,
        check=False,
    )
    assert done.returncode == 0, f"kcat {' '.join(args)} exited {done.returncode}: {done.stderr}"
    return done.stdout


def consume_json(bootstrap: str, topic: str, *args: str) -> list[dict[str, Any]]:
    out = kcat(bootstrap, "-C", "-t", topic, "-e", "-J", *args)
    return [json.loads(line) for line in out.splitlines() if line.strip()]


def create_topic(bootstrap: str, topic: str, partitions: int) -> None:
    ck.create_topic(ck.admin(bootstrap), topic, partitions)


def test_metadata_list_json(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("kcat-meta")
    create_topic(bootstrap, topic, 3)
    listing = json.loads(kcat(bootstrap, "-L", "-J"))
    assert listing["brokers"] == [{"id": 1, "name": bootstrap}]
    assert listing["controllerid"] == 1
    [described] = [t for t in listing["topics"] if t["topic"] == topic]
    partitions = sorted(described["partitions"], key=lambda p: p["partition"])
    assert [p["partition"] for p in partitions] == [0, 1, 2]
    for p in partitions:
        assert p["leader"] == 1
        assert p["replicas"] == [{"id": 1}]
        assert p["isrs"] == [{"id": 1}]

    only = json.loads(kcat(bootstrap, "-L", "-J", "-t", topic))
    assert [t["topic"] for t in only["topics"]] == [topic]
    text = kcat(bootstrap, "-L", "-t", topic)
    assert f'topic "{topic}" with 3 partitions:' in text


@pytest.mark.parametrize("codec", CODECS)
def test_produce_keys_headers_codec_then_consume(shared_broker: BrokerProcess, codec: str) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name(f"kcat-{codec}")
    create_topic(bootstrap, topic, 2)
    count = 150
    lines = [f"key-{i}:value {i} {'strøm ' * (i % 20)}" for i in range(count)]
    before = now_ms()
    for partition in (0, 1):
        kcat(
            bootstrap,
            "-P",
            "-t",
            topic,
            "-p",
            str(partition),
            "-K",
            ":",
            "-z",
            codec,
            "-H",
            f"partition={partition}",
            "-H",
            "dup=one",
            "-H",
            "dup=two",
            "-X",
            "linger.ms=20",
            stdin="\n".join(lines) + "\n",
        )
    after = now_ms()
    assert stored_codecs(shared_broker.data_dir, topic) == {codec}

    messages = consume_json(bootstrap, topic, "-o", "beginning")
    assert len(messages) == 2 * count
    for partition in (0, 1):
        got = [m for m in messages if m["partition"] == partition]
        assert [m["offset"] for m in got] == list(range(count))
        assert [m["key"] for m in got] == [line.split(":", 1)[0] for line in lines]
        assert [m["payload"] for m in got] == [line.split(":", 1)[1] for line in lines]
        for m in got:
            assert m["headers"] == ["partition", str(partition), "dup", "one", "dup", "two"]
            assert m["tstype"] == "create"
            assert before <= m["ts"] <= after

    # the same through a format string, one partition at a time
    text = kcat(
        bootstrap, "-C", "-t", topic, "-p", "1", "-e", "-o", "beginning", "-f", "%p|%o|%k|%s|%h\n"
    )
    assert text.splitlines() == [
        f"1|{i}|{line.split(':', 1)[0]}|{line.split(':', 1)[1]}|partition=1,dup=one,dup=two"
        for i, line in enumerate(lines)
    ]


def test_consume_from_offsets_and_counts(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("kcat-offsets")
    create_topic(bootstrap, topic, 1)
    kcat(bootstrap, "-P", "-t", topic, "-p", "0", stdin="".join(f"m{i}\n" for i in range(100)))

    def values(*args: str) -> list[str]:
        out = kcat(bootstrap, "-C", "-t", topic, "-p", "0", "-e", "-f", "%o:%s\n", *args)
        return out.splitlines()

    assert values("-o", "37", "-c", "5") == [f"{i}:m{i}" for i in range(37, 42)]
    assert values("-o", "-3") == [f"{i}:m{i}" for i in range(97, 100)]  # relative to the end
    assert values("-o", "99") == ["99:m99"]
    assert values("-o", "end") == []
    assert values("-o", "beginning", "-c", "2") == ["0:m0", "1:m1"]


def test_query_offsets_for_times_and_timestamp_ranges(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("kcat-times")
    admin = ck.admin(bootstrap)
    ck.create_topic(admin, topic, 1)
    base = now_ms() - 600_000
    records = [
        Rec(0, i, f"k{i}".encode(), f"v{i}".encode(), (), base + i * 1000) for i in range(30)
    ]
    ck.produce_all(ck.producer(bootstrap), topic, records)

    for ts, offset in [(base - 1, 0), (base + 4_500, 5), (base + 29_000, 29), (base + 30_000, -1)]:
        out = kcat(bootstrap, "-Q", "-t", f"{topic}:0:{ts}")
        assert f"{topic} [0] offset {offset}" in out, (ts, out)

    text = kcat(
        bootstrap,
        "-C",
        "-t",
        topic,
        "-p",
        "0",
        "-e",
        "-o",
        f"s@{base + 10_000}",
        "-o",
        f"e@{base + 13_000}",
        "-f",
        "%o %k %s %T\n",
    )
    assert text.splitlines() == [f"{i} k{i} v{i} {base + i * 1000}" for i in (10, 11, 12)]


def test_consume_nulls_and_binary_from_another_client(shared_broker: BrokerProcess) -> None:
    bootstrap = shared_broker.bootstrap
    topic = topic_name("kcat-nulls")
    ck.create_topic(ck.admin(bootstrap), topic, 1)
    ts = now_ms() - 1000
    records = [
        Rec(0, 0, None, b"no key", (), ts),
        Rec(0, 1, b"tombstone", None, (), ts),
        Rec(0, 2, b"", b"", (("h", None),), ts),
        Rec(0, 3, b"k", b"v", (("a", b"1"), ("b", b"")), ts),
    ]
    ck.produce_all(ck.producer(bootstrap), topic, records)
    text = kcat(bootstrap, "-C", "-t", topic, "-e", "-Z", "-f", "%o|%K|%k|%S|%s|%h\n")
    assert text.splitlines() == [
        "0|-1|NULL|6|no key|",
        "1|9|tombstone|-1|NULL|",
        "2|0|NULL|0|NULL|h=NULL",  # -Z prints empty as NULL too: the lengths tell them apart
        "3|1|k|1|v|a=1,b=",
    ]
