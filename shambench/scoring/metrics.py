"""Metric formulas shared by the scorer: precision/recall/F1 conventions, Mu-SHROOM IoU and Cor, bootstrap."""

from __future__ import annotations

import math
import zlib
from collections.abc import Iterable, Iterator, Sequence

import numpy as np

EMPTY_RULE = (
    "no gold and no prediction: P=R=F1=1; otherwise an undefined precision or recall is 0 "
    "(gold but no prediction: P=R=F1=0; prediction but no gold: P=R=F1=0)"
)
# What the rule means for a reader of a table, in one sentence.
EMPTY_RULE_SENTENCE = (
    "Under the paper's per-example convention an example with no hallucination and no predicted span scores F1 = 1, "
    "so a detector that predicts nothing earns full credit on every hallucination-free example."
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


def exact_mean(values: np.ndarray | Sequence[float]) -> float:
    """The exactly rounded mean (math.fsum / n): independent of the order of the values, so the mean of stored
    per-example values, in any order, equals the reported figure."""
    listed = np.asarray(values, dtype=np.float64).tolist()
    return math.fsum(listed) / len(listed)


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
    ref, pred = np.asarray(ref, float), np.asarray(pred, float)
    return float(cor_many(SoftVectors(ref, [len(ref)]), SoftVectors(pred, [len(pred)]))[0])


class SoftVectors:
    """Per-character probability vectors of many items laid end to end, as Cor reads them: per item, its number
    of distinct values (to 8 decimals) and, when asked for, its values' average ranks within the item; computed
    once for all items in a few numpy calls, so gold soft labels scored on every pass are prepared once."""

    def __init__(self, values: np.ndarray, lengths: Sequence[int] | np.ndarray):
        self.values = np.asarray(values, float)
        self.lengths = np.asarray(lengths, np.int64)
        """Per item, its number of characters."""
        self.item = np.repeat(np.arange(len(self.lengths)), self.lengths)
        """Per character, the number of its item."""
        self.levels = _distinct_per_item(np.round(self.values, 8), self.item, len(self.lengths))
        self._ranks: np.ndarray | None = None

    def ranks(self) -> np.ndarray:
        """Each value's 1-based average rank within its item (scipy's `rankdata(method="average")` per item)."""
        if self._ranks is None:
            self._ranks = _average_ranks(self.values, self.item, self.lengths)
        return self._ranks


def cor_many(ref: SoftVectors, pred: SoftVectors) -> np.ndarray:
    """Per item, the Cor of a reference and a predicted vector of the same items (the official rule first: when
    either vector is constant, 1.0 if both have as many distinct values, else 0.0; else Spearman's rho, the
    Pearson correlation of their average ranks)."""
    constant = (ref.levels <= 1) | (pred.levels <= 1)
    rho = np.zeros(len(ref.lengths))
    ranked = ~constant[ref.item]
    if ranked.any():
        rho[~constant] = _pearson_per_item(ref.ranks()[ranked], pred.ranks()[ranked], ref.lengths[~constant])
    return np.where(constant, (ref.levels == pred.levels).astype(float), rho)


def _sorted_within_items(values: np.ndarray, item: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The order that sorts each item's values (items kept in order), the item of each sorted value, and whether
    each sorted value differs from the one before it in its item (the first of a run of equal values)."""
    order = np.lexsort((values, item))
    xs, owner = values[order], item[order]
    new = np.ones(len(xs), bool)
    new[1:] = (xs[1:] != xs[:-1]) | (owner[1:] != owner[:-1])
    return order, owner, new


def _counted_within_items(values: np.ndarray, item: np.ndarray, n_items: int) -> tuple[np.ndarray, np.ndarray] | None:
    """Per item and distinct value (in increasing order), how many of the item's values equal it (items × distinct
    values), and each value's place in that table (flattened); None when the table would hold more cells than there
    are values (many distinct values) or a NaN is among them (which no other value equals, itself included).

    Soft labels take a few distinct values: counted in a table, no sort within items is needed."""
    distinct = np.unique(values)
    if n_items * len(distinct) > len(values) or (len(distinct) and np.isnan(distinct[-1])):
        return None
    place = item * len(distinct) + np.searchsorted(distinct, values)
    return np.bincount(place, minlength=n_items * len(distinct)).reshape(n_items, len(distinct)), place


def _distinct_per_item(values: np.ndarray, item: np.ndarray, n_items: int) -> np.ndarray:
    """Per item, how many distinct values it has (as a set of floats counts them)."""
    counted = _counted_within_items(values, item, n_items)
    if counted is not None:
        return np.count_nonzero(counted[0], axis=1)
    _, owner, new = _sorted_within_items(values, item)
    return np.bincount(owner[new], minlength=n_items)


def _average_ranks(values: np.ndarray, item: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Each value's 1-based rank within its item, ties given the mean of the ranks they span."""
    counted = _counted_within_items(values, item, len(lengths))
    if counted is not None:
        table, place = counted
        # The values of its item below it, then the mean of the places its ties span (as from a sort, below).
        below = np.cumsum(table, axis=1) - table
        return (below + (table + 1) / 2).ravel()[place]
    order, owner, new = _sorted_within_items(values, item)
    firsts = np.flatnonzero(new)
    sizes = np.diff(np.append(firsts, len(values)))
    # A tie's first place counted from its item's first character.
    local = firsts - (np.cumsum(lengths) - lengths)[owner[firsts]]
    ranks = np.empty(len(values))
    ranks[order] = (local + (sizes + 1) / 2)[np.cumsum(new) - 1]
    return ranks


def average_precision(gold: np.ndarray, scores: np.ndarray) -> float:
    """Average precision (AUPRC) of scores against 0/1 gold, which must hold both classes: the precision at each
    distinct score from the highest down, weighted by the recall it adds (scikit-learn's average_precision_score,
    which the base install does not carry: it brings scipy)."""
    order = np.argsort(-scores, kind="stable")
    ranked, hits = scores[order], np.cumsum(gold[order])
    last = np.append(np.flatnonzero(ranked[1:] != ranked[:-1]), len(ranked) - 1)  # each distinct score's last place
    tp = hits[last]
    return float(np.sum(np.diff(tp, prepend=0) / tp[-1] * (tp / (last + 1))))


def roc_auc(gold: np.ndarray, scores: np.ndarray) -> float:
    """Area under the ROC curve of scores against 0/1 gold, which must hold both classes: the chance that a gold
    value outscores one that is not, ties counting half (the Mann-Whitney statistic; scikit-learn's roc_auc_score)."""
    positive = gold.astype(bool)
    ranks = _average_ranks(scores, np.zeros(len(scores), np.int64), np.array([len(scores)]))
    n_pos = int(positive.sum())
    return float((ranks[positive].sum() - n_pos * (n_pos + 1) / 2) / (n_pos * (len(scores) - n_pos)))


def _pearson_per_item(a: np.ndarray, b: np.ndarray, lengths: np.ndarray) -> np.ndarray:
    """Per item, the Pearson correlation of its values of `a` and `b` (laid end to end, items of `lengths`),
    clipped to [-1, 1] as `np.corrcoef` clips it."""
    item = np.repeat(np.arange(len(lengths)), lengths)
    n = lengths.astype(float)
    da = a - (np.bincount(item, a, len(lengths)) / n)[item]
    db = b - (np.bincount(item, b, len(lengths)) / n)[item]
    sab, saa, sbb = (np.bincount(item, x * y, len(lengths)) for x, y in ((da, db), (da, da), (db, db)))
    return np.clip(sab / np.sqrt(saa) / np.sqrt(sbb), -1.0, 1.0)


# Resamples are drawn 64 at a time: this block size fixes how the generator's stream is read, so it must not
# change (the intervals of every stored result depend on it).
_BLOCK = 64


def _drawn_counts(n: int, name: str, n_resamples: int, seed: int) -> Iterator[np.ndarray]:
    """How often each of `n` examples is drawn in each seeded resample: blocks of up to 64 resamples × n, in uint8
    (widened for a block where an example is drawn more than 255 times, which no real group comes near).

    The generator is seeded with `(seed, crc32(name))`, so a group's interval does not change when other groups
    are added. Only one block of draws exists at a time: memory is 4 bytes per example and block row, whatever
    the number of resamples.
    """
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    for lo in range(0, n_resamples, _BLOCK):
        rows = min(_BLOCK, n_resamples - lo)
        yield _row_counts(rng.integers(0, n, size=(rows, n), dtype=np.int32), n)


# Draws counted by one `bincount` call, at most: enough to make the calls few, few enough to bound the int64 copies.
_COUNTED_DRAWS = 1 << 22


def _row_counts(idx: np.ndarray, n: int) -> np.ndarray:
    """Per row of drawn positions, how often each of `n` positions was drawn (uint8 unless a count is larger)."""
    out = np.empty(idx.shape, np.uint8)
    step = max(1, _COUNTED_DRAWS // max(n, 1))
    for lo in range(0, len(idx), step):
        part = idx[lo : lo + step]
        # Row r's positions shifted by r * n: one bincount counts every row of the part at once.
        shifted = part + (np.arange(len(part), dtype=np.int64) * n)[:, None]
        counts = np.bincount(shifted.ravel(), minlength=part.size).reshape(part.shape)
        top = int(counts.max()) if counts.size else 0
        if top > np.iinfo(out.dtype).max:
            out = out.astype(np.min_scalar_type(top))
        out[lo : lo + step] = counts
    return out


class Resamples:
    """The seeded bootstrap resamples of a group of `n` examples, as blocks of per-example draw counts.

    The draws do not depend on any prediction, so with `keep` the blocks are kept after the first pass (one byte
    per example and resample) and a rescoring costs only the products; without it every pass draws them again,
    one block at a time, so memory stays linear in `n` whatever the number of resamples.
    """

    def __init__(self, n: int, name: str, n_resamples: int, seed: int, keep: bool = True):
        self.n, self.name, self.n_resamples, self.seed, self.keep = n, name, n_resamples, seed, keep
        self._kept: list[np.ndarray] | None = None

    def __iter__(self) -> Iterator[np.ndarray]:
        if self._kept is not None:
            return iter(self._kept)
        blocks = _drawn_counts(self.n, self.name, self.n_resamples, self.seed)
        if not self.keep:
            return blocks
        self._kept = list(blocks)
        return iter(self._kept)

    def counts(self) -> np.ndarray:
        """Every resample's draw counts as one matrix (resamples × n), in the blocks' widest integer type."""
        blocks = list(self)
        return np.concatenate(blocks) if blocks else np.empty((0, self.n), np.uint8)

    def keep_counts(self, counts: np.ndarray) -> None:
        """Keep `counts` (what `counts()` of the same resamples gave before) as the blocks, instead of drawing them:
        the same rows in the same blocks, so every product over them is the same."""
        self._kept = [counts[lo : lo + _BLOCK] for lo in range(0, len(counts), _BLOCK)]


def bootstrap_weights(n: int, name: str, n_resamples: int, seed: int) -> np.ndarray:
    """How often each of `n` examples is drawn in each seeded resample, as one float32 matrix (resamples × n).

    The dense form of `Resamples`, for small groups and tests; the scorer iterates `Resamples` instead.
    """
    return Resamples(n, name, n_resamples, seed, keep=False).counts().astype(np.float32)


def bootstrap_replicates(values: np.ndarray, weights: np.ndarray | Iterable[np.ndarray]) -> np.ndarray:
    """Means of `values` (shape levels × examples) over the resamples: levels × resamples.

    `weights` is a resamples × examples matrix of draw counts (`bootstrap_weights`) or `Resamples`. Every level of
    a group is resampled with the same draws.
    """
    if isinstance(weights, np.ndarray):
        dense = weights
        weights = [dense[lo : lo + _BLOCK] for lo in range(0, len(dense), _BLOCK)]
    v = values.astype(np.float32)
    # einsum's own loop rather than BLAS: threaded BLAS stalls on a busy 2-core machine and gains nothing here.
    # Each replicate is the float32 dot product of one resample row, so the blocks give the very same sums as
    # one whole matrix would.
    sums = [np.einsum("ln,rn->lr", v, block.astype(np.float32, copy=False)) for block in weights]
    out = np.concatenate(sums, axis=1) if sums else np.empty((len(values), 0), np.float32)
    return out.astype(np.float64) / values.shape[1]


def percentile_ci(replicates: np.ndarray) -> tuple[float, float]:
    """The central 95% percentile interval of bootstrap replicates."""
    lo, hi = np.percentile(replicates, [2.5, 97.5])
    return float(lo), float(hi)
