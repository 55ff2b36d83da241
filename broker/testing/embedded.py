"""Run a broker inside a test: in this trio run, or as a child process.

Both bind port 0 and report the port they got (never a guessed port: a
connect-retry loop aimed at an ephemeral port can end up connected to itself).

    async with open_broker(tmp_path) as broker:       # in-process, trio
        client.connect(broker.bootstrap)

    with BrokerProcess(tmp_path) as broker:           # child `strom serve`
        Producer({"bootstrap.servers": broker.bootstrap})
"""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
import uuid
from collections import deque
from collections.abc import AsyncIterator, Callable, Mapping
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from types import TracebackType

import trio

import strom
from strom.broker.process.app import Broker
from strom.broker.testing.faults import FaultControl
from strom.config import Listener, load_config
from strom.coordinator.controller.state_machine import LATEST_METADATA_VERSION
from strom.coordinator.metadata.image import METADATA_VERSION
from strom.coordinator.metadata.kraft_checkpoint import encode_bootstrap
from strom.storage.meta_properties import format_directories, new_cluster_id

_STARTED = re.compile(r"Strom \S+ started: .*?listeners=(?P<listeners>\S+)")
_METRICS = re.compile(r" metrics=http://(?P<address>\S+?)\"?$")


def _test_defaults(data_dir: Path) -> dict[str, str]:
    return {
        "listeners": "PLAINTEXT://127.0.0.1:0",
        "log.dirs": str(data_dir),
        "group.initial.rebalance.delay.ms": "0",
    }


@dataclass
class EmbeddedBroker:
    broker: Broker
    endpoints: list[Listener]

    @property
    def bootstrap(self) -> str:
        first = self.endpoints[0]
        return f"{first.host}:{first.port}"


@asynccontextmanager
async def open_broker(
    data_dir: Path,
    overrides: Mapping[str, str] | None = None,
    *,
    features: Mapping[str, int] | None = None,
) -> AsyncIterator[EmbeddedBroker]:
    """Start a broker in the current trio run; shut it down cleanly on exit. `features`:
    feature levels to finalize, as `strom format --feature` does (a new data directory)."""
    config = load_config(extra={**_test_defaults(data_dir), **(overrides or {})})
    if features:
        format_directories(
            config.data_dirs,
            config.metadata_dir,
            cluster_id=new_cluster_id(),
            node_id=config.node_id,
            new_uuid=uuid.uuid4,
            ignore_formatted=True,
            bootstrap=encode_bootstrap({**features, METADATA_VERSION: LATEST_METADATA_VERSION}, 0),
            voters=frozenset(config.quorum_voters or {config.node_id}),
        )
    broker = Broker(config)
    async with trio.open_nursery() as nursery:
        endpoints = await nursery.start(broker.run)
        try:
            yield EmbeddedBroker(broker, endpoints)
        finally:
            broker.shutdown()


