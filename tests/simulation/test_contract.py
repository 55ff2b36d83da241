"""The simulation's contract with broker code: the machine is reached through
`strom.broker.runtime` (and files through `strom.storage.disk`), never around them.

A call to `time.time()`, `uuid.uuid4()`, `trio.to_thread.run_sync` or `trio.open_tcp_stream`
in the broker would run on the real machine inside a simulation: a run would stop replaying
from its seed (or block on a real thread while the virtual clock races ahead). This test reads
the source of `strom.broker`, `strom.coordinator` and `strom.storage` and fails on any reference
to the machine outside the places listed in ALLOWED, each with the reason it is harmless.
"""

from __future__ import annotations

import ast
from pathlib import Path

import strom

ROOT = Path(strom.__file__).resolve().parent.parent

MACHINE = {
    "time.time": "runtime.wall_clock_ms",
    "time.time_ns": "runtime.wall_clock_ms",
    "time.monotonic": "runtime.monotonic_ms or trio.current_time",
    "time.monotonic_ns": "runtime.monotonic_ms or trio.current_time",
    "uuid.uuid4": "runtime.new_uuid",
    "uuid.uuid1": "runtime.new_uuid",
    "os.urandom": "runtime.new_random",
    "random.Random": "runtime.new_random",
    "random.random": "runtime.current().random",
    "random.choice": "runtime.current().random",
    "random.randint": "runtime.current().random",
    "random.shuffle": "runtime.current().random",
    "random.uniform": "runtime.current().random",
    "trio.to_thread.run_sync": "runtime.to_thread",
    "trio.open_tcp_stream": "runtime.current().network.connect",
    "trio.open_tcp_listeners": "runtime.current().network.listen",
    "trio.open_ssl_over_tcp_stream": "runtime.current().network.connect, then trio.SSLStream",
    "threading.Thread": "runtime.to_thread",
}

ALLOWED: dict[tuple[str, str], str] = {
    ("broker/runtime.py", "*"): "the production implementations themselves",
    ("broker/testing/*", "*"): "test harnesses drive real processes from outside",
    ("broker/monitoring/*", "*"): "the metrics HTTP endpoint and process CPU figures: scraped, "
    "never part of the cluster's behaviour (a simulation leaves metrics.listener unset)",
    ("broker/metrics/recorder.py", "time.monotonic"): "commit latency, a metric only",
    ("broker/process/app.py", "trio.open_tcp_listeners"): "metrics.listener (see monitoring)",
    ("broker/process/storage_tool.py", "*"): "`strom format` runs before any broker",
    ("broker/security/*", "*"): "SASL/SCRAM nonces and salts, OAuth key reloads: a "
    "simulation's listeners are plaintext",
    ("storage/meta_properties.py", "uuid.uuid4"): "new_cluster_id's default, for "
    "`strom random-uuid` (the broker passes its runtime's)",
    ("storage/log/log_manager.py", "uuid.uuid4"): "the unique suffix of a deleted partition's "
    "directory name",
    ("storage/log/log_manager.py", "time.monotonic"): "how long loading took, for a log line",
    ("storage/log/log_loader.py", "time.monotonic"): "how long recovery took, for a log line",
    ("storage/log/partition.py", "random.Random"): "segment.jitter.ms draws (0 by default: "
    "none are drawn)",
    ("storage/cleaner/*", "*"): "the log cleaner's own thread and its throughput figures (a "
    "simulation turns it off: log.cleaner.enable=false)",
    ("storage/log/deleter.py", "threading.Thread"): "removing a deleted partition's files",
    ("storage/disk/*", "*"): "the disks themselves and their clocks",
}


TYPES = {"random.Random", "threading.Thread"}
"""Also named in annotations: only a call reaches the machine."""


def _dotted(node: ast.AST) -> str:
    """`a.b.c` for a chain of attributes on a name ("" when it starts elsewhere: a call)."""
    parts = []
    while isinstance(node, ast.Attribute):
        parts.append(node.attr)
        node = node.value
    if not isinstance(node, ast.Name):
        return ""
    parts.append(node.id)
    return ".".join(reversed(parts))


def _allowed(path: str, name: str) -> bool:
    for (where, what), _why in ALLOWED.items():
        matches = path == where or (where.endswith("/*") and path.startswith(where[:-1]))
        if matches and what in ("*", name):
            return True
    return False


def references() -> list[tuple[str, int, str]]:
    found = []
    for package in ("broker", "coordinator", "storage"):
        for file in sorted((ROOT / package).rglob("*.py")):
            relative = file.relative_to(ROOT).as_posix()
            tree = ast.parse(file.read_text(), relative)
            for node in ast.walk(tree):
                if isinstance(node, ast.Call):
                    name = _dotted(node.func)
                elif isinstance(node, ast.Attribute):
                    name = _dotted(node)  # a function passed on (`default=uuid.uuid4`)
                    if name in TYPES:
                        continue
                else:
                    continue
                if name in MACHINE and not _allowed(relative, name):
                    found.append((relative, node.lineno, name))
    return sorted(set(found))


def test_broker_code_reaches_the_machine_through_the_runtime() -> None:
    found = references()
    assert not found, "\n".join(
        f"{path}:{line}: {name} (use {MACHINE[name]}, strom.broker.runtime)"
        for path, line, name in found
    )


def test_the_scan_sees_a_planted_call(tmp_path: Path) -> None:
    tree = ast.parse("import time\nnow = time.time_ns() // 1_000_000\n")
    names = [_dotted(n) for n in ast.walk(tree) if isinstance(n, ast.Attribute)]
    assert "time.time_ns" in names
    assert not _allowed("broker/data/append.py", "time.time_ns")
    assert _allowed("broker/testing/cluster.py", "time.time_ns")
