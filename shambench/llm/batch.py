"""Runs through OpenAI's Batch API (half price, answers within 24 h), cost estimates and budgets.

A batch run goes in rounds. Each round runs the detector over the examples still to do with a `BatchRoute`:
requests the response cache answers are answered at once, as in a direct run; the others are held back and
written as Batch JSONL (`custom_id` = `<example id>#<request cache key>`, one line per distinct request),
uploaded with the `openai` SDK (`files.create(purpose="batch")`, `batches.create(endpoint=..., completion_window=
"24h")`) and recorded in the run directory's `batches.json` at once: the input file as soon as it is uploaded, the
batch id as soon as it exists. The batch is polled with backoff; its output and error files are downloaded, and
the detector runs again over the held-back examples with the route serving the downloaded answers, so every
answer goes through the same parsing, span placement, response cache and journal as a direct one. An item the
batch failed, and any item an expired, cancelled or failed batch left unanswered, becomes a failed prediction
with its reason; `--resume` sends those again in a new batch.

A killed process loses nothing: `--resume` finds the recorded batch (or, when the process died between the
upload and the batch id being written, the batch made from the recorded input file, through the SDK's paginated
`batches.list`), waits for it and finishes the run; a batch whose answers were applied is never used again.

Estimates (`--dry-run`): the requests a run will send after the cache, their input tokens (tiktoken when it is
installed and its encoding is available offline, else 4 characters per token, OpenAI's rule of thumb for English
text, plus 4 tokens per message), and their cost from the price table with and without the batch discount.
"""

from __future__ import annotations

import json
import math
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field

from shambench.detection.detector import Detector, Monitor
from shambench.errors import DataError, MalformedReply
from shambench.io import Journal, write_json
from shambench.llm.client import (
    Budget,
    Deferred,
    Endpoint,
    LLMClient,
    LLMError,
    Reply,
    Route,
    Usage,
    cost_of,
    error_message,
    price_of,
    redact,
    reply_of,
    wire_body,
)
from shambench.provenance import now_iso
from shambench.schema import Example, Prediction

STATE = "batches.json"
# Batch API endpoint of each request kind.
BATCH_ENDPOINTS = {"chat": "/v1/chat/completions", "completions": "/v1/completions", "responses": "/v1/responses"}
# Statuses after which a batch changes no more.
FINISHED = frozenset({"completed", "failed", "expired", "cancelled"})
# Batches per page when looking for a batch by its input file (the SDK follows the cursor to further pages).
LIST_PAGE = 100
CHARS_PER_TOKEN = 4
TOKENS_PER_MESSAGE = 4
DEFAULT_OUTPUT_TOKENS = 100
"""Output tokens per reply an estimate assumes when the run has no answered prediction to measure (a span list
without reasoning is a few dozen tokens; the ceiling at the request's token limit is shown beside it)."""
# Generation parameters that cap a reply's length, in the order a server honours them.
LIMIT_KEYS = ("max_completion_tokens", "max_tokens", "max_output_tokens")


class BatchRecord(BaseModel):
    """One batch submitted for a run."""

    input_file_id: str
    """The uploaded Batch JSONL file."""
    id: str | None = None
    """The batch id; None while the process that uploaded the file had not yet recorded the batch."""
    endpoint: str
    """Batch API endpoint of its requests."""
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


class BatchState(BaseModel):
    """`batches.json` of a run directory: every batch the run submitted, in order."""

    batches: list[BatchRecord] = Field(default_factory=list)
    """Submitted batches, oldest first."""


class Answer(BaseModel):
    """One request's outcome in a batch: the response body, or why there is none."""

    body: dict[str, Any] | None = None
    """The response body (a chat completion), when the item succeeded."""
    error: str | None = None
    """Why the item has no answer."""


class BatchSettings(BaseModel):
    """How a batch run waits and spends."""

    wait: bool = True
    """Wait for the batch and finish the run; False submits and returns (`--no-wait`)."""
    poll: float = Field(default=5.0, gt=0)
    """Seconds between the first two status checks; each further wait is 1.5 times longer."""
    poll_max: float = Field(default=300.0, gt=0)
    """Longest wait between status checks."""
    max_cost: float | None = Field(default=None, ge=0)
    """US dollars this invocation may spend (answers accounted, batches estimated before submission)."""


