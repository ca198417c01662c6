"""The unified data model: every adapter emits `Example`s and every detector emits `Prediction`s."""

from __future__ import annotations

import re
import sys
from bisect import bisect_left, bisect_right
from collections.abc import Callable, Iterable, Sequence
from typing import Annotated, Any

from pydantic import (
    AfterValidator,
    BaseModel,
    ConfigDict,
    Field,
    TypeAdapter,
    ValidationError,
    field_validator,
    model_validator,
)

from shambench.controls import IN_NAMES
from shambench.errors import SourceError
from shambench.secrets import registered_key_env

_CONTROL = re.compile(f"[{IN_NAMES}]")


def plain_name(value: str) -> str:
    """`value` when it holds no control character; ValueError naming the first one otherwise."""
    # Every character of IN_NAMES is one str.isprintable refuses (tests/core/test_names.py enumerates
    # them): a printable value, nearly every id and name, is passed without the regex search.
    if value.isprintable():
        return value
    found = _CONTROL.search(value)
    if found:
        raise ValueError(
            f"U+{ord(found[0]):04X} at position {found.start()}: an id or a name holds no control character (it "
            "would be a line break or an escape sequence wherever it is shown)"
        )
    return value


Name = Annotated[str, AfterValidator(plain_name)]
"""The type of every id and name a model holds (example ids, task, dataset and partition names, annotators,
detector, run and submission names): one line of text without control characters (`plain_name`), so that a name
shown on a terminal, in a log line or on a page is shown as itself. `tests/core/test_names.py` fails on a model's
id or name field of another type."""

BUILT_WHEN_USED = ConfigDict(defer_build=True)
"""The config of every model of the package (`Model`'s) and of the module-level type adapters: a validator and
serializer are made the first time they validate or serialize, not when their module is imported. A command imports
many models it never uses (the adapters' raw rows, the step-level suites' figures, the sections of a run's spec),
and a model nested in one that is used is made inside it. `tests/core/test_models_built_when_used.py` fails on a
model that is not."""


class Model(BaseModel):
    """What every model of the package derives from, instead of pydantic's `BaseModel`: built when first used
    (`BUILT_WHEN_USED`); a model's own `model_config` adds to it."""

    model_config = BUILT_WHEN_USED


NAMES_A_KEY = AfterValidator(registered_key_env)
"""Metadata of every model field that names an environment variable holding a key (`Annotated[str, NAMES_A_KEY]`):
the process that builds the model (a sweep's driver, which writes what its workers' requests brought back, without
reading the key itself) knows the key as a secret from then on, not only the process that reads it."""

# Annotators of one example that human agreement reads. A counting rule's golds are derived in time linear in the
# annotators, but each reading holds its others' gold as a list (`Reading.others`, as every EXAMPLES file and run
# fingerprint has it): where annotators mark apart, that is annotators x pieces (2.2 MB at 256, 28 MB at 1,024), and
# a rule that does not count is called once per annotator on the others' lists. The released corpora have at most
# a dozen.
MAX_ANNOTATORS = 256


class Span(Model):
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


class SoftSpan(Model):
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


class Step(Model):
    """One reasoning step of a step-level (math) response, as a character range with its gold verdict."""

    model_config = ConfigDict(frozen=True)

    start: int = Field(ge=0)
    """Offset of the step's first character in the response."""
    end: int
    """Offset one past the step's last character."""
    label: int | None = None
    """1 = correct, 0 = erroneous, None = not labelled (e.g. after ProcessBench's first error)."""


class Reading(Model):
    """One annotator's spans on an example, beside the gold the source's own rule builds from the other annotators
    (what human agreement scores: this annotator as a prediction against that gold)."""

    annotator: Name
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


