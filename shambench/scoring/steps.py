"""Step-level (math) verification: the metrics of ProcessBench, Hard2Verify and Math-Shepherd, kept in their own
results group (`Results.groups.math`), never in the SHAM-Bench overall. Adapters build step examples with
`shambench.data.steps.step_fields`; the suite tables are `shambench.reporting.steps`'.

What a prediction says about the steps of an example, in order of precedence:
`step_verdicts` (a critic's 1/0/-2 list, any length), `step_scores` (a PRM's probability that each step is correct,
thresholded: a step is correct iff its score is at or above the threshold), `first_error` (a critic's index: the
steps before it correct, it and every later step erroneous), `sentence_labels` (1 = hallucinated unit, the steps
being the units), else `spans` (a step is erroneous when a predicted span overlaps it). An example without a
usable prediction counts as "every step correct", as the span scorer counts it as "no span".
"""

from __future__ import annotations

import math
import statistics
import warnings
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeGuard

import numpy as np

from shambench.schema import Example, Model, Name, Prediction
from shambench.scoring.metrics import pooled_prf
from shambench.sources import char_level_suites, suite_of

UNPARSEABLE = -2
GRID = tuple(round(0.10 + 0.05 * i, 2) for i in range(17))
TUNING_SIZE = 100
DEFAULT_THRESHOLD = 0.5
SOPO_WARNING = (
    "SOPO compatibility mode: the predicted span is snapped to the start of the gold erroneous step it falls in, "
    "so it depends on the gold labels; these figures reproduce the SOPO kit and are not a fair measure"
)

CONVENTIONS = {
    "scale": "every rate, accuracy and F1 of this group is a percentage (0-100), as the papers print them",
    "prediction": "per step, in order of precedence: step_verdicts; step_scores >= threshold is correct; "
    "first_error (earlier steps correct, later ones erroneous); sentence_labels; spans overlapping the step; "
    "an example without a usable prediction predicts every step correct",
    "first_error": "the prediction's first_error, else the index of the first of its first n verdicts that is "
    "not 1 (-2, never right, when that verdict is unparseable), else -1; "
    "tpr (acc_correct) = share of error-free responses predicted -1, tnr (acc_erroneous) = share of erroneous "
    "responses whose index is exactly right; ProcessBench F1 = 2*tpr*tnr/(tpr+tnr) = this level's balanced_f1",
    "step": "Hard2Verify: pooled over the labelled steps (steps after ProcessBench's or SHARP's first error are "
    "unlabelled and skipped); positive class = correct step; an unparseable (-2) verdict or a missing one "
    "(fewer verdicts than steps) takes the wrong label, extra verdicts are dropped",
    "response": "Hard2Verify: gold 0 when any step is labelled 0; predicted 0 when any of the verdicts given "
    "(at most one per step, unparseable ones replaced by the wrong label, none padded) is 0",
    "balanced": "balanced_accuracy = (tpr+tnr)/2, balanced_f1 = 2*tpr*tnr/(tpr+tnr) (0 when both are 0); both None "
    "when the data has no example of one class",
    "threshold": f"for step_scores: swept over {GRID[0]:.2f}..{GRID[-1]:.2f} step 0.05 on a seeded random subset "
    f"of {TUNING_SIZE} responses of each suite (all when fewer), choosing the first maximum of the harmonic mean "
    "of the step, response and first-error balanced F1s; then applied to every response of the suite",
    "char": "Math-Shepherd: micro character P/R/F1; gold = every step labelled 0 with the separator after it "
    "(except the last step); predicted = the same ranges of the steps predicted erroneous (unparseable verdicts "
    "flag nothing), or the predicted spans as given when the prediction has no step-level output; gold-independent",
    "case": "response level of the char view: positive = a response with a gold (predicted) erroneous character",
    "char_sopo_compat": "only with --sopo-compat; " + SOPO_WARNING,
    "mean_f1": "per suite, unweighted mean over its datasets of the first-error balanced F1 (ProcessBench's "
    "'average F1'), over the datasets where it is defined",
}


