"""An LLM judge that sorts missed gold spans into the five categories of the SHAM-Bench error analysis.

Each gold span that no prediction overlapped is sent, with its question, context and response, to a chat model
through the prompted-detector machinery (presets, response cache, retries, usage). Verdicts are journaled in
`<out>/judgements.jsonl`, keyed by `<example id>@<start>-<end>`, so an interrupted categorisation resumes with
only the spans still unjudged or failed.
"""

from __future__ import annotations

import hashlib
from collections import Counter
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field

from shambench.detection.detector import Monitor
from shambench.io import Journal
from shambench.schema import Example, Model, Name, Span

# Written from the SHAM-Bench paper's description of why detectors miss annotated hallucinations.
CATEGORIES: dict[str, str] = {
    "labelling_error": "The span is in fact supported by the question or context, or makes no checkable claim: "
    "the annotation itself is wrong, and a detector was right not to flag it.",
    "overgeneralisation": "The span states something broader, stronger or more absolute than the evidence "
    "allows (a general rule from one case, 'always' or 'all' where the source is hedged or specific).",
    "unsupported_detail": "The span adds a specific detail (a number, date, name, place, attribute or event) "
    "that the evidence neither states nor implies.",
    "misattribution": "The facts appear in the evidence but the span attaches them to the wrong entity, source, "
    "time or place (who said or did what, when, where).",
    "subjective_language": "The span is an opinion, evaluation or emotive wording (e.g. 'stunning', 'highly "
    "regarded') that the evidence does not express.",
}

SYSTEM = (
    "You analyse annotated hallucinations that a hallucination detector failed to find. You get a question, "
    "the context the answer should be faithful to (it may be empty for open-domain questions), the answer, "
    "and one span of the answer that human annotators marked as not supported. Decide which category best "
    "explains the span:\n"
    + "\n".join(f"- {name}: {text}" for name, text in CATEGORIES.items())
    + '\nReply with JSON only: {"category": "<one of the names above>", "reason": "<one short sentence>"}.'
)
PROMPT_HASH = hashlib.sha256(SYSTEM.encode()).hexdigest()[:16]
JUDGEMENTS = "judgements.jsonl"


class Judgement(Model):
    """The judge's verdict on one missed gold span."""

    id: Name
    """`<example id>@<start>-<end>`."""
    example_id: Name
    """The example the span belongs to."""
    partition: Name
    """The example's `task/dataset`."""
    start: int
    """Span start in the response."""
    end: int
    """Span end in the response."""
    category: str | None = None
    """One of `CATEGORIES`, or None when the judge failed."""
    reason: str | None = None
    """The judge's one-sentence justification."""
    error: str | None = None
    """Why no verdict could be had."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Usage and the raw reply."""


def span_key(example: Example, span: Span) -> str:
    """The journal key of a span."""
    return f"{example.id}@{span.start}-{span.end}"


def messages_for(example: Example, span: Span, context_chars: int = 6000) -> list[dict[str, str]]:
    """The chat messages asking for one span's category."""
    context = example.context if len(example.context) <= context_chars else example.context[:context_chars] + " [...]"
    marked = example.response[: span.start] + "[[" + example.response[span.start : span.end] + "]]"
    user = (
        f"Question:\n{example.question or '(none)'}\n\nContext:\n{context or '(none)'}\n\n"
        f"Answer (the annotated span is between [[ and ]]):\n{marked}{example.response[span.end :]}\n\n"
        f"Annotated span: {example.response[span.start : span.end]!r}"
    )
    return [{"role": "system", "content": SYSTEM}, {"role": "user", "content": user}]


def parse_verdict(text: str) -> tuple[str, str]:
    """`(category, reason)` from a reply; ValueError when it names no known category."""
    from shambench.llm.replies import reply_json_values

    for value in reversed(reply_json_values(text)):
        if isinstance(value, dict) and value.get("category") in CATEGORIES:
            return value["category"], str(value.get("reason") or "")
    raise ValueError(f"no known category in the reply (expected one of {', '.join(CATEGORIES)})")


class Judge:
    """Categorises missed spans with a prompted-detector preset's model and endpoint."""

    def __init__(self, preset: str, **overrides: Any):
        from shambench.llm.presets import preset_settings

        settings = preset_settings(preset, **overrides)
        self.endpoint = settings.endpoint
        self.structured = settings.structured
        fmt = {"response_format": {"type": "json_object"}} if settings.structured != "prompt" else {}
        self.body = {**settings.generation, **fmt}

    def judge(self, items: Sequence[tuple[Example, Span]], monitor: Monitor | None = None) -> Iterator[Judgement]:
        """A judgement per (example, span), yielded as they complete."""
        from shambench.llm.client import map_endpoint

        yield from map_endpoint(self.endpoint, items, self._one, monitor, structured=self.structured)

    async def _one(self, client: Any, item: tuple[Example, Span]) -> Judgement:
        from shambench.llm.client import LLMError

        ex, span = item
        base: dict[str, Any] = {"id": span_key(ex, span), "example_id": ex.id, "partition": ex.partition}
        base |= {"start": span.start, "end": span.end}
        try:
            reply = await client.chat(messages_for(ex, span), self.body, accept=lambda c: parse_verdict(c.text))
        except LLMError as err:
            return Judgement(**base, error=err.reason, meta={"usage": err.usage.model_dump(), "raw": err.text})
        category, reason = reply.parsed
        return Judgement(**base, category=category, reason=reason, meta={"usage": reply.usage.model_dump()})


def categorise(
    judge: Judge,
    missed: Sequence[tuple[Example, Span]],
    out_dir: Path,
    monitor: Monitor | None = None,
    root: Path | None = None,
) -> dict[str, dict[str, int]]:
    """Judge the missed spans not yet judged in `out_dir`, then the category counts per partition (`root`: the
    folder the journal's writes are confined to, `shambench.fs.Root`)."""
    journal = Journal(out_dir / JUDGEMENTS, Judgement, root)
    done = {k for k, j in journal.read().items() if j.error is None}
    todo = [(ex, s) for ex, s in missed if span_key(ex, s) not in done]
    with journal.appender() as append:
        for judgement in judge.judge(todo, monitor):
            append(judgement)
            if monitor is not None:
                monitor.done(judgement)
    wanted = {span_key(ex, s) for ex, s in missed}
    tally: dict[str, Counter] = {}
    for key, j in journal.read().items():
        if key in wanted:
            tally.setdefault(j.partition, Counter())[j.category or "failed"] += 1
    return {part: dict(sorted(c.items())) for part, c in sorted(tally.items())}
