"""librdkafka's own tests that are too long for CI, run by hand against Strom.

    python -m compat_tests.librdkafka ssl           # 0097 and 0133 on a TLS broker (about 40 s)
    python -m compat_tests.librdkafka oauthbearer   # 0142 over OAUTHBEARER on 3 nodes (about 4-5 min)
    python -m compat_tests.librdkafka admin         # 0081, the Admin API (about 6 min)

Each builds what it needs the first time (see suite.py), starts Strom in a temporary directory,
runs the test and prints librdkafka's summary; the exit status is 0 only when every test ran
and PASSED. `--keep` leaves the directory (with the test's output and Strom's log) in place.

- `ssl`: the PKI trivup makes (pki.py), a broker whose SSL listener requires client
  certificates (`ssl.client.auth=required`, trivup's default), and a client configured as
  trivup configures it.
- `oauthbearer`: 0142 with unsecured OAUTHBEARER tokens (`principal=admin
  scope=requiredScope`, as trivup's client config; the brokers require that scope, as
  trivup's do) and `connections.max.reauth.ms=20000`. The SCRAM run in CI uses 5000, but over
  OAUTHBEARER the test gives its tokens half that lifetime in whole seconds (2 s), and
  librdkafka refreshes a token on a one-second timer once 80% of its life has passed: for any
  lifetime of 5 s or less that refresh comes when the token expires, so the client
  re-authenticates with an expired token and the broker (Strom or Kafka) refuses it. With
  20000 the tokens live 10 s and are refreshed 2 s before they expire. (12000, 6 s tokens,
  failed 2 of 3 runs on this loaded machine: the client re-authenticates at 90% of the
  session, 600 ms before its end, and the broker, reading a connection's pipelined requests
  one at a time as Kafka does, read a produce request sent before that after the session
  ended, which closes the connection as in Kafka.)
- `admin`: 0081 on one broker with the StandardAuthorizer (`allow.everyone.if.no.acl.found`),
  as trivup's ACL-enabled broker, told that the broker is Kafka 4.1 (the suite's default), so
  its group-config cases run: IncrementalAlterConfigs and DescribeConfigs of ConfigResource
  GROUP (KIP-848's group configs, stored and described as Kafka does; Strom's groups are all
  classic, which ignore them, as Kafka's do). (A SASL-only case that also reads the version,
  authorized operations of a group, is skipped here as on trivup's plaintext broker.)
"""

from __future__ import annotations

import argparse
import os
import re
import shutil
import sys
import tempfile
import time
from pathlib import Path

from compat_tests.librdkafka import suite
from compat_tests.librdkafka.pki import make_pki
from compat_tests.librdkafka.test_security import ADMIN_SECRET, AUTHORIZER, SASL_CLUSTER
from strom.broker.testing.cluster import ClusterProcess
from strom.broker.testing.embedded import BrokerProcess

BY_HAND = ("0081", "0097", "0133", "0142")
OAUTH_JAAS = (
    "org.apache.kafka.common.security.oauthbearer.OAuthBearerLoginModule required "
    'unsecuredLoginStringClaim_sub="admin" unsecuredValidatorRequiredScope="requiredScope";'
)
OAUTH_CLUSTER = {
    **SASL_CLUSTER,
    "listener.name.plaintext.sasl.enabled.mechanisms": "PLAIN,OAUTHBEARER",
    "listener.name.plaintext.oauthbearer.sasl.jaas.config": OAUTH_JAAS,
    "connections.max.reauth.ms": "20000",
}


def _ssl(root: Path, runner: Path) -> str:
    pki = make_pki(root / "pki")
    listener = {"listeners": "SSL://127.0.0.1:0", **pki.listener("ssl", "required")}
    with BrokerProcess(root / "strom", listener) as broker:
        done = suite.run(runner, "0097,0133", broker.bootstrap, root / "rdkafka",
                         extra_conf={**pki.client_conf(), "test.timeout.multiplier": "4"},
                         extra_env=pki.environment("required"))  # fmt: skip
        (root / "strom.log").write_text("\n".join(broker.output))
    return done.stdout + done.stderr


def _oauthbearer(root: Path, runner: Path) -> str:
    with ClusterProcess(root / "cluster", combined=3, overrides=OAUTH_CLUSTER,
                        client_sasl=("PLAIN", "admin", ADMIN_SECRET)) as cluster:  # fmt: skip
        done = suite.run(runner, "0142", cluster.bootstrap, root / "rdkafka", extra_conf={
            "security.protocol": "SASL_PLAINTEXT", "sasl.mechanism": "OAUTHBEARER",
            "sasl.oauthbearer.config": "principal=admin scope=requiredScope",
            "enable.sasl.oauthbearer.unsecure.jwt": "true", "test.timeout.multiplier": "4",
        })  # fmt: skip
        (root / "strom.log").write_text(cluster.report(5000))
    return done.stdout + done.stderr


def _admin(root: Path, runner: Path) -> str:
    with BrokerProcess(root / "strom", AUTHORIZER) as broker:
        done = suite.run(runner, "0081", broker.bootstrap, root / "rdkafka", timeout=3600,
                         extra_conf={"test.timeout.multiplier": "4"})  # fmt: skip
        (root / "strom.log").write_text("\n".join(broker.output))
    return done.stdout + done.stderr


RUNS = {"ssl": (_ssl, ("0097", "0133")), "oauthbearer": (_oauthbearer, ("0142",)),
        "admin": (_admin, ("0081",))}  # fmt: skip


def main() -> int:
    parser = argparse.ArgumentParser(prog="python -m compat_tests.librdkafka", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)  # fmt: skip
    parser.add_argument("run", choices=sorted(RUNS))
    parser.add_argument("--keep", action="store_true", help="keep the run's directory")
    args = parser.parse_args()
    run, tests = RUNS[args.run]
    runner = suite.test_runner(BY_HAND)
    root = Path(tempfile.mkdtemp(prefix=f"strom-librdkafka-{args.run}-"))
    started = time.monotonic()
    try:
        output = run(root, runner)
        (root / "output.txt").write_text(output)
    finally:
        if not args.keep:
            shutil.rmtree(root, ignore_errors=True)
    summary = dict(re.findall(r"\|\S*\s*(\d{4}_\w+)\s+\|\s*(\w+)\s*\|", output))
    ran = {name: verdict for name, verdict in summary.items() if name[:4] in tests}
    for name, verdict in sorted(ran.items()):
        print(f"{name}: {verdict}")
    passed = {name[:4] for name, verdict in ran.items() if verdict == "PASSED"}
    ok = passed == set(tests) and all(v == "PASSED" for v in ran.values())
    if not ok:
        print("\n".join(output.splitlines()[-80:]), file=sys.stderr)
    print(f"{'passed' if ok else 'FAILED'} in {time.monotonic() - started:.0f} s"
          + (f"; output and Strom's log in {root}" if args.keep else ""))  # fmt: skip
    return 0 if ok else 1


if __name__ == "__main__":
    os.environ.pop("SUBTESTS", None)  # every sub-test
    sys.exit(main())
