"""The Files and Batches endpoints of OpenAI's Batch API, through the `openai` SDK on a transport that gives it the
rules of `shambench.http`.

The SDK builds the requests (paths, the multipart upload, the key's header) and retries 429, 5xx, timeouts and
dropped connections `Endpoint.max_retries` times; everything a reply may do to us is bounded below it, in
`GatedTransport`, the httpx transport every one of its requests goes through:

- each attempt ends `Endpoint.timeout` seconds after it starts, plus 1 s per `shambench.http.MIN_RATE` bytes of
  body received (`shambench.http.time_left`, the blocking client's rule), so a server that trickles cannot hold it;
  and each call, its retries and their waits included, ends within `call_deadline` seconds;
- a body is counted as it arrives, and refused past its cap: an object (a batch, a file, a list page) past
  MAX_OBJECT_BYTES, an error reply past MAX_ERROR_BYTES, an output or error file past
  `$SHAMBENCH_MAX_BATCH_FILE_BYTES`; only gzip and deflate are asked for, and they are inflated here a bounded
  piece at a time, the cap counting the inflated bytes, so a decompression bomb stops at the cap;
- a reply's JSON is read by the bounded reader (`shambench.structured.json_value`: size and depth) and checked
  against the few fields a run reads (`Batch`), never handed to the SDK's own parser;
- every failure is one `DataError` line naming the call, the key redacted (`WaitOver` when the caller's own wait
  ran out first).

The calls run on a private event loop in a daemon thread (`shambench.llm.loop.LoopThread`), so a caller that has
a loop of its own (a notebook) can use them too.
"""

from __future__ import annotations

import asyncio
import os
import zlib
from collections.abc import AsyncIterator, Awaitable, Coroutine, Iterator
from typing import Any, TypeVar

import httpx2
import openai
from pydantic import BaseModel, Field, ValidationError

from shambench.errors import DataError, MalformedReply
from shambench.http import CHUNK_BYTES, MIN_RATE, deadline, proxy_for, time_left
from shambench.llm.endpoint import Endpoint
from shambench.llm.loop import LoopThread
from shambench.llm.wire import error_message
from shambench.schema import Model, Name
from shambench.secrets import redact
from shambench.structured import MAX_FIELD_CHARS, json_value

T = TypeVar("T")
M = TypeVar("M", bound=BaseModel)

MAX_BATCH_FILE_ENV = "SHAMBENCH_MAX_BATCH_FILE_BYTES"
"""Output and error files larger than this many (inflated) bytes are refused whole."""
DEFAULT_MAX_BATCH_FILE_BYTES = 512 * 1024 * 1024
MAX_OBJECT_BYTES = MAX_FIELD_CHARS
"""Largest reply that is one JSON object (a batch, a file, a page of the batch list): what the bounded reader takes."""
MAX_ERROR_BYTES = 64 * 1024
"""Largest error reply (status 400 and above) read; only its message is shown."""
LIST_PAGE = 100
"""Batches per page when looking for a batch by its input file."""
MAX_LIST_PAGES = 1000
"""Pages of the batch list read at most (100,000 batches), so that a list that never ends cannot hold a run."""
ENCODINGS = ("gzip", "deflate")
"""The content codings asked for, and inflated by `GatedTransport`; a reply in any other is refused."""
API_ID = r"^[A-Za-z0-9_.:-]{1,200}$"
"""The shape of the ids the Batch API gives files and batches (one of another shape could leave the API's paths)."""
DETAIL_CHARS = 500
"""Longest server message quoted in an error line."""


class WaitOver(Exception):
    """The caller's own wait (`within`) ran out before a call finished; the call is abandoned."""


class RequestCounts(Model):
    """A batch's request counts."""

    total: int = 0
    """Requests in the batch."""
    completed: int = 0
    """Requests answered."""
    failed: int = 0
    """Requests failed."""


class ItemError(Model):
    """One error of a failed batch (e.g. its input file's validation)."""

    code: str | None = None
    """The error's code."""
    message: str | None = None
    """What went wrong."""


class BatchErrors(Model):
    """A failed batch's errors."""

    data: list[ItemError] = Field(default_factory=list)
    """The errors, in the API's order."""


class Batch(Model):
    """A batch as the API reports it: the fields a run reads (any other is ignored)."""

    id: Name = Field(pattern=API_ID)
    """The batch id."""
    status: str = Field(pattern=r"^[a-z_]{1,64}$")
    """`validating`, `in_progress`, `finalizing`, `completed`, `failed`, `expired`, `cancelling`, `cancelled`."""
    input_file_id: Name | None = None
    """The uploaded Batch JSONL file it runs."""
    output_file_id: Name | None = Field(default=None, pattern=API_ID)
    """The file of its answers, once there is one."""
    error_file_id: Name | None = Field(default=None, pattern=API_ID)
    """The file of its failed requests, once there is one."""
    request_counts: RequestCounts | None = None
    """How many of its requests are done."""
    errors: BatchErrors | None = None
    """Why it failed, when it did."""


