"""librdkafka's own integration tests, built from its source and run against a Strom cluster.

librdkafka's test suite (`tests/` of its source: `test.c`, one file per numbered test, and the
`test-runner` its Makefile links) is the client's own proof of its behaviour against a real
broker. Its source comes from the npm registry: the `node-rdkafka` package bundles the whole
librdkafka tree, tests included (`package/deps/librdkafka`), at a pinned version. Everything is
kept under `.cache/librdkafka/` (git-ignored), so it is fetched and built once:

1. `npm pack node-rdkafka@<version>` and unpack it;
2. `./configure` with OpenSSL (TLS, and SCRAM, which librdkafka computes with it) and
   without GSSAPI, curl or external zstd/lz4 (the bundled lz4 and snappy, and zlib, are
   enough), then `make libs`;
3. the `test-runner` with only the tests asked for: `test.c` lists every test, so the others
   are linked as weak stubs that fail if called (the Makefile's test list is overridden,
   nothing in librdkafka's tree is edited).

`run()` starts one test with a `test.conf` naming the cluster (`RDKAFKA_TEST_CONF`), the broker
version as Kafka 4.1 (`TEST_KAFKA_VERSION`: the suite chooses its sub-tests by it), and for the
tests that start a Java producer (0098's `TransactionProducerCli`) a `KAFKA_PATH` laid out as a
Kafka release: `libs/` holds the Java client from Maven Central with its dependencies, and
`bin/kafka-run-class.sh` runs a class on that classpath. The tests that manage ACLs with
`bin/kafka-acls.sh` get the `KAFKA_PATH` of `acl_tools()`: Kafka's own AclCommand.

A missing `npm`, compiler or `java` raises `SuiteUnavailable` with the command that installs
it: the tests fail, never skip.
"""

from __future__ import annotations

import fcntl
import os
import re
import shutil
import subprocess
import tarfile
from collections.abc import Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path

from compat_tests import maven

NODE_RDKAFKA = "3.6.1"
"""The node-rdkafka release whose bundled librdkafka (v2.12.0) is built."""
LIBRDKAFKA = "2.12.0"
CACHE = maven.CACHE / "librdkafka"
BROKER_VERSION = "4.1.0"
"""What the suite is told the broker is (it picks sub-tests by broker version)."""
INSTALL = "apt-get install -y npm build-essential zlib1g-dev rapidjson-dev libssl-dev"
RAPIDJSON = Path("/usr/include/rapidjson/schema.h")
"""0098 checks statistics with RapidJSON and is skipped without it: required here."""
OPENSSL = Path("/usr/include/openssl/ssl.h")
"""TLS and SCRAM (the security tests) need librdkafka built with OpenSSL."""

_CONFIGURE = (
    "--disable-gssapi", "--disable-curl", "--disable-zstd", "--disable-lz4-ext",
    "--disable-optimization",
)  # fmt: skip
_BUILD = CACHE / f"node-rdkafka-{NODE_RDKAFKA}-ssl"
"""Where the tree is unpacked and built (named for the build's configuration)."""
_HARNESS_OBJECTS = (
    "test.o", "rusage.o", "testcpp.o", "tinycthread.o", "tinycthread_extra.o", "rdlist.o",
    "sockem.o", "sockem_ctrl.o",
)  # fmt: skip
_RUN_CLASS = """#!/bin/sh
# kafka-run-class.sh as a Kafka release has it, reduced to what librdkafka's tests use:
# run a class with $CLASSPATH and this release's libs/ on the classpath.
here=$(cd "$(dirname "$0")/.." && pwd)
exec java -Xmx256m -cp "${CLASSPATH}:${here}/libs/*" "$@"
"""


class SuiteUnavailable(Exception):
    """A tool the build needs is missing; the message says how to install it."""


def _need(tool: str) -> str:
    found = shutil.which(tool)
    if found is None:
        raise SuiteUnavailable(f"`{tool}` is not installed: {INSTALL}")
    return found


