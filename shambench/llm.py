"""An asynchronous client pool for OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, ...), shared by every
detector that prompts a model.

What it guarantees:
- bounded concurrency: at most `Endpoint.max_concurrency` requests in flight, served by that many workers;
- retries with exponential backoff and jitter on 429, 5xx, timeouts, dropped connections and malformed bodies,
  honouring `Retry-After` / `retry-after-ms`; every HTTP attempt is made and counted here, exactly;
- a per-request timeout;
- accounting: input, output and reasoning tokens, cost from the price table (`shambench/pricing.yaml`, overridden
  by `$SHAMBENCH_PRICING` or `<user config dir>/shambench/pricing.yaml`), requests, retries and cache hits;
- a response cache (`shambench.cache`) keyed by model, endpoint kind, generation parameters and rendered prompt;
- no secrets kept: the API key is read from the environment when the client starts and never stored in
  parameters, cache records, usage records or error messages.

The requests go out through aiohttp rather than the openai SDK: the SDK's request transformation and its httpx
transport cost several milliseconds of CPU per request, which on a 2-core machine caps a run far below what a
local vLLM server or OpenAI's rate limits allow (see benchmarks/bench_api.py). The wire format is the plain
OpenAI JSON API: `POST {base_url}/chat/completions`, `/completions` or `/responses`, with `extra_body` merged into the body.

Typical use from a detector:

    client = LLMClient(Endpoint(model="gpt-5-mini"), cache=ResponseCache())

    async def one(example):
        reply = await client.chat(messages_for(example), {"max_completion_tokens": 800}, accept=parse)
        return reply.parsed

    for result in client.map(examples, one, monitor):   # a sync generator; the loop runs in a worker thread
        ...
"""

from __future__ import annotations

import asyncio
import contextlib
import email.utils
import functools
import json
import os
import queue
import random
import re
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from functools import cache
from importlib import resources
from pathlib import Path
from typing import Any, TypeVar

import yaml
from platformdirs import user_config_dir
from pydantic import BaseModel, Field, ValidationError

from shambench.cache import ResponseCache, cache_key
from shambench.detector import Monitor
from shambench.io import DataError

T = TypeVar("T")
R = TypeVar("R")

PRICING_ENV = "SHAMBENCH_PRICING"
DEFAULT_KEY_ENV = "OPENAI_API_KEY"
OPENAI_URL = "https://api.openai.com/v1"
# Sent to servers that need no key (vLLM, llama.cpp): some still insist on an Authorization header.
PLACEHOLDER_KEY = "EMPTY"
# The URL path of each request kind below the base URL.
KIND_PATHS = {"chat": "chat/completions", "completions": "completions", "responses": "responses"}
# HTTP statuses worth another attempt: timeout, conflict, rate limit, and server errors.
RETRYABLE_STATUS = frozenset({408, 409, 429})
# How often finished results and counters are handed from the event-loop thread to the caller.
FLUSH_SECONDS = 0.05
_FINISHED = object()


class Endpoint(BaseModel):
    """Which server and model to call, and how hard to push it (nothing here changes a model's answer)."""

    model: str
    """Model name as the server knows it, e.g. `gpt-5-mini` or `Qwen/Qwen3-4B`."""
    base_url: str | None = None
    """OpenAI-compatible base URL ending in `/v1`; None means OpenAI's own API."""
    api_key_env: str = DEFAULT_KEY_ENV
    """Environment variable holding the API key (the key itself is never stored)."""
    max_concurrency: int = Field(default=16, ge=1)
    """Requests in flight at once."""
    timeout: float = Field(default=120.0, gt=0)
    """Seconds before one request is abandoned (and retried)."""
    max_retries: int = Field(default=6, ge=0)
    """Further attempts after a retryable failure, before the item is recorded as failed."""
    backoff_base: float = Field(default=1.0, ge=0)
    """Backoff before retry n is between half and all of `backoff_base * 2**(n-1)` seconds (equal jitter)."""
    backoff_max: float = Field(default=60.0, ge=0)
    """Longest wait before a retry, including waits asked for by `Retry-After`."""

    def identity(self) -> dict[str, Any]:
        """Model, server and key variable: the part an API-backed detector records in its params, in the
        keywords its factory takes, so that `--resume` rebuilds it against the same server."""
        return {"model": self.model, "base_url": self.base_url, "api_key_env": self.api_key_env}