class BatchOutcome(BaseModel):
    """How a batch run ended."""

    detached: str | None = None
    """The id of a batch left running (`--no-wait`, or not finished yet), when the run is not finished."""
    batches: list[str] = Field(default_factory=list)
    """Ids of the batches submitted by this invocation."""
    unfinished: list[str] = Field(default_factory=list)
    """`<batch id> <status>` of each applied batch that expired, was cancelled or failed."""
    not_run: int = 0
    """Examples recorded as not run because the budget did not cover their requests."""
    spent: float = 0.0
    """US dollars accounted for the answers this invocation applied."""


# ----------------------------------------------------------------------------------------------- run-dir state


def state_path(run_dir: Path) -> Path:
    """Where a run directory records its batches."""
    return Path(run_dir) / STATE


def load_state(run_dir: Path) -> BatchState:
    """The run's recorded batches (none when it never used the Batch API)."""
    path = state_path(run_dir)
    if not path.is_file():
        return BatchState()
    try:
        return BatchState.model_validate_json(path.read_text(encoding="utf-8"))
    except ValueError as err:
        raise DataError(f"{path}: not a batch record ({err})") from None


def has_batches(run_dir: Path) -> bool:
    """Whether the run has ever submitted a batch (a resume then continues by batch)."""
    return bool(load_state(run_dir).batches)


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


class Estimate(BaseModel):
    """What a run is about to send and what it should cost (`--dry-run`)."""

    model: str
    """Model the requests go to."""
    examples: int
    """Examples still to run."""
    cached: int
    """Of those, examples the response cache answers (no request)."""
    in_batches: int
    """Distinct requests already in a submitted batch of the run (paid there; `--resume` collects them)."""
    requests: int
    """Distinct requests to send."""
    input_tokens: int
    """Estimated prompt tokens of those requests."""
    token_method: str
    """How the tokens were counted."""
    output_tokens_per_request: float
    """Output tokens per reply assumed for the expected cost."""
    output_basis: str
    """Where that assumption comes from."""
    max_output_tokens: int | None
    """The requests' token limit (the cost ceiling assumes every reply reaches it); None when unset."""
    priced: bool
    """Whether the price table lists the model (if not, every cost is 0)."""
    cost: float
    """Expected US dollars sent directly."""
    batch_cost: float
    """Expected US dollars through the Batch API."""
    ceiling_cost: float | None
    """US dollars directly if every reply reached the token limit."""
    ceiling_batch_cost: float | None
    """The same through the Batch API."""


def mean_output_tokens(journal: Journal) -> float | None:
    """Mean billed output tokens of the journal's answered predictions that reached the model (no cache hit)."""
    counts = [
        p.meta["usage"]["output_tokens"]
        for p in journal.read().values()
        if p.error is None and (p.meta.get("usage") or {}).get("output_tokens") and not p.meta["usage"].get("cache_hit")
    ]
    return sum(counts) / len(counts) if counts else None


def estimate_run(detector: Any, examples: Sequence[Example], journal: Journal, run_dir: Path) -> Estimate:
    """What running `examples` would send after the response cache and the run's submitted batches, in tokens
    and dollars; sends nothing."""
    route = held_requests(detector, examples, {})
    submitted = {key for r in load_state(run_dir).batches if not r.applied for key in r.keys}
    counter = TokenCounter()
    bodies = [d.body for key, (_, d) in route.wanted.items() if key not in submitted]
    input_tokens = sum(counter.request(b) for b in bodies)
    measured = mean_output_tokens(journal)
    per_reply = measured if measured is not None else float(DEFAULT_OUTPUT_TOKENS)
    basis = "mean of this run's answered predictions" if measured is not None else "default assumption"
    limits = [next((int(b[k]) for k in LIMIT_KEYS if b.get(k)), None) for b in bodies]
    limit = max((n for n in limits if n is not None), default=None) if all(limits) else None
    model = detector.endpoint.model
    out_total = per_reply * len(bodies)
    ceiling = None if limit is None else limit * len(bodies)
    return Estimate(
        model=model,
        examples=len(examples),
        cached=len(examples) - len(route.held_ids),
        in_batches=len(route.wanted) - len(bodies),
        requests=len(bodies),
        input_tokens=input_tokens,
        token_method=counter.method,
        output_tokens_per_request=round(per_reply, 1),
        output_basis=basis,
        max_output_tokens=limit,
        priced=price_of(model) is not None,
        cost=cost_of(model, input_tokens, out_total),
        batch_cost=cost_of(model, input_tokens, out_total, batch=True),
        ceiling_cost=None if ceiling is None else cost_of(model, input_tokens, ceiling),
        ceiling_batch_cost=None if ceiling is None else cost_of(model, input_tokens, ceiling, batch=True),
    )