class Rates(Model):
    """Balanced metrics of one level (positive class = correct), as percentages."""

    tpr: float | None
    """Recall on the correct class (acc_correct); None without correct items."""
    tnr: float | None
    """Recall on the erroneous class (acc_erroneous); None without erroneous items."""
    balanced_accuracy: float | None
    """(tpr + tnr) / 2; None when either is undefined."""
    balanced_f1: float | None
    """2·tpr·tnr / (tpr + tnr), 0 when both are 0; None when either is undefined."""
    n_correct: int
    """Items of the correct class."""
    n_erroneous: int
    """Items of the erroneous class."""

    @classmethod
    def of(cls, tpr: float | None, tnr: float | None, n_correct: int, n_erroneous: int) -> Rates:
        """Rates from the two recalls (fractions), scaled to percentages."""
        return cls(
            tpr=None if tpr is None else 100 * tpr,
            tnr=None if tnr is None else 100 * tnr,
            balanced_accuracy=100 * (tpr + tnr) / 2 if tpr is not None and tnr is not None else None,
            balanced_f1=(
                (100 * 2 * tpr * tnr / (tpr + tnr) if tpr + tnr else 0.0)
                if tpr is not None and tnr is not None
                else None
            ),
            n_correct=n_correct,
            n_erroneous=n_erroneous,
        )


class CharScores(Model):
    """Math-Shepherd character and case level scores, as percentages."""

    precision: float
    """Micro character precision."""
    recall: float
    """Micro character recall."""
    f1: float
    """Micro character F1."""
    case_precision: float
    """Precision of flagging a response as erroneous."""
    case_recall: float
    """Recall of erroneous responses."""
    case_f1: float
    """F1 of the two above."""
    case_accuracy: float
    """Share of responses whose erroneous / error-free status is predicted right."""


class MathScores(Model):
    """Step-level verification scores of one dataset (subset)."""

    n: int
    """Responses scored."""
    n_erroneous: int
    """Responses with at least one step labelled 0."""
    missing_predictions: int
    """Responses without a usable prediction (counted as predicting every step correct)."""
    threshold: float | None = None
    """The PRM threshold applied to step_scores (None when no prediction has scores)."""
    first_error: Rates
    """First-error identification; its balanced_f1 is ProcessBench's F1."""
    step: Rates
    """Step level, pooled over labelled steps."""
    response: Rates
    """Response level (any erroneous step)."""
    char: CharScores | None = None
    """Math-Shepherd character and case level (gold-independent), for the math-shepherd suite."""
    char_sopo_compat: CharScores | None = None
    """The SOPO kit's label-dependent rule, only when asked for (`--sopo-compat`)."""


class ThresholdChoice(Model):
    """The PRM threshold chosen on a suite's tuning subset."""

    threshold: float
    """The chosen threshold: a step is correct iff its score is at or above it."""
    objective: float
    """Harmonic mean of the step, response and first-error balanced F1 at that threshold on the subset."""
    tuning_ids: list[str]
    """Ids of the responses the threshold was tuned on."""
    seed: int
    """Seed of the subset draw."""


class SuiteScores(Model):
    """One suite's summary: its datasets, ProcessBench-style mean F1 and threshold."""

    datasets: list[Name]
    """Dataset (subset) names of the suite."""
    mean_f1: float | None
    """Mean first-error balanced F1 over the datasets where it is defined."""
    threshold: ThresholdChoice | None = None
    """The tuned PRM threshold, when predictions carry step scores."""


class MathGroup(Model):
    """All step-level results of a run: `Results.groups.math`."""

    conventions: dict[str, str]
    """How every number of the group is computed."""
    datasets: dict[str, MathScores]
    """Per dataset (subset)."""
    suites: dict[str, SuiteScores]
    """Per suite."""


def _has_step_output(pred: Prediction) -> bool:
    return any(x is not None for x in (pred.step_verdicts, pred.step_scores, pred.first_error, pred.sentence_labels))


