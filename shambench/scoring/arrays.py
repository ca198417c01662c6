"""Array helpers shared by the scoring modules (the segmentation cache's checks, the corpus, the scorer)."""

from __future__ import annotations

import numpy as np


def runs(firsts: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """The positions `firsts[k], ..., firsts[k] + counts[k] - 1` of every k, laid end to end (int64)."""
    counts = np.asarray(counts, np.int64)
    starts = np.cumsum(counts) - counts
    return np.repeat(np.asarray(firsts, np.int64) - starts, counts) + np.arange(int(counts.sum()), dtype=np.int64)
