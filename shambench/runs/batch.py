"""Runs through the Batch API: rounds, the run directory's `batches.json`, resumes, cost estimates and budgets.

A batch run goes in rounds. Each round runs the detector over the examples still to do with a `BatchRoute`
(`shambench.llm.batch`): cached requests are answered at once, the others are held back, uploaded and recorded in
`batches.json` at once: the input file as soon as it is uploaded, the batch id as soon as it exists. The batch is
polled with backoff; its output and error files are downloaded, and the detector runs again over the held-back
examples with the route serving the downloaded answers. An item the batch failed, and any item an expired,
cancelled or failed batch left unanswered, becomes a failed prediction with its reason; `--resume` sends those
again in a new batch.

A killed process loses nothing: `--resume` finds the recorded batch (or, when the process died between the
upload and the batch id being written, the batch made from the recorded input file, found in the batch list read
page by page), waits for it and finishes the run; a batch whose answers were applied is never used again. Every
call to the API is bounded in time and bytes (`shambench.llm.batchapi`); one that fails is one error line and
leaves the batch recorded and unapplied; a status check still unanswered when the wait's time is up leaves the
run detached, as a batch still running does.

Estimates (`--dry-run`): the requests a run will send after the cache, their input tokens, and their cost from the
price table with and without the batch discount.
"""

from __future__ import annotations

import json
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic import Field

import shambench.fs as fs
from shambench.detection.detector import Monitor
from shambench.errors import DataError
from shambench.io import Journal, read_regular, write_json
from shambench.llm.batch import (
    BATCH_ENDPOINTS,
    DEFAULT_OUTPUT_TOKENS,
    FINISHED,
    LIMIT_KEYS,
    Answer,
    BatchRecord,
    BatchRoute,
    TokenCounter,
    answers_of,
    custom_id,
    held_requests,
    request_cost,
    require_routes,
)
from shambench.llm.endpoint import Endpoint
from shambench.llm.pricing import cost_of, price_of
from shambench.llm.route import Budget
from shambench.llm.wire import wire_body
from shambench.provenance import now_iso
from shambench.runs.files import BATCHES
from shambench.runs.runner import run_predictions
from shambench.schema import Example, Model, Prediction

if TYPE_CHECKING:  # the SDK is imported only when a batch is talked to (`BatchRun.api`)
    from shambench.llm.batchapi import Batch, BatchAPI

MAX_STATE_BYTES = 64 * 1024 * 1024
"""Largest batches.json read (a batch of 10,000 requests records about 1 MB of keys)."""


class BatchState(Model):
    """`batches.json` of a run directory: every batch the run submitted, in order."""

    by_batch: bool = False
    """The run goes by batch: recorded before its first upload, so a process killed after the upload and before
    the batch is recorded still resumes by batch (never at full price)."""
    batches: list[BatchRecord] = Field(default_factory=list)
    """Submitted batches, oldest first."""


DEFAULT_TIMEOUT = 26 * 3600.0


class BatchSettings(Model):
    """How a batch run waits and spends."""

    wait: bool = True
    """Wait for the batch and finish the run; False submits and returns (`--no-wait`)."""
    poll: float = Field(default=5.0, gt=0)
    """Seconds between the first two status checks; each further wait is 1.5 times longer."""
    poll_max: float = Field(default=300.0, gt=0)
    """Longest wait between status checks."""
    max_cost: float | None = Field(default=None, ge=0)
    """US dollars this invocation may spend (answers accounted, batches estimated before submission)."""
    timeout: float = Field(default=DEFAULT_TIMEOUT, gt=0)
    """Seconds this invocation waits for a batch to finish (`--batch-timeout`, 26 h: OpenAI's 24 h window and
    some); after that the run stops, the batch stays recorded and `--resume` waits again."""


class BatchOutcome(Model):
    """How a batch run ended."""

    detached: str | None = None
    """The id of a batch left running (`--no-wait`, or not finished yet), when the run is not finished."""
    timed_out: bool = False
    """The batch was left running because `BatchSettings.timeout` passed while waiting for it."""
    unused_lines: list[str] = Field(default_factory=list)
    """`<batch id>: <counts>` of output lines applied to no request (unknown or unreadable `custom_id`s, requests
    answered twice)."""
    batches: list[str] = Field(default_factory=list)
    """Ids of the batches submitted by this invocation."""
    unfinished: list[str] = Field(default_factory=list)
    """`<batch id> <status>` of each applied batch that expired, was cancelled or failed."""
    not_run: int = 0
    """Examples recorded as not run because the budget did not cover their requests."""
    spent: float = 0.0
    """US dollars accounted for the answers this invocation applied."""


def state_path(run_dir: Path) -> Path:
    """Where a run directory records its batches."""
    return Path(run_dir) / BATCHES


def load_state(run_dir: Path) -> BatchState:
    """The run's recorded batches (none when it never used the Batch API)."""
    path = state_path(run_dir)
    data = read_regular(path, MAX_STATE_BYTES)
    if data is None:
        return BatchState()
    try:
        return BatchState.model_validate_json(data)
    except ValueError as err:
        raise DataError(f"{path}: not a batch record ({err})") from None


