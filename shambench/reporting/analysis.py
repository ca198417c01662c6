"""Why a detector fails: span recovery, boundary errors, false alarms and hallucination-rate calibration.

Every figure is defined in `DEFINITIONS`, which each analysis carries with it into analysis.json.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

import numpy as np
from pydantic import Field

from shambench.schema import Example, Model, Name, Prediction, Span
from shambench.scoring.metrics import per_example_prf
from shambench.scoring.text import Segmentation, language_of, segment_mixed
from shambench.scoring.typed import TypesGroup

DEFINITIONS = """\
Definitions (all in spaCy tokens, the scorer's tokeniser, whitespace excluded):
- A gold span is *recovered* when any predicted span overlaps it by at least one character.
- For a recovered gold span g, let P be the union of the predicted spans that overlap it.
  over  = tokens of P outside g (the prediction runs long), under = tokens of g outside P (it stops short).
  `boundary.over_mean` is the mean of `over` over the recovered spans where over > 0; `under_mean` likewise.
- A predicted span is a *false alarm* when it overlaps no gold span.
- Per-example hallucinated-token rate = positive tokens / tokens, for gold and for the prediction.
- `f1_no_gold`: mean per-example token F1 on examples with no gold span (1 when nothing is predicted, else 0);
  `f1_all_hallucinated`: the same on examples whose every token is gold-positive.
"""
RATE_BINS = tuple(round(x, 1) for x in np.linspace(0.0, 1.0, 11))


class Boundary(Model):
    """Boundary disagreement on recovered gold spans, in tokens."""

    over_share: float
    """Share of recovered gold spans whose overlapping prediction runs past them."""
    over_mean: float | None
    """Mean tokens predicted beyond the gold span, over spans where that is > 0."""
    under_share: float
    """Share of recovered gold spans that the prediction does not cover completely."""
    under_mean: float | None
    """Mean gold tokens left uncovered, over spans where that is > 0."""


class GroupAnalysis(Model):
    """The analysis of one partition (`task/dataset`) or task of a run."""

    n_examples: int
    """Examples analysed."""
    n_gold_spans: int
    """Gold spans in these examples."""
    n_pred_spans: int
    """Predicted spans in these examples."""
    recovered_share: float | None
    """Share of gold spans overlapped by some prediction; None without gold spans."""
    boundary: Boundary | None
    """Boundary errors on the recovered spans; None when none was recovered."""
    false_alarm_share: float | None
    """Share of predicted spans overlapping no gold span; None without predictions."""
    f1_no_gold: float | None
    """Mean token F1 on examples with no gold span; None when there are none."""
    n_no_gold: int
    """Examples with no gold span."""
    f1_all_hallucinated: float | None
    """Mean token F1 on examples whose every token is gold-positive; None when there are none."""
    n_all_hallucinated: int
    """Examples whose every token is gold-positive."""
    gold_rate_mean: float
    """Mean per-example gold hallucinated-token rate."""
    pred_rate_mean: float
    """Mean per-example predicted hallucinated-token rate."""
    gold_rate_hist: list[int]
    """Counts of per-example gold rates in the bins `rate_bins` (last bin closed)."""
    pred_rate_hist: list[int]
    """Counts of per-example predicted rates in the same bins."""


class RunAnalysis(Model):
    """The analysis of one run directory."""

    run_dir: str
    """The run analysed."""
    detector: Name
    """The run's name: its detector, and the model an API detector asked for (`reporting.naming.run_name`)."""
    definitions: str = DEFINITIONS
    """How every figure is defined."""
    rate_bins: list[float] = Field(default_factory=lambda: list(RATE_BINS))
    """Edges of the rate histograms."""
    datasets: dict[str, GroupAnalysis]
    """Per partition."""
    tasks: dict[str, GroupAnalysis]
    """Per task."""
    categories: dict[str, dict[str, int]] | None = None
    """Missed-gold-span categories per partition, when an LLM judge categorised them."""
    types: TypesGroup | None = None
    """Per error type recall (and typed P/R/F1) of the run's sources whose gold spans carry types: `groups.types`
    of its results (`shambench.scoring.typed`)."""


@dataclass
class _ExampleFacts:
    """Token-level facts of one example, gathered once."""

    n_tokens: int
    gold_tokens: int
    pred_tokens: int
    tp_tokens: int
    gold_spans: int
    pred_spans: int
    recovered: int
    false_alarms: int
    over: list[int] = field(default_factory=list)
    under: list[int] = field(default_factory=list)


def _token_sets(starts: np.ndarray, ends: np.ndarray, spans: Sequence[Span]) -> list[set[int]]:
    """Per span, the indices of the tokens it overlaps."""
    out = []
    for s in spans:
        lo = int(np.searchsorted(ends, s.start, side="right"))
        hi = int(np.searchsorted(starts, s.end, side="left"))
        out.append(set(range(lo, hi)))
    return out


def _overlaps(a: Span, b: Span) -> bool:
    return a.start < b.end and b.start < a.end


def example_facts(example: Example, spans: Sequence[Span], seg: Segmentation) -> _ExampleFacts:
    """Recovery, false alarms and boundary errors of one prediction against one example."""
    gold, pred = example.hallu_spans, list(spans)
    gold_toks = _token_sets(seg.token_starts, seg.token_ends, gold)
    pred_toks = _token_sets(seg.token_starts, seg.token_ends, pred)
    all_gold = set().union(*gold_toks) if gold_toks else set()
    all_pred = set().union(*pred_toks) if pred_toks else set()
    facts = _ExampleFacts(
        n_tokens=len(seg.token_starts),
        gold_tokens=len(all_gold),
        pred_tokens=len(all_pred),
        tp_tokens=len(all_gold & all_pred),
        gold_spans=len(gold),
        pred_spans=len(pred),
        recovered=0,
        false_alarms=sum(not any(_overlaps(p, g) for g in gold) for p in pred),
    )
    for g, g_toks in zip(gold, gold_toks):
        hits = [pt for p, pt in zip(pred, pred_toks) if _overlaps(p, g)]
        if not hits:
            continue
        facts.recovered += 1
        covered = set().union(*hits)
        facts.over.append(len(covered - g_toks))
        facts.under.append(len(g_toks - covered))
    return facts


def _mean_positive(values: list[int]) -> float | None:
    pos = [v for v in values if v > 0]
    return float(np.mean(pos)) if pos else None


def _rate_hist(rates: np.ndarray) -> list[int]:
    return np.histogram(rates, bins=RATE_BINS)[0].astype(int).tolist()


def group_analysis(facts: list[_ExampleFacts]) -> GroupAnalysis:
    """Aggregate per-example facts of one group."""
    n_tok = np.array([max(f.n_tokens, 1) for f in facts], float)
    gold_rate = np.array([f.gold_tokens for f in facts]) / n_tok
    pred_rate = np.array([f.pred_tokens for f in facts]) / n_tok
    _, _, f1 = per_example_prf(
        np.array([f.tp_tokens for f in facts]),
        np.array([f.pred_tokens for f in facts]),
        np.array([f.gold_tokens for f in facts]),
    )
    no_gold = np.array([f.gold_tokens == 0 for f in facts])
    all_hallu = np.array([f.n_tokens > 0 and f.gold_tokens == f.n_tokens for f in facts])
    n_gold = sum(f.gold_spans for f in facts)
    n_pred = sum(f.pred_spans for f in facts)
    recovered = sum(f.recovered for f in facts)
    over = [v for f in facts for v in f.over]
    under = [v for f in facts for v in f.under]
    boundary = None
    if recovered:
        boundary = Boundary(
            over_share=sum(v > 0 for v in over) / recovered,
            over_mean=_mean_positive(over),
            under_share=sum(v > 0 for v in under) / recovered,
            under_mean=_mean_positive(under),
        )
    return GroupAnalysis(
        n_examples=len(facts),
        n_gold_spans=n_gold,
        n_pred_spans=n_pred,
        recovered_share=recovered / n_gold if n_gold else None,
        boundary=boundary,
        false_alarm_share=sum(f.false_alarms for f in facts) / n_pred if n_pred else None,
        f1_no_gold=float(f1[no_gold].mean()) if no_gold.any() else None,
        n_no_gold=int(no_gold.sum()),
        f1_all_hallucinated=float(f1[all_hallu].mean()) if all_hallu.any() else None,
        n_all_hallucinated=int(all_hallu.sum()),
        gold_rate_mean=float(gold_rate.mean()),
        pred_rate_mean=float(pred_rate.mean()),
        gold_rate_hist=_rate_hist(gold_rate),
        pred_rate_hist=_rate_hist(pred_rate),
    )


def analyse(
    examples: Sequence[Example], predictions: dict[str, Prediction], run_dir: str = "", detector: str = ""
) -> RunAnalysis:
    """The analysis of predictions against examples (a missing or failed prediction counts as no span)."""
    segs = segment_mixed([ex.response for ex in examples], [language_of(ex.meta) for ex in examples])
    facts: dict[str, list[_ExampleFacts]] = {}
    by_task: dict[str, list[_ExampleFacts]] = {}
    for ex, seg in zip(examples, segs):
        pred = predictions.get(ex.id)
        spans = pred.spans if pred is not None and pred.error is None else []
        f = example_facts(ex, spans, seg)
        facts.setdefault(ex.partition, []).append(f)
        by_task.setdefault(ex.task, []).append(f)
    return RunAnalysis(
        run_dir=run_dir,
        detector=detector,
        datasets={k: group_analysis(v) for k, v in sorted(facts.items())},
        tasks={k: group_analysis(v) for k, v in sorted(by_task.items())},
    )


def missed_spans(examples: Sequence[Example], predictions: dict[str, Prediction]) -> list[tuple[Example, Span]]:
    """Gold spans that no prediction overlaps, with their example, in example order."""
    out: list[tuple[Example, Span]] = []
    for ex in examples:
        pred = predictions.get(ex.id)
        spans = pred.spans if pred is not None and pred.error is None else []
        out.extend((ex, g) for g in ex.hallu_spans if not any(_overlaps(p, g) for p in spans))
    return out
