"""kafka-python's own SASL and SSL integration tests, run against Strom.

kafka-python's integration tests (`test/integration/`) start their brokers themselves:
`KafkaFixture` renders a `kafka.properties` from `servers/<KAFKA_VERSION>/resources/` (or
`servers/resources/default/`) under `PROJECT_ROOT`, formats and starts the broker with the
scripts of a Kafka release at `KAFKA_ROOT` (default `servers/<KAFKA_VERSION>/kafka-bin`), and
waits for its start-up lines. `KAFKA_VERSION` (here Kafka 4.1.1's, so KRaft) turns the tests
on. The runner:

1. downloads the sdist of the installed kafka-python version from PyPI (`pip download`) into
   the git-ignored `.cache/kafka-python-suite/` and unpacks it into a temporary directory
   (nothing of it is kept in this repository);
2. adds the two files the sdist leaves out that its tests import: an empty `test/__init__.py`
   (without it `import test` finds Python's own regression-test package) and `test/service.py`
   (`compat_tests.kafka_python_suite.service`);
3. makes `PROJECT_ROOT` with Strom's resource templates (`TEMPLATES`: a one-node KRaft
   broker-and-controller, the client listener of the fixture's transport, its SASL, SSL and
   authorizer lines) and a Kafka release directory whose `bin/kafka-storage.sh`,
   `bin/kafka-run-class.sh` and `bin/kafka-topics.sh` run `compat_tests.kafka_python_suite.
   kafka_bin` (Strom's format and serve, Kafka's own TopicCommand);
4. runs `pytest test/integration/test_sasl_integration.py test/integration/test_ssl_integration.py`
   there, unmodified, and returns the JUnit report.

By hand: `python -m compat_tests.kafka_python_suite` (prints pytest's output and the summary).
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import tarfile
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from importlib.metadata import version
from pathlib import Path

from compat_tests import maven

HERE = Path(__file__).resolve().parent
REPO = HERE.parent.parent
CACHE = maven.CACHE / "kafka-python-suite"
TESTS = ("test/integration/test_sasl_integration.py", "test/integration/test_ssl_integration.py")

TEMPLATES = {
    # Python str.format templates over the fixture's attributes (KafkaFixture: broker_id, host,
    # port, controller_port, transport, tmp_dir, partitions, replicas, and the SASL, SSL, ACL
    # and JAAS lines it builds for its transport).
    "kafka.properties": """\
