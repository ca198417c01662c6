"""The one HTTP stack of the package, on aiohttp: the sessions of the OpenAI-compatible client (`open_session`), a
blocking `Client` for what does not run on an event loop (downloads, context providers), the proxy that applies to
a URL, reply bodies read within a byte limit, and the handshake with a Dask scheduler. Anything every request must
obey has its one place here:

- a deadline for the whole request (connection, headers and body), not only for each read, so that a server
  trickling a byte a second cannot hold a request for minutes: `deadline` around an API request; the blocking
  client's requests end `timeout` seconds after they start, plus the time their bytes take at `min_rate`;
- a byte cap counted as the body arrives, on the decoded bytes where the client decompresses (aiohttp inflates a
  compressed body a bounded piece at a time, so a decompression bomb stops at the cap, never whole in memory);
- a failure is one of this module's errors or a TimeoutError, with a message of one line.

aiohttp rather than httpx or the openai SDK: the SDK's request transformation and its httpx transport cost
several milliseconds of CPU per request, which on a 2-core machine caps a run far below what a local vLLM server
or OpenAI's rate limits allow (benchmarks/bench_api.py); bare loops of the same requests, alternately, took 0.15 ms
of CPU per request through aiohttp against 4.1 ms through httpx (benchmarks/bench_http.py). The openai SDK is kept
for the Batch API only, on a transport that applies this module's rules to it (`shambench.llm.batchapi`); of
huggingface_hub, downloads use only its URLs and token.
"""

from __future__ import annotations

import asyncio
import collections
import urllib.parse
import urllib.request
from collections.abc import Awaitable, Iterator
from contextlib import AbstractAsyncContextManager, contextmanager
from typing import Any, TypeVar

from shambench.errors import MalformedReply
from shambench.structured import json_value

T = TypeVar("T")

# Bytes read from a reply at a time.
CHUNK_BYTES = 64 * 1024
# Connections a blocking `Client` keeps (aiohttp's default pool size; it sends one request at a time).
CLIENT_CONNECTIONS = 100
# The slowest a blocking client's body may arrive on average (bytes per second) before its deadline passes: far
# below any real link, far above a server that trickles.
MIN_RATE = 16 * 1024


def time_left(started: float, now: float, timeout: float, received: int, min_rate: float = MIN_RATE) -> float:
    """Seconds left to a request that started at `started` and has received `received` bytes of body, at `now`
    (one clock): `timeout` from its start, plus 1 s per `min_rate` bytes received. The one rule of every request
    whose body may be large (downloads, Batch API files): a server that trickles runs out of time, a large body
    at any real rate does not."""
    return started + timeout + received / min_rate - now


def deadline(seconds: float) -> asyncio.Timeout:
    """The one deadline of a whole API request: used as `async with deadline(s):` around sending it and reading its
    body, a TimeoutError once `seconds` have passed, however the bytes trickle."""
    return asyncio.timeout(seconds)


class _Expiry:
    """One request's place in its loop's `_Deadlines`."""

    __slots__ = ("cancelling", "done", "fired", "task", "when")

    def __init__(self, when: float, task: asyncio.Task[Any]):
        self.when, self.task, self.cancelling = when, task, task.cancelling()
        self.done = self.fired = False


class _Deadlines:
    """The deadlines of one event loop's API requests. A client gives each of its requests the same time, so they
    pass in the order the requests began: one timer, set for the oldest request still open, serves them all, where
    an `asyncio.timeout` each (a timer in the loop's heap, compared in Python) cost a request 35k instructions."""

    def __init__(self, loop: asyncio.AbstractEventLoop):
        self.loop = loop
        self._open: collections.deque[_Expiry] = collections.deque()
        self._timer: asyncio.TimerHandle | None = None

    def admit(self, seconds: float, task: asyncio.Task[Any]) -> _Expiry | None:
        """The expiry of a request of `task` that must end within `seconds`; None when it would pass before one
        already open (the caller then takes an `asyncio.timeout` of its own)."""
        when = self.loop.time() + seconds
        if self._open and when < self._open[-1].when:
            return None
        expiry = _Expiry(when, task)
        self._open.append(expiry)
        # A timer is pending whenever a request is open, set no later than the oldest one's deadline. The timer of
        # a longer request that has already ended may still be pending, set for later than this one's deadline.
        if self._timer is None or when < self._timer.when():
            if self._timer is not None:
                self._timer.cancel()
            self._timer = self.loop.call_at(when, self._pass)
        return expiry

    def close(self, expiry: _Expiry) -> None:
        """The request of `expiry` has left its deadline."""
        expiry.done = True
        while self._open and self._open[0].done:
            self._open.popleft()

    def _pass(self) -> None:
        """Cancel every open request whose deadline has passed, and set the timer for the next."""
        now = self.loop.time()
        while self._open and (self._open[0].done or self._open[0].when <= now):
            expiry = self._open.popleft()
            if not expiry.done:
                expiry.fired = True
                expiry.task.cancel()
        self._timer = self.loop.call_at(self._open[0].when, self._pass) if self._open else None


