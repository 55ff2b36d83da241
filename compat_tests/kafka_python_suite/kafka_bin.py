"""The `bin/` scripts of a Kafka release that kafka-python's integration fixtures call, served
by Strom: `python -m compat_tests.kafka_python_suite.kafka_bin <script> <args>`.

kafka-python's `KafkaFixture` (KAFKA_VERSION 4.x, KRaft) starts a broker from a Kafka release
directory: it renders `kafka.properties` from its resource templates, runs
`bin/kafka-storage.sh format --standalone -t <id> -c <props> [--add-scram ...]`, then
`bin/kafka-run-class.sh kafka.Kafka <props>` with `KAFKA_OPTS=-Djava.security.auth.login.config=
<jaas file>` for SASL, and waits for Kafka's start-up lines in its output; `get_topic_names`
runs `bin/kafka-topics.sh --list`. The suite runner gives it a release directory whose scripts
run this module:

- `kafka-storage.sh` is `strom format` with the same arguments (Strom's format takes
  kafka-storage's), and notes the SCRAM users it added beside the data. The fixture formats
  before it writes its SASL lines into the properties; Kafka's format never looks at listeners,
  Strom's checks them as `serve` does (a SASL listener without mechanisms would enable GSSAPI,
  which Strom refuses), so the properties it formats with map SASL listeners to their
  non-SASL protocol: nothing format writes depends on it;
- `kafka-run-class.sh kafka.Kafka <props>` runs `strom serve` on those properties, with two
  translations a Kafka user makes when moving to Strom: the JAAS file's `KafkaServer` login
  module becomes `listener.name.<listener>.<mechanism>.sasl.jaas.config` for each SASL listener
  and mechanism (Strom reads no JAAS files), and JKS key and trust stores (which only a JVM
  reads) are converted with `keytool` to PKCS12 and PEM, as docs/security.md tells users.
  It passes Strom's output through and, once Strom says it started, prints the lines the
  fixture waits for (Kafka's "Kafka Server started" and, per formatted SCRAM user,
  "Replayed UserScramCredentialRecord"); SIGTERM stops Strom;
- `kafka-topics.sh` is Kafka 4.1's own TopicCommand (jars from Maven Central,
  `compat_tests.kafka_tools.tools`).
"""

from __future__ import annotations

import itertools
import os
import re
import shlex
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path

SCRAM_USERS = ".kafka-python-scram-users"
"""Beside the data: the users `kafka-storage.sh format --add-scram` seeded, one a line."""