def _usable(pred: Prediction | None) -> TypeGuard[Prediction]:
    return pred is not None and pred.error is None


def verdicts_of(ex: Example, pred: Prediction | None, threshold: float | None = None) -> list[int]:
    """The raw per-step verdicts (1, 0 or -2; any length) a prediction makes about an example's steps."""
    bounds = [(s.start, s.end) for s in ex.steps or []]
    if not _usable(pred):
        return [1] * len(bounds)
    if pred.step_verdicts is not None:
        return list(pred.step_verdicts)
    if pred.step_scores is not None:
        t = DEFAULT_THRESHOLD if threshold is None else threshold
        return [UNPARSEABLE if math.isnan(s) else int(s >= t) for s in pred.step_scores]
    if pred.first_error is not None:
        k = pred.first_error
        return [UNPARSEABLE] if k == UNPARSEABLE else [int(k < 0 or i < k) for i in range(len(bounds))]
    if pred.sentence_labels is not None:
        return [1 - v for v in pred.sentence_labels]
    return [0 if any(sp.start < e and s < sp.end for sp in pred.spans) else 1 for s, e in bounds]


def first_error_of(pred: Prediction | None, verdicts: Sequence[int], n_steps: int) -> int:
    """The predicted first-error index: the prediction's own, else the index of the first of its first n verdicts
    that is not 1 (-2 when that verdict is unparseable), else -1."""
    if _usable(pred) and pred.first_error is not None:
        return pred.first_error
    return next((i if v == 0 else UNPARSEABLE for i, v in enumerate(verdicts[:n_steps]) if v != 1), -1)


def _wrong(gold: int | None) -> int:
    # Unlabelled steps only follow a response's first error, so "no error here" is the verdict that cannot help.
    return 1 if gold is None else 1 - gold


def fixed_verdicts(verdicts: Sequence[int], gold: Sequence[int | None]) -> list[int]:
    """One verdict per step: unparseable or missing ones replaced by the wrong label, extra ones dropped."""
    return [verdicts[i] if i < len(verdicts) and verdicts[i] != UNPARSEABLE else _wrong(g) for i, g in enumerate(gold)]


@dataclass
class _Outcome:
    """One response's gold and predicted labels at every level."""

    step_gold: list[int]
    step_pred: list[int]
    response_gold: int
    response_pred: int
    first_gold: int
    first_pred: int
    verdicts: list[int]


def outcome(ex: Example, pred: Prediction | None, threshold: float | None = None) -> _Outcome:
    """Gold and predicted labels of one response at step, response and first-error level."""
    if ex.first_error is None:
        raise ValueError(f"example {ex.id!r} has no steps to score at step level")
    gold = [s.label for s in ex.steps or []]
    verdicts = verdicts_of(ex, pred, threshold)
    fixed = fixed_verdicts(verdicts, gold)
    labelled = [i for i, g in enumerate(gold) if g is not None]
    return _Outcome(
        step_gold=[g for g in gold if g is not None],
        step_pred=[fixed[i] for i in labelled],
        response_gold=0 if 0 in gold else 1,
        response_pred=0 if 0 in fixed[: len(verdicts)] else 1,
        first_gold=ex.first_error,
        first_pred=first_error_of(pred, verdicts, len(gold)),
        verdicts=verdicts,
    )


def binary_rates(pred: Iterable[int], gold: Iterable[int]) -> Rates:
    """Balanced rates of 0/1 predictions against 0/1 gold labels (positive = 1 = correct)."""
    p, g = np.fromiter(pred, dtype=np.int64), np.fromiter(gold, dtype=np.int64)
    pos, neg = g == 1, g == 0
    tpr = float(np.mean(p[pos] == 1)) if pos.any() else None
    tnr = float(np.mean(p[neg] == 0)) if neg.any() else None
    return Rates.of(tpr, tnr, int(pos.sum()), int(neg.sum()))


