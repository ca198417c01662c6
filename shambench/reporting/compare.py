"""Paired comparison of two runs: a bootstrap over the example ids both runs scored.

Conventions (also stated in every `Comparison`):

- Only ids present in both runs are compared, and their examples must be identical (response and gold spans);
  each run's predictions are scored on that shared set with the SHAM-Bench per-example F1.
- By default only the shared ids that both runs predicted successfully are compared (a missing or failed
  prediction says nothing about the detector's output); `missing_as_empty` keeps them, scored as predicting
  nothing, as the results do.
- A task's F1 is the mean per-example F1 over its shared examples; overall is the unweighted mean over the
  non-step tasks, as in the results.
- Resampling is paired and stratified: each task's shared examples are resampled with replacement (seeded by
  `(seed, task)`, as the scorer does), and the same draw is applied to both runs. The overall replicate is
  the mean of the task replicates.
- The interval is the 2.5th-97.5th percentile of the replicate differences A - B.
- The p-value is two-sided, from the bootstrap distribution shifted to the null of no difference:
  `(1 + #{|d* - d| >= |d|}) / (1 + resamples)`, where d is the observed difference and d* a replicate.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

import numpy as np

from shambench.errors import DataError
from shambench.reporting.naming import run_name
from shambench.reporting.ranks import RankStability, pair_stability
from shambench.schema import Example, Model, Prediction
from shambench.scoring import metrics

LEVEL_NAMES = {"token": "span", "sentence": "sentence"}
CONVENTION = (
    "paired stratified bootstrap over the shared example ids (each task resampled with replacement, the same "
    "draws for both runs; overall = mean of the task replicates); 95% percentile interval of A - B; two-sided "
    "p = (1 + #{|d* - d| >= |d|}) / (1 + resamples)"
)


class Difference(Model):
    """A - B for one group and level."""

    group: str
    """A task name, or `overall`."""
    level: str
    """`span` (token F1) or `sentence`."""
    n: int
    """Shared examples in the group."""
    f1_a: float
    """F1 of run A on the shared examples."""
    f1_b: float
    """F1 of run B on the shared examples."""
    diff: float
    """f1_a - f1_b."""
    ci: tuple[float, float]
    """95% percentile-bootstrap interval of the difference."""
    p_value: float
    """Two-sided bootstrap p-value of no difference."""


class RunCounts(Model):
    """How many of a run's examples have a successful prediction, a failed one, or none."""

    predicted: int
    """Examples with a successful prediction."""
    failed: int
    """Examples whose prediction carries a detector error."""
    missing: int
    """Examples without any prediction."""


def run_counts(examples: Sequence[Example], predictions: Sequence[Prediction]) -> RunCounts:
    """The counts of a run's examples by the state of their prediction."""
    by_id = {p.id: p for p in predictions}
    states = [by_id.get(ex.id) for ex in examples]
    failed = sum(p is not None and p.error is not None for p in states)
    missing = sum(p is None for p in states)
    return RunCounts(predicted=len(states) - failed - missing, failed=failed, missing=missing)


class Comparison(Model):
    """The paired comparison of two runs."""

    run_a: str
    """Run A (its detector name or directory)."""
    run_b: str
    """Run B."""
    n_shared: int
    """Example ids scored by both runs."""
    only_a: int
    """Ids only run A has (left out)."""
    only_b: int
    """Ids only run B has (left out)."""
    counts_a: RunCounts | None = None
    """Run A's examples by the state of their prediction."""
    counts_b: RunCounts | None = None
    """Run B's examples by the state of their prediction."""
    missing_as_empty: bool = False
    """Whether shared ids without a successful prediction in a run were compared, scored as empty."""
    unpredicted: int = 0
    """Shared ids left out because a run has no successful prediction for them (0 with `missing_as_empty`)."""
    n_resamples: int
    """Bootstrap resamples."""
    seed: int
    """Bootstrap seed."""
    convention: str = CONVENTION
    """How the interval and p-value are computed."""
    differences: list[Difference]
    """Overall first, then per task, for each level."""
    ranks: RankStability | None = None
    """The two runs (ids `A`, `B`) under every convention, with their rank intervals and whether their order
    holds (`shambench.reporting.ranks`); None when no task of the overall was compared."""


def bootstrap_difference(f1_a: np.ndarray, f1_b: np.ndarray, weights: np.ndarray | Iterable[np.ndarray]) -> np.ndarray:
    """Replicates of mean(f1_a) - mean(f1_b) under the resamples (a resamples × examples matrix or `Resamples`)."""
    reps = metrics.bootstrap_replicates(np.stack([f1_a, f1_b]), weights)
    return reps[0] - reps[1]


def p_value(observed: float, replicates: np.ndarray) -> float:
    """Two-sided p-value of no difference, from the replicates shifted to the null (see the module docstring)."""
    extreme = np.count_nonzero(np.abs(replicates - observed) >= abs(observed) - 1e-12)
    return float((1 + extreme) / (1 + len(replicates)))