class FileObject(Model):
    """An uploaded file, as the API reports it (its id is all a run reads)."""

    id: Name = Field(pattern=API_ID)
    """The file id."""


class BatchPage(Model):
    """A page of the batch list."""

    data: list[dict[str, Any]] = Field(default_factory=list)
    """Its batches, each checked only when it is the one looked for."""
    has_more: bool = False
    """Whether a further page follows."""
    last_id: Name | None = None
    """The cursor of the next page."""


def max_batch_file_bytes() -> int:
    """`$SHAMBENCH_MAX_BATCH_FILE_BYTES`, else 512 MiB."""
    value = os.environ.get(MAX_BATCH_FILE_ENV)
    if not value:
        return DEFAULT_MAX_BATCH_FILE_BYTES
    if not value.isdigit():
        raise DataError(f"${MAX_BATCH_FILE_ENV}: expected a number of bytes, got {value!r}")
    return int(value)


# ------------------------------------------------------------------------------------------- the transport


class Inflater:
    """The bytes of a body sent in a content coding (gzip or deflate; "" for none), fed as they arrive and handed
    on at most CHUNK_BYTES at a time: a small compressed piece that inflates to gigabytes comes out a bounded piece
    at a time, so the cap counting them stops it early. MalformedReply on bytes that are not what the coding says."""

    def __init__(self, coding: str):
        self.coding = coding
        # MAX_WBITS | 32 reads a gzip or a zlib header; deflate in HTTP is zlib-wrapped (RFC 9110, 8.4.1.2).
        self._inflater = zlib.decompressobj(zlib.MAX_WBITS | 32) if coding else None

    def feed(self, piece: bytes) -> Iterator[bytes]:
        """The inflated bytes of the next piece of the body."""
        inflater = self._inflater
        if inflater is None:
            if piece:
                yield piece
            return
        data, out = piece, b""
        try:
            # A full piece out may leave more inflated bytes inside zlib although no input is left.
            while not inflater.eof and (data or len(out) == CHUNK_BYTES):
                out = inflater.decompress(data, CHUNK_BYTES)
                data = inflater.unconsumed_tail
                if out:
                    yield out
        except zlib.error as err:
            raise MalformedReply(f"malformed reply: not valid {self.coding} data ({err})") from None
        if inflater.eof and (data or inflater.unused_data):
            raise MalformedReply(f"malformed reply: bytes after the end of its {self.coding} body")

    def end(self) -> None:
        """MalformedReply when the body ended before its compressed stream did."""
        if self._inflater is not None and not self._inflater.eof:
            raise MalformedReply(f"malformed reply: its {self.coding} body ends early")


class GatedTransport(httpx2.AsyncBaseTransport):
    """The transport under the SDK's client (see the module docstring): each attempt within its deadline, its body
    inflated here and refused past `limit` bytes (MAX_ERROR_BYTES for an error reply); `hint` ends the message of
    a body refused for its size (what to do about it)."""

    def __init__(self, inner: httpx2.AsyncBaseTransport, timeout: float, limit: int, hint: str = ""):
        self.inner, self.timeout, self.limit, self.hint = inner, timeout, limit, hint
        self.min_rate = MIN_RATE

    def now(self) -> float:
        """The running loop's clock."""
        return asyncio.get_running_loop().time()

    def late(self) -> str:
        """Why an attempt was abandoned for time."""
        return f"no complete reply within {self.timeout:g} s (plus 1 s per {self.min_rate:g} bytes received)"

    def too_big(self, error: bool) -> MalformedReply:
        """The error of a body past its limit (`error`: the body of an error reply)."""
        if error:
            return MalformedReply(f"malformed reply: an error reply larger than {MAX_ERROR_BYTES} bytes")
        return MalformedReply(f"malformed reply: larger than the {self.limit}-byte limit{self.hint}")

    async def handle_async_request(self, request: httpx2.Request) -> httpx2.Response:
        request.headers["Accept-Encoding"] = ", ".join(ENCODINGS)
        started = self.now()
        try:
            async with deadline(self.timeout):
                reply = await self.inner.handle_async_request(request)
        except TimeoutError:
            raise httpx2.ReadTimeout(self.late(), request=request) from None
        coding = reply.headers.get("content-encoding", "").strip().lower()
        error = reply.status_code >= 400
        length = reply.headers.get("content-length", "")
        problem = None
        if coding not in ("", "identity", *ENCODINGS):
            problem = MalformedReply(f"malformed reply: its body is in {coding[:40]!r}, a coding not asked for")
        elif not error and length.isdigit() and int(length) > self.limit:  # an error's body is read only when
            problem = self.too_big(error)  # it is shown (not before a retry), and then within MAX_ERROR_BYTES
        if problem is not None:
            await reply.aclose()
            raise problem
        # httpx must not inflate it again, nor check the inflated length against the one sent.
        headers = [
            (k, v) for k, v in reply.headers.multi_items() if k.lower() not in ("content-encoding", "content-length")
        ]
        body = GatedBody(self, reply.stream, request, "" if coding == "identity" else coding, error, started)
        return httpx2.Response(
            reply.status_code, headers=headers, stream=body, request=request, extensions=reply.extensions
        )

    async def aclose(self) -> None:
        await self.inner.aclose()