class _RequestDeadline:
    """`async with`: a request's deadline of `seconds` in its loop's `_Deadlines`; a TimeoutError once they have
    passed, as `asyncio.timeout` raises it (a cancellation from elsewhere passes through as it is)."""

    def __init__(self, clock: Clock, seconds: float):
        self._clock, self._seconds = clock, seconds
        self._deadlines: _Deadlines | None = None
        self._expiry: _Expiry | None = None
        self._fallback: asyncio.Timeout | None = None

    async def __aenter__(self) -> None:
        task = asyncio.current_task()
        self._deadlines = self._clock.deadlines()
        self._expiry = self._deadlines.admit(self._seconds, task) if task is not None else None
        if self._expiry is None:
            self._fallback = asyncio.timeout(self._seconds)
            await self._fallback.__aenter__()

    async def __aexit__(self, kind: type[BaseException] | None, error: BaseException | None, trace: Any) -> None:
        if self._fallback is not None:
            await self._fallback.__aexit__(kind, error, trace)
            return
        expiry, deadlines = self._expiry, self._deadlines
        assert expiry is not None and deadlines is not None
        deadlines.close(expiry)
        # As asyncio.timeout does: the cancel its deadline made is taken back, and becomes a TimeoutError unless
        # another cancel was asked for meanwhile.
        if expiry.fired and expiry.task.uncancel() <= expiry.cancelling and kind is asyncio.CancelledError:
            raise TimeoutError from error


class Clock:
    """What an API client's waits run on: the deadline of each request and the pause before a retry. This one is
    the running event loop's clock; a test gives the client one that moves only when the test says
    (`tests/manual_clock.py`), so which request meets its deadline never depends on how busy the machine is."""

    def __init__(self) -> None:
        self._deadlines: _Deadlines | None = None

    def deadline(self, seconds: float) -> AbstractAsyncContextManager[Any]:
        """An API request's deadline of `seconds` (see `deadline`), kept with the others of its loop."""
        return _RequestDeadline(self, seconds)

    def deadlines(self) -> _Deadlines:
        """The deadlines of the running loop's requests (made anew when the clock serves another loop: the last
        loop's are kept by the requests still in them)."""
        loop = asyncio.get_running_loop()
        if self._deadlines is None or self._deadlines.loop is not loop:
            self._deadlines = _Deadlines(loop)
        return self._deadlines

    async def sleep(self, seconds: float) -> None:
        """Wait `seconds` (the pause before a retry)."""
        await asyncio.sleep(seconds)


LOOP_CLOCK = Clock()
"""The clock of every API client that is not given another."""


async def _within(step: Awaitable[T], seconds: float) -> T:
    async with asyncio.timeout(seconds):
        return await step


async def _handshake(address: str, seconds: float) -> None:
    from distributed.comm import connect

    comm = await connect(address, timeout=seconds)
    await comm.close()


def reach_scheduler(address: str, seconds: float) -> None:
    """Nothing when the Dask scheduler at `address` connects and answers distributed's handshake within `seconds`;
    TransportError in one line otherwise (Dask's own connect does not bound the handshake: a port that accepts and
    never speaks would hold a sweep forever)."""
    try:
        asyncio.run(_within(_handshake(address, seconds), seconds))
    except TimeoutError:
        raise Timeout(f"no answer from the Dask scheduler at {address} within {seconds:g} s") from None
    except (OSError, ValueError) as err:
        first = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ConnectError(f"cannot reach the Dask scheduler at {address} ({first})") from None


