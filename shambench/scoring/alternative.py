"""The alternative annotator test (Calderon, Reichart and Dror, ACL 2025): can a detector stand in for an annotator?

For each annotator j of a partition with individual annotators, on every item j read that has at least two other
annotators: the gold of the others (the partition's own leave-one-out rule, as for the human ceiling), the
alignment S of the detector and of j with that gold, W_f = [S(detector) >= S(j)], W_h = [S(j) >= S(detector)] and
d = W_f - W_h. rho_f(j) and rho_h(j) are the means of W_f and W_h. H0: mean(d) <= -epsilon against H1: mean(d) >
-epsilon, by a one-sided one-sample t-test on d (when d has no variance, p = 0 if mean(d) > -epsilon, else 1), for
every annotator with at least `MIN_ITEMS` such items; their p-values are corrected by Benjamini-Yekutieli at q. The
winning rate omega is the share of tested annotators whose H0 is rejected; the detector passes when omega >= 0.5.
The average advantage probability is the mean of rho_f over the tested annotators.

The Student t distribution is computed here (the regularized incomplete beta by its continued fraction), since
scipy is not a dependency of the base install.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence

import numpy as np
from pydantic import ConfigDict

from shambench.schema import Model, Name

ALT_EPSILON = 0.2
"""The paper's epsilon for skilled annotators (`--alt-epsilon` changes it)."""
ALT_Q = 0.05
"""The false discovery rate of the Benjamini-Yekutieli correction."""
MIN_ITEMS = 30
"""An annotator is tested with at least this many items that have two or more other annotators."""
PASS_OMEGA = 0.5
"""The detector passes when at least this share of the tested annotators is beaten."""
METRICS = {
    "iou": "Mu-SHROOM IoU of characters against the others' gold (1.0 when both are empty)",
    "token_f1": "the scorer's per-example token F1 against the others' gold (empty-example rule included)",
}
CONVENTION = (
    "the alternative annotator test (Calderon, Reichart and Dror, ACL 2025): per annotator j with at least "
    f"{MIN_ITEMS} items having two or more other annotators, on each such item S = alignment with the gold of the "
    "others (the partition's leave-one-out rule; `metric` says which alignment), W_f = [S(detector) >= S(j)], "
    "W_h = [S(j) >= S(detector)], d = W_f - W_h; one-sided one-sample t-test of H0 mean(d) <= -epsilon (no "
    "variance: p = 0 if mean(d) > -epsilon, else 1); Benjamini-Yekutieli at q over the annotators; omega = share "
    "of tested annotators rejected; pass when omega >= 0.5; advantage = mean of rho_f over tested annotators"
)


class AnnotatorTest(Model):
    """The test against one annotator."""

    model_config = ConfigDict(allow_inf_nan=False)

    annotator: Name
    """The annotator's id, as the source names them."""
    n: int
    """Items of the annotator with at least two other annotators."""
    rho_f: float
    """Share of those items where the detector aligns with the others at least as well as the annotator."""
    rho_h: float
    """Share where the annotator aligns at least as well as the detector."""
    mean_d: float
    """Mean of d = W_f - W_h (rho_f - rho_h)."""
    t: float | None
    """The t statistic (mean(d) + epsilon) / (sd(d) / sqrt(n)); None when d has no variance."""
    p: float
    """One-sided p-value of H0 mean(d) <= -epsilon."""
    p_adjusted: float
    """The Benjamini-Yekutieli adjusted p-value over the partition's tested annotators."""
    rejected: bool
    """H0 rejected (p_adjusted <= q): the detector is as good an annotator as this one."""


class AlternativeTest(Model):
    """The alternative annotator test of a detector on one partition."""

    model_config = ConfigDict(allow_inf_nan=False)

    metric: str
    """The alignment S: `iou` (Mu-SHROOM partitions) or `token_f1` (the others)."""
    epsilon: float
    """The tolerance of H0: mean(d) <= -epsilon."""
    q: float
    """The false discovery rate of the Benjamini-Yekutieli correction."""
    annotators: list[AnnotatorTest]
    """Per tested annotator, in id order."""
    untested: dict[str, int]
    """Annotators with fewer than the required items, with their number of items (two or more others)."""
    omega: float | None
    """Winning rate: share of tested annotators whose H0 is rejected; None when no annotator was tested."""
    passed: bool | None
    """omega >= 0.5; None when no annotator was tested."""
    advantage: float | None
    """Average advantage probability: mean of rho_f over the tested annotators; None when none was."""


def _beta_fraction(a: float, b: float, x: float) -> float:
    """The continued fraction of the regularized incomplete beta (modified Lentz), for x < (a + 1) / (a + b + 2)."""
    tiny, eps = 1e-300, 1e-16
    c, d = 1.0, 1.0 - (a + b) * x / (a + 1.0)
    d = 1.0 / (d if abs(d) > tiny else tiny)
    h = d
    for m in range(1, 10_000):
        for num in (
            m * (b - m) * x / ((a + 2 * m - 1) * (a + 2 * m)),
            -(a + m) * (a + b + m) * x / ((a + 2 * m) * (a + 2 * m + 1)),
        ):
            d = 1.0 + num * d
            d = 1.0 / (d if abs(d) > tiny else tiny)
            c = 1.0 + num / c
            c = c if abs(c) > tiny else tiny
            h *= d * c
        if abs(d * c - 1.0) < eps:
            return h
    raise ArithmeticError(f"incomplete beta did not converge (a={a}, b={b}, x={x})")


