"""The unified data model: every adapter emits `Example`s and every detector emits `Prediction`s."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from pydantic import BaseModel, ConfigDict, Field, TypeAdapter, ValidationError, field_validator, model_validator

from shambench.errors import SourceError

# Annotators of one example that human agreement reads: each reading carries the gold of all the others, so the
# work and the memory of an example grow with the square of its annotators (the released corpora have at most a
# dozen; 256 take about 0.2 s of CPU).
MAX_ANNOTATORS = 256


class Span(BaseModel):
    """A half-open character range `[start, end)` of a response."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    """Offset of the first character (0-based, Python code points)."""
    end: int
    """Offset one past the last character."""
    label: str | None = None
    """Optional error type, e.g. RAGTruth's `Evident Conflict`; merged spans join distinct labels with `|`."""
    score: float | None = Field(default=None, allow_inf_nan=False)
    """Optional detector confidence that the range is hallucinated (higher = more likely; a probability where the
    detector has one). Threshold-free metrics and Mu-SHROOM Cor use only its order, so logits work too."""

    @model_validator(mode="after")
    def _non_empty(self) -> Span:
        if self.end <= self.start:
            raise ValueError(f"span [{self.start}, {self.end}) is empty or reversed (start must be < end)")
        return self

    @classmethod
    def coerce(cls, value: Any) -> Span:
        """A span from `[start, end]`, `[start, end, label]`, a dict or a `Span`."""
        if isinstance(value, Span):
            return value
        if isinstance(value, list | tuple):
            if len(value) not in (2, 3):
                raise ValueError(f"a span list must be [start, end] or [start, end, label], got {value!r}")
            return cls(start=value[0], end=value[1], label=value[2] if len(value) == 3 else None)
        if isinstance(value, dict):
            return cls.model_validate(value)
        raise ValueError(f"cannot read a span from {value!r}")


def merge_spans(spans: Iterable[Span]) -> list[Span]:
    """Spans sorted by start, with overlapping or touching ranges merged into one.

    Touching ranges merge too (as Mu-SHROOM's `recompute_hard_labels` does) because no metric can tell
    `[0,3)+[3,5)` from `[0,5)`. A merged span joins the distinct labels with `|` and keeps the highest score.
    """
    listed = list(spans)
    if all(a.end < b.start for a, b in zip(listed, listed[1:])):
        return listed  # already sorted and apart (as every stored list is): nothing to merge
    ordered = sorted(listed, key=lambda s: (s.start, s.end))
    merged: list[Span] = []
    for span in ordered:
        if merged and span.start <= merged[-1].end:
            merged[-1] = _union(merged[-1], span)
        else:
            merged.append(span)
    return merged


def _union(a: Span, b: Span) -> Span:
    labels = [lab for lab in dict.fromkeys((a.label or "").split("|") + (b.label or "").split("|")) if lab]
    scores = [s for s in (a.score, b.score) if s is not None]
    return a.model_copy(
        update={
            "end": max(a.end, b.end),
            "label": "|".join(labels) or None,
            "score": max(scores) if scores else None,
        }
    )


def coverage(span_lists: Sequence[Iterable[Span]]) -> list[tuple[int, int, int]]:
    """How many of the span lists cover each character, as maximal `(start, end, count)` runs with count > 0.

    Each list is merged first, so a list that covers a character twice counts once (one annotator, one vote).
    """
    deltas: dict[int, int] = {}
    for spans in span_lists:
        for span in merge_spans(spans):
            deltas[span.start] = deltas.get(span.start, 0) + 1
            deltas[span.end] = deltas.get(span.end, 0) - 1
    runs: list[tuple[int, int, int]] = []
    count = 0
    bounds = sorted(deltas)
    for start, end in zip(bounds, bounds[1:]):
        count += deltas[start]
        if count > 0:
            runs.append((start, end, count))
    return runs