class GatedBody(httpx2.AsyncByteStream):
    """A reply's body as `GatedTransport` hands it on: each piece within the attempt's deadline, inflated, and
    counted as sent and as inflated against the cap."""

    def __init__(
        self, gate: GatedTransport, raw: Any, request: httpx2.Request, coding: str, error: bool, started: float
    ):
        self.gate, self.raw, self.request = gate, raw, request
        self.coding, self.error, self.started = coding, error, started
        self.limit = MAX_ERROR_BYTES if error else gate.limit

    async def _pieces(self) -> AsyncIterator[bytes]:
        """The bytes as sent, each piece within what is left of the attempt's time."""
        gate, received = self.gate, 0
        pieces = aiter(self.raw)
        while True:
            left = time_left(self.started, gate.now(), gate.timeout, received, gate.min_rate)
            try:
                async with deadline(max(left, 0.0)):
                    piece = await anext(pieces)
            except StopAsyncIteration:
                return
            except TimeoutError:
                raise httpx2.ReadTimeout(gate.late(), request=self.request) from None
            received += len(piece)
            if received > self.limit:
                raise gate.too_big(self.error)
            yield piece

    async def __aiter__(self) -> AsyncIterator[bytes]:
        inflater, size = Inflater(self.coding), 0
        async for piece in self._pieces():
            for out in inflater.feed(piece):
                size += len(out)
                if size > self.limit:
                    raise self.gate.too_big(self.error)
                yield out
        inflater.end()

    async def aclose(self) -> None:
        await self.raw.aclose()


# ------------------------------------------------------------------------------------------------- the calls


async def _bounded(step: Awaitable[T], seconds: float) -> T:
    async with deadline(seconds):
        return await step


async def _next(pieces: AsyncIterator[bytes]) -> bytes | None:
    return await anext(pieces, None)


def checked(model: type[M], value: Any, what: str) -> M:
    """`value` as `model`; DataError naming the first field that is wrong and `what` was expected (one line)."""
    try:
        return model.model_validate(value)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(part) for part in first["loc"])
        field = f"the reply's {where}" if where else "the reply"
        raise DataError(f"{field}: {first['msg']}; expected {what}") from None


async def _object(call: Awaitable[Any], model: type[M], what: str) -> M:
    """The reply of an SDK call made `with_raw_response`, read by the bounded reader and checked as `model`."""
    reply = await call
    return checked(model, json_value(reply.content, "the reply", what), what)


