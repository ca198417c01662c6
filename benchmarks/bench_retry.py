"""CPU per request of the client's hand-written retry loop against the same loop written with tenacity.

    .venv/bin/python benchmarks/bench_retry.py [--calls 20000] [--repeats 7]     # tenacity comes with dspy

Ways of sending one request, all through the client's own attempt (`LLMClient._attempt`: the 429 gate, the
reply validation, the failure classification, the accounting) against an in-process stand-in for aiohttp's
session, so that only the retry machinery differs and no network or server time is counted:

- `bare`: one attempt, no retry machinery at all (the floor; for a retried call, two attempts and the sleep);
- `loop`: the client's own `LLMClient._send`, the hand-written loop;
- `tenacity`: the same attempt inside `tenacity.AsyncRetrying` (stop after `max_retries + 1` attempts, wait =
  the equal-jitter backoff or Retry-After, retry only the retryable failures, count each retry before its sleep),
  which is how the loop would be written with it (one AsyncRetrying per request, as concurrent requests need);
- `reused`: the same with one AsyncRetrying built once and reused, sequentially (tenacity's own lower bound).

Each variant sends `--calls` successful requests (a 200 at once) and `--calls` retried requests (a 500, then a
200; the backoff base is 0, so the sleep is `asyncio.sleep(0)` in every variant) in one event loop; CPU time is
`time.process_time`, variants alternate, and the medians of `--repeats` are printed with their ratios, the
retry machinery's overhead over `bare`, and that overhead as a share of the ~300 µs of client CPU a request may
take (issue #29: the bare aiohttp loop spends 0.34 ms per request). It also times `import tenacity` in fresh
processes after asyncio and aiohttp (which the client loads anyway), since every command that sends requests
would pay it.
"""

from __future__ import annotations

import argparse
import asyncio
import os
import statistics
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import orjson
import tenacity

from shambench.llm.client import KIND_PATHS, LLMClient, given_up
from shambench.llm.endpoint import Endpoint
from shambench.llm.retry import Failure, backoff
from shambench.llm.wire import Reply, wire_body

BUDGET_US = 300.0
COMPLETION = orjson.dumps(
    {
        "id": "c",
        "object": "chat.completion",
        "model": "m",
        "choices": [{"index": 0, "message": {"role": "assistant", "content": "[]"}, "finish_reason": "stop"}],
        "usage": {"prompt_tokens": 120, "completion_tokens": 3, "total_tokens": 123},
    }
)
SERVER_ERROR = orjson.dumps({"error": {"message": "boom", "type": "server_error"}})
BODY = {"messages": [{"role": "user", "content": "Which spans are wrong? " * 40}], "max_completion_tokens": 800}


class Content:
    def __init__(self, body: bytes):
        self.body = body

    async def iter_chunked(self, size: int) -> Any:
        yield self.body


class FakeReply:
    """What `session.post(...)` yields: a status, headers and a body, as aiohttp's reply offers them."""

    def __init__(self, status: int, body: bytes):
        self.status = status
        self.headers: dict[str, str] = {}
        self.content_length = len(body)
        self.content = Content(body)

    async def __aenter__(self) -> FakeReply:
        return self

    async def __aexit__(self, *exc: object) -> None:
        return None


class FakeSession:
    """Answers each post with the next status of `statuses` (cycled)."""

    def __init__(self, statuses: list[int]):
        self.statuses = statuses
        self.n = 0

    def post(self, url: str, data: bytes, headers: dict[str, str], proxy: str | None) -> FakeReply:
        status = self.statuses[self.n % len(self.statuses)]
        self.n += 1
        return FakeReply(status, COMPLETION if status == 200 else SERVER_ERROR)


class Retryable(Exception):
    """A failed attempt worth another, as tenacity needs it: an exception."""

    def __init__(self, failure: Failure):
        super().__init__(failure.reason)
        self.failure = failure


class TenacityClient(LLMClient):
    """`LLMClient` with `_send` written on `tenacity.AsyncRetrying` around the client's own `_attempt`."""

    shared: tenacity.AsyncRetrying | None = None
    """One AsyncRetrying for every request (the lower bound: tenacity keeps each run's state on the object, so
    concurrent requests cannot share one); None: a new one per request."""

    def retrying(self) -> tenacity.AsyncRetrying:
        return tenacity.AsyncRetrying(
            stop=tenacity.stop_after_attempt(self.endpoint.max_retries + 1),
            wait=self._wait,
            retry=tenacity.retry_if_exception_type(Retryable),
            before_sleep=lambda state: self.on_count("retries", 1),
            reraise=True,
        )

    def _wait(self, state: tenacity.RetryCallState) -> float:
        err = state.outcome.exception() if state.outcome else None
        delay = backoff(state.attempt_number, self.endpoint.backoff_base, self.endpoint.backoff_max, self._rng)
        wait = err.failure.wait if isinstance(err, Retryable) else None
        return min(max(delay, wait or 0.0), self.endpoint.backoff_max)

    async def _send(self, kind: str, body: dict[str, Any]) -> Reply:
        session = self._http()
        url = f"{self.endpoint.url()}/{KIND_PATHS[kind]}"
        payload = orjson.dumps(wire_body(self.endpoint.model, body))
        attempt = 0
        try:
            async for trying in self.shared or self.retrying():
                with trying:
                    attempt = trying.retry_state.attempt_number
                    return await self._tried(session, kind, url, payload, attempt)
        except Retryable as err:
            raise given_up(err.failure, attempt) from None
        raise AssertionError("tenacity neither returned nor raised")

    async def _tried(self, session: Any, kind: str, url: str, payload: bytes, attempt: int) -> Reply:
        """`_attempt` as tenacity needs it: the reply, Retryable for a failure worth another, LLMError for one
        that is final."""
        outcome = await self._attempt(session, kind, url, payload, attempt)
        if not isinstance(outcome, Failure):
            return outcome
        if not outcome.retryable:
            raise given_up(outcome, attempt)
        raise Retryable(outcome)


