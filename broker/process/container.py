"""The container image's entrypoint: the apache/kafka image's environment variables, mapped to
Strom's configuration by the same rules, so that a compose file or a Testcontainers
`KafkaContainer` written for apache/kafka runs Strom when only the image name changes.

    strom-container run [VAR=value ...]   (the image's /etc/kafka/docker/run)
    strom-container healthcheck           (the image's HEALTHCHECK)

The rules (apache/kafka's docker scripts and its KafkaDockerWrapper):
- every `KAFKA_*` variable but the JVM's and log4j's (`EXCLUDED`) is a server property: drop
  `KAFKA_`, lower-case, then `___` -> `-`, `__` -> `_`, `_` -> `.` (`KAFKA_NODE_ID` -> node.id,
  `KAFKA_LOG_FLUSH_INTERVAL_MESSAGES` -> log.flush.interval.messages);
- `KAFKA_LISTENERS` unset on a node that is not controller-only: the advertised listeners with
  every host replaced by 0.0.0.0;
- a controller-only node (`KAFKA_PROCESS_ROLES=controller`) refuses `KAFKA_ADVERTISED_LISTENERS`;
- `CLUSTER_ID` formats the storage (default `DEFAULT_CLUSTER_ID`, as the image's); storage
  already formatted is left alone;
- a mounted `server.properties` (`/mnt/shared/config`) is the base the variables are added to;
  with neither a mounted file nor a variable the image's default (a single combined node,
  `docker/server.properties`) applies;
- arguments `VAR=value` are exported before all this (apache's `run "$@"`).
Strom's own: `KAFKA_LOG4J_ROOT_LOGLEVEL` sets strom.log.level; `log.dirs` defaults to
`/var/lib/kafka/data` (the image's volume); every Strom key works the same way
(`KAFKA_METRICS_LISTENER=http://0.0.0.0:9404` -> metrics.listener).

`container_properties` is the whole mapping as a pure function (tested without a container
engine); `run` writes the result, formats and execs `strom serve`.
"""

from __future__ import annotations

import argparse
import os
import re
import socket
import sys
import urllib.request
from collections.abc import Mapping
from pathlib import Path

from strom.config import ConfigError, load_config
from strom.config.properties_file import read_properties_file

DEFAULT_CLUSTER_ID = "5L6g3nShT-eMCtK--X86sw"
"""apache/kafka's default CLUSTER_ID (its configureDefaults)."""
DEFAULT_LOG_DIRS = "/var/lib/kafka/data"
MOUNTED_CONFIG_DIR = Path("/mnt/shared/config")
FINAL_CONFIG_DIR = Path("/opt/strom/config")
DEFAULTS_FILE = Path("/etc/kafka/docker/server.properties")

EXCLUDED = frozenset({
    "KAFKA_VERSION", "KAFKA_HEAP_OPTS", "KAFKA_LOG4J_OPTS", "KAFKA_OPTS", "KAFKA_JMX_OPTS",
    "KAFKA_JVM_PERFORMANCE_OPTS", "KAFKA_GC_LOG_OPTS", "KAFKA_LOG4J_ROOT_LOGLEVEL",
    "KAFKA_LOG4J_LOGGERS", "KAFKA_TOOLS_LOG4J_LOGLEVEL", "KAFKA_JMX_HOSTNAME", "KAFKA_JMX_PORT",
})  # fmt: skip
"""Variables of the JVM and log4j, not server properties (apache's list, plus the JMX port)."""

_LOG4J_LEVELS = {"TRACE": "TRACE", "DEBUG": "DEBUG", "INFO": "INFO", "WARN": "WARN",
                 "ERROR": "ERROR", "FATAL": "ERROR", "OFF": "ERROR", "ALL": "TRACE"}  # fmt: skip
_HOST = re.compile(r"://[^:,]*:")


class ContainerConfigError(Exception):
    """The environment cannot be turned into a configuration; the message says what to fix."""


def property_name(variable: str) -> str:
    """`KAFKA_FOO_BAR` -> `foo.bar` (`___` -> `-`, `__` -> `_`), as apache/kafka's image."""
    return (
        variable.removeprefix("KAFKA_").lower()
        .replace("_", ".").replace("...", "-").replace("..", "_")
    )  # fmt: skip


def env_properties(env: Mapping[str, str]) -> dict[str, str]:
    """The server properties the `KAFKA_*` variables give (in sorted variable order)."""
    return {
        property_name(name): value
        for name, value in sorted(env.items())
        if name.startswith("KAFKA_") and name not in EXCLUDED
    }


