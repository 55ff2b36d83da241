"""The import rules in pyproject.toml: each one holds for the tree, and each one would catch a
break of it (an import planted in the graph makes the contract fail), so none can pass vacuously.

`lint-imports` runs the same contracts in CI; these tests keep the list and the reasons together:
a new contract needs a planted break here, and a contract removed fails the list check.
"""

from __future__ import annotations

import subprocess
import sys
from copy import deepcopy
from pathlib import Path
from typing import Any

import grimp
import pytest
from importlinter.api import read_configuration
from importlinter.contracts.acyclic_siblings import AcyclicSiblingsContract
from importlinter.contracts.forbidden import ForbiddenContract
from importlinter.contracts.layers import LayersContract
from importlinter.domain.contract import Contract

REPO = Path(__file__).resolve().parents[2]
CONFIG = read_configuration(str(REPO / "pyproject.toml"))
SESSION: dict[str, Any] = CONFIG["session_options"]
CONTRACTS: dict[str, dict[str, Any]] = {
    c.get("id", c["name"]): c for c in CONFIG["contracts_options"]
}
TYPES: dict[str, type[Contract]] = {
    "layers": LayersContract,
    "forbidden": ForbiddenContract,
    "acyclic_siblings": AcyclicSiblingsContract,
}

BREAKS: dict[str, list[tuple[str, str]]] = {
    # an import that each contract forbids, the way a change could plausibly add it
    "layers": [("strom.wire.connection", "strom.broker.state")],
    "broker-floors": [
        ("strom.broker.data.append", "strom.broker.state"),  # the data path reaching up
        ("strom.broker.core_state", "strom.broker.replication.replication_manager"),
        ("strom.broker.drivers.groups", "strom.broker.data.append"),
        ("strom.broker.admin.forwarding", "strom.broker.handlers.request"),
        ("strom.broker.metrics.recorder", "strom.broker.state"),  # the counters reaching up
        ("strom.broker.network.server", "strom.broker.monitoring.endpoint"),
        ("strom.broker.runtime", "strom.broker.metrics.recorder"),  # the machine reaching up
    ],
    "cli-is-a-client": [("strom.cli.topics", "strom.broker.state")],  # the CLI reaching in
    "nothing-imports-cli": [("strom.broker.process.cli", "strom.cli.app")],
    "wire-sans-io": [("strom.wire.connection", "trio")],
    "coordinator-pure": [("strom.coordinator.raft.core", "trio")],
    "coordinator-no-file-io": [
        ("strom.coordinator.metadata.raft_entries", "pathlib"),  # a state machine writing files
        ("strom.coordinator.metadata.kraft_checkpoint", "os"),
        ("strom.coordinator.groups.offset_store", "pathlib"),
        ("strom.coordinator.controller.state_machine", "shutil"),
    ],
    "acyclic-siblings": [("strom.storage.log.partition", "strom.storage.cleaner.log_cleaner")],
}


def test_every_contract_has_a_planted_break() -> None:
    """A contract in pyproject.toml gets an `id` and an entry in BREAKS."""
    assert set(CONTRACTS) == set(BREAKS)


def test_the_tree_keeps_every_contract() -> None:
    done = subprocess.run(
        [sys.executable, "-c", "from importlinter.cli import lint_imports_command; "
         "lint_imports_command()"],
        cwd=REPO, capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    assert f"Contracts: {len(CONTRACTS)} kept, 0 broken." in done.stdout, done.stdout


@pytest.fixture(scope="module")
def graph() -> grimp.ImportGraph:
    return grimp.build_graph(
        *SESSION["root_packages"],
        include_external_packages=SESSION["include_external_packages"] == "True",
    )


def _kept(graph: grimp.ImportGraph, contract_id: str) -> bool:
    """Check one contract on a copy of `graph` (a contract may change the graph it checks)."""
    options = {k: v for k, v in CONTRACTS[contract_id].items() if k not in ("id", "name", "type")}
    contract = TYPES[CONTRACTS[contract_id]["type"]](
        CONTRACTS[contract_id]["name"], SESSION, options
    )
    return bool(contract.check(deepcopy(graph), verbose=False).kept)


@pytest.mark.parametrize(
    ("contract_id", "importer", "imported"),
    [(cid, a, b) for cid, breaks in BREAKS.items() for a, b in breaks],
)
def test_a_planted_import_breaks_the_contract(
    graph: grimp.ImportGraph, contract_id: str, importer: str, imported: str
) -> None:
    assert {importer, imported} <= graph.modules, "a module of this planted import was renamed"
    assert _kept(graph, contract_id)
    assert not graph.direct_import_exists(importer=importer, imported=imported)
    planted = deepcopy(graph)
    planted.add_import(importer=importer, imported=imported, line_number=1, line_contents="planted")
    assert not _kept(planted, contract_id)