def _difference(group: str, level: str, f1_a: float, f1_b: float, reps: np.ndarray, n: int) -> Difference:
    diff = f1_a - f1_b
    return Difference(
        group=group,
        level=LEVEL_NAMES[level],
        n=n,
        f1_a=f1_a,
        f1_b=f1_b,
        diff=diff,
        ci=metrics.percentile_ci(reps),
        p_value=p_value(diff, reps),
    )


def shared_examples(a: Sequence[Example], b: Sequence[Example]) -> tuple[list[Example], int, int]:
    """The examples of `a` whose ids `b` has too (in `a`'s order), and how many ids only `a` or only `b` has.

    DataError when a shared id's response or gold spans differ between the two: the runs did not see the same
    example, so no paired comparison is possible.
    """
    by_id = {ex.id: ex for ex in b}
    shared = [ex for ex in a if ex.id in by_id]
    for ex in shared:
        other = by_id[ex.id]
        if (ex.response, ex.hallu_spans, ex.steps) != (other.response, other.hallu_spans, other.steps):
            raise DataError(f"example {ex.id!r} differs between the two runs (response or gold spans)")
    if not shared:
        held = [", ".join(sorted({ex.partition for ex in run})) or "none" for run in (a, b)]
        raise DataError(f"the two runs share no example id (A holds {held[0]}; B holds {held[1]})")
    return shared, len(a) - len(shared), len(b) - len(shared)


def compare_predictions(
    examples: Sequence[Example],
    predictions_a: Sequence[Prediction],
    predictions_b: Sequence[Prediction],
    names: tuple[str, str] = ("A", "B"),
    n_resamples: int = 1000,
    seed: int = 0,
    excluded: tuple[int, int] = (0, 0),
) -> Comparison:
    """The paired comparison of two prediction sets on the same examples (predictions for other ids ignored)."""
    from shambench.scoring.scorer import LEVELS, Scorer

    scorer = Scorer(examples, n_resamples=n_resamples, seed=seed)
    wanted = set(scorer.index)
    kept_a = [p for p in predictions_a if p.id in wanted]
    kept_b = [p for p in predictions_b if p.id in wanted]
    prf_a, prf_b = scorer.example_prf(kept_a), scorer.example_prf(kept_b)
    overall_tasks = [t for t in scorer.groups["tasks"] if t not in scorer.step_tasks]
    differences = []
    for level in LEVELS:
        a, b = prf_a[level][2], prf_b[level][2]
        per_task = {}
        for task, idx in scorer.groups["tasks"].items():
            reps = bootstrap_difference(a[idx], b[idx], scorer.bootstrap_weights(task, len(idx)))
            per_task[task] = (float(a[idx].mean()), float(b[idx].mean()), reps, len(idx))
        if overall_tasks:
            fa, fb, reps, n = (
                float(np.mean([per_task[t][0] for t in overall_tasks])),
                float(np.mean([per_task[t][1] for t in overall_tasks])),
                np.mean([per_task[t][2] for t in overall_tasks], axis=0),
                sum(per_task[t][3] for t in overall_tasks),
            )
            differences.append(_difference("overall", level, fa, fb, reps, n))
        differences.extend(_difference(task, level, *vals) for task, vals in per_task.items())
    return Comparison(
        run_a=names[0],
        run_b=names[1],
        n_shared=len(examples),
        only_a=excluded[0],
        only_b=excluded[1],
        n_resamples=n_resamples,
        seed=seed,
        differences=differences,
        ranks=pair_stability(scorer, (kept_a, kept_b), names) if overall_tasks else None,
    )


def compare_runs(
    run_a: str | Path, run_b: str | Path, n_resamples: int = 1000, seed: int = 0, missing_as_empty: bool = False
) -> Comparison:
    """The paired comparison of two run directories (their examples are re-created from their configs): over the
    shared ids both predicted successfully, or every shared id with `missing_as_empty`."""
    from shambench.io import Journal
    from shambench.runs.files import JOURNAL
    from shambench.runs.rundir import load_config, run_examples

    loaded = []
    for run in (Path(run_a), Path(run_b)):
        config = load_config(run)
        loaded.append((run_name(config), run_examples(config), list(Journal(run / JOURNAL).read().values())))
    (name_a, ex_a, pred_a), (name_b, ex_b, pred_b) = loaded
    shared, only_a, only_b = shared_examples(ex_a, ex_b)
    names = (name_a, name_b) if name_a != name_b else (str(run_a), str(run_b))
    kept = shared
    if not missing_as_empty:
        ok = {p.id for p in pred_a if p.error is None} & {p.id for p in pred_b if p.error is None}
        kept = [ex for ex in shared if ex.id in ok]
        if not kept:
            raise DataError(
                "no shared example was predicted successfully by both runs (--missing-as-empty compares them "
                "anyway, scoring missing and failed predictions as empty)"
            )
    result = compare_predictions(kept, pred_a, pred_b, names, n_resamples, seed, (only_a, only_b))
    return result.model_copy(
        update={
            "counts_a": run_counts(ex_a, pred_a),
            "counts_b": run_counts(ex_b, pred_b),
            "missing_as_empty": missing_as_empty,
            "unpredicted": len(shared) - len(kept),
        }
    )
