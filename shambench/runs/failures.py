"""Failed predictions: one classifier of failure reasons, the fail-fast watch, likely fixes and the summary."""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Mapping, Sequence
from typing import TYPE_CHECKING

from shambench.errors import ShambenchError

if TYPE_CHECKING:
    from shambench.schema import Example, Prediction

# Fail fast: stop when the first FAIL_FIRST predictions of a run, or FAIL_RUN in a row, failed for the same reason.
FAIL_FIRST = 8
FAIL_RUN = 20
# Reasons shown in full under the per-class counts.
FIRST_REASONS = 5
# The likely fix of a systematic failure, by a pattern of its reason (first match wins).
LIKELY_FIXES: tuple[tuple[str, str], ...] = (
    (
        r"response_format|json_schema|structured",
        "the server does not take this structured-output mode: leave -p structured on auto, or force one the "
        "server takes (-p structured=json_object+schema, json_object or prompt)",
    ),
    (r"HTTP 40[13]\b", "the server refused the key: set the variable --api-key-env names (default OPENAI_API_KEY)"),
    (r"HTTP 404\b", "check --base-url (it ends in /v1) and --model (the name the server knows)"),
    (r"HTTP 429\b", "the server is rate-limiting: lower --max-concurrency, or wait for the limit to reset"),
    (
        r"Connect|connection|refused",
        "no server answers at --base-url: start it, or correct the URL (it ends in /v1)",
    ),
    (
        r"timeout",
        "the server answers slower than --timeout: raise --timeout, or lower --max-concurrency to the server's "
        "parallel slots",
    ),
    (r"token limit", "the replies are cut off: raise -p max_tokens (or max_completion_tokens)"),
    (
        r"unusable output",
        "the model does not answer in the expected form (its raw replies are in predictions.jsonl): try another "
        "-p structured=MODE, or a stronger model",
    ),
)


def failures(examples: Sequence[Example], predictions: Mapping[str, Prediction]) -> list[tuple[str, str]]:
    """`(id, reason)` of the examples whose journaled prediction (`predictions`, the journal read, by id) failed,
    in the examples' order."""
    out = []
    for ex in examples:
        pred = predictions.get(ex.id)
        if pred is not None and pred.error:
            out.append((ex.id, pred.error))
    return out


class SystematicFailure(ShambenchError):
    """A run stopped because its predictions keep failing for one reason; what was journaled is kept."""

    def __init__(self, reason: str, count: int, from_start: bool):
        self.reason = reason
        self.count = count
        self.fix = likely_fix(reason)
        where = f"the first {count} predictions" if from_start else f"{count} predictions in a row"
        super().__init__(f"stopped: {where} failed for the same reason: {reason}\nlikely fix: {self.fix}")


def likely_fix(reason: str) -> str:
    """The likely fix of a failure reason (see `LIKELY_FIXES`)."""
    for pattern, fix in LIKELY_FIXES:
        if re.search(pattern, reason, re.IGNORECASE):
            return fix
    return "read the failed predictions' `error` and `raw` in predictions.jsonl"


class FailureWatch:
    """Raises SystematicFailure when the first `first` predictions, or `run` in a row, failed for one reason."""

    def __init__(self, first: int = FAIL_FIRST, run: int = FAIL_RUN):
        self.first, self.run = first, run
        self.kind: str | None = None
        self.streak = 0
        self.all_failed = True

    def see(self, pred: Prediction) -> None:
        """Take one finished prediction into account."""
        if pred.error is None:
            self.all_failed, self.kind, self.streak = False, None, 0
            return
        kind = reason_class(pred.error)
        self.streak = self.streak + 1 if kind == self.kind else 1
        self.kind = kind
        if self.all_failed and self.streak == self.first:
            raise SystematicFailure(pred.error, self.streak, from_start=True)
        if self.streak >= self.run:
            raise SystematicFailure(pred.error, self.streak, from_start=False)


def reason_class(reason: str) -> str:
    """The kind of a failure reason, for counting: its text before the first colon (`HTTP 500`, `timeout`,
    `malformed reply`), without the attempt count."""
    head = reason.split(":", 1)[0].split(" after ", 1)[0].strip()
    return head[:60] or "unknown"


def failure_lines(failures: Sequence[tuple[str, str]], what: str = "predictions") -> list[str]:
    """The failure summary of `(id, reason)` pairs: counts by reason class, then the first few reasons."""
    if not failures:
        return []
    counts = Counter(reason_class(reason) for _, reason in failures)
    lines = [f"{len(failures)} {what} failed:"]
    lines += [f"  {n:>6}  {kind}" for kind, n in counts.most_common()]
    lines.append("first reasons:")
    lines += [f"  {item_id}: {' '.join(reason.split())[:300]}" for item_id, reason in failures[:FIRST_REASONS]]
    return lines
