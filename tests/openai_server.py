"""A real OpenAI-compatible HTTP server on 127.0.0.1 for tests and benchmarks (no model, no internet).

It answers `POST /v1/chat/completions`, `POST /v1/completions` and `POST /v1/responses` with text from a scripted function, reports
usage, and can inject latency and faults: 429 with `Retry-After`, 500, 401/403, requests held open until released
(`hang`: which only a client's timeout, or killing the client, ends; `hold`: answered as usual once released, all
at once or by prompt), a body trickling a byte every 20 ms (`trickle`) or a
gzip bomb (`bomb`), and HTTP-200 bodies that are not a
well-formed completion (`MALFORMED_200`: not JSON, `null`, `[]`, a bare string, `choices: null`, non-string
content, usage of the wrong type or with huge numbers, logprobs of the wrong shape, JSON nested thousands of levels
deep in the body or in the model's output, and a body over any sane size limit).
It can also behave like real local servers: reject `response_format` types it does not take the way
llama-cpp-python does (`accepted_formats`, HTTP 500 with a pydantic validation message), answer under its own
model name whatever was asked (`served_model`), and report its parallel slots at `GET /props` (`slots`).
Every request is logged (path, model, prompt hash, attempt number for that prompt, fault, status, headers).
A test of a client's concurrency has the server hold requests until as many as it expects are in flight at once
(`gather`), so the overlap it counts never depends on how fast the machine runs the client.

In a test:

    def test_x(openai_server):                       # fixture from tests/conftest.py
        openai_server.script = lambda req: '{"incorrect_spans": []}'
        openai_server.faults = fail_rate(0.2, seed=1)
        ... --base-url openai_server.base_url ...
        assert len(openai_server.log) == ...

As a process (for benchmarks): `python -m tests.openai_server --latency 0.1` prints its base URL, then serves
until killed; `GET /_stats` returns request counts and when the first request arrived and the last answer was
ready (`first_at`, `last_at`: `time.time()`).
"""

from __future__ import annotations

import argparse
import asyncio
import functools
import gzip
import hashlib
import json
import threading
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest
from aiohttp import web


@dataclass
class Request:
    """One request as the server saw it."""

    n: int
    path: str
    body: dict[str, Any]
    prompt: str
    key: str
    attempt: int
    authorization: str | None
    fault: str | None = None
    status: int | None = None

    @property
    def model(self) -> str | None:
        return self.body.get("model")


DEEP = 5000
"""Nesting depth of the `deep-body` and `deep-output` replies (far beyond Python's recursion limit)."""
HUGE_BYTES = 6 * 1024 * 1024
"""Size of the `huge` reply's content."""
BOMB_BYTES = 64 * 1024 * 1024
"""Decoded size of the `bomb` reply (about 64 KB compressed)."""
GATHER_SECONDS = 60
"""How long a request waits for the others `gather` expects before the server stops gathering: a bound on a hang
(a client that never sends them all at once fails its test's count instead of holding it forever)."""


@functools.cache
def bomb() -> bytes:
    """BOMB_BYTES of spaces, gzipped (made once)."""
    return gzip.compress(b" " * BOMB_BYTES, compresslevel=9)


def _with_choice(payload: dict[str, Any], **changes: Any) -> str:
    choice = {**payload["choices"][0], **changes}
    return json.dumps({**payload, "choices": [choice]})


def _with_message(payload: dict[str, Any], **changes: Any) -> str:
    return _with_choice(payload, message={**payload["choices"][0]["message"], **changes})