def _properties(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for raw in path.read_text().splitlines():
        line = raw.strip()
        if line and not line.startswith(("#", "!")) and "=" in line:
            key, value = line.split("=", 1)
            values[key.strip()] = value.strip()
    return values


def _log_dir(properties: dict[str, str]) -> Path:
    return Path((properties.get("log.dirs") or properties["log.dir"]).split(",")[0])


def storage(args: list[str]) -> int:
    """`kafka-storage.sh format ...`: `strom format` with the same arguments."""
    if not args or args[0] != "format":
        print(f"kafka-storage.sh: only `format` is served by Strom, not {args[:1]}", file=sys.stderr)
        return 1
    flag = "-c" if "-c" in args else "--config"
    config = Path(args[args.index(flag) + 1])
    properties = _properties(config)
    protocols = properties.get("listener.security.protocol.map", "")
    properties["listener.security.protocol.map"] = re.sub(r":SASL_(PLAINTEXT|SSL)", r":\1", protocols)
    properties.pop("sasl.mechanism.inter.broker.protocol", None)
    formatted = config.parent / "format.properties"
    formatted.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    command = list(args[1:])
    command[command.index(flag)] = "--config"
    command[command.index("--config") + 1] = str(formatted)
    done = subprocess.run([sys.executable, "-m", "strom", "format", *command])
    if done.returncode == 0:
        users = [
            match.group(1)
            for option, value in itertools.pairwise(args)
            if option in ("--add-scram", "-S") and (match := re.search(r"name=([^,\]]+)", value))
        ]
        folder = _log_dir(properties)
        (folder / SCRAM_USERS).write_text("".join(f"{user}\n" for user in users))
    return done.returncode


def _jaas_module(opts: str) -> str | None:
    """The KafkaServer login module of the JAAS file named in KAFKA_OPTS."""
    for word in shlex.split(opts):
        if word.startswith("-Djava.security.auth.login.config="):
            text = Path(word.split("=", 1)[1]).read_text()
            found = re.search(r"KafkaServer\s*\{(.*?)\}\s*;", text, re.DOTALL)
            if found is not None and found.group(1).strip():
                return " ".join(found.group(1).split())
    return None


def _from_jks(properties: dict[str, str], folder: Path) -> dict[str, str]:
    """JKS key and trust stores as PKCS12 and PEM (keytool), the keys pointing at them."""
    out = dict(properties)
    keystore = properties.get("ssl.keystore.location", "")
    if keystore.endswith(".jks") and properties.get("ssl.keystore.type", "JKS").upper() == "JKS":
        password = properties.get("ssl.keystore.password", "")
        target = folder / (Path(keystore).stem + ".p12")
        subprocess.run(
            ["keytool", "-importkeystore", "-noprompt", "-srckeystore", keystore,
             "-srcstoretype", "JKS", "-srcstorepass", password, "-destkeystore", str(target),
             "-deststoretype", "PKCS12", "-deststorepass", password,
             "-destkeypass", password],
            check=True, capture_output=True,
        )  # fmt: skip
        out.update({"ssl.keystore.location": str(target), "ssl.keystore.type": "PKCS12"})
        out.pop("ssl.key.password", None)  # a PKCS12 store's key takes the store's password
    truststore = properties.get("ssl.truststore.location", "")
    if truststore.endswith(".jks") and properties.get("ssl.truststore.type", "JKS").upper() == "JKS":
        password = properties.get("ssl.truststore.password", "")
        listing = subprocess.run(
            ["keytool", "-list", "-rfc", "-keystore", truststore, "-storepass", password],
            check=True, capture_output=True, text=True,
        ).stdout  # fmt: skip
        pems = re.findall(r"-----BEGIN CERTIFICATE-----.*?-----END CERTIFICATE-----", listing, re.DOTALL)
        target = folder / (Path(truststore).stem + ".pem")
        target.write_text("\n".join(pems) + "\n")
        out.update({"ssl.truststore.location": str(target), "ssl.truststore.type": "PEM"})
        out.pop("ssl.truststore.password", None)
    return out


def _sasl_listeners(properties: dict[str, str]) -> list[str]:
    protocols = dict(
        entry.split(":", 1) for entry in properties.get("listener.security.protocol.map", "").split(",") if entry
    )
    names = [entry.split("://", 1)[0] for entry in properties.get("listeners", "").split(",") if entry]
    return [n for n in names if protocols.get(n, n).startswith("SASL_")]


def serve(args: list[str]) -> int:
    """`kafka-run-class.sh kafka.Kafka <props>`: strom serve, translated (module docstring)."""
    if len(args) != 2 or args[0] != "kafka.Kafka":
        print(f"kafka-run-class.sh: only `kafka.Kafka <properties>` is served by Strom, not {args}",
              file=sys.stderr)  # fmt: skip
        return 1
    source = Path(args[1])
    properties = _properties(source)
    folder = source.parent / "strom"
    folder.mkdir(exist_ok=True)
    properties = _from_jks(properties, folder)
    module = _jaas_module(os.environ.get("KAFKA_OPTS", ""))
    if module is not None:
        for listener in _sasl_listeners(properties):
            for mechanism in properties.get("sasl.enabled.mechanisms", "GSSAPI").split(","):
                key = f"listener.name.{listener.lower()}.{mechanism.strip().lower()}.sasl.jaas.config"
                properties[key] = module
    config = folder / "server.properties"
    config.write_text("".join(f"{k}={v}\n" for k, v in properties.items()))
    users_file = _log_dir(properties) / SCRAM_USERS
    users = users_file.read_text().split() if users_file.exists() else []
    node = properties.get("node.id", "0")
    child = subprocess.Popen(
        [sys.executable, "-m", "strom", "serve", "--config", str(config)],
        stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
    )  # fmt: skip
    signal.signal(signal.SIGTERM, lambda *_: child.terminate())
    threading.Thread(target=_orphaned, args=(child,), daemon=True).start()
    assert child.stdout is not None
    for line in child.stdout:
        sys.stdout.write(line)
        if re.search(r"Strom \S+ started", line):
            print(f"[KafkaRaftServer nodeId={node}] Kafka Server started (Strom)")
            for user in users:
                print(f"Replayed UserScramCredentialRecord creating new entry for {user} (Strom)")
        sys.stdout.flush()
    return child.wait()


def _orphaned(child: subprocess.Popen[str]) -> None:
    """Stop Strom if the test run that started us went away without stopping us (a timeout)."""
    parent = os.getppid()
    while child.poll() is None:
        if os.getppid() != parent:
            child.terminate()
            return
        time.sleep(1)


def topics(args: list[str]) -> int:
    """`kafka-topics.sh ...`: Kafka's own TopicCommand."""
    from compat_tests.kafka_tools.tools import KafkaTools

    return subprocess.run(KafkaTools.resolve().command("kafka-topics", *args)).returncode


SCRIPTS = {"kafka-storage.sh": storage, "kafka-run-class.sh": serve, "kafka-topics.sh": topics}


def main() -> int:
    script, args = sys.argv[1], sys.argv[2:]
    if script not in SCRIPTS:
        print(f"{script}: not one of the scripts Strom serves ({', '.join(SCRIPTS)})", file=sys.stderr)
        return 1
    return SCRIPTS[script](args)


if __name__ == "__main__":
    sys.exit(main())
