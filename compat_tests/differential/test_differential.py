"""Generated request sequences sent to Apache Kafka 4.1 and to Strom, compared field by field.

Each test draws a fixed number of sequences (hypothesis, derandomized: the same sequences on
every run) from one family of APIs, runs each on both brokers and collects every difference
that `ALLOWED` does not list; the test fails with all of them at once. The counts of sequences,
requests and fields compared are printed at the end of the run (docs/ecosystem.md quotes them).
"""

from __future__ import annotations

import itertools
import time
from collections.abc import Sequence

import trio
from hypothesis import HealthCheck, Phase, given, settings
from hypothesis import strategies as st

from compat_tests.differential import ops
from compat_tests.differential.conftest import Pair
from compat_tests.differential.harness import (
    STATS,
    Allowed,
    Context,
    Difference,
    Op,
    Plain,
    Side,
    check,
    run_sequence,
)
from strom.broker.handlers import _TABLE
from strom.broker.testing.client import KafkaClient
from strom.wire.messages.api_versions import ApiVersionsRequest, ApiVersionsResponse

ALLOWED: tuple[Allowed, ...] = (
    Allowed(
        "(?!FindCoordinator).*", r".*\.error_message",
        "error messages are free text: Strom words its own (the error code is compared)",
        lambda kafka, strom: isinstance(kafka, str) and isinstance(strom, str),
    ),
    Allowed(
        "DescribeConfigs", r"\.results\.configs\..*\.synonyms",
        "synonym chains: Kafka drops the broker synonyms listed before the key's primary broker "
        "key (e.g. retention.ms lists no log.retention.hours=168); Strom lists the key that "
        "produced the value",
        lambda kafka, strom: _is_suffix(kafka, strom),
    ),
    Allowed(
        "CreateTopics", r"\.topics\.(error_code|error_message|num_partitions|"
        r"replication_factor|topic_id|configs|topic_config_error_code)",
        "segment.bytes between 14 bytes and 1 MiB: Kafka 4 refuses it (KIP-1030 minimum 1 MiB), "
        "Strom accepts it (its own tests rely on small segments)",
        applies=lambda op: _small_segments(op),
    ),
)  # fmt: skip


def _small_segments(op: Op) -> bool:
    return isinstance(op, ops.CreateTopic) and any(
        key == "segment.bytes" and value is not None and value.isdigit()
        and 14 <= int(value) < 1 << 20
        for key, value in op.configs
    )  # fmt: skip


def _is_suffix(kafka: Plain, strom: Plain) -> bool:
    return (
        isinstance(kafka, list) and isinstance(strom, list) and len(kafka) < len(strom)
        and strom[len(strom) - len(kafka):] == kafka
    )  # fmt: skip


ALLOWED_VERSION_RANGES = {
    # Kafka 4.1 additions Strom (written against 4.0) does not implement yet:
    0: ((0, 13), (0, 12)),  # Produce v13: topic ids instead of names (KIP-516)
    1: ((4, 18), (4, 17)),  # Fetch v18: high-watermark tagged field for share fetch
    # AlterPartitionReassignments v1: allowReplicationFactorChange (KIP-860)
    45: ((0, 1), (0, 0)),
    # Kafka 4.1 lists JoinGroup v0-1 again; Strom keeps 4.0's floor (KIP-896), see docs/apis.md
    11: ((0, 9), (2, 9)),
}

_prefixes = itertools.count()


def _settings(examples: int) -> settings:
    return settings(
        max_examples=examples,
        derandomize=True,
        database=None,
        deadline=None,
        phases=(Phase.explicit, Phase.generate),
        suppress_health_check=(HealthCheck.too_slow, HealthCheck.function_scoped_fixture,
                               HealthCheck.data_too_large),
    )  # fmt: skip


