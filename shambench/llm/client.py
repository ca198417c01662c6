"""An asynchronous client pool for OpenAI-compatible servers (OpenAI, vLLM, llama.cpp, ...), shared by every
detector that prompts a model.

What it guarantees:

- bounded concurrency: at most `Endpoint.max_concurrency` requests in flight, served by that many workers;
- retries with exponential backoff and jitter on 429, 5xx, timeouts, dropped connections and malformed bodies,
  honouring `Retry-After` / `retry-after-ms`; every HTTP attempt is made and counted here, exactly;
- a per-request timeout, and a bound on the size of a reply (`Endpoint.max_response_bytes`);
- every HTTP-200 body validated (`parse_reply`): anything that is not a well-formed completion (not JSON, nested
  too deeply, no choices, non-string content, usage or logprobs of the wrong shape) is a `MalformedReply`, retried
  and, when it persists, the item's failure reason; it never stops the run;
- a stop after `Endpoint.auth_failures_to_stop` consecutive 401/403 replies (`AuthenticationStopped`), rather than
  one doomed request per item; likewise a stop after `UNREACHABLE_TO_STOP` failed connections to a server that has
  not answered once (`ServerUnreachable`: nothing listens at the base URL), within seconds instead of a full
  backoff per item;
- a per-request timeout for the whole attempt (connection, headers and body: `shambench.http.deadline`, through
  the client's `Clock`), counted from when the request is sent (not while it waits for a free connection), so a
  trickling server cannot hold it;
- structured-output negotiation: a `response_format` asking for a JSON schema is sent in the first mode of
  `STRUCTURED_MODES` the server accepts (json_schema, then json_object with the schema alongside as
  llama-cpp-python takes it, then json_object, then the prompt alone). The first request runs alone until one
  succeeds; a rejection that names the format moves to the next mode, once, for every later request, and the mode
  is remembered for the endpoint in the response cache (it is part of the request body, hence of the cache key);
- the served model: the model name each reply reports is kept (`Completion.served_model`); when it differs from
  the requested one it is said once and becomes part of the cache key, so two models behind one alias never
  share answers;
- a server that states its slot count (llama-server's `/props`) gets no more concurrent requests than that;
- a server that answers 429 gets fewer attempts at once: the bound halves on a 429 and grows back by one after
  as many successes in a row;
- accounting: input, output and reasoning tokens, cost from the price table (`shambench/llm/pricing.yaml`, overridden
  by `$SHAMBENCH_PRICING` or `<user config dir>/shambench/pricing.yaml`), requests, retries and cache hits;
- a response cache (`shambench.llm.cache`) keyed by the server (`endpoint_url`), model, endpoint kind, generation
  parameters and rendered prompt, so two servers never share answers;
- no secrets kept: the API key is read from the environment when the client starts and never stored in
  parameters, cache records, usage records or error messages (redacted before any truncation); a base URL
  carrying credentials (`user:pass@host`) is refused (`EndpointError`).

The client puts together parts that live beside it, one job each: `wire` (request bodies as sent and every reply
validated), `negotiation` (the structured-output modes), `retry` (which failures to try again, Retry-After,
backoff, the 429 gate), `pricing` (prices and costs) and `loop` (the event-loop thread behind `map`).

The requests go out through the package's HTTP stack (`shambench.http`: aiohttp, not the openai SDK). The wire
format is the plain OpenAI JSON API: `POST {base_url}/chat/completions`, `/completions` or `/responses`, with
`extra_body` merged into the body. The endpoint itself and the checks on it are in `endpoint`; what goes instead of
HTTP (a `Route`) and when nothing more is sent (a `Budget`) in `route`.

Typical use from a detector:

    client = LLMClient(endpoint_of("gpt-5-mini"), cache=ResponseCache())

    async def one(example):
        reply = await client.chat(messages_for(example), {"max_completion_tokens": 800}, accept=parse)
        return reply.parsed

    for result in client.map(examples, one, monitor):   # a sync generator; the loop runs in a worker thread
        ...
"""