def _run(args: Sequence[str], cwd: Path, what: str, env: Mapping[str, str] | None = None) -> None:
    done = subprocess.run(
        list(args), cwd=cwd, capture_output=True, text=True, timeout=1800,
        env={**os.environ, **(env or {})},
    )  # fmt: skip
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-40:])
        raise RuntimeError(f"{what} failed (exit {done.returncode}):\n{tail}")


@contextmanager
def _locked() -> Iterator[None]:
    """One build at a time (two test sessions may share the cache)."""
    CACHE.mkdir(parents=True, exist_ok=True)
    with (CACHE / ".lock").open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        yield


def source() -> Path:
    """librdkafka's source tree (fetched once)."""
    root = _BUILD / "package" / "deps" / "librdkafka"
    if (root / "tests" / "test.c").exists():
        return root
    npm = _need("npm")
    CACHE.mkdir(parents=True, exist_ok=True)
    packed = CACHE / f"node-rdkafka-{NODE_RDKAFKA}.tgz"
    if not packed.exists():
        _run([npm, "pack", f"node-rdkafka@{NODE_RDKAFKA}", "--pack-destination", str(CACHE)],
             CACHE, "npm pack node-rdkafka")  # fmt: skip
    target = _BUILD
    shutil.rmtree(target, ignore_errors=True)
    with tarfile.open(packed) as tar:
        tar.extractall(target, filter="data")
    for script in ("configure", "mklove/modules/configure.base", "lds-gen.py", "packaging/tools/gh-releases.py"):
        path = root / script
        if path.exists():
            path.chmod(0o755)
    for path in (root / "tests").glob("*.sh"):
        path.chmod(0o755)
    (root / "tests" / "java" / "run-class.sh").chmod(0o755)
    version = re.search(r"# librdkafka v(\S+)", (root / "CHANGELOG.md").read_text())
    if version is None or version.group(1) != LIBRDKAFKA:
        raise RuntimeError(f"node-rdkafka {NODE_RDKAFKA} does not bundle librdkafka {LIBRDKAFKA}")
    return root


def _stubs(tests_dir: Path, wanted: Sequence[str]) -> str:
    """C source defining every test `test.c` declares but `wanted` lacks, as a weak function
    that fails: the runner links without the other ~190 test files."""
    declared = re.findall(r"^_TEST_DECL\((\w+)\);", (tests_dir / "test.c").read_text(), re.M)
    stubs = [name for name in declared if not name.startswith(tuple(wanted))]
    lines = ["/* generated by compat_tests/librdkafka/suite.py: tests not built */",
             "#include <stdio.h>"]  # fmt: skip
    for name in stubs:
        lines.append(
            f"__attribute__((weak)) int main_{name}(int argc, char **argv) "
            f'{{ fprintf(stderr, "{name} is not built\\n"); return 1; }}'
        )
    return "\n".join(lines) + "\n"


def test_runner(wanted: Sequence[str]) -> Path:
    """The `test-runner` holding the tests whose numbers are `wanted` (built once per set)."""
    with _locked():
        root = source()
        tests = root / "tests"
        key = "-".join(sorted(wanted))
        runner = tests / f"test-runner-{key}"
        if runner.exists():
            return runner
        for tool in ("make", "gcc", "g++"):
            _need(tool)
        if not RAPIDJSON.exists():
            raise SuiteUnavailable(f"RapidJSON's headers are not installed: {INSTALL}")
        if not OPENSSL.exists():
            raise SuiteUnavailable(f"OpenSSL's headers are not installed: {INSTALL}")
        config = root / "config.h"
        configured = config.read_text() if config.exists() else ""
        if "WITH_RAPIDJSON 1" not in configured or "WITH_SSL 1" not in configured:
            _run(["./configure", *_CONFIGURE], root, "librdkafka ./configure")
        jobs = f"-j{max(1, min(2, os.cpu_count() or 1))}"
        _run(["make", jobs, "libs"], root, "librdkafka make libs")
        files = sorted(
            path.name for path in tests.iterdir()
            if path.suffix in (".c", ".cpp") and path.name[:4] in wanted
        )  # fmt: skip
        assert {name[:4] for name in files} == set(wanted), files
        (tests / "strom-stubs.c").write_text(_stubs(tests, wanted))
        objects = [Path(name).with_suffix(".o").name for name in files]
        objects += ["strom-stubs.o", *_HARNESS_OBJECTS]
        # the interceptor plugin first, on its own: OBJS given on the command line would reach
        # its sub-make too
        _run(["make", "interceptor_test"], tests, "interceptor_test build")
        _run(
            ["make", jobs, "-o", "interceptor_test", "test-runner", f"OBJS={' '.join(objects)}"],
            tests, "test-runner build",
        )  # fmt: skip
        (tests / "test-runner").rename(runner)
        return runner


