"""A private event loop in a daemon thread, for callers that are not async: the client's `map` and DSPy's LM
calls both hand their coroutines to one of these instead of each running a loop of its own."""

from __future__ import annotations

import asyncio
import concurrent.futures
import threading
from collections.abc import Coroutine
from typing import Any, TypeVar

T = TypeVar("T")


class LoopThread:
    """An event loop running in a daemon thread from creation until `close`."""

    def __init__(self, name: str = "shambench-llm"):
        self._loop = asyncio.new_event_loop()
        self._thread = threading.Thread(target=self._run, name=name, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        self._loop.run_forever()

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