def container_properties(
    env: Mapping[str, str],
    mounted: Mapping[str, str] | None = None,
    defaults: Mapping[str, str] | None = None,
) -> tuple[dict[str, str], str]:
    """The configuration and cluster id for this environment (see the module docstring).
    `mounted`: a mounted server.properties' contents, if any; `defaults`: the image's default
    server.properties."""
    roles = env.get("KAFKA_PROCESS_ROLES")
    advertised = env.get("KAFKA_ADVERTISED_LISTENERS")
    derived = dict(env)
    if roles is not None and roles.strip() == "controller":
        if advertised:
            raise ContainerConfigError(
                "KAFKA_ADVERTISED_LISTENERS is not supported on a KRaft controller "
                "(KAFKA_PROCESS_ROLES=controller): remove it"
            )
        derived.pop("KAFKA_ADVERTISED_LISTENERS", None)
    elif not env.get("KAFKA_LISTENERS") and advertised:
        derived["KAFKA_LISTENERS"] = _HOST.sub("://0.0.0.0:", advertised)
    from_env = env_properties(derived)
    if mounted is not None:
        properties = {**mounted, **from_env}
    else:
        properties = dict(from_env)
    if not properties:
        properties = dict(defaults or {})
    properties.setdefault("log.dirs", DEFAULT_LOG_DIRS)
    level = env.get("KAFKA_LOG4J_ROOT_LOGLEVEL", "").strip().upper()
    if level:
        if level not in _LOG4J_LEVELS:
            raise ContainerConfigError(
                f"KAFKA_LOG4J_ROOT_LOGLEVEL={level} is not a log level (TRACE, DEBUG, INFO, "
                "WARN, ERROR)"
            )
        properties.setdefault("strom.log.level", _LOG4J_LEVELS[level])
    cluster_id = env.get("CLUSTER_ID") or DEFAULT_CLUSTER_ID
    return properties, cluster_id


def write_properties(path: Path, properties: Mapping[str, str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    lines = [f"{key}={_escape(value)}" for key, value in properties.items()]
    path.write_text("# written by strom-container from the environment\n" + "\n".join(lines) + "\n")


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n")


def run(args: argparse.Namespace) -> int:  # noqa: RET503 (it ends in exec)
    for assignment in args.assignments:  # apache's run "$@": VAR=value arguments
        name, sep, value = assignment.partition("=")
        if not sep:
            _fail(f"argument {assignment!r} is not VAR=value")
            return 2
        os.environ[name] = value
    mounted_file = args.mounted_config_dir / "server.properties"
    mounted = read_properties_file(str(mounted_file)) if _has_content(mounted_file) else None
    defaults = read_properties_file(str(args.defaults)) if args.defaults.exists() else {}
    try:
        properties, cluster_id = container_properties(os.environ, mounted, defaults)
        load_config(extra=properties)  # refuse a bad configuration before formatting
    except (ContainerConfigError, ConfigError) as exc:
        _fail(str(exc))
        return 2
    final = args.final_config_dir / "server.properties"
    write_properties(final, properties)
    print(f"===> Using cluster id {cluster_id}; configuration in {final}", flush=True)
    from strom.broker.process.cli import main as strom_main

    code = strom_main(
        ["format", "--config", str(final), "--cluster-id", cluster_id, "--ignore-formatted"]
    )
    if code != 0:
        return code
    sys.stdout.flush()
    os.execv(sys.executable, [sys.executable, "-m", "strom", "serve", "--config", str(final)])


def _has_content(path: Path) -> bool:
    try:
        return bool(path.read_text().strip())
    except OSError:
        return False


def healthcheck(args: argparse.Namespace) -> int:
    """0 when the broker is ready: /readyz on metrics.listener if set, else a Kafka
    ApiVersions round trip on the first client listener."""
    try:
        config = load_config(str(args.config))
    except (ConfigError, OSError) as exc:
        _fail(f"cannot read {args.config}: {exc}")
        return 1
    metrics = config.metrics_endpoint
    try:
        if metrics is not None:
            host = _local(metrics[0])
            with urllib.request.urlopen(f"http://{host}:{metrics[1]}/readyz", timeout=5) as answer:
                return 0 if answer.status == 200 else 1
        client = [
            lst for lst in config.listener_endpoints if lst.name not in config.controller_listeners
        ]
        if not client:
            return 0  # a controller-only node: alive is all a probe can ask here
        return 0 if _api_versions(_local(client[0].host), client[0].port) else 1
    except OSError as exc:
        _fail(f"not ready: {exc}")
        return 1


def _local(host: str) -> str:
    return "127.0.0.1" if host in ("", "0.0.0.0", "::") else host


def _api_versions(host: str, port: int) -> bool:
    from strom.wire.connection import NEED_DATA, ClientConnection
    from strom.wire.messages.api_versions import ApiVersionsRequest

    conn = ClientConnection("strom-healthcheck")
    with socket.create_connection((host, port), timeout=5) as sock:
        sock.sendall(conn.send_request(ApiVersionsRequest(), 0))
        while True:
            event = conn.next_response()
            if event is not NEED_DATA:
                return isinstance(event, tuple)
            data = sock.recv(65536)
            if not data:
                return False
            conn.receive_data(data)


def _fail(message: str) -> None:
    print(f"strom-container: {message}", file=sys.stderr, flush=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="strom-container", description=__doc__.split("\n")[0])
    sub = parser.add_subparsers(dest="command", required=True)
    start = sub.add_parser("run", help="map the environment to a configuration, format, serve")
    start.add_argument("assignments", nargs="*", metavar="VAR=value")
    start.add_argument("--mounted-config-dir", type=Path, default=MOUNTED_CONFIG_DIR)
    start.add_argument("--final-config-dir", type=Path, default=FINAL_CONFIG_DIR)
    start.add_argument("--defaults", type=Path, default=DEFAULTS_FILE)
    check = sub.add_parser("healthcheck", help="exit 0 when the broker is ready")
    check.add_argument("--config", type=Path, default=FINAL_CONFIG_DIR / "server.properties")
    args = parser.parse_args(argv)
    return run(args) if args.command == "run" else healthcheck(args)


if __name__ == "__main__":
    sys.exit(main())