def incomplete_beta(a: float, b: float, x: float, y: float | None = None) -> float:
    """The regularized incomplete beta function I_x(a, b), for a, b > 0 and 0 <= x <= 1 (`y`: 1 - x, when the
    caller knows it more precisely than the subtraction would give it)."""
    y = 1.0 - x if y is None else y
    if x <= 0.0:
        return 0.0
    if y <= 0.0:
        return 1.0
    log_front = a * math.log(x) + b * math.log(y) - (math.lgamma(a) + math.lgamma(b) - math.lgamma(a + b))
    if x < (a + 1.0) / (a + b + 2.0):
        return math.exp(log_front) * _beta_fraction(a, b, x) / a
    return 1.0 - math.exp(log_front) * _beta_fraction(b, a, y) / b


def t_sf(t: float, df: float) -> float:
    """P(T > t) for Student's t with `df` degrees of freedom (the one-sided upper p-value)."""
    # x = df / (df + t^2) and 1 - x = t^2 / (df + t^2), each computed directly: near t = 0 the subtraction would
    # lose the digits the tail is made of.
    tail = 0.5 * incomplete_beta(df / 2.0, 0.5, df / (df + t * t), t * t / (df + t * t))
    return tail if t > 0 else 1.0 - tail


def t_cdf(t: float, df: float) -> float:
    """P(T <= t) for Student's t with `df` degrees of freedom."""
    return t_sf(-t, df)


def one_sided_t(d: np.ndarray, epsilon: float) -> tuple[float | None, float]:
    """(t, p) of the one-sided one-sample t-test of H0 mean(d) <= -epsilon; t is None (and p 0 or 1) when d has no
    variance."""
    n = len(d)
    mean = math.fsum(d.tolist()) / n
    sd = float(np.std(d, ddof=1)) if n > 1 else 0.0
    if sd == 0.0:
        return None, 0.0 if mean > -epsilon else 1.0
    t = (mean + epsilon) / (sd / math.sqrt(n))
    return t, t_sf(t, n - 1)


def by_adjusted(p: Sequence[float]) -> list[float]:
    """Benjamini-Yekutieli adjusted p-values (step-up, capped at 1), in the order given."""
    m = len(p)
    if not m:
        return []
    harmonic = math.fsum(1.0 / k for k in range(1, m + 1))
    order = np.argsort(np.asarray(p, float), kind="stable")
    scaled = np.asarray(p, float)[order] * m * harmonic / np.arange(1, m + 1)
    adjusted = np.minimum(1.0, np.minimum.accumulate(scaled[::-1])[::-1])
    out = np.empty(m)
    out[order] = adjusted
    return out.tolist()


def annotator_rows(annotators: Sequence[str]) -> dict[str, np.ndarray]:
    """Per annotator, in id order, the positions of its rows (`annotators`: each row's annotator)."""
    rows: dict[str, list[int]] = {}
    for k, name in enumerate(annotators):
        rows.setdefault(name, []).append(k)
    return {name: np.array(rows[name], np.int64) for name in sorted(rows)}


def alternative_test(
    annotators: Mapping[str, np.ndarray],
    detector: np.ndarray,
    human: np.ndarray,
    metric: str,
    epsilon: float = ALT_EPSILON,
) -> AlternativeTest:
    """The test on one partition, from its eligible rows (items with two or more other annotators): per annotator
    in id order, the positions of its rows (`annotator_rows`); per row, the detector's alignment and the
    annotator's, against the same gold of the others."""
    w_f = (detector >= human).astype(float)
    w_h = (human >= detector).astype(float)
    tested, untested = [], {}
    for name, idx in annotators.items():
        if len(idx) < MIN_ITEMS:
            untested[name] = len(idx)
            continue
        d = w_f[idx] - w_h[idx]
        t, p = one_sided_t(d, epsilon)
        rho_f, rho_h = (math.fsum(w[idx].tolist()) / len(idx) for w in (w_f, w_h))
        tested.append((name, len(idx), rho_f, rho_h, math.fsum(d.tolist()) / len(idx), t, p))
    adjusted = by_adjusted([row[-1] for row in tested])
    results = [
        AnnotatorTest(
            annotator=name,
            n=n,
            rho_f=rho_f,
            rho_h=rho_h,
            mean_d=mean_d,
            t=t,
            p=p,
            p_adjusted=adj,
            rejected=adj <= ALT_Q,
        )
        for (name, n, rho_f, rho_h, mean_d, t, p), adj in zip(tested, adjusted)
    ]
    omega = sum(r.rejected for r in results) / len(results) if results else None
    return AlternativeTest(
        metric=metric,
        epsilon=epsilon,
        q=ALT_Q,
        annotators=results,
        untested=untested,
        omega=omega,
        passed=None if omega is None else omega >= PASS_OMEGA,
        advantage=math.fsum(r.rho_f for r in results) / len(results) if results else None,
    )
