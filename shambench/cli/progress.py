"""A rich progress bar that also shows the counters a detector reports (failures, retries, cache hits, ...)."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from rich.console import Console
from rich.progress import (
    BarColumn,
    MofNCompleteColumn,
    Progress,
    TextColumn,
    TimeElapsedColumn,
    TimeRemainingColumn,
)

from shambench.detection.detector import Monitor
from shambench.reporting.console import styled

if TYPE_CHECKING:
    from shambench.runs.sweep import CellReport, SweepPlan


def counting_progress(console: Console | None, enabled: bool = True) -> Progress:
    """The house progress display: description, bar, done/total, elapsed, remaining, and a `stats` text field."""
    return Progress(
        # markup=False: a detector or run name is printed as it is, whatever brackets it holds.
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[stats]}", markup=False),
        console=console,
        disable=not enabled,
    )


class ProgressMonitor(Monitor):
    """Counts predictions and detector counters into a live progress bar."""

    def __init__(self, total: int | None, description: str, console: Console | None = None, enabled: bool = True):
        self.counters: dict[str, float] = {}
        self.progress = counting_progress(console, enabled)
        self.task = self.progress.add_task(description, total=total, stats="")

    def count(self, key: str, n: float = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n
        self._refresh()

    def note(self, message: str) -> None:
        """Print a message above the bar."""
        self.progress.console.print(styled(("note:", "yellow"), " ", message), soft_wrap=True)

    def done(self, item: Any) -> None:
        """One prediction (or context record) is finished."""
        if item.error is not None:
            self.counters["failed"] = self.counters.get("failed", 0) + 1
        self.progress.advance(self.task)
        self._refresh()

    def _refresh(self) -> None:
        stats = " ".join(f"{k}={_fmt(v)}" for k, v in sorted(self.counters.items()) if v)
        self.progress.update(self.task, stats=stats)

    def __enter__(self) -> ProgressMonitor:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def _fmt(v: float) -> str:
    return f"{v:.4f}" if isinstance(v, float) and not v.is_integer() else f"{int(v)}"


class SweepProgress(Monitor):
    """Two bars, cells and predictions, plus the counters detectors report on the workers."""

    def __init__(self, plan: SweepPlan, console: Console, enabled: bool):
        self.progress = counting_progress(console, enabled)
        self.cells = self.progress.add_task("cells", total=len(plan.cells), stats="")
        self.prediction_bar = self.progress.add_task("predictions", total=None, stats="")
        self.counters: dict[str, float] = {}

    def count(self, key: str, n: float = 1) -> None:
        """A detector counter from a worker (Monitor interface)."""
        self.counters[key] = self.counters.get(key, 0) + n
        stats = " ".join(f"{k}={v:g}" for k, v in sorted(self.counters.items()) if v)
        self.progress.update(self.prediction_bar, stats=stats)

    def predictions(self, n: int, failed: int) -> None:
        """`n` predictions were journaled, `failed` of them carrying a detector error."""
        self.progress.advance(self.prediction_bar, n)
        if failed:
            self.count("failed", failed)

    def cell(self, report: CellReport) -> None:
        """One cell finished."""
        self.progress.advance(self.cells)
        if report.status == "failed":
            self.progress.console.print(styled(("failed", "red"), f" {report.cell}: {report.error}"))

    def __enter__(self) -> SweepProgress:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()