process.roles=broker,controller
node.id={broker_id}
controller.quorum.bootstrap.servers={controller_bootstrap_host}:{controller_port}
controller.listener.names=CONTROLLER
listeners={transport}://{host}:{port},CONTROLLER://{host}:{controller_port}
advertised.listeners={transport}://{host}:{port}
listener.security.protocol.map=CONTROLLER:PLAINTEXT,{transport}:{transport}
inter.broker.listener.name={transport}
log.dirs={tmp_dir}/data
num.partitions={partitions}
default.replication.factor={replicas}
offsets.topic.replication.factor=1
offsets.topic.num.partitions=2
transaction.state.log.replication.factor=1
group.initial.rebalance.delay.ms=0
group.min.session.timeout.ms=1000
{sasl_config}
{ssl_config}
{acl_config}
""",
    # the broker's login module, read by kafka_bin (Strom reads no JAAS files)
    "kafka_server_jaas.conf": "KafkaServer {{\n  {jaas_config}\n}};\n",
    # the admin tools' client config (kafka-topics.sh --command-config)
    "sasl_command.conf": "security.protocol={transport}\nsasl.mechanism={sasl_mechanism}\nsasl.jaas.config={jaas_config}\n",
    # KAFKA_LOG4J_OPTS points here; Strom logs its own way
    "log4j.properties": "# Strom does not read log4j configuration\n",
}

BIN_SCRIPTS = ("kafka-storage.sh", "kafka-run-class.sh", "kafka-topics.sh")


class SuiteUnavailable(Exception):
    """The sdist could not be fetched; the message says why."""


@dataclass(frozen=True)
class Outcome:
    name: str
    status: str  # passed, failed, error, skipped
    detail: str


@dataclass(frozen=True)
class Run:
    code: int
    output: str
    outcomes: list[Outcome]


def sdist() -> Path:
    """The installed kafka-python version's sdist, downloaded once into CACHE."""
    release = version("kafka-python")
    CACHE.mkdir(parents=True, exist_ok=True)
    found = sorted(CACHE.glob(f"kafka_python-{release}.tar.gz"))
    if found:
        return found[0]
    done = subprocess.run(
        [sys.executable, "-m", "pip", "download", "--no-deps", "--no-binary", ":all:",
         "-d", str(CACHE), f"kafka-python=={release}"],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    found = sorted(CACHE.glob(f"kafka_python-{release}.tar.gz"))
    if done.returncode != 0 or not found:
        raise SuiteUnavailable(
            f"pip could not download kafka-python {release}'s sdist from PyPI:\n"
            + "\n".join((done.stdout + done.stderr).splitlines()[-15:])
        )
    return found[0]


def prepare(work: Path) -> Path:
    """The unpacked sdist with PROJECT_ROOT beside it (module docstring); its directory."""
    archive = sdist()
    with tarfile.open(archive) as tar:
        tar.extractall(work, filter="data")
    [tree] = [p for p in work.iterdir() if p.is_dir() and p.name.startswith("kafka_python-")]
    tests = tree / "test"
    (tests / "__init__.py").touch()
    if not (tests / "service.py").exists():
        shutil.copy(HERE / "service.py", tests / "service.py")
    resources = work / "project" / "servers" / "resources" / "default"
    resources.mkdir(parents=True)
    for name, text in TEMPLATES.items():
        (resources / name).write_text(text)
    bin_dir = work / "project" / "servers" / maven.KAFKA_VERSION / "kafka-bin" / "bin"
    bin_dir.mkdir(parents=True)
    for script in BIN_SCRIPTS:
        path = bin_dir / script
        path.write_text(
            "#!/bin/sh\n"
            f'PYTHONPATH="{REPO}${{PYTHONPATH:+:$PYTHONPATH}}" '
            f'exec "{sys.executable}" -m compat_tests.kafka_python_suite.kafka_bin {script} "$@"\n'
        )
        path.chmod(0o755)
    return tree


def run(work: Path, timeout: float = 900.0) -> Run:
    """Run kafka-python's SASL and SSL integration tests in `work` against Strom."""
    tree = prepare(work)
    report = work / "report.xml"
    env = {
        **os.environ,
        "KAFKA_VERSION": maven.KAFKA_VERSION,
        "PROJECT_ROOT": str(work / "project"),
        "PYTHONDONTWRITEBYTECODE": "1",
        # this checkout's strom (its pytest plugin loads in the suite's run too), whatever
        # the working directory
        "PYTHONPATH": os.pathsep.join(p for p in (str(REPO), os.environ.get("PYTHONPATH")) if p),
    }
    for key in ("KAFKA_URI", "ZOOKEEPER_URI", "KAFKA_ROOT", "PYTEST_ADDOPTS"):
        env.pop(key, None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", *TESTS, "-p", "no:cacheprovider", "-p", "no:randomly",
         "-o", "log_level=INFO", f"--junitxml={report}", "-q", "-rA"],
        cwd=tree, env=env, capture_output=True, text=True, timeout=timeout,
    )  # fmt: skip
    outcomes = _outcomes(report) if report.exists() else []
    return Run(done.returncode, done.stdout + done.stderr, outcomes)


def _outcomes(report: Path) -> list[Outcome]:
    found = []
    for case in ET.parse(report).getroot().iter("testcase"):
        name = f"{case.get('classname')}::{case.get('name')}"
        status, detail = "passed", ""
        for kind in ("failure", "error", "skipped"):
            element = case.find(kind)
            if element is not None:
                status = {"failure": "failed"}.get(kind, kind)
                detail = (element.get("message") or "") + "\n" + (element.text or "")
                break
        found.append(Outcome(name, status, detail))
    return found


def main() -> int:
    import tempfile

    with tempfile.TemporaryDirectory(prefix="kafka-python-suite-") as work:
        result = run(Path(work))
    print(result.output)
    for outcome in result.outcomes:
        print(f"{outcome.status:8} {outcome.name}")
    return result.code
