"""A new run's examples handed to its requests while the corpora load: the loading thread, and what holds the
predictions and the monitor's calls until the run's config.json exists (`shambench.runs.evaluate` runs it).

Loading all the corpora takes over a second; a detector whose requests wait on a server can spend it sending the
first datasets' requests. Nothing is journaled before config.json is written (once every example is known): the
predictions that finish earlier are held in memory and journaled right after it. A crash before then loses them
from the run, not from the response cache, which keeps their answers: a rerun does not pay for them again.
"""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

from shambench.detection.detector import Monitor
from shambench.errors import message_of
from shambench.llm.loop import Feed
from shambench.runs.selection import select_datasets
from shambench.runs.spec import Selection
from shambench.schema import Example, Prediction


class LoadingStopped(Exception):
    """The loading thread stopped handing examples (a dataset failed, or the run was stopped)."""


class Loading:
    """The selected examples of adapters' datasets (`select_datasets`), loaded in a thread: each dataset's are put
    into `feed` as soon as it is loaded. The feed is closed when loading ends, with `LoadingStopped` when it
    failed (the requests stop at once; `result` raises the loading's own error)."""

    def __init__(self, selection: Selection):
        self.feed: Feed[Example] = Feed()
        self.wanted: dict[str | None, Example] = {}
        """The examples handed so far, by id (put here before they are fed, so every prediction finds its own)."""
        self._selection = selection
        self._stop = threading.Event()
        self._selected: tuple[list[Example], dict[str, Any]] | None = None
        self._error: BaseException | None = None
        self._thread = threading.Thread(target=self._load, name="shambench-loading", daemon=True)
        self._thread.start()

    def done(self) -> bool:
        """Whether loading has ended (well or not)."""
        return not self._thread.is_alive()

    def result(self) -> tuple[list[Example], dict[str, Any]]:
        """Every selected example and the selection fields of a `RunConfig`, once loading ends (waits for it);
        the loading's error when it failed."""
        self._thread.join()
        if self._error is not None:
            raise self._error
        assert self._selected is not None
        return self._selected

    def stop(self) -> None:
        """Hand nothing more and end loading after the dataset being read; waits for it."""
        self._stop.set()
        self.feed.close(LoadingStopped("the run was stopped"))
        self._thread.join()

    def _load(self) -> None:
        try:
            self._selected = select_datasets(self._selection, on_selected=self._hand, on_failed=self._failing)
        except BaseException as err:  # noqa: BLE001  (handed to the caller's thread by `result`)
            self._error = err
            self.feed.close(LoadingStopped(message_of(err)))
        else:
            self.feed.close()

    def _hand(self, examples: list[Example]) -> None:
        if self._stop.is_set():
            raise LoadingStopped("the run was stopped")
        for ex in examples:
            self.wanted[ex.id] = ex
        self.feed.put(examples)

    def _failing(self) -> None:
        self.feed.close(LoadingStopped("a dataset failed to load"))


class HeldMonitor(Monitor):
    """Holds a detector's counters, notes and finished items until the run's own monitor exists (`release`), then
    passes them, and every later call, on to it."""

    def __init__(self) -> None:
        self._held: list[tuple[str, tuple[Any, ...]]] = []
        self._to: Monitor | None = None

    def count(self, key: str, n: float = 1) -> None:
        self._call("count", key, n)

    def done(self, item: Any) -> None:
        self._call("done", item)

    def note(self, message: str) -> None:
        self._call("note", message)

    def release(self, monitor: Monitor) -> None:
        """Pass what was held on to `monitor`, in order, and every later call."""
        self._to = monitor
        for name, args in self._held:
            self._call(name, *args)
        self._held.clear()

    def _call(self, name: str, *args: Any) -> None:
        if self._to is None:
            self._held.append((name, args))
        else:
            # A monitor written before notes existed may lack `note`.
            getattr(self._to, name, lambda *a: None)(*args)


class HeldJournal:
    """Where a streamed run's predictions go: held in memory until `ready()` says the examples are all known, then
    (`open`) appended to what `open_journal` returns (config.json is written by then), the held ones first."""

    def __init__(self, ready: Callable[[], bool], open_journal: Callable[[], Callable[[Prediction], None]]):
        self.held: list[Prediction] = []
        self._ready, self._open_journal = ready, open_journal
        self._append: Callable[[Prediction], None] | None = None

    @property
    def is_open(self) -> bool:
        """Whether predictions go to the journal now."""
        return self._append is not None

    def append(self, pred: Prediction) -> None:
        """Journal `pred`, or hold it while the examples are still loading."""
        if self._append is None and self._ready():
            self.open()
        if self._append is None:
            self.held.append(pred)
        else:
            self._append(pred)

    def open(self) -> None:
        """Open the journal (waiting for loading to end) and journal the held predictions."""
        if self._append is None:
            self._append = self._open_journal()
            for pred in self.held:
                self._append(pred)
            self.held.clear()
