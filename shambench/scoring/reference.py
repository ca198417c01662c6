"""The SHAM-Bench metric as the paper defines it, in plain Python, one example at a time.

This is the readable definition; `shambench.scoring.scorer` computes the same figures with arrays, and is tested
against this module (tests/scoring/test_scorer.py). Slow and obvious on purpose: no numpy, no caching.

Per example (units: the response's tokens, whitespace excluded, and its sentences, both from
`shambench.scoring.text`):

- a unit is gold-positive when a gold span overlaps it by at least one character, predicted-positive likewise for
  the predicted spans (a prediction's `sentence_labels`, when given, label the sentences directly);
- precision = TP / predicted, recall = TP / gold, F1 = 2PR / (P + R); an example with no gold and no predicted
  unit scores 1.0 for all three, and any other undefined ratio is 0.0 (no gold but some prediction: 0.0);
- a missing or failed prediction predicts nothing.

Per partition (`task/dataset`) and per task: the mean of the per-example values (so datasets weigh by their
size); pooled (micro) token and character P/R/F1 are named alternatives. Overall: the unweighted mean of the
task F1s and their population standard deviation (ddof = 0).

Span-annotated examples only: step-level examples (with `steps`) are scored by `shambench.scoring.steps`.
"""

from __future__ import annotations

import statistics
from collections.abc import Iterable, Sequence

from shambench.schema import Example, Model, Name, Prediction, Span
from shambench.scoring.text import sentences, tokens


class ReferencePRF(Model):
    """Precision, recall and F1 of one example or one group, under the convention of the enclosing key."""

    precision: float
    """Precision."""
    recall: float
    """Recall."""
    f1: float
    """F1."""


class ExampleReference(Model):
    """One example's scores and the counts they come from."""

    partition: Name
    """The example's `task/dataset`."""
    task: Name
    """The example's task."""
    token: ReferencePRF
    """Per-example token P/R/F1."""
    sentence: ReferencePRF
    """Per-example sentence P/R/F1."""
    token_counts: tuple[int, int, int]
    """Tokens predicted and gold-positive, predicted-positive, gold-positive."""
    char_counts: tuple[int, int, int]
    """Characters predicted and gold, predicted, gold."""


class GroupReference(Model):
    """A partition's or a task's scores."""

    n: int
    """Number of examples."""
    token: ReferencePRF
    """Mean over the examples of their token P/R/F1 (the headline)."""
    sentence: ReferencePRF
    """Mean over the examples of their sentence P/R/F1."""
    token_pooled: ReferencePRF
    """Micro P/R/F1 over every token of the group."""
    char_pooled: ReferencePRF
    """Micro P/R/F1 over every character of the group."""


class Reference(Model):
    """Every figure the definition gives for a set of examples and predictions."""

    partitions: dict[str, GroupReference]
    """By `task/dataset`."""
    tasks: dict[str, GroupReference]
    """By task."""
    overall_token_f1: float
    """Unweighted mean of the task token F1s."""
    overall_token_std: float
    """Population standard deviation (ddof = 0) of the task token F1s."""
    overall_sentence_f1: float
    """Unweighted mean of the task sentence F1s."""
    overall_sentence_std: float
    """Population standard deviation (ddof = 0) of the task sentence F1s."""


def prf(tp: int, n_pred: int, n_gold: int) -> ReferencePRF:
    """P/R/F1 from counts: both empty is 1.0 for all three; otherwise an undefined ratio is 0.0."""
    if n_pred == 0 and n_gold == 0:
        return ReferencePRF(precision=1.0, recall=1.0, f1=1.0)
    p = tp / n_pred if n_pred else 0.0
    r = tp / n_gold if n_gold else 0.0
    return ReferencePRF(precision=p, recall=r, f1=2 * p * r / (p + r) if p + r else 0.0)


def overlapping(units: Sequence[tuple[int, int]], spans: Iterable[Span]) -> set[int]:
    """Indices of the units that share at least one character with any of the spans."""
    spans = list(spans)
    return {k for k, (a, b) in enumerate(units) if any(s.start < b and a < s.end for s in spans)}


def example_reference(example: Example, prediction: Prediction | None) -> ExampleReference:
    """One example's scores; `prediction` None (or failed) predicts nothing."""
    usable = prediction if prediction is not None and prediction.error is None else None
    spans = usable.spans if usable else []
    toks, sents = tokens(example.response), sentences(example.response)
    gold_t, pred_t = overlapping(toks, example.hallu_spans), overlapping(toks, spans)
    gold_s = overlapping(sents, example.hallu_spans)
    if usable and usable.sentence_labels:
        pred_s = {k for k, label in enumerate(usable.sentence_labels) if label}
    else:
        pred_s = overlapping(sents, spans)
    gold_c = {c for s in example.hallu_spans for c in range(s.start, s.end)}
    pred_c = {c for s in spans for c in range(s.start, s.end)}
    return ExampleReference(
        partition=example.partition,
        task=example.task,
        token=prf(len(gold_t & pred_t), len(pred_t), len(gold_t)),
        sentence=prf(len(gold_s & pred_s), len(pred_s), len(gold_s)),
        token_counts=(len(gold_t & pred_t), len(pred_t), len(gold_t)),
        char_counts=(len(gold_c & pred_c), len(pred_c), len(gold_c)),
    )


def group_reference(members: Sequence[ExampleReference]) -> GroupReference:
    """A group's scores: per-example means, and pooled counts."""

    def mean(level: str) -> ReferencePRF:
        values = [getattr(m, level) for m in members]
        return ReferencePRF(
            precision=statistics.fmean(v.precision for v in values),
            recall=statistics.fmean(v.recall for v in values),
            f1=statistics.fmean(v.f1 for v in values),
        )

    def pooled(counts: str) -> ReferencePRF:
        tp, n_pred, n_gold = (sum(getattr(m, counts)[k] for m in members) for k in range(3))
        return prf(tp, n_pred, n_gold)

    return GroupReference(
        n=len(members),
        token=mean("token"),
        sentence=mean("sentence"),
        token_pooled=pooled("token_counts"),
        char_pooled=pooled("char_counts"),
    )


def reference_scores(examples: Iterable[Example], predictions: Iterable[Prediction]) -> Reference:
    """Every figure of the definition (predictions: at most one per example id)."""
    by_id = {p.id: p for p in predictions}
    rows = [example_reference(ex, by_id.get(ex.id)) for ex in examples]
    partitions = {
        name: group_reference([r for r in rows if r.partition == name]) for name in {r.partition for r in rows}
    }
    tasks = {name: group_reference([r for r in rows if r.task == name]) for name in {r.task for r in rows}}
    token_f1 = [g.token.f1 for g in tasks.values()]
    sentence_f1 = [g.sentence.f1 for g in tasks.values()]
    return Reference(
        partitions=dict(sorted(partitions.items())),
        tasks=dict(sorted(tasks.items())),
        overall_token_f1=statistics.fmean(token_f1),
        overall_token_std=statistics.pstdev(token_f1),
        overall_sentence_f1=statistics.fmean(sentence_f1),
        overall_sentence_std=statistics.pstdev(sentence_f1),
    )
