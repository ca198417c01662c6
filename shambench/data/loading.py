"""Who is told which source is being read while sources load: loading the extended suite takes about 10 s, and a
command that says nothing meanwhile looks hung. The command line installs a watcher (a status line on the
terminal) for the command it runs; the loading calls `tell` with what it reads, then with None when it is done."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

# A context variable, not a global: a thread loading in the background (a run streamed while the other sources
# load) tells no one, so that its status never draws over the run's own progress bar.
_watcher: ContextVar[Callable[[str | None], None] | None] = ContextVar("shambench_loading_watcher", default=None)


def tell(what: str | None) -> None:
    """Tell the watcher, if any, what is being read now (None: the loading is over)."""
    watcher = _watcher.get()
    if watcher is not None:
        watcher(what)


@contextmanager
def watched_by(watcher: Callable[[str | None], None]) -> Iterator[None]:
    """`watcher` is told of every loading in this context, until it ends."""
    token = _watcher.set(watcher)
    try:
        yield
    finally:
        tell(None)
        _watcher.reset(token)
