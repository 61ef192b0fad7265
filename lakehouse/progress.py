"""Progress and summaries for long work, on stderr: a live bar on a terminal, plain lines elsewhere."""

from __future__ import annotations

import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

console = Console(stderr=True, highlight=False, soft_wrap=True)


class Reporter:
    """Counts work done against a total and shows the rate and what is left.

    Args:
        what: the unit shown, e.g. ``"lines"``.
        total: how many there are.
        label: what the work is, e.g. ``"checking landing lines"``.
    """

    def __init__(self, label: str, total: int, what: str) -> None:
        self.label, self.total, self.what = label, total, what
        self.done = 0
        self.started = time.monotonic()
        self._progress: Progress | None = None
        self._task: object = None
        self._last_line = self.started
        self._lines = 0

    def advance(self, amount: int) -> None:
        """Record ``amount`` more units done."""
        self.done += amount
        if self._progress is not None:
            self._progress.update(self._task, advance=amount)  # type: ignore[arg-type]
            return
        now = time.monotonic()  # plain lines: every 5 s of long work, and its end (short work stays quiet)
        if now - self._last_line >= 5 or (self.done >= self.total and self._lines):
            self._last_line = now
            self._lines += 1
            rate = f"{self.rate:,.0f}" if self.rate >= 10 else f"{self.rate:.2g}"
            console.print(f"  {self.label}: {self.done:,}/{self.total:,} {self.what} ({rate} {self.what}/s)")

    @property
    def rate(self) -> float:
        """Units per second so far."""
        return self.done / max(time.monotonic() - self.started, 1e-9)


@contextmanager
def progress(label: str, total: int, what: str) -> Iterator[Reporter]:
    """Show progress of ``total`` units of work; a bar on a terminal, plain lines otherwise."""
    reporter = Reporter(label, total, what)
    if console.is_terminal and sys.stderr.isatty():
        with Progress(TextColumn("[bold]{task.description}"), BarColumn(), MofNCompleteColumn(),
                      TextColumn(what), TimeElapsedColumn(), TextColumn("left"), TimeRemainingColumn(),
                      console=console, transient=True) as bar:
            reporter._progress = bar
            reporter._task = bar.add_task(label, total=total)
            yield reporter
    else:
        yield reporter


class Timeline:
    """The wall time of each named step of a run, in the order they end (seconds, rounded to ms).

    ``mark(name)`` ends a step that began at the previous mark (or at creation). Steps that run
    lazily in the engine are charged to the step whose action (a write, a count) runs them.
    """

    def __init__(self) -> None:
        self.steps: dict[str, float] = {}
        self._last = time.monotonic()

    def mark(self, name: str) -> None:
        """End the step ``name`` now (a repeated name adds up)."""
        now = time.monotonic()
        self.steps[name] = round(self.steps.get(name, 0.0) + now - self._last, 3)
        self._last = now