def proxy_for(url: str) -> str | None:
    """The HTTP(S)_PROXY that applies to `url` (NO_PROXY honoured), looked up once by the caller rather than by
    aiohttp's `trust_env` on every request, which costs more CPU than the request itself."""
    parts = urllib.parse.urlsplit(url)
    if urllib.request.proxy_bypass(parts.hostname or ""):
        return None
    return urllib.request.getproxies().get(parts.scheme)


def open_session(
    connections: int,
    timeout: float,
    headers: dict[str, str],
    connect_timeout: float | None = None,
    decompress: bool = True,
) -> Any:
    """An aiohttp session of the running event loop with at most `connections` connections, sending `headers`
    with every request, whose requests are abandoned after `timeout` seconds without a byte of reply and
    `connect_timeout` (default: `timeout`, at most 30 s) without a connection (the whole request's deadline is
    the caller's `deadline`, or the blocking client's); `decompress=False` hands on bodies as sent. Every session
    of the package is made here."""
    import aiohttp

    # The timeout runs from when the request is written: `sock_read` bounds the wait for the reply, and no
    # total/connect limit counts the time spent waiting for a free connection of the pool (the caller's deadline
    # starts once it holds a slot of its own concurrency bound, which is the pool's size).
    connect = min(30.0, timeout) if connect_timeout is None else connect_timeout
    return aiohttp.ClientSession(
        connector=aiohttp.TCPConnector(limit=connections),
        timeout=aiohttp.ClientTimeout(total=None, connect=None, sock_connect=connect, sock_read=timeout),
        headers=headers,
        auto_decompress=decompress,
    )


def too_big(limit: int, hint: str = "") -> MalformedReply:
    """The error of a reply larger than `limit` bytes; `hint` ends the message (where the limit is set)."""
    return MalformedReply(f"malformed reply: larger than the {limit}-byte limit{hint}")


async def read_body(reply: Any, limit: int, hint: str = "") -> bytes:
    """The body of an aiohttp reply; MalformedReply as soon as it is known to exceed `limit` bytes (from its
    Content-Length, or while reading), so a huge reply is never held in memory whole. `hint` ends the message
    (where the limit is set)."""
    if reply.content_length is not None and reply.content_length > limit:
        raise too_big(limit, hint)
    chunks, size = [], 0
    async for chunk in reply.content.iter_chunked(CHUNK_BYTES):
        size += len(chunk)
        if size > limit:
            raise too_big(limit, hint)
        chunks.append(chunk)
    return b"".join(chunks)


class HTTPError(Exception):
    """A request through `Client` that got no usable reply."""


class TransportError(HTTPError):
    """No reply at all: no connection, a dropped one, or no answer in time."""


class ConnectError(TransportError):
    """No connection to the server (refused, no route, a name that does not resolve)."""


class Timeout(TransportError):
    """No answer within the client's timeout."""


class StatusError(HTTPError):
    """A reply whose status is an error (`Reply.raise_for_status`)."""


class Reply:
    """The status and headers of a reply from `Client`, whose body is read as it arrives (`chunks`) or whole
    within a byte limit (`read`, `json`)."""

    def __init__(self, client: Client, raw: Any, started: float):
        self._client, self._raw = client, raw
        self.status: int = raw.status
        """The HTTP status."""
        self.reason: str = raw.reason or ""
        """The status's phrase (`Not Found`)."""
        self.headers: Any = raw.headers
        """The headers, looked up by any case of their names."""
        self._started = started

    def chunks(self) -> Iterator[bytes]:
        """The body's bytes as they arrive (undecoded when the client does not decompress); when the connection
        breaks or the request's deadline passes, every byte received before it, then the TransportError."""
        content = self._raw.content
        received = 0
        while True:
            try:
                chunk = self._client.run(content.readany(), self._client.remaining(self._started, received))
                received += len(chunk)
            except TransportError:
                # aiohttp raises a broken body's error before handing on what it had buffered: that much is handed
                # on first, so that a download keeps every byte that arrived and resumes after the last.
                if rest := content._read_nowait(-1):
                    yield rest
                raise
            if not chunk:
                return
            yield chunk

    def read(self, limit: int) -> bytes:
        """The whole body; MalformedReply past `limit` bytes, Timeout past the request's deadline (which, as for
        `chunks`, grows with the bytes received only: a body trickling in fails by then, whatever the limit)."""
        if self._raw.content_length is not None and self._raw.content_length > limit:
            raise too_big(limit)
        body = bytearray()
        for chunk in self.chunks():
            body += chunk
            if len(body) > limit:
                raise too_big(limit)
        return bytes(body)

    def json(self, limit: int) -> Any:
        """The body as JSON (ValueError when it is not)."""
        return json_value(self.read(limit), str(self._raw.url), "a JSON body")

    def raise_for_status(self) -> None:
        """StatusError when the status is 400 or above."""
        if self.status >= 400:
            raise StatusError(f"HTTP {self.status} {self.reason} from {self._raw.url}")


