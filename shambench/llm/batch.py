"""OpenAI's Batch API (half price, answers within 24 h) as a request route, and the price of a held request.

`BatchRoute` answers the requests the response cache knows at once and holds the others back; they are written as
Batch JSONL (`custom_id` = `<example id>#<request cache key>`, one line per distinct request) and uploaded with the
`openai` SDK (`files.create(purpose="batch")`, `batches.create(endpoint=..., completion_window="24h")`) through
`shambench.llm.batchapi.BatchAPI`, whose transport bounds every call; `answers_of` turns a finished batch's output and error files back into one `Answer` per request, which
the route then serves, so every answer goes through the same parsing, span placement, response cache and journal as
a direct one. The rounds, the run directory's `batches.json`, resumes and estimates are `shambench.runs.batch`'s.

Request sizes (`--dry-run`): input tokens by tiktoken when it is installed and its encoding is available offline,
else 4 characters per token, OpenAI's rule of thumb for English text, plus 4 tokens per message.
"""

from __future__ import annotations

import json
import math
import re
from collections import Counter
from collections.abc import Callable, Iterable, Iterator, Sequence
from typing import TYPE_CHECKING, Any

from pydantic import Field, field_validator

from shambench.detection.detector import Detector, Monitor
from shambench.errors import DataError, MalformedReply
from shambench.io import json_type
from shambench.llm.client import LLMError
from shambench.llm.endpoint import MAX_RESPONSE_BYTES_ENV, Endpoint
from shambench.llm.pricing import cost_of
from shambench.llm.route import Deferred, Route
from shambench.llm.wire import Reply, Usage, error_message, reply_of
from shambench.schema import Example, Model, Name
from shambench.structured import json_value

if TYPE_CHECKING:  # the SDK is imported only by a run that talks to the Batch API
    from shambench.llm.batchapi import Batch, BatchAPI

# Batch API endpoint of each request kind.
BATCH_ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "responses": "/v1/responses"}
# Statuses after which a batch changes no more.
FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})
CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4
DEFAULT_OUTPUT_TOKENS = 100
"""Output tokens per reply an estimate assumes when the run has no answered prediction to measure (a span list
without reasoning is a few dozen tokens; the ceiling at the request's token limit is shown beside it)."""
# Generation parameters that cap a reply's length, in the order a server honours them.
LIMIT_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")
LINE_WRAPPER_BYTES = 4096
"""What an output line may hold besides its response body (ids, status): a line is refused past the body cap
(the direct replies' `max_response_bytes`) plus this."""
HEAD_BYTES = 1024
"""How much of an overlong line is kept, to find its `custom_id` (OpenAI writes it before the response)."""
_CUSTOM_ID = re.compile(rb'"custom_id"\s*:\s*"([^"\\]{1,1000})"')
# Ids the Batch API gives files and batches; a recorded one of another shape is a doctored batches.json.
_API_ID = r"^[A-Za-z0-9_.:-]{1,200}$"


class BatchRecord(Model):
    """One batch submitted for a run."""

    input_file_id: Name = Field(pattern=_API_ID)
    """The uploaded Batch JSONL file."""
    id: Name | None = Field(default=None, pattern=_API_ID)
    """The batch id; None while the process that uploaded the file had not yet recorded the batch."""
    endpoint: str
    """Batch API endpoint of its requests."""

    @field_validator("endpoint")
    @classmethod
    def _known_endpoint(cls, value: str) -> str:
        if value not in BATCH_ENDPOINTS.values():
            raise ValueError(f"not a Batch API endpoint: {value!r}")
        return value

    keys: list[str]
    """Response-cache keys of its requests (one per distinct request)."""
    estimated_cost: float = 0.0
    """US dollars the requests were estimated to cost at batch prices when submitted."""
    submitted_at: str
    """UTC time of the upload."""
    status: str = "uploaded"
    """Last status seen (`validating`, `in_progress`, `finalizing`, `completed`, `failed`, `expired`, ...)."""
    request_counts: dict[str, int] = Field(default_factory=dict)
    """Last request counts seen: total, completed, failed."""
    applied: bool = False
    """Its answers went through the detector into the journal; it is never used again."""


class Answer(Model):
    """One request's outcome in a batch: the response body, or why there is none."""

    body: dict[str, Any] | None = None
    """The response body (a chat completion), when the item succeeded."""
    error: str | None = None
    """Why the item has no answer."""


# --------------------------------------------------------------------------------------------------- the route


def custom_id(example_id: str, key: str) -> str:
    """The Batch API `custom_id` of a request: the example's id and the request's cache key."""
    return f"{example_id}#{key}"


def key_of(custom: str) -> str:
    """The request cache key in a `custom_id`."""
    return custom.rsplit("#", 1)[-1]