class Usage(BaseModel):
    """What answering one item consumed in this run (a cache hit consumes no tokens and costs nothing)."""

    input_tokens: int = 0
    """Prompt tokens billed."""
    output_tokens: int = 0
    """Completion tokens billed (reasoning tokens included, as OpenAI counts them)."""
    reasoning_tokens: int = 0
    """Of the output tokens, how many were hidden reasoning."""
    cost: float = 0.0
    """US dollars, from the price table; 0 for models it does not list."""
    requests: int = 0
    """HTTP requests sent (attempts, including retries)."""
    retries: int = 0
    """Attempts after the first."""
    cache_hit: int = 0
    """1 when the answer came from the response cache."""


class Completion(BaseModel):
    """A model's answer to one request."""

    text: str
    """The message content (chat) or completion text."""
    reasoning: str | None = None
    """Reasoning text the server returned beside the content (vLLM `reasoning_content`), when any."""
    finish_reason: str | None = None
    """Why generation stopped (`stop`, `length`, ...)."""
    top_logprobs: dict[str, float] | None = None
    """The first generated token's most likely alternatives (token -> log-probability), when the request asked
    for log-probabilities (`logprobs`/`top_logprobs`); None otherwise."""
    usage: Usage
    """What it consumed."""
    key: str
    """Its response-cache key."""
    parsed: Any = None
    """What the caller's `accept` function returned for it."""


class LLMError(Exception):
    """A request that failed for good: the reason, what the attempts consumed, and any text received."""

    def __init__(self, reason: str, usage: Usage, text: str | None = None):
        super().__init__(reason)
        self.reason = reason
        self.usage = usage
        self.text = text


class Price(BaseModel):
    """US dollars per million tokens."""

    input: float = Field(ge=0)
    """Per million prompt tokens."""
    output: float = Field(ge=0)
    """Per million completion tokens (reasoning included)."""


def pricing_override_path() -> Path:
    """The user's price file: `$SHAMBENCH_PRICING`, else `pricing.yaml` in the user config directory."""
    return Path(os.environ.get(PRICING_ENV) or Path(user_config_dir("shambench")) / "pricing.yaml").expanduser()


def _read_prices(text: str, origin: str) -> dict[str, Price]:
    data = yaml.safe_load(text) or {}
    if not isinstance(data, dict):
        raise DataError(f"{origin}: expected a mapping of model name to {{input, output}} prices")
    try:
        return {str(name): Price.model_validate(entry) for name, entry in data.items()}
    except ValidationError as err:
        raise DataError(f"{origin}: {err.errors()[0]['loc']}: {err.errors()[0]['msg']}") from None


@cache
def load_prices() -> dict[str, Price]:
    """The packaged price table, updated by the user's file when it exists (see `pricing_override_path`)."""
    packaged = resources.files("shambench").joinpath("pricing.yaml").read_text(encoding="utf-8")
    prices = _read_prices(packaged, "shambench/pricing.yaml")
    user = pricing_override_path()
    if user.is_file():
        prices.update(_read_prices(user.read_text(encoding="utf-8"), str(user)))
    return prices


def price_of(model: str, prices: dict[str, Price] | None = None) -> Price | None:
    """The price of a model: its exact name, else without a `provider/` prefix, else the longest listed prefix
    (so a dated snapshot such as `gpt-5-mini-2025-08-07` is priced as `gpt-5-mini`)."""
    prices = load_prices() if prices is None else prices
    for name in (model, model.rsplit("/", 1)[-1]):
        if name in prices:
            return prices[name]
    prefixes = [p for p in prices if model.rsplit("/", 1)[-1].startswith(p)]
    return prices[max(prefixes, key=len)] if prefixes else None