def child_environment() -> dict[str, str]:
    """The environment of a `strom` child: it imports the same `strom` as this process.

    Where PYTHONDONTWRITEBYTECODE keeps `.pyc` files out of the source tree (a checkout, as on
    the project's machines), the children keep their bytecode in a cache of their own
    (PYTHONPYCACHEPREFIX, `bytecode_cache()`) instead of compiling all of Strom at every start:
    about 0.3 s of CPU per child, which a test of three nodes, or of a CLI run after another,
    pays many times. Python checks each cached file against its source, so an edited module is
    compiled again."""
    home = str(Path(strom.__file__).resolve().parent.parent)
    path = [home, *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    env = {**os.environ, "PYTHONUNBUFFERED": "1", "PYTHONPATH": os.pathsep.join(path)}
    if env.get("PYTHONDONTWRITEBYTECODE") and not env.get("PYTHONPYCACHEPREFIX"):
        env["PYTHONDONTWRITEBYTECODE"] = ""
        env["PYTHONPYCACHEPREFIX"] = str(bytecode_cache())
    return env


def bytecode_cache() -> Path:
    """The test children's bytecode: under the user's cache directory (not a shared /tmp path
    that another user could fill first)."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "strom" / "bytecode"


class BrokerProcess:
    """`strom serve` as a child process, with its data directory kept across restarts.

    `output` keeps the last 2,000 log lines; `on_line`, if given, sees every line
    (from a reader thread), for a test that must check a log longer than that.
    """

    def __init__(
        self,
        data_dir: Path,
        overrides: Mapping[str, str] | None = None,
        on_line: Callable[[str], None] | None = None,
    ) -> None:
        self.data_dir = data_dir
        self.overrides = {**_test_defaults(data_dir), **(overrides or {})}
        self.process: subprocess.Popen[str] | None = None
        self.bootstrap = ""
        self.port = 0
        self.metrics_address = ""
        """host:port of the metrics listener (with `metrics.listener` set), once started."""
        self.output: deque[str] = deque(maxlen=2000)
        self.on_line = on_line
        self.faults: FaultControl | None = None
        """Request fault rules (`fail`, `delay`, `clear_faults`), once started."""

    def start(self, timeout: float = 20.0, same_port: bool = False) -> str:
        """Start and wait for the startup line; return the bootstrap address."""
        overrides = dict(self.overrides)
        if same_port and self.port:
            overrides["listeners"] = f"PLAINTEXT://127.0.0.1:{self.port}"
        args = [sys.executable, "-m", "strom", "serve"]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        if self.faults is None:
            self.faults = FaultControl()
        self.process = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
            text=True, env={**child_environment(), **self.faults.environment()},
        )  # fmt: skip
        ready = threading.Event()
        threading.Thread(target=self._drain, args=(self.process, ready), daemon=True).start()
        if not ready.wait(timeout) or not self.bootstrap:
            self.kill()
            tail = "\n".join(list(self.output)[-30:])
            raise RuntimeError(f"strom serve did not start within {timeout}s; its output:\n{tail}")
        return self.bootstrap

    def _drain(self, process: subprocess.Popen[str], ready: threading.Event) -> None:
        assert process.stderr is not None
        for line in process.stderr:
            self.output.append(line.rstrip("\n"))
            if self.on_line is not None:
                self.on_line(line.rstrip("\n"))
            if not ready.is_set():
                match = _STARTED.search(line)
                if match:
                    first = match.group("listeners").split(",")[0]
                    host_port = first.split("://", 1)[1]
                    self.bootstrap = host_port
                    self.port = int(host_port.rsplit(":", 1)[1])
                    metrics = _METRICS.search(line.rstrip("\n"))
                    self.metrics_address = metrics.group("address") if metrics else ""
                    ready.set()
        process.stderr.close()
        ready.set()  # the process ended; start() sees no bootstrap if it never started

    def stop(self, timeout: float = 10.0) -> int:
        """SIGTERM and wait: a clean shutdown. Returns the exit code."""
        process = self._require()
        process.send_signal(signal.SIGTERM)
        return process.wait(timeout)

    def kill(self) -> None:
        """SIGKILL: an unclean stop, as a crash or power loss would leave things."""
        if self.process is not None and self.process.poll() is None:
            self.process.kill()
            self.process.wait()

    def restart(self, clean: bool = True) -> str:
        if clean:
            self.stop()
        else:
            self.kill()
        return self.start(same_port=True)

    def _require(self) -> subprocess.Popen[str]:
        if self.process is None:
            raise RuntimeError("broker process not started")
        return self.process

    def _faults(self) -> FaultControl:
        if self.faults is None:
            raise RuntimeError("broker process not started")
        return self.faults

    def fail(
        self,
        api: str | int,
        error: str | int,
        *,
        count: int | None = 1,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        """Make the next `count` requests of `api` ("Produce", ...) fail with `error`
        ("NOT_LEADER_OR_FOLLOWER", ...), for `topic` (and `partition`) only if given
        (`strom.broker.network.faults` says what each API answers)."""
        self._faults().add(api, error=error, count=count, topic=topic, partition=partition)

    def delay(
        self,
        api: str | int,
        ms: int,
        *,
        count: int | None = None,
        topic: str | None = None,
        partition: int | None = None,
    ) -> None:
        """Answer the next `count` requests of `api` `ms` late (None: until `clear_faults`)."""
        self._faults().add(api, delay_ms=ms, count=count, topic=topic, partition=partition)

    def clear_faults(self) -> None:
        self._faults().clear()

    def __enter__(self) -> BrokerProcess:
        self.start()
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        try:
            if self.process is not None and self.process.poll() is None:
                try:
                    self.stop()
                except subprocess.TimeoutExpired:
                    self.kill()
        finally:
            if self.faults is not None:
                self.faults.close()