class BatchRoute(Route):
    """Serves downloaded batch answers; holds back every other request, noting which example made it."""

    def __init__(self, model: str, answers: dict[str, Answer] | None = None):
        self.model = model
        self.answers = answers or {}
        self.wanted: dict[str, tuple[str, Deferred]] = {}
        """Held-back requests by cache key: the first example that made it, and the request."""
        self.held_ids: dict[str, str] = {}
        """Example id -> the cache key of its held-back request."""
        self.spent = 0.0

    async def send(self, key: str, kind: str, body: dict[str, Any]) -> Reply:
        answer = self.answers.get(key)
        if answer is None:
            raise Deferred(key, kind, body)
        if answer.body is None:
            raise LLMError(answer.error or "no answer", Usage(requests=1))
        try:
            reply = reply_of(kind, answer.body, self.model, batch=True)
        except MalformedReply as err:
            raise LLMError(f"batch output: {err}", Usage(requests=1)) from None
        usage = reply.usage.model_copy(update={"requests": 1})
        self.spent += usage.cost
        return reply.model_copy(update={"usage": usage})

    def held(self, item: Any, deferred: Deferred) -> None:
        self.wanted.setdefault(deferred.key, (item.id, deferred))
        self.held_ids[item.id] = deferred.key


def supports_routes(detector: Detector) -> bool:
    """Whether a detector sends its requests through a `Route` (the prompted family: presets, openai, miprov2)."""
    return hasattr(detector, "route") and isinstance(getattr(detector, "endpoint", None), Endpoint)


def require_routes(detector: Detector, flag: str) -> None:
    """DataError when `flag` is given for a detector that does not talk chat completions through a route."""
    if not supports_routes(detector):
        raise DataError(
            f"{flag} needs a detector that sends chat completions (prompted presets, openai, miprov2:PROGRAM); "
            f"{detector.name!r} does not"
        )


def held_requests(detector: Any, examples: Sequence[Example], answers: dict[str, Answer]) -> BatchRoute:
    """The route after a pass of the detector over `examples` that only collects requests (nothing is sent or
    written): which requests the cache cannot answer."""
    route = BatchRoute(detector.endpoint.model, answers)
    detector.route = route
    try:
        for _ in detector.predict(examples, Monitor()):
            pass
    finally:
        detector.route = None
    return route


# ---------------------------------------------------------------------------------------------------- estimates


class TokenCounter:
    """Counts prompt tokens with tiktoken's `o200k_base` when available offline, else by characters."""

    def __init__(self) -> None:
        self._encode: Callable[[str], list[int]] | None = None
        self.method = f"{CHARS_PER_TOKEN} characters per token + {TOKENS_PER_MESSAGE} per message"
        try:
            import tiktoken

            self._encode = tiktoken.get_encoding("o200k_base").encode
            self.method = f"tiktoken o200k_base + {TOKENS_PER_MESSAGE} per message"
        except Exception:  # not installed, or its encoding cannot be fetched offline: fall back to characters
            self._encode = None

    def text(self, text: str) -> int:
        """Tokens of one text."""
        if self._encode is not None:
            return len(self._encode(text))
        return math.ceil(len(text) / CHARS_PER_TOKEN)

    def request(self, body: dict[str, Any]) -> int:
        """Input tokens of one request body: its messages (or prompt/input) and any response schema."""
        parts: list[str] = []
        messages = body.get("messages") or []
        for message in messages:
            content = message.get("content")
            parts.append(content if isinstance(content, str) else json.dumps(content))
        for name in ("prompt", "input", "instructions"):
            if isinstance(body.get(name), str):
                parts.append(body[name])
        if body.get("response_format"):
            parts.append(json.dumps(body["response_format"]))
        return sum(self.text(p) for p in parts) + TOKENS_PER_MESSAGE * len(messages)


def request_cost(model: str, counter: TokenCounter, body: dict[str, Any], per_reply: float) -> float:
    """Estimated batch-price dollars of one request."""
    return cost_of(model, counter.request(body), per_reply, batch=True)


# ------------------------------------------------------------------------------------------------ the answers


def split_lines(chunks: Iterable[bytes], line_limit: int) -> Iterator[tuple[int, bytes, bool]]:
    """`(line number, bytes, whole)` of each non-blank line of a file arriving in `chunks`: a line longer than
    `line_limit` comes cut to its first `HEAD_BYTES` with `whole` false, so memory stays bounded by the limit (the
    whole file's is the transport's, `shambench.llm.batchapi`)."""
    lineno, line, cut = 0, bytearray(), False
    for chunk in chunks:
        start = 0
        while start <= len(chunk):
            end = chunk.find(b"\n", start)
            if not cut:
                line += chunk[start : len(chunk) if end < 0 else end]
                if len(line) > line_limit:
                    del line[HEAD_BYTES:]
                    cut = True
            if end < 0:
                break
            lineno += 1
            if cut or line.strip():
                yield lineno, bytes(line), not cut
            line, cut, start = bytearray(), False, end + 1
    if cut or line.strip():  # a last line without its newline: torn, or merely unterminated (parsing tells)
        yield lineno + 1, bytes(line), not cut