from __future__ import annotations

import asyncio
import functools
import queue
import random
from collections.abc import Awaitable, Callable, Iterator, Sequence
from typing import Any, NamedTuple, TypeVar

import orjson

from shambench.detection.detector import Monitor
from shambench.errors import (
    AuthenticationStopped,
    DataError,
    MalformedReply,
    ServerUnreachable,
    ShambenchError,
)
from shambench.http import LOOP_CLOCK, Clock, open_session, proxy_for, read_body
from shambench.io import model_json
from shambench.llm.cache import ResponseCache, cache_key
from shambench.llm.endpoint import (
    MAX_RESPONSE_BYTES_ENV,
    Endpoint,
    endpoint_url,
    same_model,
)
from shambench.llm.loop import ENDED, Ended, Feed, LoopThread
from shambench.llm.negotiation import (
    REJECTION_STATUS,
    STRUCTURED_MODES,
    STRUCTURED_SETTINGS,
    is_validation_error,
    next_mode,
    with_structured_mode,
)
from shambench.llm.retry import (
    AUTH_STATUS,
    RETRYABLE_STATUS,
    UNREACHABLE_TO_STOP,
    AdaptiveGate,
    Failure,
    backoff,
    connect_failure,
    retry_after,
)
from shambench.llm.route import Budget, Deferred, Route
from shambench.llm.wire import Reply, Usage, error_message, parse_reply, wire_body
from shambench.schema import Model
from shambench.secrets import redact
from shambench.structured import json_value

T = TypeVar("T")
R = TypeVar("R")

# The URL path of each request kind below the base URL.
KIND_PATHS = {"chat": "chat/completions", "completions": "completions", "responses": "responses", "pooling": "pooling"}
# Request kinds served at the server's root rather than under its /v1 (vLLM's pooling API).
ROOT_KINDS = frozenset({"pooling"})
JSON_HEADERS = {"Content-Type": "application/json"}
# What of a reply the response cache does not keep: what obtaining it consumed belongs to the run that asked.
_NOT_CACHED = {"usage"}

# How often finished results and counters are handed from the event-loop thread to the caller.
FLUSH_SECONDS = 0.05
_FINISHED = object()


class Completion(Model):
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
    served_model: str | None = None
    """The model name the reply reported (None when it reported none, or for answers cached before it was kept)."""
    structured: str | None = None
    """The structured-output mode the request was sent in (None when it asked for no output format)."""
    usage: Usage
    """What it consumed."""
    key: str
    """Its response-cache key."""
    parsed: Any = None
    """What the caller's `accept` function returned for it."""


class LLMError(ShambenchError):
    """A request that failed for good: the reason, what the attempts consumed, any text received, and the HTTP
    status when the server refused it."""

    def __init__(self, reason: str, usage: Usage, text: str | None = None, status: int | None = None):
        super().__init__(reason)
        self.reason = reason
        self.usage = usage
        self.text = text
        self.status = status

    def names_format(self) -> bool:
        """Whether this is a server rejecting the requested output format (not the prompt or the model)."""
        reason = self.reason.lower()
        # llama-cpp-python's message names the field and the accepted types ("Input should be 'text' or
        # 'json_object'"); others name the field or the type they refuse.
        named = ("response_format", "json_schema", "json_object")
        return self.status in REJECTION_STATUS and any(k in reason for k in named)


class _Lookup(NamedTuple):
    """A request's response-cache lookup: the structured-output mode and served model its key was made for."""

    mode: str
    served: str | None
    """The served model as the key records it (`LLMClient._served_in_key`)."""
    key: str