async def _both(
    pair: Pair, sequence: Sequence[Op], prefix: str, used: set[Allowed] | None = None
) -> list[Difference]:
    ctx = Context(prefix=prefix, ts0=(int(time.time() * 1000) // 1000) * 1000)
    kafka = await KafkaClient.connect(pair.kafka.bootstrap, client_id="differential")
    strom = await KafkaClient.connect(pair.strom.bootstrap, client_id="differential")
    try:
        sides = (
            Side("kafka", kafka, pair.kafka_node, needs_barrier=True),
            Side("strom", strom, pair.strom_node, needs_barrier=False),
        )
        k, s = await run_sequence(sequence, sides, ctx)
    finally:
        await kafka.aclose()
        await strom.aclose()
    return check(sequence, k, s, ALLOWED, used)


def _run_family(
    pair: Pair, strategy: st.SearchStrategy[list[Op]], examples: int
) -> None:
    failures: list[tuple[list[Op], Difference]] = []

    @_settings(examples)
    @given(strategy)
    def one(sequence: list[Op]) -> None:
        prefix = f"d{next(_prefixes)}-"
        for diff in trio.run(_both, pair, sequence, prefix):
            failures.append((sequence, diff))

    one()
    if failures:
        seen: dict[str, tuple[list[Op], Difference]] = {}
        for sequence, diff in failures:
            seen.setdefault(f"{diff.api} {diff.generic_path}", (sequence, diff))
        lines = [f"{len(failures)} differences ({len(seen)} kinds) not in ALLOWED:"]
        for sequence, diff in seen.values():
            lines.append(f"- {diff}")
            lines.append(f"    in sequence: {sequence}")
        raise AssertionError("\n".join(lines))


def test_api_versions_match_for_every_api_strom_implements(pair: Pair) -> None:
    async def versions(bootstrap: str) -> dict[int, tuple[int, int]]:
        client = await KafkaClient.connect(bootstrap)
        try:
            request = ApiVersionsRequest(
                client_software_name="strom-differential", client_software_version="1.0"
            )
            response = await client.request(request, 3, ApiVersionsResponse)
        finally:
            await client.aclose()
        return {k.api_key: (k.min_version, k.max_version) for k in response.api_keys}

    kafka = trio.run(versions, pair.kafka.bootstrap)
    strom = trio.run(versions, pair.strom.bootstrap)
    implemented = {h.api_key for h in _TABLE if h.serves("broker")}  # a client listener's
    assert set(strom) == implemented
    STATS.fields += 2 * len(implemented)
    differing = {
        key: (kafka.get(key), strom[key]) for key in implemented if kafka.get(key) != strom[key]
    }
    assert differing == ALLOWED_VERSION_RANGES, "API key: (Kafka's range, Strom's range)"


def test_topics_and_data(pair: Pair) -> None:
    _run_family(pair, st.lists(ops.data_ops, min_size=1, max_size=10), examples=60)


def test_configs(pair: Pair) -> None:
    _run_family(pair, st.lists(ops.config_ops, min_size=1, max_size=8), examples=60)


def test_groups(pair: Pair) -> None:
    _run_family(pair, ops.group_sequences, examples=80)


def test_group_configs(pair: Pair) -> None:
    """GROUP config resources (KIP-848 group configs): one fixed sequence, no departures."""
    differences = trio.run(_both, pair, list(ops.GROUP_CONFIG_SEQUENCE), f"d{next(_prefixes)}-")
    assert differences == [], "\n".join(str(d) for d in differences)


KNOWN_DEPARTURES: tuple[tuple[int, list[Op]], ...] = (
    (0, [ops.CreateTopic(7, 0, 1, 1, (("segment.bytes", "big"),), False)]),
    (1, [ops.CreateTopic(7, 0, 1, 1, (), False),
         ops.DescribeConfigs(4, 0, ("retention.ms", "max.message.bytes"), True)]),
    (2, [ops.CreateTopic(7, 0, 1, 1, (("segment.bytes", "100000"),), False)]),
)  # fmt: skip
"""For each ALLOWED rule (by index), a sequence that shows that departure today."""


def test_every_allowed_difference_still_shows(pair: Pair) -> None:
    """An allow-list entry whose difference is gone (fixed in Strom, or Kafka changed) must go."""
    assert sorted(i for i, _ in KNOWN_DEPARTURES) == list(range(len(ALLOWED)))
    for index, sequence in KNOWN_DEPARTURES:
        used: set[Allowed] = set()
        failures = trio.run(_both, pair, sequence, f"d{next(_prefixes)}-", used)
        assert failures == [], f"{sequence}: differences not allowed: {failures}"
        assert used == {ALLOWED[index]}, f"{sequence} no longer shows: {ALLOWED[index].reason}"