def answer_of(line: dict[str, Any]) -> Answer:
    """One output/error file line (a decoded object) as an answer or its failure reason; a line of another shape
    is that item's failure, never an exception."""
    error = line.get("error")
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else error
        return Answer(error=f"batch item failed: {': '.join(str(x) for x in (code, message) if x)}"[:2000])
    response = line.get("response")
    if not isinstance(response, dict):
        return Answer(error=f"batch output: the line's response is {json_type(response)}, not an object")
    status, body = response.get("status_code"), response.get("body")
    if not isinstance(status, int) or isinstance(status, bool):
        return Answer(error=f"batch output: the line's status_code is {json_type(status)}, not a number")
    if status != 200:
        return Answer(error="batch item failed: " + error_message(status, json.dumps(body or {}))[:2000])
    if not isinstance(body, dict):
        return Answer(error=f"batch output: the line's body is {json_type(body)}, not a completion")
    return Answer(body=body)


def line_answer(
    raw: bytes, whole: bool, limit: int, where: str = "batch file", lineno: int = 1
) -> tuple[str | None, Answer]:
    """The `custom_id` of one raw output line (None when it has none that can be read) and its answer: a line
    over the size limit, not JSON (read by the bounded reader: strict, at most `MAX_DEPTH` levels deep) or not an
    object is the failure of the request it names. `where` and `lineno` name the line in a failure."""
    found = _CUSTOM_ID.search(raw[:HEAD_BYTES])
    named = found.group(1).decode("utf-8", "replace") if found else None
    if not whole:
        return named, Answer(
            error=f"batch output: the answer is larger than the {limit}-byte limit (${MAX_RESPONSE_BYTES_ENV})"
        )
    try:
        line = json_value(raw, where, "a Batch API output line", first_line=lineno)
    except DataError as err:
        return named, Answer(error=f"batch output: {err}")
    if not isinstance(line, dict):
        return None, Answer(error=f"batch output: the line is {json_type(line)}, not an object")
    custom = line.get("custom_id")
    return (custom if isinstance(custom, str) else None), answer_of(line)


class BatchAnswers(Model):
    """What a finished batch's files say about its requests."""

    answers: dict[str, Answer]
    """Each request of the batch (by cache key): its answer, or why it has none."""
    unused: dict[str, int] = Field(default_factory=dict)
    """Lines applied to no request, by reason (unknown or missing `custom_id`, unreadable), and requests answered
    more than once (each then failed)."""

    def unused_note(self) -> str:
        """One line on the lines not used, or "" when every line answered one request."""
        return ", ".join(f"{reason}: {n}" for reason, n in sorted(self.unused.items()))


def batch_errors(batch: Batch) -> str:
    """The messages of a failed batch's `errors` (e.g. input file validation), joined."""
    data = batch.errors.data if batch.errors else []
    return "; ".join(": ".join(str(part) for part in (e.code, e.message) if part) for e in data)[:2000]


def answers_of(api: BatchAPI, batch: Batch, record: BatchRecord, limit: int) -> BatchAnswers:
    """Every request of a finished batch: its answer, or why it has none (an expired, cancelled or failed batch
    leaves requests unanswered; they get that as their reason). Each line is checked as a direct reply is (at most
    `limit` bytes, a JSON object, a numeric status, an object body): a bad line fails the request it names and the
    others are applied; a request named by two lines (two answers, or an answer and an error) fails, as neither
    can be trusted; lines naming no request of the batch are counted."""
    wanted = set(record.keys)
    found: dict[str, list[Answer]] = {}
    unused: Counter[str] = Counter()
    for file_id in (batch.output_file_id, batch.error_file_id):
        lines = split_lines(api.chunks(file_id), limit + LINE_WRAPPER_BYTES) if file_id else ()
        for lineno, raw, whole in lines:
            custom, answer = line_answer(raw, whole, limit, f"batch file {file_id}", lineno)
            if custom is None:
                unused["lines without a readable custom_id"] += 1
            elif key_of(custom) not in wanted:
                unused["lines with an unknown custom_id"] += 1
            else:
                found.setdefault(key_of(custom), []).append(answer)
    detail = batch_errors(batch)
    missing = Answer(error=f"batch {batch.id} {batch.status} without answering it" + (f" ({detail})" if detail else ""))
    answers = {}
    for key in record.keys:
        given = found.get(key, [missing])
        if len(given) > 1:
            unused["requests answered more than once"] += 1
            given = [Answer(error=f"batch output: {len(given)} lines answer this request (duplicate custom_id)")]
        answers[key] = given[0]
    return BatchAnswers(answers=answers, unused=dict(unused))
