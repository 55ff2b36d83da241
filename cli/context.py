"""What every command gets: the session (where the cluster is) and the output (how to print)."""

from __future__ import annotations

from dataclasses import dataclass

import click

from strom.cli.output import Output
from strom.cli.session import Session


@dataclass
class Context:
    session: Session
    out: Output


pass_context = click.make_pass_decorator(Context)
