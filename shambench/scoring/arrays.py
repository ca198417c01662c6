"""Array helpers shared by the scoring modules (the segmentation cache's checks, the corpus, the scorer, the
per-type figures): positions laid end to end, characters covered and scores of overlapping ranges on the global
axis."""

from __future__ import annotations

import numpy as np


def runs(firsts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The positions `firsts[k], ..., firsts[k] + counts[k] - 1` of every k, laid end to end (int64)."""
    counts = np.asarray(counts, np.int64)
    starts = np.cumsum(counts) - counts
    return np.repeat(np.asarray(firsts, np.int64) - starts, counts) + np.arange(int(counts.sum()), dtype=np.int64)


def char_counts(s: np.ndarray, e: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Per example, how many characters the ranges `[s, e)` cover (overlaps counted once).

    Sorted by start, a range adds only what reaches past every earlier range's end; ranges of different
    examples never overlap on the global axis, so no per-character mask is needed.
    """
    order = np.argsort(s, kind="stable")
    s, e, owner = s[order], e[order], owner[order]
    reach = np.concatenate([[0], np.maximum.accumulate(e)[:-1]]) if len(e) else e
    gain = np.maximum(0, e - np.maximum(s, reach))
    return np.bincount(owner, weights=gain, minlength=n)


def max_scores(starts: np.ndarray, ends: np.ndarray, s: np.ndarray, e: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per item, the max score `v` over the ranges that overlap it (0 where none does)."""
    out = np.zeros(len(starts))
    lo = np.searchsorted(ends, s.astype(ends.dtype), side="right")
    hi = np.searchsorted(starts, e.astype(starts.dtype), side="left")
    counts = np.maximum(hi - lo, 0)
    if counts.sum():
        np.maximum.at(out, runs(lo, counts), np.repeat(v, counts))
    return out