class BatchAPI:
    """The Files and Batches endpoints of the detector's server (same base URL and key variable as direct
    requests), one call at a time; see the module docstring for what bounds each call."""

    def __init__(self, endpoint: Endpoint):
        self.endpoint = endpoint
        self.base_url = endpoint.url()
        self.call_deadline = (endpoint.max_retries + 1) * (endpoint.timeout + endpoint.backoff_max)
        """Seconds a call may take, its retries and the waits before them included."""
        key = endpoint.api_key()
        hint = f" (${MAX_BATCH_FILE_ENV}); nothing of it was applied: raise ${MAX_BATCH_FILE_ENV} to accept it, then resume"
        self._objects = self._sdk(key, MAX_OBJECT_BYTES)
        self._files = self._sdk(key, max_batch_file_bytes(), hint)
        self._thread = LoopThread("shambench-batch")

    def _sdk(self, key: str, limit: int, hint: str = "") -> openai.AsyncOpenAI:
        inner = httpx2.AsyncHTTPTransport(proxy=proxy_for(self.base_url))
        gate = GatedTransport(inner, self.endpoint.timeout, limit, hint)
        # trust_env=False: no proxy transport of httpx's own beside the gate (the proxy is the package's rule).
        http = httpx2.AsyncClient(transport=gate, trust_env=False, follow_redirects=True, timeout=self.endpoint.timeout)
        return openai.AsyncOpenAI(
            api_key=key,
            base_url=self.base_url,
            http_client=http,
            max_retries=self.endpoint.max_retries,
            timeout=self.endpoint.timeout,
        )

    def __enter__(self) -> BatchAPI:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Close the connections and stop the loop."""
        self._thread.close(self._aclose())

    async def _aclose(self) -> None:
        await self._objects.close()
        await self._files.close()

    def problem(self, err: BaseException) -> str:
        """What a failed call's error says, in words."""
        if isinstance(err, openai.APIStatusError):
            return error_message(err.status_code, err.response.text)
        if isinstance(err, openai.APITimeoutError):
            attempts = self.endpoint.max_retries + 1
            return f"no complete reply within {self.endpoint.timeout:g} s, {attempts} attempt(s)"
        if isinstance(err, openai.APIConnectionError):
            return f"no connection ({err.__cause__ or err})"
        return str(err) or type(err).__name__

    def run(self, what: str, step: Coroutine[Any, Any, T], within: float | None = None) -> T:
        """The outcome of `step` on the API's loop within `call_deadline` seconds (or `within`, when shorter:
        WaitOver once that passes); DataError in one line, saying `what` failed and why, the key redacted."""
        seconds = self.call_deadline if within is None else min(within, self.call_deadline)
        try:
            return self._thread.submit(_bounded(step, seconds)).result()
        except TimeoutError:
            if within is not None and within < self.call_deadline:
                raise WaitOver(what) from None
            problem = f"no answer within {seconds:g} s"
        except (openai.APIError, httpx2.HTTPError, MalformedReply, DataError, OSError) as err:
            problem = self.problem(err)
        # Redacted before it is shortened, so that no cut leaves part of a key unmasked.
        problem = " ".join(redact(problem).split())
        if len(problem) > DETAIL_CHARS:
            problem = problem[:DETAIL_CHARS] + "..."
        raise DataError(f"Batch API at {self.base_url}: {what} failed: {problem}")

    def upload(self, lines: list[str], name: str) -> str:
        """The id of an uploaded Batch JSONL file."""
        data = "".join(lines).encode("utf-8")
        made = self._objects.files.with_raw_response.create(file=(name, data), purpose="batch")
        return self.run("uploading the requests", _object(made, FileObject, "a file object")).id

    def create(self, input_file_id: str, endpoint: str, run_name: str) -> Batch:
        """A new batch of an uploaded input file."""
        made = self._objects.batches.with_raw_response.create(
            input_file_id=input_file_id,
            endpoint=endpoint,  # type: ignore[arg-type]  # one of BATCH_ENDPOINTS, checked when recorded
            completion_window="24h",
            metadata={"shambench_run": run_name[:512]},
        )
        return self.run("creating the batch", _object(made, Batch, "a batch object"))

    def find(self, input_file_id: str) -> Batch | None:
        """The batch made from an input file, if one was (the batch list is read page by page)."""
        return self.run("listing batches", self._find(input_file_id))

    async def _find(self, input_file_id: str) -> Batch | None:
        cursor: str | None = None
        for _ in range(MAX_LIST_PAGES):
            listed = self._objects.batches.with_raw_response.list(limit=LIST_PAGE, after=cursor or openai.omit)
            page = await _object(listed, BatchPage, "a page of the batch list")
            found = next((b for b in page.data if b.get("input_file_id") == input_file_id), None)
            if found is not None:
                return checked(Batch, found, "a batch object")
            following = page.last_id or (page.data[-1].get("id") if page.data else None)
            if not page.has_more or not isinstance(following, str) or following == cursor:
                return None
            cursor = following
        raise DataError(f"the batch list goes on past {MAX_LIST_PAGES} pages of {LIST_PAGE}")

    def retrieve(self, batch_id: str, within: float | None = None) -> Batch:
        """A batch's current state (WaitOver when `within` seconds pass first)."""
        made = self._objects.batches.with_raw_response.retrieve(batch_id)
        return self.run(f"checking batch {batch_id}", _object(made, Batch, "a batch object"), within)

    def chunks(self, file_id: str) -> Iterator[bytes]:
        """The bytes of an output or error file as they arrive (never held whole), inflated and capped by the
        transport."""
        what = f"downloading {file_id}"
        opened = self._files.files.with_streaming_response.content(file_id)
        reply = self.run(what, opened.__aenter__())
        try:
            pieces = reply.iter_bytes()
            while (piece := self.run(what, _next(pieces))) is not None:
                yield piece
        finally:
            self.run(what, opened.__aexit__(None, None, None))