def marked_by_more_than(span_lists: Sequence[Iterable[Span]], share: float) -> list[Span]:
    """The characters more than `share` of the lists cover (strictly: a tie at exactly `share` is not enough),
    as merged spans; 0 gives their union, 0.5 the majority."""
    n = len(span_lists)
    return merge_spans([Span(start=s, end=e) for s, e, count in coverage(span_lists) if count > share * n])


def covered_shares(span_lists: Sequence[Iterable[Span]]) -> list[tuple[int, int, float]]:
    """Per maximal run of characters that some list covers, the share of the lists that cover it (Mu-SHROOM's
    soft labels: an annotator who marked nothing still counts in the denominator)."""
    n = len(span_lists)
    return [(s, e, count / n) for s, e, count in coverage(span_lists)]


class SoftSpan(BaseModel):
    """A character range with the share of annotators who marked it (Mu-SHROOM soft labels)."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    """Offset of the first character."""
    end: int
    """Offset one past the last character."""
    prob: float = Field(ge=0.0, le=1.0)
    """Probability that the characters are hallucinated (annotator agreement)."""

    @model_validator(mode="after")
    def _non_empty(self) -> SoftSpan:
        if self.end <= self.start:
            raise ValueError(f"soft span [{self.start}, {self.end}) is empty or reversed (start must be < end)")
        return self


class Step(BaseModel):
    """One reasoning step of a step-level (math) response, as a character range with its gold verdict."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    """Offset of the step's first character in the response."""
    end: int
    """Offset one past the step's last character."""
    label: int | None = None
    """1 = correct, 0 = erroneous, None = not labelled (e.g. after ProcessBench's first error)."""


class Reading(BaseModel):
    """One annotator's spans on an example, beside the gold the source's own rule builds from the other annotators
    (what human agreement scores: this annotator as a prediction against that gold)."""

    annotator: str
    """The annotator's id in the source (or a stable stand-in where the source gives none)."""
    spans: list[Span] = Field(default_factory=list)
    """What this annotator marked as hallucinated (under the source's labels), sorted and merged; empty when
    they read the example and marked nothing."""
    others: list[Span] = Field(default_factory=list)
    """The gold the source's aggregation rule builds from every other annotator of the example."""
    others_soft: list[SoftSpan] | None = None
    """The share of the other annotators marking each character, where the source's gold has soft labels
    (Mu-SHROOM's Cor)."""

    @field_validator("spans", "others", mode="before")
    @classmethod
    def _merged(cls, value: Any) -> list[Span]:
        return _coerced_spans(value)


class Annotations(BaseModel):
    """The individual annotators of an example, read by its source's adapter, for human agreement."""

    readings: list[Reading]
    """One per annotator who read the example (those who marked nothing included), in the source's order."""
    rule: str
    """How the source builds gold from several annotators, and how this adapter read them (one sentence)."""
    reproduces_gold: bool | None = None
    """Whether the rule over all annotators gives the released gold exactly (None: not checked)."""
    unplaced: dict[str, int] = Field(default_factory=dict)
    """Annotators' spans that could not be placed on the response as released, by reason (the reason says
    whether the span was left out of `readings` or moved)."""

    @classmethod
    def leave_one_out(
        cls,
        marked: dict[str, list[Span]],
        gold_of: Callable[[list[list[Span]]], list[Span]],
        rule: str,
        *,
        soft: bool = False,
        released: list[Span] | None = None,
        unplaced: dict[str, int] | None = None,
    ) -> Annotations:
        """The readings of the annotators in `marked` (id -> spans), each beside `gold_of` the others' spans
        (and, with `soft`, the others' shares per character); `reproduces_gold` compares `gold_of` every
        annotator's spans with the `released` gold, character for character; SourceError past MAX_ANNOTATORS."""
        if len(marked) > MAX_ANNOTATORS:
            raise SourceError(
                f"{len(marked)} annotators of one example, more than the {MAX_ANNOTATORS} human agreement reads "
                "(each one's gold is built from all the others)"
            )
        readings = []
        for annotator, spans in marked.items():
            others = [s for other, s in marked.items() if other != annotator]
            shares = [SoftSpan(start=a, end=b, prob=p) for a, b, p in covered_shares(others)] if soft else None
            readings.append(Reading(annotator=annotator, spans=spans, others=gold_of(others), others_soft=shares))
        reproduces = None
        if released is not None:
            reproduces = _bounds(gold_of(list(marked.values()))) == _bounds(released)
        return cls(readings=readings, rule=rule, reproduces_gold=reproduces, unplaced=unplaced or {})


