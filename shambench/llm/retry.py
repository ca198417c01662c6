"""When to try a request again and how long to wait: retryable statuses, Retry-After, jittered backoff, the 429 gate.

The loop that applies them is `LLMClient._send` around `LLMClient._attempt`, written by hand rather than on
tenacity's `AsyncRetrying` (which inspect_ai and lm-evaluation-harness use), because of what tenacity costs per
request, measured by benchmarks/bench_retry.py (the client's own attempt against an in-process stand-in for the
HTTP session, CPU time, medians of 7 alternating runs; benchmarks/RESULTS.md): over the bare attempts, the loop
adds 3 µs to a successful request and 8 µs to one retried once; tenacity adds 41 µs and 97 µs (23 µs and 82 µs
even with one AsyncRetrying reused, which concurrent requests cannot share), 13% and 32% of the ~300 µs of client
CPU a request may take, and `import tenacity` adds 13 ms to every command that sends requests. Nor is it
shorter: the failure classification stays, and a retryable `Failure` must become an exception for tenacity's
wait callback to read its Retry-After back from, the last one then turned back into the `LLMError`.
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import os
import random
import time
from collections.abc import Callable
from typing import Any, NamedTuple

# HTTP statuses worth another attempt: timeout, conflict, rate limit, and server errors.
RETRYABLE_STATUS = frozenset({408, 409, 429})


# Authentication failures: not retried, and a run stops after `Endpoint.auth_failures_to_stop` in a row.
AUTH_STATUS = frozenset({401, 403})


# Failed connections, before the server has answered once, after which the run stops: the second attempt lets a
# server that is still starting come up; a server that answered before gets the full retries instead.
UNREACHABLE_TO_STOP = 2


class Failure(NamedTuple):
    """Why one HTTP attempt failed, as the retry loop needs it."""

    reason: str
    """What went wrong, in words (redacted and shortened)."""
    retryable: bool
    """Whether another attempt may succeed."""
    status: int | None
    """The HTTP status of the reply; None when none came."""
    wait: float | None
    """Seconds the server asked us to wait (`Retry-After`), when it did."""


def retry_after(headers: Any, now: Callable[[], float] = time.time) -> float | None:
    """Seconds a server asked us to wait (`retry-after-ms`, or `retry-after` in seconds or as an HTTP date, counted
    from `now()`: the wall clock, which is what HTTP dates are on)."""
    if headers is None:
        return None
    ms = headers.get("retry-after-ms")
    if ms:
        try:
            return max(0.0, float(ms) / 1000)
        except ValueError:
            pass
    value = headers.get("retry-after")
    if not value:
        return None
    try:
        return max(0.0, float(value))
    except ValueError:
        when = email.utils.parsedate_to_datetime(value) if value else None
        return max(0.0, when.timestamp() - now()) if when else None


def backoff(attempt: int, base: float, limit: float, rng: random.Random) -> float:
    """Equal-jitter exponential backoff before retry `attempt` (1-based): in [d/2, d], d = min(limit, base*2**(n-1))."""
    ceiling = min(limit, base * 2 ** (attempt - 1))
    return ceiling / 2 + rng.random() * ceiling / 2


class AdaptiveGate:
    """How many HTTP attempts may be in flight: `limit`, halved when the server answers 429 and raised by one
    after as many successes in a row as the current bound (additive increase, multiplicative decrease)."""

    def __init__(self, limit: int, on_throttle: Callable[[int], None]):
        self.limit = limit
        self.cap = limit
        self.in_flight = 0
        self.successes = 0
        self.on_throttle = on_throttle
        self._said = False
        self._cond: asyncio.Condition | None = None
        self._loop: asyncio.AbstractEventLoop | None = None

    def _condition(self) -> asyncio.Condition:
        loop = asyncio.get_running_loop()
        if self._cond is None or self._loop is not loop:
            self._cond, self._loop = asyncio.Condition(), loop
        return self._cond

    @contextlib.asynccontextmanager
    async def slot(self) -> Any:
        """Wait until fewer than `cap` attempts are in flight, and count this one while it runs."""
        cond = self._condition()
        async with cond:
            await cond.wait_for(lambda: self.in_flight < self.cap)
            self.in_flight += 1
        try:
            yield
        finally:
            async with cond:
                self.in_flight -= 1
                cond.notify_all()

    def after(self, status: int) -> None:
        """Adapt the bound to an attempt's status."""
        if status == 429:
            self.successes = 0
            lowered = max(1, min(self.cap, self.in_flight) // 2)
            if lowered < self.cap:
                self.cap = lowered
                if not self._said:
                    self._said = True
                    self.on_throttle(lowered)
        elif status == 200 and self.cap < self.limit:
            self.successes += 1
            if self.successes >= self.cap:
                self.cap, self.successes = self.cap + 1, 0


def connect_failure(err: Any) -> str:
    """Why a connection could not be made, in words (aiohttp's own text names `ssl:default` even for http)."""
    key = getattr(err, "_conn_key", None)
    where = f"{key.host}:{key.port}" if key is not None else "the server"
    errno = getattr(getattr(err, "os_error", None), "errno", None)
    cause = os.strerror(errno).lower() if errno else str(err)
    return f"cannot connect to {where}: {cause}"