def cost_of(model: str, input_tokens: int, output_tokens: int) -> float:
    """US dollars for the tokens, 0 when the model has no price."""
    price = price_of(model)
    if price is None:
        return 0.0
    return (input_tokens * price.input + output_tokens * price.output) / 1_000_000


def retry_after(headers: Any) -> float | None:
    """Seconds a server asked us to wait (`retry-after-ms`, or `retry-after` in seconds or as an HTTP date)."""
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
        return max(0.0, when.timestamp() - time.time()) if when else None


def backoff(attempt: int, base: float, limit: float, rng: random.Random) -> float:
    """Equal-jitter exponential backoff before retry `attempt` (1-based): in [d/2, d], d = min(limit, base*2**(n-1))."""
    ceiling = min(limit, base * 2 ** (attempt - 1))
    return ceiling / 2 + rng.random() * ceiling / 2


def redact(text: str, secret: str | None) -> str:
    """`text` without the secret, nor anything shaped like an OpenAI key (servers echo masked keys in errors)."""
    if secret and secret != PLACEHOLDER_KEY:
        text = text.replace(secret, "***")
    return re.sub(r"\bsk-[A-Za-z0-9*_\-]{3,}", "sk-***", text)


def usage_of(model: str, response: dict[str, Any]) -> Usage:
    """The token usage of a response body, in Chat Completions or Responses API names (zeros when absent)."""
    u = response.get("usage") or {}
    inp = int(u.get("prompt_tokens") or u.get("input_tokens") or 0)
    out = int(u.get("completion_tokens") or u.get("output_tokens") or 0)
    details = u.get("completion_tokens_details") or u.get("output_tokens_details") or {}
    reasoning = int(details.get("reasoning_tokens") or 0)
    return Usage(input_tokens=inp, output_tokens=out, reasoning_tokens=reasoning, cost=cost_of(model, inp, out))


