"""A private event loop in a daemon thread, for callers that are not async: the client's `map` and DSPy's LM
calls both hand their coroutines to one of these instead of each running a loop of its own. A `Feed` hands such a
loop's workers items that another thread is still producing."""

from __future__ import annotations

import asyncio
import concurrent.futures
import contextlib
import sys
import threading
from collections import deque
from collections.abc import Coroutine, Iterable
from typing import Any, Generic, TypeVar

from shambench.memory import switch_interval

T = TypeVar("T")

HANDOVER_SECONDS = 0.0001
"""The interpreter's thread switch interval while a loop thread runs (Python's default is 0.005 s)."""

_running = 0
_default_interval = sys.getswitchinterval()
_interval_lock = threading.Lock()


def _handover_sooner(started: bool) -> None:
    """Lower the switch interval while any loop thread runs, and restore it when the last one stops, where the
    process allows it (`shambench.memory.switch_interval`: the command line's does): the loop answers sockets in
    short bursts, and a CPU-bound thread of this process (the scorer built ahead of the last answer, the main
    thread journaling predictions) would otherwise keep the GIL for up to 5 ms each time the loop wakes up, a
    delay every request in flight pays."""
    global _running, _default_interval
    with _interval_lock:
        if started and _running == 0:
            _default_interval = sys.getswitchinterval()
            switch_interval(min(HANDOVER_SECONDS, _default_interval))
        _running += 1 if started else -1
        if not started and _running == 0:
            switch_interval(_default_interval)


class LoopThread:
    """An event loop running in a daemon thread from creation until `close`."""

    def __init__(self, name: str = "shambench-llm"):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        _handover_sooner(True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_forever()
        finally:
            _handover_sooner(False)

    def submit(self, coro: Coroutine[Any, Any, T]) -> concurrent.futures.Future[T]:
        """Run `coro` on the loop; its future, to wait on from any thread."""
        return asyncio.run_coroutine_threadsafe(coro, self._loop)

    def close(self, last: Coroutine[Any, Any, Any] | None = None) -> None:
        """Run `last` (e.g. closing HTTP connections), cancel whatever still runs, stop the loop and wait for it."""
        if not self._thread.is_alive():
            if last is not None:
                last.close()
            return
        if last is not None:
            self.submit(last).result()
        self.submit(self._cancel_the_rest()).result()
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join()
        self._loop.close()

    async def _cancel_the_rest(self) -> None:
        tasks = [t for t in asyncio.all_tasks(self._loop) if t is not asyncio.current_task()]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)


class Ended:
    """What `Feed.take` returns once the feed is closed and empty."""


ENDED = Ended()


class Feed(Generic[T]):
    """Items handed to an event loop's workers while another thread is still producing them (e.g. loading them).

    `put` and `close` are called from any thread; `take` on the loop, where a worker waits without blocking the
    loop: a put wakes the loop's waiting workers with `call_soon_threadsafe`. Items are taken in the order put."""

    def __init__(self) -> None:
        self._items: deque[T] = deque()
        self._closed = False
        self._error: BaseException | None = None
        self._lock = threading.Lock()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._ready: asyncio.Event | None = None

    def put(self, items: Iterable[T]) -> None:
        """Hand these items to the workers (ignored once the feed is closed)."""
        with self._lock:
            if self._closed:
                return
            self._items.extend(items)
        self._wake()

    def close(self, error: BaseException | None = None) -> None:
        """No more items: workers end once the items put are taken, or, with `error`, raise it at their next take
        (the items not yet taken are dropped)."""
        with self._lock:
            if self._closed:
                return
            self._closed = True
            if error is not None:
                self._error = error
                self._items.clear()
        self._wake()

    async def take(self) -> T | Ended:
        """The next item, waiting for one to be put; ENDED once the feed is closed and empty."""
        while True:
            with self._lock:
                if self._ready is None:
                    self._loop, self._ready = asyncio.get_running_loop(), asyncio.Event()
                if self._error is not None:
                    raise self._error
                if self._items:
                    return self._items.popleft()
                if self._closed:
                    return ENDED
                # Cleared under the lock: a put after this wakes the event, since its wake-up runs on the loop
                # only once this worker awaits.
                self._ready.clear()
            await self._ready.wait()

    def _wake(self) -> None:
        loop, ready = self._loop, self._ready
        if loop is None or ready is None:  # no worker has waited yet: the first take finds the items
            return
        with contextlib.suppress(RuntimeError):  # the loop is closed: nobody takes any more
            loop.call_soon_threadsafe(ready.set)