# HTTP-200 bodies that are not a well-formed chat completion, by fault kind: each gets the well-formed payload.
MALFORMED_200: dict[str, Callable[[dict[str, Any]], str]] = {
    "malformed": lambda p: '{"id": "x", "choices": [',
    "null": lambda p: "null",
    "array": lambda p: "[]",
    "string": lambda p: '"the answer"',
    "choices-null": lambda p: json.dumps({**p, "choices": None}),
    "choices-empty": lambda p: json.dumps({**p, "choices": []}),
    "content-number": lambda p: _with_message(p, content=42),
    "content-list": lambda p: _with_message(p, content=[{"type": "text", "text": "hi"}]),
    "usage-string": lambda p: json.dumps({**p, "usage": "lots"}),
    "usage-huge": lambda p: json.dumps({**p, "usage": {**p["usage"], "prompt_tokens": 10**30}}),
    "usage-negative": lambda p: json.dumps({**p, "usage": {**p["usage"], "completion_tokens": -5}}),
    "logprobs-shape": lambda p: _with_choice(p, logprobs={"content": "not a list"}),
    "logprobs-nan": lambda p: _with_choice(
        p, logprobs={"content": [{"token": "a", "logprob": 0, "top_logprobs": [{"token": "a", "logprob": "x"}]}]}
    ),
    "deep-body": lambda p: '{"choices": [{"message": {"content": ' + "[" * DEEP + "]" * DEEP + "}}]}",
    "deep-output": lambda p: _with_message(p, content='{"incorrect_spans": ' + "[" * DEEP + "]" * DEEP + "}"),
    "huge": lambda p: _with_message(p, content="x" * HUGE_BYTES),
}


@dataclass
class Fault:
    """What to do instead of answering: `429`, `500`, `401`, `403`, `hang`, `hold`, `trickle`, `bomb`, or a
    `MALFORMED_200` kind."""

    kind: str
    retry_after: str | None = None
    message: str | None = None
    """The error message of a status fault (default: one per status)."""


def prompt_of(body: dict[str, Any]) -> str:
    """The prompt text of a request: the joined message contents, or the completion prompt."""
    if "messages" in body:
        return "\n".join(str(m.get("content", "")) for m in body["messages"])
    if "input" in body:
        return "\n".join(str(body[k]) for k in ("instructions", "input") if body.get(k))
    return str(body.get("prompt", ""))


def fail_rate(rate: float, seed: int = 0, kinds: tuple[str, ...] = ("500", "429"), retry_after: str = "0"):
    """A fault plan failing each attempt with probability `rate`, decided by a hash of (seed, prompt, attempt),
    so the same run meets the same faults whatever the order of requests. Kinds alternate by the same hash."""

    def plan(req: Request) -> Fault | None:
        digest = hashlib.sha256(f"{seed}|{req.key}|{req.attempt}".encode()).digest()
        if int.from_bytes(digest[:4], "big") / 2**32 >= rate:
            return None
        kind = kinds[digest[4] % len(kinds)]
        return Fault(kind, retry_after if kind == "429" else None)

    return plan


def poison(rate: float, kind: str, seed: int = 0):
    """A fault plan giving a `kind` fault to a fixed share `rate` of prompts, on every attempt (decided by a hash
    of seed and prompt), so those examples fail however often they are retried, and the others never do."""

    def plan(req: Request) -> Fault | None:
        digest = hashlib.sha256(f"{seed}|{req.key}".encode()).digest()
        return Fault(kind) if int.from_bytes(digest[:4], "big") / 2**32 < rate else None

    return plan


def echo_empty(req: Request) -> str:
    """The default script: every answer is supported."""
    return '{"incorrect_spans": []}'


def _words(text: str) -> int:
    return len(text.split())