def kafka_path() -> Path:
    """A directory laid out as a Kafka release for the suite's Java helpers."""
    home = CACHE / f"kafka-{maven.KAFKA_VERSION}-clients"
    libs, bin_dir = home / "libs", home / "bin"
    if not (bin_dir / "kafka-run-class.sh").exists():
        libs.mkdir(parents=True, exist_ok=True)
        for jar in maven.kafka("kafka-clients"):
            link = libs / jar.name
            if not link.exists():
                link.symlink_to(jar)
        bin_dir.mkdir(parents=True, exist_ok=True)
        script = bin_dir / "kafka-run-class.sh"
        script.write_text(_RUN_CLASS)
        script.chmod(0o755)
    return home


def acl_tools() -> Path:
    """A `KAFKA_PATH` whose `bin/kafka-acls.sh` is Kafka's own AclCommand (Maven Central)."""
    from compat_tests.kafka_tools.tools import KafkaTools

    home = CACHE / f"kafka-{maven.KAFKA_VERSION}-acls"
    script = home / "bin" / "kafka-acls.sh"
    command = " ".join(f"'{part}'" for part in KafkaTools.resolve().command("kafka-acls"))
    script.parent.mkdir(parents=True, exist_ok=True)
    script.write_text(f'#!/bin/sh\nexec {command} "$@"\n')
    script.chmod(0o755)
    return home


def run(
    runner: Path, test: str, bootstrap: str, workdir: Path, *, timeout: float = 900,
    extra_conf: Mapping[str, str] | None = None, kafka_home: Path | None = None,
    extra_env: Mapping[str, str] | None = None, broker_version: str = BROKER_VERSION,
) -> subprocess.CompletedProcess[str]:  # fmt: skip
    """Run one numbered test of `runner` against `bootstrap`; its output is in the result
    (exit status 0: every sub-test passed). `extra_env`: more environment (the `SSL_*` files
    of `pki.make_pki`). `broker_version`: the Kafka version the suite is told it runs against
(it chooses sub-tests and their expectations by it)."""
    workdir.mkdir(parents=True, exist_ok=True)
    conf = workdir / "test.conf"
    settings = {"bootstrap.servers": bootstrap, **(extra_conf or {})}
    conf.write_text("".join(f"{k}={v}\n" for k, v in settings.items()))
    env = {
        # without CI: on CI, librdkafka's runner adds 2 to the timeout multiplier a test asked for
        **{name: value for name, value in os.environ.items() if name != "CI"},
        **(extra_env or {}),
        "TESTS": test,
        "RDKAFKA_TEST_CONF": str(conf),
        "TEST_KAFKA_VERSION": broker_version,
        "KAFKA_PATH": str(kafka_home or kafka_path()),
        "TEST_LEVEL": "2",
        # the runner links librdkafka's shared libraries from the tree, as run-test.sh sets it
        "LD_LIBRARY_PATH": os.pathsep.join(
            str(runner.parent.parent / lib) for lib in ("src", "src-cpp")
        ),
    }
    return subprocess.run(
        [str(runner), "-p1", "-E"], cwd=runner.parent, env=env, capture_output=True, text=True,
        timeout=timeout,
    )  # fmt: skip
