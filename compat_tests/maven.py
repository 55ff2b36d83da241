"""Fetching JVM artifacts from Maven Central by name, for the tests that run real Kafka tools.

Kafka's CLI tools, Kafka Connect, MirrorMaker 2, a reference Apache Kafka broker and Spark's
Kafka connector are test dependencies only: they never enter the broker's install. `classpath`
resolves Maven coordinates with their transitive dependencies using `mvn` and returns the
jars. Everything fetched lives under `.cache/` at the repository root (git-ignored); a second
call with the same coordinates reads the cached list without running Maven.

A missing `mvn`/`java` or a failed resolution raises `JvmUnavailable`, whose message says
what to install: tests that need these artifacts fail, never skip (CI installs them).
"""

from __future__ import annotations

import hashlib
import os
import shutil
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
CACHE = Path(os.environ.get("STROM_JVM_CACHE", REPO / ".cache"))
LOCAL_REPOSITORY = CACHE / "m2"

KAFKA_VERSION = "4.1.1"
"""The Kafka release whose tools, Connect, MirrorMaker 2, broker and Java client the tests run."""

MVN_INSTALL = "apt-get install -y maven openjdk-17-jdk-headless"

_POM = """<?xml version="1.0" encoding="UTF-8"?>
<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>strom.tests</groupId>
  <artifactId>classpath-{digest}</artifactId>
  <version>0</version>
  <packaging>pom</packaging>
  <dependencies>
{dependencies}
  </dependencies>
</project>
"""

_DEPENDENCY = """    <dependency>
      <groupId>{group}</groupId>
      <artifactId>{artifact}</artifactId>
      <version>{version}</version>{classifier}
    </dependency>"""


class JvmUnavailable(Exception):
    """Java, Maven or an artifact is missing; the message says how to get it."""


def _dependency(coordinate: str) -> str:
    parts = coordinate.split(":")
    if len(parts) not in (3, 4):
        raise ValueError(f"expected group:artifact:version[:classifier], got {coordinate!r}")
    group, artifact, version = parts[:3]
    classifier = f"\n      <classifier>{parts[3]}</classifier>" if len(parts) == 4 else ""
    return _DEPENDENCY.format(
        group=group, artifact=artifact, version=version, classifier=classifier
    )


def require_java() -> str:
    """The `java` executable, or JvmUnavailable."""
    java = shutil.which("java")
    if java is None:
        raise JvmUnavailable(f"no `java` on PATH: {MVN_INSTALL}")
    return java


def classpath(*coordinates: str) -> list[Path]:
    """The jars of `coordinates` (group:artifact:version[:classifier]) and their dependencies."""
    digest = hashlib.sha256("\n".join(sorted(coordinates)).encode()).hexdigest()[:16]
    work = CACHE / "classpaths" / digest
    listing = work / "classpath.txt"
    if listing.exists():
        jars = [Path(p) for p in listing.read_text().split(os.pathsep) if p]
        if jars and all(jar.exists() for jar in jars):
            return jars
    mvn = shutil.which("mvn")
    if mvn is None:
        raise JvmUnavailable(f"no `mvn` on PATH: {MVN_INSTALL}")
    work.mkdir(parents=True, exist_ok=True)
    dependencies = "\n".join(_dependency(c) for c in coordinates)
    (work / "pom.xml").write_text(_POM.format(digest=digest, dependencies=dependencies))
    partial = work / "classpath.tmp"
    command = [
        mvn, "-B", "-q", f"-Dmaven.repo.local={LOCAL_REPOSITORY}",
        "dependency:build-classpath", f"-Dmdep.outputFile={partial}",
        "-Dmdep.includeScope=runtime",
    ]
    done = subprocess.run(command, cwd=work, capture_output=True, text=True, timeout=1200)
    if done.returncode != 0:
        tail = "\n".join((done.stdout + done.stderr).splitlines()[-30:])
        raise JvmUnavailable(f"mvn could not resolve {', '.join(coordinates)}:\n{tail}")
    os.replace(partial, listing)
    return [Path(p) for p in listing.read_text().split(os.pathsep) if p]


def kafka(*artifacts: str, version: str = KAFKA_VERSION) -> list[Path]:
    """Jars of Apache Kafka artifacts by name (`kafka-tools`, `connect-runtime`, ...)."""
    return classpath(*(f"org.apache.kafka:{name}:{version}" for name in artifacts))