def first_error_rates(pred: Iterable[int], gold: Iterable[int]) -> Rates:
    """Rates of first-error identification: exact -1 on error-free responses, exact index on the others."""
    p, g = np.fromiter(pred, dtype=np.int64), np.fromiter(gold, dtype=np.int64)
    ok, err = g == -1, g >= 0
    tpr = float(np.mean(p[ok] == -1)) if ok.any() else None
    tnr = float(np.mean(p[err] == g[err])) if err.any() else None
    return Rates.of(tpr, tnr, int(ok.sum()), int(err.sum()))


def _levels(outcomes: Sequence[_Outcome]) -> dict[str, Rates]:
    return {
        "first_error": first_error_rates((o.first_pred for o in outcomes), (o.first_gold for o in outcomes)),
        "step": binary_rates((v for o in outcomes for v in o.step_pred), (v for o in outcomes for v in o.step_gold)),
        "response": binary_rates((o.response_pred for o in outcomes), (o.response_gold for o in outcomes)),
    }


def _separated_ranges(ex: Example) -> list[tuple[int, int]]:
    """Each step's range extended over the separator after it (the last step ends where it ends)."""
    steps = ex.steps or []
    return [(s.start, steps[i + 1].start if i + 1 < len(steps) else s.end) for i, s in enumerate(steps)]


def _gold_chars(ex: Example) -> np.ndarray:
    mask = np.zeros(len(ex.response), bool)
    for (s, e), step in zip(_separated_ranges(ex), ex.steps or []):
        mask[s:e] |= step.label == 0
    return mask


def _pred_chars(ex: Example, pred: Prediction | None, verdicts: Sequence[int]) -> np.ndarray:
    mask = np.zeros(len(ex.response), bool)
    if not _usable(pred):
        return mask
    if _has_step_output(pred):
        for (s, e), v in zip(_separated_ranges(ex), verdicts):
            mask[s:e] |= v == 0
    else:
        for sp in pred.spans:
            mask[sp.start : sp.end] = True
    return mask


def _sopo_snapped(ex: Example, pred_mask: np.ndarray) -> np.ndarray:
    """The SOPO kit's prediction: the whole suffix from the earliest predicted character, moved back to the start
    of the gold erroneous step it falls in (this is what makes the rule depend on the gold labels)."""
    out = np.zeros_like(pred_mask)
    hits = np.flatnonzero(pred_mask)
    if not hits.size:
        return out
    start = int(hits[0])
    for (s, e), step in zip(_separated_ranges(ex), ex.steps or []):
        if step.label == 0 and s <= start < e:
            start = s
    out[start:] = True
    return out


def char_scores(
    examples: Sequence[Example], predictions: Mapping[str, Prediction], outcomes: Sequence[_Outcome], sopo: bool
) -> CharScores:
    """Micro character P/R/F1 and case-level scores; `sopo` applies the kit's label-dependent snapping."""
    counts = np.zeros(3)
    cases = np.zeros(3)
    correct_cases = 0
    for ex, o in zip(examples, outcomes):
        gold = _gold_chars(ex)
        pred = _pred_chars(ex, predictions.get(ex.id), o.verdicts)
        if sopo:
            pred = _sopo_snapped(ex, pred)
        counts += (np.count_nonzero(gold & pred), np.count_nonzero(pred), np.count_nonzero(gold))
        has_g, has_p = bool(gold.any()), bool(pred.any())
        cases += (has_g and has_p, has_p, has_g)
        correct_cases += has_g == has_p
    p, r, f = pooled_prf(*counts)
    cp, cr, cf = pooled_prf(*cases)
    return CharScores(
        precision=100 * p,
        recall=100 * r,
        f1=100 * f,
        case_precision=100 * cp,
        case_recall=100 * cr,
        case_f1=100 * cf,
        case_accuracy=100 * correct_cases / len(examples),
    )


