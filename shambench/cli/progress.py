"""A rich progress bar that also shows the counters a detector reports (failures, retries, cache hits, ...)."""

from __future__ import annotations

import sys
from typing import TYPE_CHECKING, Any

from shambench.detection.detector import Monitor
from shambench.reporting.console import styled

# rich.progress (and the live display it brings) is imported where a display is made: every command installs a
# LoadStatus, and most (score, a run's scoring) never show one.
if TYPE_CHECKING:
    from rich.progress import Progress, ProgressColumn

    from shambench.runs.sweep import CellReport, SweepPlan


def progress_display(*columns: str | ProgressColumn, enabled: bool = True, transient: bool = False) -> Progress:
    """The one way a command shows progress: on stderr, never on stdout, which holds the command's results (and is
    often a file: `eval > out.txt` would end with the last frame of the bar). The stream is the one of the moment
    it is made (a library that silences stderr later does not hide it). `enabled` false (--no-progress) shows
    nothing; `transient`: erased once it stops (and never written where stderr is not a terminal)."""
    from rich.progress import Progress

    from shambench.reporting.console import make_console

    console = make_console(stderr=True)
    console.file = sys.stderr
    return Progress(
        *columns,
        console=console,
        disable=not enabled,
        transient=transient,
        # lines printed to a terminal's stdout meanwhile go above the display; a redirected stdout stays as it is
        redirect_stdout=sys.stdout.isatty(),
    )


def counting_progress(enabled: bool = True) -> Progress:
    """The house progress display: description, bar, done/total, elapsed, remaining, and a `stats` text field."""
    from rich.progress import BarColumn, MofNCompleteColumn, TextColumn, TimeElapsedColumn, TimeRemainingColumn

    return progress_display(
        # markup=False: a detector or run name is printed as it is, whatever brackets it holds.
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        MofNCompleteColumn(),
        TimeElapsedColumn(),
        TimeRemainingColumn(),
        TextColumn("{task.fields[stats]}", markup=False),
        enabled=enabled,
    )


class ProgressMonitor(Monitor):
    """Counts predictions and detector counters into a live progress bar."""

    def __init__(self, total: int | None, description: str, enabled: bool = True):
        self.counters: dict[str, float] = {}
        self.progress = counting_progress(enabled)
        self.task = self.progress.add_task(description, total=total, stats="")

    def count(self, key: str, n: float = 1) -> None:
        self.counters[key] = self.counters.get(key, 0) + n
        self._refresh()

    def note(self, message: str) -> None:
        """Print a message above the bar."""
        self.progress.console.print(styled(("note:", "yellow"), " ", message), soft_wrap=True)

    def done(self, item: Any) -> None:
        """One prediction (or context record) is finished."""
        # The counters' text is made again only when one changed: a prediction without an error changes none.
        if item.error is None:
            self.progress.advance(self.task)
            return
        self.counters["failed"] = self.counters.get("failed", 0) + 1
        self._refresh(advance=1)

    def _refresh(self, advance: int = 0) -> None:
        stats = " ".join(f"{k}={_fmt(v)}" for k, v in sorted(self.counters.items()) if v)
        self.progress.update(self.task, advance=advance, stats=stats)

    def __enter__(self) -> ProgressMonitor:
        self.progress.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.progress.stop()


def _fmt(v: float) -> str:
    return f"{v:.4f}" if isinstance(v, float) and not v.is_integer() else f"{int(v)}"


class SweepProgress(Monitor):
    """Two bars, cells and predictions, plus the counters detectors report on the workers."""

    def __init__(self, plan: SweepPlan, enabled: bool):
        self.progress = counting_progress(enabled)
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


class LoadStatus:
    """The line naming the source being read while a command's sources load (`shambench.data.loading`): on a
    terminal's stderr only (in a log it would be noise), not with --no-progress, erased once they are loaded."""

    def __init__(self) -> None:
        self.display: Progress | None = None
        self.task: Any = None

    def __call__(self, what: str | None) -> None:
        if self.display is None and what is not None:
            self.display = self._started(what)
        elif self.display is not None and what is not None:
            self.display.update(self.task, description=what)
            self.display.refresh()  # each source named as it starts, not at the next tick
        elif self.display is not None:
            self.display.stop()
            self.display = None

    def _started(self, what: str) -> Progress | None:
        import click
        from rich.progress import SpinnerColumn, TextColumn

        ctx = click.get_current_context(silent=True)
        if ctx is not None and ctx.params.get("no_progress"):
            return None
        display = progress_display(SpinnerColumn(), TextColumn("{task.description}", markup=False), transient=True)
        if not display.console.is_terminal:
            return None
        self.task = display.add_task(what, total=None)
        display.start()
        return display