def client_of(cls: type[LLMClient], statuses: list[int]) -> LLMClient:
    endpoint = Endpoint(model="m", base_url="http://127.0.0.1:9/v1", max_concurrency=64, backoff_base=0.0)
    client = cls(endpoint, seed=0)
    client._session = FakeSession(statuses)
    return client


def bare_send(client: LLMClient, tries: int) -> Callable[[], Awaitable[Any]]:
    """One request as `tries` attempts with nothing around them but the sleep between (the floor)."""
    session, url = client._http(), f"{client.endpoint.url()}/{KIND_PATHS['chat']}"

    async def send() -> Any:
        payload = orjson.dumps(wire_body(client.endpoint.model, BODY))
        for attempt in range(1, tries):
            await client._attempt(session, "chat", url, payload, attempt)
            await asyncio.sleep(0)
        return await client._attempt(session, "chat", url, payload, tries)

    return send


def variants(statuses: list[int]) -> dict[str, Callable[[], Awaitable[Any]]]:
    bare = client_of(LLMClient, statuses)
    loop, tenacious, reused = (client_of(cls, statuses) for cls in (LLMClient, TenacityClient, TenacityClient))
    reused.shared = reused.retrying()  # type: ignore[attr-defined]
    return {
        "bare": bare_send(bare, len(statuses)),
        "loop": lambda: loop._send("chat", BODY),
        "tenacity": lambda: tenacious._send("chat", BODY),
        "reused": lambda: reused._send("chat", BODY),
    }


def cpu_us(send: Callable[[], Awaitable[Any]], calls: int, attempts: int) -> float:
    """CPU microseconds per call of `send`, over `calls` sequential calls on a fresh event loop (each reply checked
    to be the completion after `attempts` attempts)."""

    async def run() -> float:
        for _ in range(200):  # warm-up
            await send()
        start = time.process_time()
        for _ in range(calls):
            reply = await send()
        spent = time.process_time() - start
        assert reply.text == "[]" and (reply.usage.requests, reply.usage.retries) == (attempts, attempts - 1)
        return spent

    return asyncio.run(run()) / calls * 1e6


def import_ms(module: str, repeats: int) -> float:
    """Median milliseconds `import module` takes in a fresh interpreter that has imported asyncio already
    (`-X importtime`'s cumulative figure for the module)."""
    found = []
    for _ in range(repeats):
        argv = [sys.executable, "-X", "importtime", "-c", f"import asyncio, aiohttp; import {module}"]
        log = subprocess.run(argv, check=True, capture_output=True, text=True).stderr
        line = next(line for line in log.splitlines() if line.split("|")[-1].strip() == module)
        found.append(int(line.split("|")[1]) / 1e3)
    return statistics.median(found)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--calls", type=int, default=20000)
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    cases = {"successful": [200], "retried once": [500, 200]}
    times: dict[tuple[str, str], list[float]] = {}
    for _ in range(args.repeats):
        for case, statuses in cases.items():
            for name, send in variants(statuses).items():
                times.setdefault((case, name), []).append(cpu_us(send, args.calls, len(statuses)))
    print(f"load average: {' '.join(f'{x:.2f}' for x in os.getloadavg())}; {args.calls} calls, {args.repeats} repeats")
    print(f"{'call':<14} {'variant':<9} {'µs/call':>8} {'x loop':>7} {'overhead µs':>12} {'of 300 µs':>10}")
    for case in cases:
        bare = statistics.median(times[(case, "bare")])
        loop = statistics.median(times[(case, "loop")])
        for name in ("bare", "loop", "tenacity", "reused"):
            us = statistics.median(times[(case, name)])
            over = us - bare
            print(f"{case:<14} {name:<9} {us:>8.1f} {us / loop:>7.2f} {over:>12.1f} {over / BUDGET_US:>9.1%}")
    print(f"import tenacity: {import_ms('tenacity', args.repeats):.1f} ms (after asyncio and aiohttp)")


if __name__ == "__main__":
    main()