def dataset_scores(
    examples: Sequence[Example],
    predictions: Mapping[str, Prediction],
    threshold: float | None = None,
    char: bool = False,
    sopo: bool = False,
) -> MathScores:
    """Every step-level metric of one dataset's examples."""
    outcomes = [outcome(ex, predictions.get(ex.id), threshold) for ex in examples]
    return MathScores(
        n=len(examples),
        n_erroneous=sum(o.response_gold == 0 for o in outcomes),
        missing_predictions=sum(not _usable(predictions.get(ex.id)) for ex in examples),
        threshold=threshold,
        **_levels(outcomes),
        char=char_scores(examples, predictions, outcomes, sopo=False) if char else None,
        char_sopo_compat=char_scores(examples, predictions, outcomes, sopo=True) if char and sopo else None,
    )


def tuning_subset(examples: Sequence[Example], seed: int, size: int = TUNING_SIZE) -> list[Example]:
    """A seeded random subset of `size` responses (all when fewer), drawn from the examples sorted by id."""
    ordered = sorted(examples, key=lambda ex: ex.id)
    if len(ordered) <= size:
        return ordered
    picks = np.random.default_rng(seed).choice(len(ordered), size=size, replace=False)
    return [ordered[i] for i in sorted(picks)]


def sweep_objective(outcomes: Sequence[_Outcome]) -> float:
    """Harmonic mean of the step, response and first-error balanced F1s (over those defined; 0 if any is 0)."""
    f1s = [r.balanced_f1 for r in _levels(outcomes).values() if r.balanced_f1 is not None]
    return statistics.harmonic_mean(f1s) if f1s else 0.0


def tune_threshold(
    examples: Sequence[Example], predictions: Mapping[str, Prediction], seed: int = 0
) -> ThresholdChoice:
    """The grid threshold maximising `sweep_objective` on the seeded tuning subset (first maximum wins)."""
    subset = tuning_subset(examples, seed)
    preds = [predictions.get(ex.id) for ex in subset]
    objectives = [sweep_objective([outcome(ex, p, t) for ex, p in zip(subset, preds)]) for t in GRID]
    best = int(np.argmax(objectives))
    return ThresholdChoice(
        threshold=GRID[best], objective=objectives[best], tuning_ids=[ex.id for ex in subset], seed=seed
    )


def _thresholded(examples: Sequence[Example], predictions: Mapping[str, Prediction]) -> bool:
    """Whether any usable prediction of these examples is decided by its step scores."""
    for ex in examples:
        p = predictions.get(ex.id)
        if _usable(p) and p.step_verdicts is None and p.step_scores is not None:
            return True
    return False


def math_group(
    examples: Sequence[Example], predictions: Mapping[str, Prediction], seed: int = 0, sopo_compat: bool = False
) -> MathGroup:
    """The `math` results group of the step-level examples, per dataset and per suite."""
    if sopo_compat:
        warnings.warn(SOPO_WARNING, stacklevel=2)
    by_suite: dict[str, dict[str, list[Example]]] = {}
    for ex in examples:
        if ex.steps:
            by_suite.setdefault(suite_of(ex.dataset), {}).setdefault(ex.dataset, []).append(ex)
    datasets: dict[str, MathScores] = {}
    suites: dict[str, SuiteScores] = {}
    by_char = char_level_suites()
    for suite, members in sorted(by_suite.items()):
        every = [ex for exs in members.values() for ex in exs]
        choice = tune_threshold(every, predictions, seed) if _thresholded(every, predictions) else None
        for name, exs in sorted(members.items()):
            datasets[name] = dataset_scores(
                exs,
                predictions,
                choice.threshold if choice else None,
                char=suite in by_char,
                sopo=sopo_compat,
            )
        f1s = [f1 for n in members if (f1 := datasets[n].first_error.balanced_f1) is not None]
        suites[suite] = SuiteScores(
            datasets=sorted(members), mean_f1=float(np.mean(f1s)) if f1s else None, threshold=choice
        )
    return MathGroup(conventions=CONVENTIONS, datasets=datasets, suites=suites)
