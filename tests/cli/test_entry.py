"""The `strom` command's dispatch: the broker's commands without the CLI extra, the client
commands' one-line hint when it is missing, `--help`, completion; format strings."""

from __future__ import annotations

import os
import subprocess
import sys

import click
import pytest

from strom.broker.testing.embedded import child_environment
from strom.cli.records import input_pattern, parse_format, render

_WITHOUT = "import sys; sys.modules['{module}'] = None; from strom.__main__ import main; raise SystemExit(main({args!r}))"


def _run_without(module: str, args: list[str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", _WITHOUT.format(module=module, args=args)],
        capture_output=True, text=True, timeout=60, env=child_environment(),
    )  # fmt: skip


@pytest.mark.parametrize("module", ["click", "rich", "confluent_kafka"])
def test_a_missing_extra_names_the_pip_command_in_one_line(module: str) -> None:
    done = _run_without(module, ["topic", "list"])
    assert done.returncode == 1
    assert done.stderr == (
        f"strom: error: 'strom topic' needs the CLI extra ({module} is not installed): "
        "pip install 'strom[cli]'\n"
    )


def test_the_broker_commands_need_no_extra() -> None:
    assert _run_without("click", ["random-uuid"]).returncode == 0
    serve = _run_without("click", ["serve", "--help"])
    assert serve.returncode == 0
    assert "--override" in serve.stdout
    top = _run_without("click", ["--help"])
    assert top.returncode == 0
    assert "pip install 'strom[cli]'" in top.stdout


def test_help_lists_every_command() -> None:
    done = subprocess.run([sys.executable, "-m", "strom", "--help"], capture_output=True,
                          text=True, timeout=60, env=child_environment())  # fmt: skip
    assert done.returncode == 0
    for command in ("serve", "format", "topic", "group", "produce", "consume", "cluster", "config"):
        assert f"  {command} " in done.stdout


def test_shell_completion() -> None:
    script = subprocess.run([sys.executable, "-m", "strom", "completion", "bash"],
                            capture_output=True, text=True, timeout=60, env=child_environment())  # fmt: skip
    assert script.returncode == 0
    assert "_STROM_COMPLETE=bash_complete" in script.stdout
    env = {**child_environment(), "_STROM_COMPLETE": "bash_complete", "COMP_WORDS": "strom gr",
           "COMP_CWORD": "1"}  # fmt: skip
    done = subprocess.run([sys.executable, "-m", "strom"], capture_output=True, text=True,
                          timeout=60, env=env)  # fmt: skip
    assert "plain,group" in done.stdout.splitlines()
    assert os.environ.get("_STROM_COMPLETE") is None


def test_output_format_strings() -> None:
    parts = parse_format("%t/%p@%o %k=%v %h %T 100%%\\n", set("tpokvhT"))
    record = {"topic": "t", "partition": 1, "offset": 7, "key": None, "value": "v",
              "headers": [("a", "1"), ("b", "2")], "timestamp": 5}  # fmt: skip
    assert render(parts, record) == "t/1@7 =v a=1,b=2 5 100%\n"


def test_input_format_strings() -> None:
    pattern = input_pattern(parse_format("%k %v\\n", set("kvph")))
    match = pattern.fullmatch("key with no space? no: value has spaces")
    assert match is not None
    assert match.group("k") == "key"
    assert match.group("v") == "with no space? no: value has spaces"
    assert input_pattern(parse_format("%v\\n", set("kvph"))).fullmatch("") is not None
    with pytest.raises(click.BadParameter, match="unknown %x"):
        parse_format("%x", set("kv"))
    with pytest.raises(click.BadParameter, match="appears twice"):
        input_pattern(parse_format("%k %k", set("kv")))