def request_cost(model: str, counter: TokenCounter, body: dict[str, Any], per_reply: float) -> float:
    """Estimated batch-price dollars of one request."""
    return cost_of(model, counter.request(body), per_reply, batch=True)


# ------------------------------------------------------------------------------------------------ the SDK side


class BatchAPI:
    """The Files and Batches endpoints of the detector's server, through the `openai` SDK (same base URL and key
    variable as direct requests; the SDK retries 429/5xx and pages through lists)."""

    def __init__(self, endpoint: Endpoint):
        import openai

        direct = LLMClient(endpoint)
        self._key = direct.api_key()
        self.base_url = direct.base_url()
        self.client = openai.OpenAI(
            api_key=self._key, base_url=self.base_url, max_retries=endpoint.max_retries, timeout=endpoint.timeout
        )
        self._errors = (openai.APIError,)

    def call(self, what: str, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """`fn(*args, **kwargs)`; DataError saying what failed (never the key) when the API refuses or fails."""
        try:
            return fn(*args, **kwargs)
        except self._errors as err:
            # The SDK keeps the `error` object of an OpenAI-style body; other servers' bodies come as they are.
            body, status = getattr(err, "body", None), getattr(err, "status_code", None)
            detail = body.get("message") if isinstance(body, dict) else None
            message = f"HTTP {status}: {detail or err}" if status else str(err)
            raise DataError(redact(f"Batch API at {self.base_url}: {what} failed: {message}", self._key)) from None

    def upload(self, lines: list[str], name: str) -> str:
        """The id of an uploaded Batch JSONL file."""
        data = "".join(lines).encode("utf-8")
        made = self.call("uploading the requests", self.client.files.create, file=(name, data), purpose="batch")
        return made.id

    def create(self, record: BatchRecord, run_name: str) -> Any:
        """A new batch of the record's input file."""
        return self.call(
            "creating the batch",
            self.client.batches.create,
            input_file_id=record.input_file_id,
            endpoint=record.endpoint,
            completion_window="24h",
            metadata={"shambench_run": run_name[:512]},
        )

    def find(self, input_file_id: str) -> Any | None:
        """The batch made from an input file, if one was (every page of the batch list is read)."""
        pages = self.call("listing batches", self.client.batches.list, limit=LIST_PAGE)
        try:
            return next((b for b in pages if b.input_file_id == input_file_id), None)
        except self._errors as err:  # a later page failed to load
            raise DataError(redact(f"Batch API at {self.base_url}: listing batches failed: {err}", self._key)) from None

    def retrieve(self, batch_id: str) -> Any:
        """A batch's current state."""
        return self.call(f"checking batch {batch_id}", self.client.batches.retrieve, batch_id)

    def lines(self, file_id: str) -> list[dict[str, Any]]:
        """The JSON lines of an output or error file."""
        content = self.call(f"downloading {file_id}", self.client.files.content, file_id)
        return [json.loads(line) for line in content.text.splitlines() if line.strip()]


def answer_of(line: dict[str, Any]) -> Answer:
    """One output/error file line as an answer or its failure reason."""
    error = line.get("error")
    if error:
        code = error.get("code") if isinstance(error, dict) else None
        message = error.get("message") if isinstance(error, dict) else error
        return Answer(error=f"batch item failed: {': '.join(str(x) for x in (code, message) if x)}")
    response = line.get("response") or {}
    status = response.get("status_code")
    body = response.get("body")
    if status == 200 and isinstance(body, dict):
        return Answer(body=body)
    return Answer(error="batch item failed: " + error_message(int(status or 0), json.dumps(body or {})))


def batch_errors(batch: Any) -> str:
    """The messages of a failed batch's `errors` (e.g. input file validation), joined."""
    data = getattr(getattr(batch, "errors", None), "data", None) or []
    return "; ".join(f"{e.code}: {e.message}" if getattr(e, "code", None) else str(e.message) for e in data)


def answers_of(api: BatchAPI, batch: Any, record: BatchRecord) -> dict[str, Answer]:
    """Every request of a finished batch: its answer, or why it has none (an expired, cancelled or failed batch
    leaves requests unanswered; they get that as their reason)."""
    out: dict[str, Answer] = {}
    for file_id in (batch.output_file_id, batch.error_file_id):
        if file_id:
            for line in api.lines(file_id):
                out[key_of(str(line.get("custom_id", "")))] = answer_of(line)
    detail = batch_errors(batch)
    missing = Answer(error=f"batch {batch.id} {batch.status} without answering it" + (f" ({detail})" if detail else ""))
    return {key: out.get(key, missing) for key in record.keys}


# ---------------------------------------------------------------------------------------------------- the run


class BatchRun:
    """One invocation's work on a run directory by batch (see the module docstring)."""

    def __init__(
        self,
        detector: Any,
        run_dir: Path,
        journal: Journal,
        settings: BatchSettings,
        report: Callable[[str], None],
    ):
        require_routes(detector, "--batch")
        self.detector = detector
        self.run_dir = Path(run_dir)
        self.journal = journal
        self.settings = settings
        self.report = report
        self.state = load_state(run_dir)
        self._api: BatchAPI | None = None
        self.outcome = BatchOutcome()

    @property
    def api(self) -> BatchAPI:
        if self._api is None:
            self._api = BatchAPI(self.detector.endpoint)
        return self._api

    def save(self) -> None:
        write_json(state_path(self.run_dir), self.state)

    def run(
        self,
        examples: Sequence[Example],
        monitor: Monitor,
        on_prediction: Callable[[Prediction], None] | None = None,
    ) -> BatchOutcome:
        """Finish `examples` (or leave a batch running when not waiting); the outcome says which."""
        from shambench.runs.runner import run_predictions

        todo = list(examples)
        while True:
            answers: dict[str, Answer] = {}
            opened = [r for r in self.state.batches if not r.applied]
            for record in opened:
                batch = self.wait(record)
                if batch.status not in FINISHED:
                    self.outcome.detached = batch.id
                    return self.outcome
                answers.update(answers_of(self.api, batch, record))
                if batch.status != "completed":
                    self.outcome.unfinished.append(f"{batch.id} {batch.status}")
            route = BatchRoute(self.detector.endpoint.model, answers)
            self.detector.route = route
            try:
                run_predictions(self.detector, todo, self.journal, monitor, on_prediction)
            finally:
                self.detector.route = None
            self.outcome.spent += route.spent
            for record in opened:
                record.applied = True
            if opened:
                self.save()
            if not route.wanted:
                return self.outcome
            todo = [ex for ex in todo if ex.id in route.held_ids]
            todo = self.submit(route, todo, monitor, on_prediction)
            if not todo:
                return self.outcome

    def submit(
        self,
        route: BatchRoute,
        todo: list[Example],
        monitor: Monitor,
        on_prediction: Callable[[Prediction], None] | None,
    ) -> list[Example]:
        """Upload and create a batch of the held-back requests the budget covers, recording it at once; the
        examples whose requests it holds (the others are journaled as not run)."""
        model = self.detector.endpoint.model
        chosen, estimated = self.within_budget(route)
        sent = set(chosen)
        skipped = [ex for ex in todo if route.held_ids[ex.id] not in sent]
        if skipped:
            # Only a budget leaves requests out.
            budget = Budget(float(self.settings.max_cost or 0.0))
            budget.spent = self.outcome.spent
            with self.journal.appender() as append:
                for ex in skipped:
                    pred = Prediction(id=ex.id, error=budget.reason())
                    append(pred)
                    if on_prediction:
                        on_prediction(pred)
            self.outcome.not_run += len(skipped)
        if not chosen:
            return []
        kinds = {route.wanted[k][1].kind for k in chosen}
        if len(kinds) != 1:
            raise DataError(f"one batch takes one endpoint; the detector made {sorted(kinds)} requests")
        kind = kinds.pop()
        lines = []
        for key in chosen:
            example_id, deferred = route.wanted[key]
            line = {
                "custom_id": custom_id(example_id, key),
                "method": "POST",
                "url": BATCH_ENDPOINTS[kind],
                "body": wire_body(model, deferred.body),
            }
            lines.append(json.dumps(line, ensure_ascii=False) + "\n")
        n = len(self.state.batches) + 1
        file_id = self.api.upload(lines, f"shambench-{self.run_dir.name}-{n}.jsonl")
        record = BatchRecord(
            input_file_id=file_id,
            endpoint=BATCH_ENDPOINTS[kind],
            keys=chosen,
            estimated_cost=estimated,
            submitted_at=now_iso(),
        )
        self.state.batches.append(record)
        self.save()
        self.ensure_created(record)
        self.outcome.batches.append(str(record.id))
        self.report(f"batch {record.id}: {len(chosen)} requests submitted (estimated ${estimated:.4f} at batch prices)")
        monitor.count("batched", len(chosen))
        return [ex for ex in todo if route.held_ids[ex.id] in sent]

    def within_budget(self, route: BatchRoute) -> tuple[list[str], float]:
        """The held-back request keys (in order) whose estimated batch cost fits what is left of the budget,
        and their estimated total."""
        model = self.detector.endpoint.model
        counter = TokenCounter()
        per_reply = mean_output_tokens(self.journal) or float(DEFAULT_OUTPUT_TOKENS)
        chosen, total = [], 0.0
        left = None if self.settings.max_cost is None else self.settings.max_cost - self.outcome.spent
        for key, (_, deferred) in route.wanted.items():
            cost = request_cost(model, counter, deferred.body, per_reply)
            if left is not None and total + cost > left:
                break
            chosen.append(key)
            total += cost
        return chosen, total

    def ensure_created(self, record: BatchRecord) -> None:
        """Give the record its batch: the one already made from its input file, else a new one; recorded at once."""
        if record.id is not None:
            return
        found = self.api.find(record.input_file_id)
        batch = found or self.api.create(record, self.run_dir.name)
        record.id = batch.id
        record.status = batch.status
        self.save()

    def wait(self, record: BatchRecord) -> Any:
        """The batch once finished (or its current state when not waiting), polled with growing waits; status
        and request counts are reported whenever they change."""
        self.ensure_created(record)
        delay = self.settings.poll
        seen = None
        while True:
            batch = self.api.retrieve(str(record.id))
            counts = batch.request_counts.model_dump() if batch.request_counts else {}
            record.status, record.request_counts = batch.status, counts
            self.save()
            if (batch.status, counts) != seen:
                seen = (batch.status, counts)
                done = f" {counts.get('completed', 0)}/{counts.get('total', 0)} done" if counts else ""
                failed = f", {counts['failed']} failed" if counts.get("failed") else ""
                self.report(f"batch {batch.id}: {batch.status}{done}{failed}")
            if batch.status in FINISHED or not self.settings.wait:
                return batch
            time.sleep(delay)
            delay = min(delay * 1.5, self.settings.poll_max)


def status_lines(run_dir: Path, detector: Any) -> list[str]:
    """One line per recorded batch of a run: id, status, counts, and whether its answers were applied (the open
    ones are checked with the API, the applied ones shown as recorded)."""
    state = load_state(run_dir)
    api = BatchAPI(detector.endpoint) if any(not r.applied for r in state.batches) else None
    lines = []
    for record in state.batches:
        status, counts = record.status, record.request_counts
        if api is not None and not record.applied and record.id:
            batch = api.retrieve(record.id)
            status = batch.status
            counts = batch.request_counts.model_dump() if batch.request_counts else {}
            record.status, record.request_counts = status, counts
        done = f"{counts.get('completed', 0)}/{counts.get('total', len(record.keys))} done" if counts else ""
        failed = f", {counts['failed']} failed" if counts.get("failed") else ""
        applied = "answers applied" if record.applied else "answers not applied yet"
        lines.append(f"{record.id or '(not created yet)'}  {status}  {done}{failed}  ({applied})")
    if api is not None:
        write_json(state_path(run_dir), state)
    return lines
