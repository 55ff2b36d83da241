"""What commands print: tables for people, JSON for scripts (`--format json`), progress on
stderr for long operations (only on a terminal, so pipes and scripts see clean output)."""

from __future__ import annotations

import json
import sys
from collections.abc import Iterable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from typing import Any

from rich.console import Console
from rich.progress import BarColumn, MofNCompleteColumn, Progress, TextColumn, TimeElapsedColumn
from rich.table import Table


@dataclass
class Output:
    """How this invocation prints (from the global --format option)."""

    json: bool = False

    def __post_init__(self) -> None:
        # a pipe gets whole rows (no folding at 80 columns): scripts cut and grep them
        self.out = Console(highlight=False, width=None if sys.stdout.isatty() else 1000)
        self.err = Console(stderr=True, highlight=False)

    def data(self, value: Any) -> None:
        """Print `value` as JSON (in JSON mode; commands call `table` otherwise)."""
        sys.stdout.write(json.dumps(value, sort_keys=False, default=str) + "\n")

    def table(
        self, columns: Sequence[str], rows: Iterable[Sequence[Any]], title: str | None = None
    ) -> None:
        table = Table(
            title=title, box=None, header_style="bold", pad_edge=False, title_justify="left"
        )
        for column in columns:
            table.add_column(column, overflow="fold")
        for row in rows:
            table.add_row(*("-" if cell is None else str(cell) for cell in row))
        self.out.print(table)

    def pairs(self, items: Iterable[tuple[str, Any]], title: str | None = None) -> None:
        """A two-column key/value table."""
        table = Table(
            title=title, box=None, show_header=False, pad_edge=False, title_justify="left"
        )
        table.add_column(style="bold")
        table.add_column(overflow="fold")
        for key, value in items:
            table.add_row(key, "-" if value is None else str(value))
        self.out.print(table)

    def note(self, text: str) -> None:
        """A line for people (stderr in JSON mode, so stdout stays parseable)."""
        (self.err if self.json else self.out).print(text)

    @contextmanager
    def progress(self, description: str, total: int | None) -> Iterator[Any]:
        """A progress bar on stderr while the block runs (a no-op when stderr is no terminal);
        yields `advance(n=1)`."""
        if not self.err.is_terminal:
            yield lambda n=1: None
            return
        columns = [TextColumn("{task.description}"), BarColumn(), MofNCompleteColumn(),
                   TimeElapsedColumn()]  # fmt: skip
        with Progress(*columns, console=self.err, transient=True) as bar:
            task = bar.add_task(description, total=total)
            yield lambda n=1: bar.advance(task, n)