def _bounds(spans: list[Span]) -> list[tuple[int, int]]:
    """The character ranges of spans, merged: equal lists mean the same characters."""
    return [(s.start, s.end) for s in merge_spans(spans)]


def _coerced_spans(value: Any) -> list[Span]:
    if value and all(type(v) is dict for v in value):
        # The JSON form, validated in one call; an invalid list is read again span by span below, so that its
        # error names the span as `Span.coerce` does.
        try:
            return merge_spans(_SPAN_LIST.validate_python(value))
        except ValidationError:
            pass
    return merge_spans([Span.coerce(v) for v in value or []])


_SPAN_LIST = TypeAdapter(list[Span])


def _check_inside(kind: str, example_id: str, ranges: list[Any], length: int) -> None:
    for r in ranges:
        if r.end > length:
            raise ValueError(
                f"example {example_id!r}: {kind} [{r.start}, {r.end}) ends past the response (length {length})"
            )


def _check_steps_ordered(example_id: str, steps: list[Step]) -> None:
    # The scorer treats steps as sentence units, which must be in order and must not overlap.
    prev_end = 0
    for i, step in enumerate(steps):
        if step.end < step.start or step.start < prev_end:
            raise ValueError(
                f"example {example_id!r}: step {i} [{step.start}, {step.end}) is reversed or overlaps the step "
                f"before it (steps must be in order and disjoint)"
            )
        prev_end = step.end


class Example(BaseModel):
    """One annotated response of a benchmark, in the schema every adapter produces."""

    id: str
    """Stable identifier, derived from the source's own ids (e.g. `ragtruth/12345`)."""
    dataset: str
    """Source corpus name, e.g. `ragtruth`, `faithbench`."""
    task: str
    """Task name, e.g. `context_qa`, `summ`, `open_qa`; partitions are `task/dataset`."""
    split: str = "test"
    """`test`, `dev` (the small validation set) or `train`."""
    question: str = ""
    """The user request or question; empty when the task has none (summarisation source is in `context`)."""
    context: str = ""
    """Grounding material the response should be faithful to; empty for open-domain sets."""
    response: str
    """The model output whose hallucinations are annotated."""
    hallu_spans: list[Span] = Field(default_factory=list)
    """Gold hallucinated character ranges of `response`, sorted and merged."""
    soft_spans: list[SoftSpan] | None = None
    """Per-range annotator agreement where the source releases it (Mu-SHROOM); used by IoU/Cor."""
    steps: list[Step] | None = None
    """Step bounds and labels for step-level (math) sets; the scorer uses them as sentence units."""
    annotations: Annotations | None = None
    """The individual annotators' spans where the source releases them (human agreement, `groups.agreement`)."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Source-specific extras (generating model, source ids, ...) that no metric reads."""

    @field_validator("hallu_spans", mode="before")
    @classmethod
    def _spans(cls, value: Any) -> list[Span]:
        return _coerced_spans(value)

    @model_validator(mode="after")
    def _inside_response(self) -> Example:
        length = len(self.response)
        _check_inside("span", self.id, self.hallu_spans, length)
        _check_inside("soft span", self.id, self.soft_spans or [], length)
        _check_inside("step", self.id, self.steps or [], length)
        _check_steps_ordered(self.id, self.steps or [])
        for reading in self.annotations.readings if self.annotations else []:
            for kind in ("spans", "others", "others_soft"):
                _check_inside(f"{reading.annotator}'s {kind}", self.id, getattr(reading, kind) or [], length)
        return self

    @property
    def partition(self) -> str:
        """The `task/dataset` key results are reported under."""
        return f"{self.task}/{self.dataset}"

    @property
    def first_error(self) -> int | None:
        """Index of the first step labelled 0, -1 when every step is correct, None without steps."""
        if self.steps is None:
            return None
        return next((i for i, s in enumerate(self.steps) if s.label == 0), -1)


