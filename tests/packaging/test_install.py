"""What installing Strom gives a user: one import name, a `strom` command, a pytest fixture."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
import zipfile
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def wheel(tmp_path_factory: pytest.TempPathFactory) -> zipfile.ZipFile:
    out = tmp_path_factory.mktemp("wheel")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(out), str(REPO)],
        capture_output=True, text=True, timeout=300,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout + done.stderr
    (built,) = out.glob("strom-*.whl")
    return zipfile.ZipFile(built)


def test_the_wheel_adds_one_top_level_import_name(wheel: zipfile.ZipFile) -> None:
    top = {name.split("/")[0] for name in wheel.namelist()}
    assert {t for t in top if not t.endswith(".dist-info")} == {"strom"}
    for package in ("wire", "config", "storage", "coordinator", "broker", "cli"):
        assert f"strom/{package}/__init__.py" in wheel.namelist()
    assert "strom/wire/messages/produce.py" in wheel.namelist()
    # the JSON definitions are the generator's input, not part of the install
    assert not [n for n in wheel.namelist() if n.endswith(".json")]


def test_the_wheel_registers_the_command_and_the_pytest_plugin(wheel: zipfile.ZipFile) -> None:
    (entry_points,) = [n for n in wheel.namelist() if n.endswith(".dist-info/entry_points.txt")]
    text = wheel.read(entry_points).decode()
    assert "[console_scripts]\nstrom = strom.__main__:main" in text
    assert "[pytest11]\nstrom = strom.broker.testing.pytest_plugin" in text


def test_a_users_test_gets_a_broker_from_the_fixture(tmp_path: Path) -> None:
    """A test in another project uses `strom_broker` with no set-up (the pytest11 entry point)."""
    (tmp_path / "test_user.py").write_text(textwrap.dedent('''
        from kafka import KafkaConsumer, KafkaProducer, TopicPartition

        def test_round_trip(strom_broker):
            producer = KafkaProducer(bootstrap_servers=strom_broker.bootstrap)
            producer.send("greetings", b"hello").get(timeout=30)
            producer.close()
            consumer = KafkaConsumer(bootstrap_servers=strom_broker.bootstrap,
                                     consumer_timeout_ms=10_000)
            consumer.assign([TopicPartition("greetings", 0)])
            consumer.seek_to_beginning()
            assert [m.value for m in consumer] == [b"hello"]
            consumer.close()
    '''))
    env = {k: v for k, v in os.environ.items() if k != "PYTEST_ADDOPTS"}
    env["PYTHONPATH"] = os.pathsep.join([str(REPO), *filter(None, [env.get("PYTHONPATH")])])
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", str(tmp_path / "test_user.py")],
        cwd=tmp_path, capture_output=True, text=True, timeout=120, env=env,
    )  # fmt: skip
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
    assert "1 passed" in done.stdout