class Annotations(Model):
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

    @model_validator(mode="after")
    def _annotators_named(self) -> Annotations:
        # Readings made by `leave_one_out` are built without validation: their annotators' names are checked here.
        for reading in self.readings:
            plain_name(reading.annotator)
        return self

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
        annotator's spans with the `released` gold, character for character; SourceError past MAX_ANNOTATORS.

        A `MarkedByMoreThan` rule's golds and the shares are derived from one count of all the annotators per
        segment of the response, less each one's own marks (linear in the annotators); any other rule is called once per
        annotator on the lists of the others."""
        if len(marked) > MAX_ANNOTATORS:
            raise SourceError(
                f"{len(marked)} annotators of one example, more than the {MAX_ANNOTATORS} human agreement reads "
                "(each one's gold is built from all the others)"
            )
        own = [_coerced_spans(spans) for spans in marked.values()]
        # counted only for what reads the counts: a MarkedByMoreThan rule's golds, the shares (zhou's rule is
        # neither: counting its 2,000 examples' annotators cost 2,000 _Counted built for nothing)
        reads_counts = soft or isinstance(gold_of, MarkedByMoreThan)
        counted = _Counted(own) if len(own) > 1 and reads_counts else None
        hard = counted.gold(gold_of.share) if counted and isinstance(gold_of, MarkedByMoreThan) else None
        shares = counted.shares() if counted and soft else None
        readings = []
        for a, annotator in enumerate(marked):
            if hard is not None:
                others = hard[a]
            else:
                others = _coerced_spans(gold_of([s for other, s in marked.items() if other != annotator]))
            # Made of merged spans already: validating the readings would walk every piece of every one again.
            readings.append(
                Reading.model_construct(
                    annotator=annotator,
                    spans=own[a],
                    others=others,
                    others_soft=(shares[a] if shares else []) if soft else None,
                )
            )
        reproduces = None
        if released is not None:
            reproduces = _bounds(gold_of(list(marked.values()))) == _bounds(released)
        return cls(readings=readings, rule=rule, reproduces_gold=reproduces, unplaced=unplaced or {})


class MarkedByMoreThan(Model):
    """A gold rule that counts: the characters more than `share` of the span lists cover (0 gives their union, 0.5
    the majority), as `marked_by_more_than`; `Annotations.leave_one_out` derives its leave-one-out golds from
    counts."""

    model_config = ConfigDict(frozen=True)

    share: float = Field(ge=0.0, le=1.0)
    """The share of the lists that must cover a character, strictly more than."""

    def __call__(self, span_lists: Sequence[Iterable[Span]]) -> list[Span]:
        return marked_by_more_than(span_lists, self.share)


class _Counted:
    """The annotators of one example counted per segment (the run between two consecutive bounds of any of their
    merged spans): what every annotator's others give is these counts less the annotator's own marks, which
    differ from one shared list of pieces only inside the annotator's own spans and at their bounds."""

    def __init__(self, own: list[list[Span]]) -> None:
        self.own = own
        deltas: dict[int, int] = {}
        bounds: dict[int, int] = {}
        for spans in own:
            for span in spans:
                deltas[span.start] = deltas.get(span.start, 0) + 1
                deltas[span.end] = deltas.get(span.end, 0) - 1
                bounds[span.start] = bounds.get(span.start, 0) + 1
                bounds[span.end] = bounds.get(span.end, 0) + 1
        self.positions = sorted(bounds)
        # Per position, how many annotators have a bound there: where the annotator left out is the only one, the
        # others' runs on either side are one run (the others' shares are split only at the others' bounds).
        self.bounds = bounds
        self.counts, count = [], 0
        for position in self.positions[:-1]:
            count += deltas[position]
            self.counts.append(count)
        self.others = len(own) - 1

    def gold(self, share: float) -> list[list[Span]]:
        """Per annotator, the characters more than `share` of the others cover (`marked_by_more_than` of the
        others): outside the annotator's spans those the count passes, inside those the count less one passes."""
        least = share * self.others
        outside = _Pieces(self._runs([count > least for count in self.counts]))
        inside = _Pieces(self._runs([count - 1 > least for count in self.counts]))
        return [_assembled(spans, outside, inside, lambda _: True) for spans in self.own]

    def shares(self) -> list[list[SoftSpan]]:
        """Per annotator, the share of the others covering each run of characters between two of the others'
        bounds (`covered_shares` of the others)."""
        at, m = self.positions, self.others
        # A segment every annotator covers lies inside each one's spans: it is never taken from `outside`.
        outside = _Pieces(
            [SoftSpan(start=at[k], end=at[k + 1], prob=c / m) for k, c in enumerate(self.counts) if 0 < c <= m]
        )
        inside = _Pieces(
            [SoftSpan(start=at[k], end=at[k + 1], prob=(c - 1) / m) for k, c in enumerate(self.counts) if c > 1]
        )
        return [_assembled(spans, outside, inside, lambda p: self.bounds[p] == 1) for spans in self.own]

    def _runs(self, passing: list[bool]) -> list[Span]:
        """The merged spans of the segments that pass."""
        runs: list[Span] = []
        start = None
        for k, passes in enumerate(passing):
            if passes and start is None:
                start = self.positions[k]
            elif not passes and start is not None:
                runs.append(Span(start=start, end=self.positions[k]))
                start = None
        if start is not None:
            runs.append(Span(start=start, end=self.positions[-1]))
        return runs


class _Pieces:
    """Sorted, disjoint ranges (spans or soft spans), to take those within a stretch of characters by bisection."""

    def __init__(self, pieces: list[Any]) -> None:
        self.pieces = pieces
        self.starts = [p.start for p in pieces]
        self.ends = [p.end for p in pieces]

    def within(self, lo: int, hi: int) -> list[Any]:
        """The pieces inside `[lo, hi)`, those across its ends cut there (the others shared, not copied)."""
        taken = self.pieces[bisect_right(self.ends, lo) : bisect_left(self.starts, hi)]
        if taken and taken[0].start < lo:
            taken[0] = taken[0].model_copy(update={"start": lo})
        if taken and taken[-1].end > hi:
            taken[-1] = taken[-1].model_copy(update={"end": hi})
        return taken


def _assembled(own: list[Span], outside: _Pieces, inside: _Pieces, joins: Callable[[int], bool]) -> list[Any]:
    """The `outside` pieces between the spans of `own` and the `inside` pieces within them, in order; two pieces
    that meet at a bound of `own` where `joins` are one."""
    stretches, lo = [], 0
    for span in own:
        stretches += [outside.within(lo, span.start), inside.within(span.start, span.end)]
        lo = span.end
    stretches.append(outside.within(lo, sys.maxsize))
    out: list[Any] = []
    for pieces in stretches:
        if out and pieces and out[-1].end == pieces[0].start and joins(pieces[0].start):
            out[-1] = out[-1].model_copy(update={"end": pieces[0].end})
            pieces = pieces[1:]
        out += pieces
    return out


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


_SPAN_LIST = TypeAdapter(list[Span], config=BUILT_WHEN_USED)


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


class Example(Model):
    """One annotated response of a benchmark, in the schema every adapter produces."""

    id: Name
    """Stable identifier, derived from the source's own ids (e.g. `ragtruth/12345`)."""
    dataset: Name
    """Source corpus name, e.g. `ragtruth`, `faithbench`."""
    task: Name
    """Task name, e.g. `context_qa`, `summ`, `open_qa`; partitions are `task/dataset`."""
    split: Name = "test"
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


class Prediction(Model):
    """What a detector says about one example."""

    id: Name
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