class Client:
    """Blocking HTTP requests through aiohttp for code that does not run on an event loop (downloads, context
    providers): an event loop and a session of its own, used from one thread at a time. Redirects are followed;
    a request is abandoned `timeout` seconds after it starts (`connect_timeout` to connect), plus the time its body
    takes at `min_rate` bytes a second, so a trickling server cannot hold it; a failed request raises a
    `TransportError`. `decompress=False` hands on the body's bytes as sent (a download counts
    the file's own bytes)."""

    def __init__(
        self,
        timeout: float = 60.0,
        connect_timeout: float = 15.0,
        headers: dict[str, str] | None = None,
        decompress: bool = True,
        min_rate: float = MIN_RATE,
    ):
        self.timeout, self.connect_timeout, self.min_rate = timeout, connect_timeout, min_rate
        self.headers, self.decompress = headers or {}, decompress
        self._loop: asyncio.AbstractEventLoop | None = None
        self._session: Any = None

    def __enter__(self) -> Client:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def _now(self) -> float:
        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        return self._loop.time()

    def remaining(self, started: float, received: int) -> float:
        """Seconds left to a request that started at `started` (the loop's clock) and has received `received`
        bytes of body."""
        return time_left(started, self._now(), self.timeout, received, self.min_rate)

    def run(self, step: Awaitable[T], seconds: float | None = None) -> T:
        """The outcome of `step` on the client's loop, within `seconds` if given; aiohttp's failures as
        `TransportError`."""
        import aiohttp

        if self._loop is None:
            self._loop = asyncio.new_event_loop()
        try:
            if seconds is None:
                return self._loop.run_until_complete(step)
            if seconds <= 0:
                if asyncio.iscoroutine(step):
                    step.close()
                raise TimeoutError
            return self._loop.run_until_complete(_within(step, seconds))
        except TimeoutError as err:
            raise Timeout(
                f"no complete answer within {self.timeout:g} s (plus 1 s per {self.min_rate:g} bytes received)"
            ) from err
        except aiohttp.ClientConnectorError as err:
            raise ConnectError(str(err)) from err
        except aiohttp.ClientError as err:
            raise TransportError(f"{type(err).__name__}: {err}".rstrip(": ")) from err

    async def _opened(self, url: str, headers: dict[str, str] | None, params: dict[str, str] | None) -> Any:
        if self._session is None:
            self._session = open_session(
                CLIENT_CONNECTIONS, self.timeout, self.headers, self.connect_timeout, self.decompress
            )
        return await self._session.get(url, headers=headers, params=params, proxy=proxy_for(url))

    @contextmanager
    def get(
        self, url: str, headers: dict[str, str] | None = None, params: dict[str, str] | None = None
    ) -> Iterator[Reply]:
        """The reply to `GET url`, its body not read yet; the connection goes back to the pool on leaving."""
        started = self._now()
        raw = self.run(self._opened(url, headers, params), self.timeout)
        try:
            yield Reply(self, raw, started)
        finally:
            raw.release()

    def close(self) -> None:
        """Close the connections and the loop."""
        if self._loop is None:
            return
        if self._session is not None:
            self._loop.run_until_complete(self._session.close())
            self._session = None
        self._loop.close()
        self._loop = None