def has_batches(run_dir: Path) -> bool:
    """Whether the run goes by batch: it submitted a batch, or was about to (a resume then continues by batch)."""
    state = load_state(run_dir)
    return state.by_batch or bool(state.batches)


class Estimate(Model):
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
    key_note: str | None = None
    """What the run would say of its API key (none set where one is needed); None when all is well."""


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
        key_note=detector.endpoint.key_note() if bodies else None,
    )


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
        """The Batch API of the detector's server, opened at the first call (`close` closes it)."""
        if self._api is None:
            from shambench.llm.batchapi import BatchAPI

            self._api = BatchAPI(self.detector.endpoint)
        return self._api

    def close(self) -> None:
        """Close the Batch API's connections, if any were opened."""
        if self._api is not None:
            self._api.close()
            self._api = None

    def save(self) -> None:
        write_json(state_path(self.run_dir), self.state, root=self.journal.root or fs.folder_root(self.run_dir))

    def run(
        self,
        examples: Sequence[Example],
        monitor: Monitor,
        on_prediction: Callable[[Prediction], None] | None = None,
    ) -> BatchOutcome:
        """Finish `examples` (or leave a batch running when not waiting); the outcome says which."""
        try:
            return self._rounds(list(examples), monitor, on_prediction)
        finally:
            self.close()

    def _rounds(
        self, todo: list[Example], monitor: Monitor, on_prediction: Callable[[Prediction], None] | None
    ) -> BatchOutcome:
        while True:
            answers: dict[str, Answer] = {}
            opened = [r for r in self.state.batches if not r.applied]
            for record in opened:
                batch = self.wait(record)
                if batch is None or batch.status not in FINISHED:
                    self.outcome.detached, self.outcome.timed_out = str(record.id), self.settings.wait
                    return self.outcome
                got = answers_of(self.api, batch, record, self.detector.endpoint.max_response_bytes)
                answers.update(got.answers)
                if got.unused:
                    self.outcome.unused_lines.append(f"{batch.id}: {got.unused_note()}")
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
        if not self.state.by_batch:
            self.state.by_batch = True
            self.save()
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
        batch = found or self.api.create(record.input_file_id, record.endpoint, self.run_dir.name)
        record.id = batch.id
        record.status = batch.status
        self.save()

    def wait(self, record: BatchRecord) -> Batch | None:
        """The batch once finished (or its current state when not waiting), polled with growing waits; status
        and request counts are reported whenever they change. A status check is given what is left of the wait
        (`BatchSettings.timeout`), at least the poll interval; None when that ran out during one (a server that
        does not answer): the batch stays recorded as last seen, for `--resume`."""
        from shambench.llm.batchapi import WaitOver

        self.ensure_created(record)
        delay = self.settings.poll
        seen = None
        deadline = time.monotonic() + self.settings.timeout
        while True:
            try:
                batch = self.api.retrieve(str(record.id), within=max(deadline - time.monotonic(), self.settings.poll))
            except WaitOver:
                return None
            counts = batch.request_counts.model_dump() if batch.request_counts else {}
            record.status, record.request_counts = batch.status, counts
            self.save()
            if (batch.status, counts) != seen:
                seen = (batch.status, counts)
                done = f" {counts.get('completed', 0)}/{counts.get('total', 0)} done" if counts else ""
                failed = f", {counts['failed']} failed" if counts.get("failed") else ""
                self.report(f"batch {batch.id}: {batch.status}{done}{failed}")
            left = deadline - time.monotonic()
            if batch.status in FINISHED or not self.settings.wait or left <= 0:
                return batch
            time.sleep(min(delay, left))
            delay = min(delay * 1.5, self.settings.poll_max)


def status_lines(run_dir: Path, endpoint: Callable[[], Endpoint]) -> list[str]:
    """One line per recorded batch of a run: id, status, counts, and whether its answers were applied (the open
    ones are checked with the API at `endpoint()`, called only then; the applied ones are shown as recorded)."""
    from shambench.llm.batchapi import BatchAPI

    state = load_state(run_dir)
    api = BatchAPI(endpoint()) if any(not r.applied for r in state.batches) else None
    try:
        lines = [status_line(record, api) for record in state.batches]
    finally:
        if api is not None:
            api.close()
    if api is not None:
        write_json(state_path(run_dir), state, root=fs.folder_root(run_dir))
    return lines


def status_line(record: BatchRecord, api: BatchAPI | None) -> str:
    """One recorded batch's line: id, status, counts, whether applied (checked with `api` when not applied)."""
    status, counts = record.status, record.request_counts
    if api is not None and not record.applied and record.id:
        batch = api.retrieve(record.id)
        status = batch.status
        counts = batch.request_counts.model_dump() if batch.request_counts else {}
        record.status, record.request_counts = status, counts
    done = f"{counts.get('completed', 0)}/{counts.get('total', len(record.keys))} done" if counts else ""
    failed = f", {counts['failed']} failed" if counts.get("failed") else ""
    applied = "answers applied" if record.applied else "answers not applied yet"
    return f"{record.id or '(not created yet)'}  {status}  {done}{failed}  ({applied})"