@dataclass
class OpenAIServer:
    """The server; `start()` runs it on its own event loop in a daemon thread."""

    script: Callable[[Request], str] = echo_empty
    latency: float = 0.0
    faults: Callable[[Request], Fault | None] | None = None
    reasoning_tokens: int = 0
    finish_reason: str = "stop"
    top_logprobs: Callable[[Request], dict[str, float]] | None = None
    """Alternatives (token -> log-probability) for the first generated token, returned when a request asks for
    log-probabilities, in OpenAI's chat format or the completions format."""
    accepted_formats: frozenset[str] | None = None
    """`response_format` types the server takes (None: all); others get llama-cpp-python's HTTP 500."""
    served_model: str | None = None
    """The model name every reply reports, whatever the request asked for (None: the requested one)."""
    slots: int | None = None
    """Parallel slots reported as `total_slots` at `GET /props` (None: no such route, 404)."""
    port: int = 0
    log: list[Request] = field(default_factory=list)
    peak: int = 0
    """Most requests in progress at once."""
    first_at: float | None = None
    """Wall-clock time (`time.time()`) the first request arrived (None before any)."""
    last_at: float | None = None
    """Wall-clock time the last answer was ready (None before any)."""

    def __post_init__(self) -> None:
        self._lock = threading.Lock()
        self._attempts: dict[str, int] = {}
        self._in_flight = 0
        self._loop: asyncio.AbstractEventLoop | None = None
        self._release: asyncio.Event | None = None
        self._holds: dict[int, tuple[Request, asyncio.Event]] = {}
        self._quorum = 0
        self._gathered: asyncio.Event | None = None
        self._thread: threading.Thread | None = None
        self._ready = threading.Event()

    @property
    def base_url(self) -> str:
        return f"http://127.0.0.1:{self.port}/v1"

    def reset(self) -> None:
        """Forget the log and attempt counts (faults and script stay)."""
        with self._lock:
            self.log.clear()
            self._attempts.clear()
            self.peak = 0
            self.first_at = self.last_at = None

    def held(self) -> list[Request]:
        """Requests currently held open by a `hang` or `hold` fault."""
        with self._lock:
            return [r for r in self.log if r.fault in ("hang", "hold") and r.status is None]

    def release(self, prompt: str | None = None) -> None:
        """Let the held requests of `prompt` finish, or every held request and every later one (`hang` with a
        503, `hold` with its answer)."""
        if self._loop:
            self._loop.call_soon_threadsafe(self._let_go, prompt)

    def gather(self, n: int) -> None:
        """Hold the requests that arrive from now on until `n` of them are in flight at once, then answer them, and
        every later one without holding (after `GATHER_SECONDS` without them, stop gathering)."""
        with self._lock:
            self._quorum, self._gathered = n, asyncio.Event()

    def _let_go(self, prompt: str | None) -> None:
        if prompt is None and self._release is not None:
            self._release.set()
        for req, event in self._holds.values():
            if prompt is None or req.prompt == prompt:
                event.set()

    async def _released(self, req: Request) -> None:
        """Return once `req` is released (at once after a release of everything)."""
        if self._release is None or self._release.is_set():
            return
        event = asyncio.Event()
        self._holds[req.n] = (req, event)
        try:
            await event.wait()
        finally:
            del self._holds[req.n]

    async def _gather(self) -> None:
        """Wait until `gather`'s count of requests is in flight (nothing when nothing is gathered)."""
        with self._lock:
            gathered, quorum = self._gathered, self._quorum
        if gathered is None:
            return
        if self._in_flight >= quorum:
            gathered.set()
        try:
            await asyncio.wait_for(gathered.wait(), GATHER_SECONDS)
        except TimeoutError:
            gathered.set()

    def count(self, status: int | None = None, fault: str | None = None) -> int:
        """Logged requests, optionally only those with a status or a fault kind."""
        with self._lock:
            return sum(
                1 for r in self.log if (status is None or r.status == status) and (fault is None or r.fault == fault)
            )

    def _record(self, path: str, body: dict[str, Any], authorization: str | None) -> Request:
        prompt = prompt_of(body)
        key = hashlib.sha256(prompt.encode()).hexdigest()[:16]
        with self._lock:
            attempt = self._attempts.get(key, 0) + 1
            self._attempts[key] = attempt
            req = Request(len(self.log) + 1, path, body, prompt, key, attempt, authorization)
            self.log.append(req)
        return req

    async def _completion(self, request: web.Request) -> web.StreamResponse:
        self._in_flight += 1
        self.peak = max(self.peak, self._in_flight)
        self.first_at = self.first_at or time.time()
        try:
            await self._gather()
            return await self._answer(request)
        finally:
            self._in_flight -= 1
            self.last_at = time.time()

    async def _answer(self, request: web.Request) -> web.StreamResponse:
        raw = await request.read()
        try:
            body = json.loads(raw)
        except ValueError:
            return web.json_response({"error": {"message": "body is not JSON"}}, status=400)
        kind = request.path.rsplit("/", 1)[-1]  # completions (chat or text) or responses
        kind = "chat" if request.path.endswith("chat/completions") else kind
        req = self._record(request.path, body, request.headers.get("Authorization"))
        fault = self.faults(req) if self.faults else None
        fault = fault or self._format_rejection(body)
        req.fault = fault.kind if fault else None
        if self.latency:
            await asyncio.sleep(self.latency)
        if fault is not None and fault.kind == "hold":
            await self._released(req)
            fault = None
        if fault is not None and fault.kind not in MALFORMED_200:
            return await self._fault(req, fault, request)
        text = self.script(req)
        req.status = 200
        payload = self._payload(kind, body, req, text)
        if fault is not None:
            return web.Response(text=MALFORMED_200[fault.kind](payload), content_type="application/json")
        return web.json_response(payload)

    def _format_rejection(self, body: dict[str, Any]) -> Fault | None:
        """llama-cpp-python's answer to a `response_format` type it does not take: its pydantic validation error,
        sent as HTTP 500."""
        fmt = body.get("response_format")
        if self.accepted_formats is None or not isinstance(fmt, dict) or fmt.get("type") in self.accepted_formats:
            return None
        allowed = " or ".join(f"'{t}'" for t in sorted(self.accepted_formats))
        detail = [
            {
                "type": "literal_error",
                "loc": ["body", "response_format", "type"],
                "msg": f"Input should be {allowed}",
                "input": fmt.get("type"),
            }
        ]
        return Fault("500", message=json.dumps(detail))

    async def _fault(self, req: Request, fault: Fault, request: web.Request) -> web.StreamResponse:
        if fault.kind in ("trickle", "bomb"):
            return await self._hostile(req, fault.kind, request)
        if fault.kind == "hang":
            await self._released(req)
            req.status = 503
            return web.json_response({"error": {"message": "released"}}, status=503)
        status = int(fault.kind)
        req.status = status
        headers = {"Retry-After": fault.retry_after} if fault.retry_after is not None else None
        messages = {429: "rate limited", 401: "Incorrect API key provided", 403: "forbidden"}
        message = fault.message or messages.get(status, "internal error")
        return web.json_response({"error": {"message": message, "type": "test"}}, status=status, headers=headers)

    async def _hostile(self, req: Request, kind: str, request: web.Request) -> web.StreamResponse:
        """A 200 whose body trickles a byte every 20 ms for at most 5 s or until released (`trickle`), or a gzip
        body of a few kilobytes that inflates to BOMB_BYTES (`bomb`)."""
        headers = {"Content-Type": "application/json"}
        if kind == "bomb":
            headers["Content-Encoding"] = "gzip"
        reply = web.StreamResponse(status=200, headers=headers)
        req.status = 200
        await reply.prepare(request)
        if kind == "bomb":
            await reply.write(bomb())
        else:
            assert self._release is not None
            for _ in range(250):
                if self._release.is_set():
                    break
                await reply.write(b" ")
                await asyncio.sleep(0.02)
        await reply.write_eof()
        return reply

    def _payload(self, kind: str, body: dict[str, Any], req: Request, text: str) -> dict[str, Any]:
        completion_tokens = _words(text) + self.reasoning_tokens
        usage = {
            "prompt_tokens": _words(req.prompt),
            "completion_tokens": completion_tokens,
            "total_tokens": _words(req.prompt) + completion_tokens,
            "completion_tokens_details": {"reasoning_tokens": self.reasoning_tokens},
        }
        if kind == "responses":
            return self._responses_payload(body, req, text, usage)
        if kind == "chat":
            choice = {
                "index": 0,
                "message": {"role": "assistant", "content": text},
                "finish_reason": self.finish_reason,
            }
            obj = "chat.completion"
        else:
            choice = {"index": 0, "text": text, "finish_reason": self.finish_reason, "logprobs": None}
            obj = "text_completion"
        if self.top_logprobs is not None and body.get("logprobs"):
            top = self.top_logprobs(req)
            if kind == "chat":
                alternatives = [{"token": t, "logprob": lp} for t, lp in top.items()]
                choice["logprobs"] = {"content": [{"token": text, "logprob": 0.0, "top_logprobs": alternatives}]}
            else:
                choice["logprobs"] = {"tokens": [text], "top_logprobs": [top]}
        return {
            "id": f"test-{req.n}",
            "object": obj,
            "created": int(time.time()),
            "model": self.served_model or body.get("model", "test"),
            "choices": [choice],
            "usage": usage,
        }

    def _responses_payload(self, body: dict[str, Any], req: Request, text: str, usage: dict) -> dict[str, Any]:
        """A Responses API body: one assistant message with one `output_text` part."""
        message = {"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": text}]}
        return {
            "id": f"resp-{req.n}",
            "object": "response",
            "status": "completed",
            "model": body.get("model", "test"),
            "output": [message],
            "usage": {
                "input_tokens": usage["prompt_tokens"],
                "output_tokens": usage["completion_tokens"],
                "output_tokens_details": usage["completion_tokens_details"],
            },
        }

    async def _stats(self, request: web.Request) -> web.Response:
        with self._lock:
            statuses: dict[str, int] = {}
            for r in self.log:
                statuses[str(r.status)] = statuses.get(str(r.status), 0) + 1
            return web.json_response(
                {"requests": len(self.log), "statuses": statuses, "first_at": self.first_at, "last_at": self.last_at}
            )

    async def _props(self, request: web.Request) -> web.Response:
        if self.slots is None:
            return web.json_response({"error": {"message": "not found"}}, status=404)
        return web.json_response({"total_slots": self.slots})

    async def _models(self, request: web.Request) -> web.Response:
        return web.json_response({"object": "list", "data": [{"id": "test", "object": "model"}]})

    def _routes(self, app: web.Application) -> None:
        """The endpoints served (a subclass adds its own)."""
        app.router.add_post("/v1/chat/completions", self._completion)
        app.router.add_post("/v1/completions", self._completion)
        app.router.add_post("/v1/responses", self._completion)
        app.router.add_get("/v1/models", self._models)
        app.router.add_get("/props", self._props)
        app.router.add_get("/_stats", self._stats)

    async def _serve(self, stop: asyncio.Event) -> None:
        self._release = asyncio.Event()
        app = web.Application(client_max_size=256 * 1024**2)
        self._routes(app)
        runner = web.AppRunner(app, access_log=None, shutdown_timeout=0.2)
        await runner.setup()
        site = web.TCPSite(runner, "127.0.0.1", self.port, backlog=1024)
        await site.start()
        self.port = site._server.sockets[0].getsockname()[1]
        self._ready.set()
        await stop.wait()
        self._let_go(None)
        await runner.cleanup()

    def start(self) -> OpenAIServer:
        """Start serving in a daemon thread; returns when the port is bound."""
        self._loop = asyncio.new_event_loop()
        self._stop = asyncio.Event()
        self._thread = threading.Thread(
            target=self._loop.run_until_complete, args=(self._serve(self._stop),), daemon=True
        )
        self._thread.start()
        if not self._ready.wait(10):
            raise RuntimeError("the test OpenAI server did not start")
        return self

    def stop(self) -> None:
        """Stop serving and wait for the thread."""
        if self._loop and self._thread and self._thread.is_alive():
            self._loop.call_soon_threadsafe(self._stop.set)
            self._thread.join(10)

    def __enter__(self) -> OpenAIServer:
        return self.start()

    def __exit__(self, *exc) -> None:
        self.stop()


@pytest.fixture
def openai_server() -> Iterator[OpenAIServer]:
    """A started test server (no latency, no faults, empty answers); stopped after the test."""
    with OpenAIServer() as server:
        yield server


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--port", type=int, default=0)
    parser.add_argument("--latency", type=float, default=0.0, help="seconds before each answer")
    args = parser.parse_args()
    server = OpenAIServer(latency=args.latency, port=args.port).start()
    print(server.base_url, flush=True)
    try:
        threading.Event().wait()
    except KeyboardInterrupt:
        server.stop()


if __name__ == "__main__":
    main()
