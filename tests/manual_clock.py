"""A clock for the API client that moves only when the test says (`shambench.http.Clock`'s stand-in).

With it, a test decides which request meets its deadline instead of racing the machine: a deadline opens at the
clock's time when the request is sent, and passes when `advance` moves the time beyond it, whatever thread calls
`advance` and however slowly the requests travel. Pauses before retries are recorded in `slept` and end at once.

    clock = ManualClock()
    client = LLMClient(endpoint, clock=clock)
    ...                                   # a request held at the server (tests/openai_server.py)
    clock.advance(1.0)                    # its deadline of 1 s passes now, not before
"""

from __future__ import annotations

import asyncio
import contextlib
import threading
from collections.abc import AsyncIterator
from dataclasses import dataclass

from shambench.http import Clock
from tests.run_helpers import HANG_SECONDS


@dataclass(eq=False)
class OpenDeadline:
    """A request inside its deadline."""

    when: float
    """The clock's time at which it passes."""
    timeout: asyncio.Timeout
    """The asyncio timeout that ends the request once it passes."""
    loop: asyncio.AbstractEventLoop
    """The loop the request runs on."""


class ManualClock(Clock):
    """Time that stands still until `advance` moves it."""

    def __init__(self) -> None:
        self.now = 0.0
        self.slept: list[float] = []
        """The pauses asked for, in order."""
        self._open: list[OpenDeadline] = []
        self._lock = threading.Lock()

    @contextlib.asynccontextmanager
    async def deadline(self, seconds: float) -> AsyncIterator[None]:
        async with asyncio.timeout(None) as timeout:
            entry = OpenDeadline(self.now + seconds, timeout, asyncio.get_running_loop())
            with self._lock:
                self._open.append(entry)
            try:
                yield
            finally:
                with self._lock:
                    self._open.remove(entry)

    async def sleep(self, seconds: float) -> None:
        with self._lock:
            self.slept.append(seconds)
        await asyncio.sleep(0)

    def advance(self, seconds: float) -> None:
        """Move the time on by `seconds`: every open deadline it passes ends its request. Called from another thread
        than the requests' loop, it returns once their tasks are cancelled (whatever reaches them later, a reply
        included, comes too late); called on that loop, once the loop next runs."""
        with self._lock:
            self.now += seconds
            due = [entry for entry in self._open if entry.when <= self.now]
        for entry in due:
            expired = threading.Event()
            entry.loop.call_soon_threadsafe(self._expire, entry, expired)
            if not _running_on(entry.loop) and not expired.wait(HANG_SECONDS):
                raise AssertionError(f"the requests' loop hung (no turn in {HANG_SECONDS} s)")

    def _expire(self, entry: OpenDeadline, expired: threading.Event) -> None:
        # On the request's loop, where the request also leaves its deadline: still open here means still waiting.
        with self._lock:
            still_open = entry in self._open
        if still_open:
            entry.timeout.reschedule(entry.loop.time())  # schedules the cancel of its task, first in the loop's turn
        entry.loop.call_soon(expired.set)  # after it


def _running_on(loop: asyncio.AbstractEventLoop) -> bool:
    try:
        return asyncio.get_running_loop() is loop
    except RuntimeError:
        return False