def _responses_parts(response: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """(text, reasoning summary, status) of a Responses API body: its `output_text` parts, joined."""
    output = response.get("output")
    if not isinstance(output, list):
        raise ValueError("the response has no output")
    texts, summaries = [], []
    for item in output:
        if item.get("type") == "message":
            texts += [c.get("text", "") for c in item.get("content") or [] if c.get("type") == "output_text"]
        elif item.get("type") == "reasoning":
            summaries += [c.get("text", "") for c in item.get("summary") or []]
    return "".join(texts), "\n".join(summaries) or None, response.get("status")


def message_parts(kind: str, response: dict[str, Any]) -> tuple[str, str | None, str | None]:
    """(text, reasoning, finish_reason) of the first choice; ValueError when the body has none."""
    if kind == "responses":
        return _responses_parts(response)
    choices = response.get("choices")
    if not choices or not isinstance(choices[0], dict):
        raise ValueError("the response has no choices")
    choice = choices[0]
    if kind == "completions":
        return choice.get("text") or "", None, choice.get("finish_reason")
    message = choice.get("message") or {}
    reasoning = message.get("reasoning_content") or message.get("reasoning")
    text = message.get("content") or ""
    return text, reasoning if isinstance(reasoning, str) else None, choice.get("finish_reason")


def first_token_logprobs(kind: str, response: dict[str, Any]) -> dict[str, float] | None:
    """Token -> log-probability of the first generated token's alternatives, from either endpoint's body."""
    logprobs = (response.get("choices") or [{}])[0].get("logprobs") or {}
    if kind == "completions":
        top = (logprobs.get("top_logprobs") or [None])[0]
        return {str(k): float(v) for k, v in top.items()} if isinstance(top, dict) else None
    first = (logprobs.get("content") or [None])[0]
    if not isinstance(first, dict):
        return None
    return {str(t["token"]): float(t["logprob"]) for t in first.get("top_logprobs") or [] if "token" in t}


def wire_body(model: str, body: dict[str, Any]) -> dict[str, Any]:
    """The JSON sent: the model, the body, and `extra_body` merged in (as the openai SDK does)."""
    out = {"model": model, **{k: v for k, v in body.items() if k != "extra_body"}}
    out.update(body.get("extra_body") or {})
    return out


def error_message(status: int, text: str) -> str:
    """`HTTP status: message`, the message taken from an OpenAI-style error body when there is one."""
    try:
        err = json.loads(text).get("error")
        message = err.get("message") if isinstance(err, dict) else err
    except (ValueError, AttributeError):
        message = None
    return f"HTTP {status}: {_short(str(message or text or 'no body'))}"


class LLMClient:
    """Calls one endpoint with bounded concurrency, retries, caching and accounting (see the module docstring)."""

    def __init__(
        self,
        endpoint: Endpoint,
        cache: ResponseCache | None = None,
        on_count: Callable[[str, float], None] | None = None,
        seed: int | None = None,
    ):
        self.endpoint = endpoint
        self.cache = cache
        self.on_count = on_count or (lambda key, n: None)
        self._rng = random.Random(seed)
        self._session: Any = None
        self._key: str | None = None
        self._proxy: str | None = None

    def api_key(self) -> str:
        """The key from the environment; a placeholder for a custom server; DataError for OpenAI without one."""
        key = os.environ.get(self.endpoint.api_key_env)
        if key:
            return key
        if self.endpoint.base_url:
            return PLACEHOLDER_KEY
        raise DataError(
            f"no API key: set {self.endpoint.api_key_env} (or name another variable with --api-key-env), "
            "or give --base-url for a server that needs none"
        )

    def base_url(self) -> str:
        """The endpoint's base URL: as given, else `$OPENAI_BASE_URL`, else OpenAI's."""
        return (self.endpoint.base_url or os.environ.get("OPENAI_BASE_URL") or OPENAI_URL).rstrip("/")

    def _http(self) -> Any:
        """The aiohttp session of the running event loop (created on first use there), at most
        `max_concurrency` connections."""
        if self._session is None:
            import aiohttp

            self._key = self.api_key()
            self._proxy = self.proxy()
            self._session = aiohttp.ClientSession(
                connector=aiohttp.TCPConnector(limit=self.endpoint.max_concurrency),
                timeout=aiohttp.ClientTimeout(total=self.endpoint.timeout),
                headers={"Authorization": f"Bearer {self._key}"},
            )
        return self._session

    def proxy(self) -> str | None:
        """The HTTP(S)_PROXY that applies to the endpoint (NO_PROXY honoured), looked up once rather than by
        aiohttp's `trust_env` on every request, which costs more CPU than the request itself."""
        parts = urllib.parse.urlsplit(self.base_url())
        if urllib.request.proxy_bypass(parts.hostname or ""):
            return None
        return urllib.request.getproxies().get(parts.scheme)

    async def aclose(self) -> None:
        """Close the HTTP connections of the current loop."""
        if self._session is not None:
            await self._session.close()
        self._session = None

    def request_key(self, kind: str, body: dict[str, Any]) -> str:
        """The cache key of a request: model, endpoint kind, generation parameters and prompt (no transport)."""
        return cache_key({"model": self.endpoint.model, "kind": kind, "body": body})

    async def chat(
        self,
        messages: list[dict[str, Any]],
        params: dict[str, Any] | None = None,
        accept: Callable[[Completion], Any] | None = None,
    ) -> Completion:
        """One chat completion; see `request`."""
        return await self.request("chat", {"messages": messages, **(params or {})}, accept)

    async def complete(
        self, prompt: str, params: dict[str, Any] | None = None, accept: Callable[[Completion], Any] | None = None
    ) -> Completion:
        """One text completion (`/completions`); see `request`."""
        return await self.request("completions", {"prompt": prompt, **(params or {})}, accept)

    async def respond(
        self, text: str, params: dict[str, Any] | None = None, accept: Callable[[Completion], Any] | None = None
    ) -> Completion:
        """One Responses API call (`/responses`, OpenAI's, e.g. with its web-search tool); see `request`."""
        return await self.request("responses", {"input": text, **(params or {})}, accept)

    async def request(
        self, kind: str, body: dict[str, Any], accept: Callable[[Completion], Any] | None = None
    ) -> Completion:
        """The answer to `body` from the cache or the server.

        `accept(completion)` returns the parsed answer (stored in `Completion.parsed`) or raises ValueError when
        the text is unusable; only accepted answers are cached. Raises LLMError when the request fails for good
        or is not accepted (with the text received).
        """
        key = self.request_key(kind, body)
        if self.cache is not None:
            stored = self.cache.get(key)
            if stored is not None:
                self.on_count("cache_hits", 1)
                done = Completion(**stored, usage=Usage(cache_hit=1), key=key)
                return self._accepted(done, accept)
        response, usage = await self._send(kind, body)
        try:
            text, reasoning, finish = message_parts(kind, response)
        except (AttributeError, ValueError) as err:
            raise LLMError(f"unexpected response: {err}", usage) from None
        for name in ("input_tokens", "output_tokens", "reasoning_tokens", "cost"):
            self.on_count(name, getattr(usage, name))
        done = self._accepted(
            Completion(
                text=text,
                reasoning=reasoning,
                finish_reason=finish,
                top_logprobs=first_token_logprobs(kind, response),
                usage=usage,
                key=key,
            ),
            accept,
        )
        if self.cache is not None:
            record = {
                "text": text,
                "reasoning": reasoning,
                "finish_reason": finish,
                "top_logprobs": done.top_logprobs,
            }
            self.cache.put(key, self.endpoint.model, record)
        return done

    @staticmethod
    def _accepted(done: Completion, accept: Callable[[Completion], Any] | None) -> Completion:
        if accept is None:
            return done
        try:
            done.parsed = accept(done)
        except ValueError as err:
            raise LLMError(f"unusable output: {err}", done.usage, done.text) from None
        return done

    async def _send(self, kind: str, body: dict[str, Any]) -> tuple[dict[str, Any], Usage]:
        """The decoded response to one request, after retries; LLMError when every attempt failed."""
        import aiohttp

        session = self._http()
        url = f"{self.base_url()}/{KIND_PATHS[kind]}"
        payload = wire_body(self.endpoint.model, body)
        attempts = 0
        while True:
            attempts += 1
            self.on_count("requests", 1)
            wait = None
            try:
                async with session.post(url, json=payload, proxy=self._proxy) as reply:
                    text = await reply.text()
                    status, headers = reply.status, reply.headers
                if status == 200:
                    response = json.loads(text)
                    usage = usage_of(self.endpoint.model, response)
                    return response, usage.model_copy(update={"requests": attempts, "retries": attempts - 1})
                retryable = status in RETRYABLE_STATUS or status >= 500
                reason, wait = error_message(status, text), retry_after(headers)
            except (aiohttp.ClientError, TimeoutError, ValueError) as err:
                # A timeout, a dropped connection, or a 200 whose body is not JSON: all worth another attempt.
                kind_of = "timeout" if isinstance(err, TimeoutError) else type(err).__name__
                retryable, reason = True, f"{kind_of}: {_short(str(err))}".rstrip(": ")
            failed = Usage(requests=attempts, retries=attempts - 1)
            if not retryable or attempts > self.endpoint.max_retries:
                tries = f" after {attempts} attempts" if attempts > 1 else ""
                raise LLMError(redact(reason, self._key) + tries, failed) from None
            self.on_count("retries", 1)
            delay = backoff(attempts, self.endpoint.backoff_base, self.endpoint.backoff_max, self._rng)
            await asyncio.sleep(min(max(delay, wait or 0.0), self.endpoint.backoff_max))

    def map(self, items: Sequence[T], work: Callable[[T], Awaitable[R]], monitor: Monitor | None = None) -> Iterator[R]:
        """`work(item)` for every item, run by `max_concurrency` workers on an event loop in a worker thread;
        results are yielded here as they complete. Counters reach `monitor` from the calling thread."""
        events: queue.SimpleQueue = queue.SimpleQueue()
        forward = self.on_count
        tally: dict[str, float] = {}
        self.on_count = lambda key, n: tally.__setitem__(key, tally.get(key, 0) + n)
        runner = _LoopThread(self._work_all(items, work, events, tally))
        runner.start()
        try:
            while True:
                results, counts, end = events.get()
                for key, n in counts.items():
                    forward(key, n)
                    if monitor is not None:
                        monitor.count(key, n)
                yield from results
                if isinstance(end, BaseException):
                    raise end
                if end is _FINISHED:
                    return
        finally:
            runner.stop()
            self.on_count = forward

    async def _work_all(
        self,
        items: Sequence[T],
        work: Callable[[T], Awaitable[R]],
        events: queue.SimpleQueue,
        tally: dict[str, float],
    ) -> None:
        pending = iter(items)
        done: list[R] = []

        def flush(end: object = None) -> None:
            # Results and counters cross to the calling thread in batches: one hand-over per result would make
            # the two threads fight for the GIL thousands of times a second and slow the event loop down.
            events.put((done.copy(), dict(tally), end))
            done.clear()
            tally.clear()

        async def worker() -> None:
            # Workers share one iterator, so at most max_concurrency items are ever started and unfinished.
            for item in pending:
                done.append(await work(item))

        async def ticker() -> None:
            while True:
                await asyncio.sleep(FLUSH_SECONDS)
                if done or tally:
                    flush()

        outcome: object = _FINISHED
        tick = asyncio.create_task(ticker())
        try:
            async with asyncio.TaskGroup() as group:
                for _ in range(min(self.endpoint.max_concurrency, len(items))):
                    group.create_task(worker())
        except* Exception as errors:
            outcome = errors.exceptions[0]
        finally:
            tick.cancel()
            await self.aclose()
        flush(outcome)


class _LoopThread:
    """Runs one coroutine on a fresh event loop in a daemon thread; `stop` cancels it and waits."""

    def __init__(self, coro: Coroutine[Any, Any, None]):
        self._loop = asyncio.new_event_loop()
        self._task = self._loop.create_task(coro)
        self._thread = threading.Thread(target=self._run, name="shambench-llm", daemon=True)

    def _run(self) -> None:
        asyncio.set_event_loop(self._loop)
        try:
            self._loop.run_until_complete(self._task)
        except asyncio.CancelledError:
            pass
        finally:
            self._loop.close()

    def start(self) -> None:
        self._thread.start()

    def stop(self) -> None:
        if self._thread.is_alive():
            # The loop may close between the check and the call: then there is nothing left to cancel.
            with contextlib.suppress(RuntimeError):
                self._loop.call_soon_threadsafe(self._task.cancel)
        self._thread.join()


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def map_endpoint(
    endpoint: Endpoint,
    items: Sequence[T],
    work: Callable[[LLMClient, T], Awaitable[R]],
    monitor: Monitor | None = None,
    use_cache: bool = True,
) -> Iterator[R]:
    """`work(client, item)` for every item, through a client of `endpoint` sharing the response cache; results
    are yielded as they complete. A missing API key fails before any request is made."""
    cache = ResponseCache() if use_cache else None
    client = LLMClient(endpoint, cache=cache)
    client.api_key()
    try:
        yield from client.map(items, functools.partial(work, client), monitor)
    finally:
        if cache is not None:
            cache.close()
