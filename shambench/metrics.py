"""Metric formulas shared by the scorer: precision/recall/F1 conventions, Mu-SHROOM IoU and Cor, bootstrap."""

from __future__ import annotations

import zlib

import numpy as np

EMPTY_RULE = (
    "no gold and no prediction: P=R=F1=1; otherwise an undefined precision or recall is 0 "
    "(gold but no prediction: P=R=F1=0; prediction but no gold: P=R=F1=0)"
)


def per_example_prf(tp: np.ndarray, n_pred: np.ndarray, n_gold: np.ndarray) -> tuple[np.ndarray, ...]:
    """Per-example precision, recall and F1 arrays under the SHAM-Bench empty-example rule (`EMPTY_RULE`)."""
    tp, n_pred, n_gold = (np.asarray(a, dtype=np.float64) for a in (tp, n_pred, n_gold))
    with np.errstate(divide="ignore", invalid="ignore"):
        p = np.where(n_pred > 0, tp / n_pred, 0.0)
        r = np.where(n_gold > 0, tp / n_gold, 0.0)
        f = np.where(p + r > 0, 2 * p * r / (p + r), 0.0)
    both_empty = (n_pred == 0) & (n_gold == 0)
    return tuple(np.where(both_empty, 1.0, a) for a in (p, r, f))


def pooled_prf(tp: float, n_pred: float, n_gold: float) -> tuple[float, float, float]:
    """Micro precision, recall and F1 from pooled counts, with the same empty rule as `per_example_prf`."""
    p, r, f = per_example_prf(np.array([tp]), np.array([n_pred]), np.array([n_gold]))
    return float(p[0]), float(r[0]), float(f[0])


def iou(intersection: np.ndarray, union: np.ndarray) -> np.ndarray:
    """Mu-SHROOM IoU per item from the sizes of the intersection and union of its character sets; 1.0 when
    the union is empty (nothing marked on either side)."""
    intersection, union = (np.asarray(a, dtype=np.float64) for a in (intersection, union))
    with np.errstate(divide="ignore", invalid="ignore"):
        return np.where(union > 0, intersection / union, 1.0)


def cor(ref: np.ndarray, pred: np.ndarray) -> float:
    """Mu-SHROOM Cor of two per-character probability vectors (official rule for constant vectors).

    An empty response gives two empty vectors; the official scorer would return Spearman's NaN there. They are
    treated as constant (the rule's intent): both have zero distinct values, so the score is 1.0, never NaN.
    """
    from scipy.stats import spearmanr

    ref_levels = len(set(np.round(ref, 8).tolist()))
    pred_levels = len(set(np.round(pred, 8).tolist()))
    if ref_levels <= 1 or pred_levels <= 1:
        return 1.0 if ref_levels == pred_levels else 0.0
    return float(spearmanr(ref, pred).correlation)


def bootstrap_weights(n: int, name: str, n_resamples: int, seed: int) -> np.ndarray:
    """How often each of `n` examples is drawn in each seeded resample, as float32 (shape resamples × n).

    The generator is seeded with `(seed, crc32(name))`, so a group's interval does not change when other
    groups are added. The draws do not depend on any prediction, so a `Scorer` keeps these weights and a
    rescoring costs one matrix product instead of a fresh resampling (counts are small integers: exact in
    float32, at 4 bytes per example and resample).
    """
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    out = np.empty((n_resamples, n), np.float32)
    # A few rows at a time keeps the int64 temporaries in cache (3x faster than one big draw; same stream).
    for lo in range(0, n_resamples, 64):
        rows = min(64, n_resamples - lo)
        idx = rng.integers(0, n, size=(rows, n), dtype=np.int32) + (np.arange(rows) * n)[:, None]
        out[lo : lo + rows] = np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n)
    return out


def bootstrap_replicates(values: np.ndarray, weights: np.ndarray) -> np.ndarray:
    """Means of `values` (shape levels × examples) over the resamples of `bootstrap_weights`: levels × resamples.

    Every level of a group is resampled with the same draws.
    """
    # einsum's own loop rather than BLAS: threaded BLAS stalls on a busy 2-core machine and gains nothing here.
    sums = np.einsum("ln,rn->lr", values.astype(np.float32), weights)
    return sums.astype(np.float64) / weights.shape[1]


def percentile_ci(replicates: np.ndarray) -> tuple[float, float]:
    """The central 95% percentile interval of bootstrap replicates."""
    lo, hi = np.percentile(replicates, [2.5, 97.5])
    return float(lo), float(hi)