class Prediction(BaseModel):
    """What a detector says about one example."""

    id: str
    """The `Example.id` this prediction is for."""
    spans: list[Span] = Field(default_factory=list)
    """Predicted hallucinated character ranges of the response (thresholded), sorted and merged."""
    sentence_labels: list[int] | None = None
    """Direct 0/1 labels per sentence unit (see `shambench.scoring.text`), for sentence verifiers; overrides projection."""
    scores: list[Span] | None = None
    """Unthresholded scored ranges for threshold-free metrics; a token's score is the max over ranges it overlaps."""
    soft_spans: list[SoftSpan] | None = None
    """Predicted per-range hallucination probabilities (Mu-SHROOM soft labels), used by Cor in the order given: a
    later range overwrites an earlier one where they overlap, as in the official scorer. Default: `scores`."""
    step_scores: list[float] | None = None
    """Per-step probability of being correct (process reward models), for step-level sets."""
    step_verdicts: list[int] | None = None
    """Per-step verdicts of a critic (1 correct, 0 erroneous, -2 unparseable); may be shorter or longer than the
    steps (`shambench.scoring.steps` applies Hard2Verify's padding and truncation rules)."""
    first_error: int | None = None
    """A critic's index of the first erroneous step (-1 none, -2 unparseable), for step-level sets."""
    raw: str | None = None
    """The detector's raw output (model text), kept for inspection."""
    error: str | None = None
    """Why no prediction could be made; such examples are scored as empty and counted."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Detector-specific extras: usage, prompt hash, unplaced strings, ..."""

    @field_validator("spans", mode="before")
    @classmethod
    def _spans(cls, value: Any) -> list[Span]:
        return _coerced_spans(value)

    @model_validator(mode="after")
    def _hard_from_soft(self) -> Prediction:
        # Mu-SHROOM: soft labels alone give hard labels where prob > 0.5, adjacent ranges merged.
        if self.soft_spans and "spans" not in self.model_fields_set:
            self.spans = merge_spans([Span(start=s.start, end=s.end) for s in self.soft_spans if s.prob > 0.5])
        return self

    @field_validator("scores", mode="before")
    @classmethod
    def _scores(cls, value: Any) -> list[Span] | None:
        return None if value is None else [Span.coerce(v) for v in value]

    @field_validator("step_verdicts")
    @classmethod
    def _verdicts(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(v not in (1, 0, -2) for v in value):
            raise ValueError("step_verdicts must be 1 (correct), 0 (erroneous) or -2 (unparseable)")
        return value

    @field_validator("first_error")
    @classmethod
    def _first_error(cls, value: int | None) -> int | None:
        if value is not None and value < -2:
            raise ValueError("first_error must be a step index, -1 (no error) or -2 (unparseable)")
        return value

    @field_validator("sentence_labels")
    @classmethod
    def _binary(cls, value: list[int] | None) -> list[int] | None:
        if value is not None and any(v not in (0, 1) for v in value):
            raise ValueError("sentence_labels must be 0 or 1")
        return value

    def check_against(self, example: Example) -> None:
        """Raise ValueError naming the id when a range falls outside `example.response`."""
        self.check_inside(len(example.response))

    def check_inside(self, length: int) -> None:
        """Raise ValueError naming the id when a range falls outside a response of `length` characters."""
        _check_inside("predicted span", self.id, self.spans, length)
        _check_inside("scored range", self.id, self.scores or [], length)
        _check_inside("soft span", self.id, self.soft_spans or [], length)