class LLMClient:
    """Calls one endpoint with bounded concurrency, retries, caching and accounting (see the module docstring)."""

    def __init__(
        self,
        endpoint: Endpoint,
        cache: ResponseCache | None = None,
        on_count: Callable[[str, float], None] | None = None,
        seed: int | None = None,
        structured: str = "auto",
        on_note: Callable[[str], None] | None = None,
        route: Route | None = None,
        budget: Budget | None = None,
        clock: Clock = LOOP_CLOCK,
    ):
        if structured not in STRUCTURED_SETTINGS:
            raise DataError(f"structured={structured!r}: expected one of {', '.join(STRUCTURED_SETTINGS)}")
        self.endpoint = endpoint
        self.cache = cache
        self.route = route
        self.budget = budget
        self.clock = clock
        """What the deadlines of requests and the pauses before retries run on (a test's own clock in tests)."""
        self.on_count = on_count or (lambda key, n: None)
        self.on_note = on_note or (lambda message: None)
        self.structured = structured
        self._rng = random.Random(seed)
        self._session: Any = None
        self._key: str | None = None
        self._proxy: str | None = None
        self._auth_failures = 0
        self._answered = False
        self._unreachable = 0
        self._mode = structured if structured != "auto" else self._remembered_mode()
        self.served_model: str | None = None
        """The model name the server reported in this client's first live reply."""
        self._settled = False
        self._settle_lock: asyncio.Lock | None = None
        self._settle_loop: asyncio.AbstractEventLoop | None = None
        self._slots_noted = False
        self._gate = AdaptiveGate(endpoint.max_concurrency, self._say_throttled)

    @property
    def mode(self) -> str:
        """The structured-output mode requests are sent in now."""
        return self._mode

    def _mode_key(self) -> str:
        return cache_key({"structured_mode_of": endpoint_url(self.endpoint.url()), "model": self.endpoint.model})

    def _remembered_mode(self) -> str:
        """The mode negotiated with this endpoint before (kept in the response cache), else the first."""
        stored = self.cache.get(self._mode_key()) if self.cache is not None else None
        mode = (stored or {}).get("text")
        return mode if mode in STRUCTURED_MODES else STRUCTURED_MODES[0]

    def _http(self) -> Any:
        """The aiohttp session of the running event loop (created on first use there), at most
        `max_concurrency` connections."""
        if self._session is None:
            self._key = self.endpoint.api_key()
            if note := self.endpoint.missing_key_note():
                self.on_note(note)
            self._proxy = proxy_for(self.endpoint.url())
            self._session = open_session(
                self.endpoint.max_concurrency, self.endpoint.timeout, {"Authorization": f"Bearer {self._key}"}
            )
        return self._session

    async def aclose(self) -> None:
        """Close the HTTP connections of the current loop."""
        if self._session is not None:
            await self._session.close()
        self._session = None

    def request_key(self, kind: str, body: dict[str, Any], served: str | None = None) -> str:
        """The cache key of a request: the server (`endpoint_url`), model, request kind, generation parameters
        (the structured-output mode included) and prompt; nothing of how it is fetched (concurrency, timeouts,
        retries); and the served model when the server answers as another model."""
        server = endpoint_url(self.endpoint.url())
        parts: dict[str, Any] = {"endpoint": server, "model": self.endpoint.model, "kind": kind, "body": body}
        if self._served_in_key(served) is not None:
            parts["served_model"] = served
        return cache_key(parts)

    def _served_in_key(self, served: str | None) -> str | None:
        """The served model as `request_key` records it: only when the server answers as another model."""
        return None if same_model(self.endpoint.model, served) else served

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
        or is not accepted (with the text received). The first request of a client goes out alone: it settles the
        structured-output mode and the served model for all the others.
        """
        while True:
            looked_up = None
            if self.cache is not None:
                mode, served = self._mode, self.served_model
                looked_up = _Lookup(
                    mode, self._served_in_key(served), self.request_key(kind, with_structured_mode(body, mode), served)
                )
                hit = self._cached(looked_up.key, accept, mode if "response_format" in body else None)
                if hit is not None:
                    return hit
            if self._settled:
                return await self._live(kind, body, accept, looked_up)
            async with self._settling():
                if not self._settled:
                    try:
                        return await self._live(kind, body, accept, looked_up)
                    finally:
                        # Whatever the outcome, the format question is answered (a rejection has already moved
                        # to the next mode): the others need not wait any longer, e.g. for a server that is down.
                        self._settled = True

    def _settling(self) -> asyncio.Lock:
        """The lock that holds the other requests back until the first has its answer, for the running event
        loop (a client may serve several loops in turn, and an asyncio lock belongs to one)."""
        loop = asyncio.get_running_loop()
        if self._settle_lock is None or self._settle_loop is not loop:
            self._settle_lock, self._settle_loop = asyncio.Lock(), loop
        return self._settle_lock

    def _cached(self, key: str, accept: Callable[[Completion], Any] | None, mode: str | None) -> Completion | None:
        assert self.cache is not None  # only looked up with a cache
        stored = self.cache.get(key)
        if stored is None:
            return None
        self.on_count("cache_hits", 1)
        done = Completion(**stored, structured=mode, usage=Usage(cache_hit=1), key=key)
        return self._accepted(done, accept)

    async def _live(
        self,
        kind: str,
        body: dict[str, Any],
        accept: Callable[[Completion], Any] | None,
        looked_up: _Lookup | None = None,
    ) -> Completion:
        """The server's answer, in the current structured-output mode, falling back to the next mode (for this
        and every later request) when the server rejects the format. The key of the cache lookup (`looked_up`)
        is used again wherever the mode and the served model leave it the same."""

        def key(mode: str, sent: dict[str, Any], served: str | None) -> str:
            if looked_up is not None and (mode, self._served_in_key(served)) == (looked_up.mode, looked_up.served):
                return looked_up.key
            return self.request_key(kind, sent, served)

        while True:
            mode = self._mode
            sent = with_structured_mode(body, mode)
            if self.budget is not None and self.budget.reached():
                raise LLMError(self.budget.reason(), Usage())
            try:
                reply = await self._fetch(kind, sent, functools.partial(key, mode, sent, None))
                break
            except LLMError as err:
                fallback = self.structured == "auto" and "response_format" in sent and next_mode(mode) is not None
                if not (fallback and err.names_format()):
                    if "response_format" in sent and err.names_format():
                        err.reason += (
                            f" (the server rejects structured mode {mode}: rerun with -p structured=MODE, "
                            f"one of {', '.join(m for m in STRUCTURED_MODES if m != mode)}, or leave it on auto)"
                        )
                    raise
                self.on_count("format_rejections", 1)
                self._fall_back(mode, err.reason)
        if self.budget is not None:
            self.budget.spent += reply.usage.cost
        served = reply.served_model
        self._learn_served(served)
        for name in ("input_tokens", "output_tokens", "reasoning_tokens", "cost"):
            self.on_count(name, getattr(reply.usage, name))
        answered = key(mode, sent, served)
        structured = mode if "response_format" in body else None
        # The reply's fields as they are (a validated Reply's, its Usage kept), not dumped and validated again.
        done = self._accepted(Completion(**vars(reply), structured=structured, key=answered), accept)
        if self.cache is not None:
            self.cache.put_json(answered, self.endpoint.model, cache_record(reply))
        return done

    async def _fetch(self, kind: str, sent: dict[str, Any], key: Callable[[], str]) -> Reply:
        """The reply to one request: from the route (the Batch API's answers, by the request's `key()`) when there
        is one, else over HTTP."""
        if self.route is None:
            return await self._send(kind, sent)
        return await self.route.send(key(), kind, sent)

    def _fall_back(self, mode: str, reason: str) -> None:
        """Move to the structured-output mode after `mode` (once, however many requests saw the rejection)."""
        if self._mode != mode:
            return
        following = next_mode(mode)
        if following is None:
            return
        self._mode = following
        if self.cache is not None:
            self.cache.put(self._mode_key(), self.endpoint.model, {"text": following})
        self.on_note(
            f"{self.endpoint.url()} rejects structured output as {mode} ({reason}); using {following} from now on "
            f"(force one with -p structured=MODE)"
        )

    def _learn_served(self, served: str | None) -> None:
        """Keep the model the server reports; say once when it is not the requested one."""
        if served is None or self.served_model == served:
            return
        self.served_model = served
        if not same_model(self.endpoint.model, served):
            self.on_note(
                f"{self.endpoint.url()} answers as model {served!r}, not the requested {self.endpoint.model!r}: "
                "its answers are recorded and cached under the served model"
            )

    def _say_throttled(self, cap: int) -> None:
        self.on_note(
            f"{self.endpoint.url()} is rate-limiting (HTTP 429): at most {cap} request(s) at once for now, more again "
            "as requests succeed (lower --max-concurrency to avoid this)"
        )

    async def _workers_for_server(self) -> int:
        """How many requests to keep in flight: `max_concurrency`, lowered to the server's slot count when it
        tells it (llama-server's `/props`), since requests beyond it only wait in the server's queue."""
        wanted = self.endpoint.max_concurrency
        if not self.endpoint.base_url or wanted == 1:
            return wanted
        slots = await self._server_slots()
        if slots is None or slots >= wanted:
            return wanted
        if not self._slots_noted:
            self._slots_noted = True
            self.on_note(
                f"{self.endpoint.url()} serves {slots} request(s) at a time: sending {slots} at once, not {wanted} "
                "(set --max-concurrency to the server's slots)"
            )
        return slots

    async def _server_slots(self) -> int | None:
        """The number of parallel slots a llama.cpp server reports at `/props` (None when it does not say)."""
        import aiohttp

        root = self.endpoint.url().removesuffix("/v1")
        try:
            async with self._http().get(
                f"{root}/props", proxy=self._proxy, timeout=aiohttp.ClientTimeout(total=5)
            ) as reply:
                if reply.status != 200:
                    return None
                props = json_value(await reply.text(), f"{root}/props", "a JSON object")
        except (aiohttp.ClientError, TimeoutError, ValueError):
            return None
        slots = props.get("total_slots") if isinstance(props, dict) else None
        return slots if isinstance(slots, int) and slots >= 1 else None

    @staticmethod
    def _accepted(done: Completion, accept: Callable[[Completion], Any] | None) -> Completion:
        if accept is None:
            return done
        try:
            done.parsed = accept(done)
        except ValueError as err:
            raise LLMError(f"unusable output: {err}", done.usage, done.text) from None
        except RecursionError:
            raise LLMError("unusable output: JSON nested too deeply", done.usage, done.text) from None
        return done

    async def _send(self, kind: str, body: dict[str, Any]) -> Reply:
        """The validated reply to one request, after retries; LLMError when every attempt failed,
        AuthenticationStopped after too many consecutive 401/403 replies."""
        session = self._http()
        base = self.endpoint.url().removesuffix("/v1") if kind in ROOT_KINDS else self.endpoint.url()
        url = f"{base}/{KIND_PATHS[kind]}"
        # Encoded once for every attempt (aiohttp's `json=` would encode it again on each, with the slower json).
        payload = orjson.dumps(wire_body(self.endpoint.model, body))
        attempts = 0
        while True:
            attempts += 1
            outcome = await self._attempt(session, kind, url, payload, attempts)
            if not isinstance(outcome, Failure):
                return outcome
            if not outcome.retryable or attempts > self.endpoint.max_retries:
                raise given_up(outcome, attempts) from None
            self.on_count("retries", 1)
            delay = backoff(attempts, self.endpoint.backoff_base, self.endpoint.backoff_max, self._rng)
            await self.clock.sleep(min(max(delay, outcome.wait or 0.0), self.endpoint.backoff_max))

    async def _attempt(self, session: Any, kind: str, url: str, payload: bytes, attempt: int) -> Reply | Failure:
        """The validated reply of HTTP attempt number `attempt` of a request, or why it failed; ServerUnreachable
        and AuthenticationStopped when it makes the run stop."""
        import aiohttp

        self.on_count("requests", 1)
        wait, status = None, None
        try:
            async with self._gate.slot(), self.clock.deadline(self.endpoint.timeout):
                async with session.post(url, data=payload, headers=JSON_HEADERS, proxy=self._proxy) as reply:
                    self._answered = True
                    raw = await read_body(reply, self.endpoint.max_response_bytes, f" (${MAX_RESPONSE_BYTES_ENV})")
                    status, headers = reply.status, reply.headers
                self._gate.after(status)
            if status == 200:
                parsed = parse_reply(kind, raw.decode("utf-8"), self.endpoint.model)
                self._auth_failures = 0
                # Counted into the reply just made, which nothing else holds yet (two model_copy calls cost 44k
                # instructions a request, these two assignments 9k).
                parsed.usage.requests, parsed.usage.retries = attempt, attempt - 1
                return parsed
            text = raw.decode("utf-8", "replace")
            retryable = (status in RETRYABLE_STATUS or status >= 500) and not is_validation_error(text)
            reason, wait = error_message(status, text), retry_after(headers)
        except MalformedReply as err:
            retryable, reason = True, str(err)
        except UnicodeDecodeError:
            retryable, reason = True, "malformed reply: not UTF-8 text"
        except aiohttp.ClientConnectorError as err:
            retryable, reason = True, connect_failure(err)
            self._stop_when_unreachable(reason)
        except (aiohttp.ClientError, TimeoutError, ValueError) as err:
            # A timeout or a dropped connection: worth another attempt.
            kind_of = "timeout" if isinstance(err, TimeoutError) else type(err).__name__
            detail = f"no complete reply within {self.endpoint.timeout:g} s" if isinstance(err, TimeoutError) else err
            retryable, reason = True, f"{kind_of}: {detail}".rstrip(": ")
        # Redact before shortening: a cut could leave part of a key behind.
        reason = _short(redact(reason))
        if status in AUTH_STATUS:
            self._stop_on_auth_failures(reason)
        return Failure(reason, retryable, status, wait)

    def _stop_when_unreachable(self, reason: str) -> None:
        """Count one more failed connection; ServerUnreachable when the server never answered and that makes
        `UNREACHABLE_TO_STOP`."""
        if self._answered:
            return
        self._unreachable += 1
        if self._unreachable >= UNREACHABLE_TO_STOP:
            raise ServerUnreachable(
                f"no server answers at {endpoint_url(self.endpoint.url())} ({reason}, {self._unreachable} attempts): "
                "start it, or correct the base URL (it usually ends in /v1)"
            )

    def _stop_on_auth_failures(self, reason: str) -> None:
        """Count one more 401/403 in a row; AuthenticationStopped when that makes `auth_failures_to_stop`."""
        self._auth_failures += 1
        if self._auth_failures >= self.endpoint.auth_failures_to_stop:
            raise AuthenticationStopped(
                f"stopped after {self._auth_failures} consecutive authentication errors ({reason}): check the key "
                f"in ${self.endpoint.api_key_env} (or --api-key-env) and the base URL {endpoint_url(self.endpoint.url())}"
            )

    def map(
        self, items: Sequence[T] | Feed[T], work: Callable[[T], Awaitable[R]], monitor: Monitor | None = None
    ) -> Iterator[R]:
        """`work(item)` for every item, run by `max_concurrency` workers on an event loop in a worker thread;
        results are yielded here as they complete. Counters and notes reach `monitor` from the calling thread.
        Items in a `Feed` are worked on as another thread puts them; the map ends when the feed is closed and
        its items done, and raises the error it was closed with."""
        events: queue.SimpleQueue = queue.SimpleQueue()
        forward, forward_note = self.on_count, self.on_note
        tally: dict[str, float] = {}
        notes: list[str] = []
        self.on_count = lambda key, n: tally.__setitem__(key, tally.get(key, 0) + n)
        self.on_note = notes.append
        runner = LoopThread()
        runner.submit(self._work_all(items, work, events, tally, notes))
        try:
            while True:
                results, counts, said, end = events.get()
                for message in said:
                    forward_note(message)
                    # A monitor written before notes existed may lack `note`: it still gets the counters.
                    getattr(monitor, "note", lambda m: None)(message)
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
            runner.close()
            self.on_count, self.on_note = forward, forward_note

    async def _work_all(
        self,
        items: Sequence[T] | Feed[T],
        work: Callable[[T], Awaitable[R]],
        events: queue.SimpleQueue,
        tally: dict[str, float],
        notes: list[str],
    ) -> None:
        take = items.take if isinstance(items, Feed) else _taker(iter(items))
        done: list[R] = []

        def flush(end: object = None) -> None:
            # Results and counters cross to the calling thread in batches: one hand-over per result would make
            # the two threads fight for the GIL thousands of times a second and slow the event loop down.
            events.put((done.copy(), dict(tally), notes.copy(), end))
            done.clear()
            tally.clear()
            notes.clear()

        async def worker() -> None:
            # Workers share one iterator (or the feed), so at most max_concurrency items are ever started and
            # unfinished.
            while not isinstance(item := await take(), Ended):
                try:
                    done.append(await work(item))
                except Deferred as deferred:
                    assert self.route is not None  # only a route defers a request
                    self.route.held(item, deferred)

        async def ticker() -> None:
            while True:
                await asyncio.sleep(FLUSH_SECONDS)
                if done or tally or notes:
                    flush()

        outcome: object = _FINISHED
        tick = asyncio.create_task(ticker())
        try:
            workers = await self._workers_for_server() if items else 0
            async with asyncio.TaskGroup() as group:
                # A feed's items are not known yet: as many workers as may be in flight, ending when it does.
                for _ in range(workers if isinstance(items, Feed) else min(workers, len(items))):
                    group.create_task(worker())
        except* Exception as errors:
            outcome = errors.exceptions[0]
        finally:
            tick.cancel()
            await self.aclose()
        flush(outcome)


def _taker(items: Iterator[T]) -> Callable[[], Awaitable[T | Ended]]:
    """A feed's `take` over items all known already."""

    async def take() -> T | Ended:
        return next(items, ENDED)

    return take


def cache_record(reply: Reply) -> str:
    """The JSON text the response cache keeps of `reply` (all of it but its usage), written by its serializer: a
    request's reply dumped to a dict that json then wrote cost 44k instructions, this 10k."""
    return model_json(reply, exclude=_NOT_CACHED).decode()


def given_up(failure: Failure, attempts: int) -> LLMError:
    """The error of a request given up after `attempts` attempts, the last of which failed so."""
    tries = f" after {attempts} attempts" if attempts > 1 else ""
    return LLMError(failure.reason + tries, Usage(requests=attempts, retries=attempts - 1), status=failure.status)


def _short(text: str, limit: int = 300) -> str:
    text = " ".join(str(text).split())
    return text if len(text) <= limit else text[: limit - 1] + "…"


def map_endpoint(
    endpoint: Endpoint,
    items: Sequence[T] | Feed[T],
    work: Callable[[LLMClient, T], Awaitable[R]],
    monitor: Monitor | None = None,
    use_cache: bool = True,
    structured: str = "auto",
    route: Route | None = None,
    budget: Budget | None = None,
) -> Iterator[R]:
    """`work(client, item)` for every item, through a client of `endpoint` sharing the response cache and
    sending `response_format` in the `structured` mode (see `LLMClient`); results are yielded as they complete.
    A missing API key fails before any request is made. With a `route`, requests the cache cannot answer go to it
    instead of the HTTP API (items it holds back yield nothing); with a `budget`, no request is sent once it is
    reached."""
    cache = ResponseCache() if use_cache else None
    client = LLMClient(endpoint, cache=cache, structured=structured, route=route, budget=budget)
    if route is None:
        endpoint.api_key()
    try:
        yield from client.map(items, functools.partial(work, client), monitor)
    finally:
        if cache is not None:
            cache.close()
