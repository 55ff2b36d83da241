"""librdkafka's own security tests against Strom (see suite.py for the build).

- 0135 `sasl_credentials`: a client with wrong SCRAM credentials is refused, then
  `sasl_set_credentials()` with the right ones lets it in (before and after the failure).
- 0142 `reauthentication`: KIP-368. With the brokers' `connections.max.reauth.ms` (read
  through DescribeConfigs), a consumer, a producer and transactional producers (committed and
  aborted) re-authenticate while they work without losing a message; a re-authentication with
  wrong credentials ends the connection. Its topic is replicated three ways: a 3-node cluster
  whose client and inter-broker listener is SASL_PLAINTEXT (SCRAM-SHA-512 for the test's user,
  PLAIN between the nodes).
- 0109 `auto_create_topics`, 0115 `producer_auth`, 0119 `consumer_auth`: with the
  StandardAuthorizer (`allow.everyone.if.no.acl.found=true`), a DENY ACL added with
  `kafka-acls.sh` (Kafka's own AclCommand) makes a subscribed consumer see
  TOPIC_AUTHORIZATION_FAILED, fails a producer's deliveries and then its produce() calls, and
  fails a consumer's fetches, as librdkafka expects.

- 0133 `ssl_keys`: PKCS#12 and PEM client key stores (librdkafka's own fixtures) load with the
  right password and are refused with a wrong one; it never connects.

0097 (certificate verification), 0081 (the Admin API) and 0142 over OAUTHBEARER are too long
for CI: `python -m compat_tests.librdkafka` runs them by hand (see its `__main__`).

0115 runs on its own with librdkafka's debug log: its "topic not known" case can lose a race
inside librdkafka (see `_client_race`); when the log proves that race, 0115 runs once more.

A sub-test librdkafka skips is allowed (0142's OAUTHBEARER cases need that mechanism in
test.conf); a whole test SKIPPED fails, as it proves nothing.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from compat_tests.librdkafka import suite
from strom.broker.testing.embedded import BrokerProcess
from strom.broker.testing.pytest_plugin import StartCluster

TESTS = ("0109", "0115", "0119", "0135", "0142")
ADMIN_SECRET, ALICE_SECRET = "admin-secret-rdk", "alice-secret-rdk"
PLAIN_JAAS = (
    "org.apache.kafka.common.security.plain.PlainLoginModule required "
    f'username="admin" password="{ADMIN_SECRET}" user_admin="{ADMIN_SECRET}";'
)
SCRAM_JAAS = (
    "org.apache.kafka.common.security.scram.ScramLoginModule required "
    f'username="admin" password="{ADMIN_SECRET}";'
)
SASL_CLUSTER = {  # the cluster harness names its client (and inter-broker) listener PLAINTEXT
    "listener.security.protocol.map": "PLAINTEXT:SASL_PLAINTEXT,CONTROLLER:PLAINTEXT",
    "listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN,SCRAM-SHA-512",
    "listener.name.plaintext.plain.sasl.jaas.config": PLAIN_JAAS,
    "listener.name.plaintext.scram-sha-512.sasl.jaas.config": SCRAM_JAAS,
    "sasl.mechanism.inter.broker.protocol": "PLAIN",
    "connections.max.reauth.ms": "5000",
    "connection.failed.authentication.delay.ms": "0",
}
AUTHORIZER = {
    "authorizer.class.name": "org.apache.kafka.metadata.authorizer.StandardAuthorizer",
    "allow.everyone.if.no.acl.found": "true",
}


@pytest.fixture(scope="module")
def runner() -> Path:
    return suite.test_runner(TESTS)


def _passed(done_output: str, code: int, tests: tuple[str, ...], logs: str) -> None:
    tail = "\n".join(done_output.splitlines()[-150:])
    assert code == 0, f"librdkafka tests {tests} failed (exit {code}):\n{tail}\n--- Strom ---\n{logs}"
    summary = dict(re.findall(r"\|\S*\s*(\d{4}_\w+)\s+\|\s*(\w+)\s*\|", done_output))
    ran = {name[:4]: verdict for name, verdict in summary.items() if name[:4] in tests}
    assert set(ran) == set(tests), f"not in the runner's summary: {summary}\n{tail}"
    assert set(ran.values()) == {"PASSED"}, f"{ran}\n{tail}"  # a SKIPPED test proves nothing


@pytest.mark.slow
@pytest.mark.timeout(1800)  # the first run fetches and builds librdkafka (several minutes)
def test_sasl_credentials_and_reauthentication(
    runner: Path, strom_cluster: StartCluster, tmp_path: Path
) -> None:
    cluster = strom_cluster(combined=3, overrides=SASL_CLUSTER,
                            client_sasl=("PLAIN", "admin", ADMIN_SECRET))  # fmt: skip
    admin = AdminClient({"bootstrap.servers": cluster.bootstrap,
                         "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "PLAIN",
                         "sasl.username": "admin", "sasl.password": ADMIN_SECRET})  # fmt: skip
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upsert = UserScramCredentialUpsertion("alice", info, ALICE_SECRET.encode())
    for future in admin.alter_user_scram_credentials([upsert]).values():
        future.result(30)
    tests = ("0135", "0142")
    done = suite.run(runner, ",".join(tests), cluster.bootstrap, tmp_path / "rdkafka", extra_conf={
        "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "SCRAM-SHA-512",
        "sasl.username": "alice", "sasl.password": ALICE_SECRET,
        "test.timeout.multiplier": "4",
    })  # fmt: skip
    _passed(done.stdout + done.stderr, done.returncode, tests, cluster.report(60))


@pytest.mark.timeout(1800)  # the first run builds its runner
def test_client_key_stores_load(tmp_path: Path) -> None:
    # 0133 never connects: its bootstrap address is never dialled
    runner = suite.test_runner(("0133",))
    done = suite.run(runner, "0133", "127.0.0.1:1", tmp_path / "rdkafka")
    _passed(done.stdout + done.stderr, done.returncode, ("0133",), "(no broker)")


@pytest.mark.slow
@pytest.mark.timeout(1800)
def test_producers_and_consumers_refused_by_acls(runner: Path, tmp_path: Path) -> None:
    tests = ("0109", "0119")
    with BrokerProcess(tmp_path / "strom", AUTHORIZER) as broker:
        done = suite.run(runner, ",".join(tests), broker.bootstrap, tmp_path / "rdkafka",
                         extra_conf={"test.timeout.multiplier": "4"},
                         kafka_home=suite.acl_tools())  # fmt: skip
        logs = "\n".join(list(broker.output)[-60:])
        _passed(done.stdout + done.stderr, done.returncode, tests, logs)
        for attempt in range(2):
            # 0115 on its own, with librdkafka's topic and metadata debug log (`_client_race`)
            done = suite.run(runner, "0115", broker.bootstrap, tmp_path / f"rdkafka-0115-{attempt}",
                             extra_conf={"test.timeout.multiplier": "4", "debug": "topic,metadata"},
                             kafka_home=suite.acl_tools())  # fmt: skip
            output = done.stdout + done.stderr
            if done.returncode == 0 or attempt or not _client_race(output):
                break
            print("0115 lost librdkafka's own produce() race (see _client_race): running it again")
        logs = "\n".join(list(broker.output)[-60:])
    _passed(_without_debug(output), done.returncode, ("0115",), logs)


def _client_race(output: str) -> bool:
    """Whether 0115's "topic not known" case failed by librdkafka's own race, not the broker's.

    The case adds a DENY ACL, then calls produce() twice for a topic its producer has never
    asked about, and expects both to succeed and their deliveries to fail. But produce() of an
    unknown topic creates the topic in the client and at once sends a Metadata request for it
    (the "fast leader query", started with no delay) from librdkafka's main thread, while the
    application thread goes on to place the message. When that thread is descheduled longer
    than the request's round trip (under a millisecond on loopback; a loaded machine does it),
    the answer, TOPIC_AUTHORIZATION_FAILED as Kafka gives it, puts the topic in its error state
    first, and produce() fails at once. The debug log proves it: the topic went from "unknown"
    to "error" after the test's "Producing message 1" (so the producer had no metadata for it
    before that call), and a "topic known" failure would show "exists -> error" instead."""
    failed = re.search(r"0115-producer_auth\.cpp:1(23|34):do_test_producer\(\)", output)
    if failed is None or "produce() failed: Broker: Topic authorization failed" not in output:
        return False
    start = output.rfind("Producing message 1 to any partition", 0, failed.start())
    topics = re.findall(r'Using topic "(\S+)"', output[: max(start, 0)])
    if start < 0 or not topics:
        return False
    window = output[start : failed.start()]
    return f"Topic {topics[-1]} changed state unknown -> error" in window


def test_the_0115_race_is_told_apart_from_a_broker_failure() -> None:
    """`_client_race` on the lines librdkafka prints: the race (the topic went unknown ->
    error after "Producing message 1") reruns; a failure where the producer knew the topic
    (exists -> error) or with another error does not."""
    head = ('[0115_producer_auth / 3.3s] Using topic "T"\n'
            "[0115_producer_auth / 6.7s] Producing message 1 to any partition\n")  # fmt: skip
    fail = ('### Test "0115_producer_auth" failed at 0115-producer_auth.cpp:123:do_test_producer() '
            'at x: ###\nTest assertion failed: "!err": produce() failed: Broker: Topic '
            "authorization failed\n")  # fmt: skip
    state = "%7|1.0|STATE|0115_producer_auth#producer-20| [thrd:main]: Topic T changed state {}\n"
    assert _client_race(head + state.format("unknown -> error") + fail)
    assert not _client_race(head + state.format("exists -> error") + fail)
    assert not _client_race(state.format("unknown -> error") + head + fail)
    assert not _client_race(head + state.format("unknown -> error") + fail.replace("Topic authorization", "Unknown topic"))
    assert _without_debug(head + state.format("unknown -> error")) == head.rstrip("\n")


def _without_debug(output: str) -> str:
    """The test's own lines, without librdkafka's debug log (`%7|...`)."""
    return "\n".join(line for line in output.splitlines() if not line.startswith("%7|"))
