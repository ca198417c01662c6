"""Metric formulas: the empty-example rule, pooled counts, Mu-SHROOM IoU/Cor and the bootstrap."""

from __future__ import annotations

import math
import zlib

import numpy as np
import pytest
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st

from shambench.scoring import metrics


def test_per_example_prf_conventions():
    # columns: (tp, predicted, gold)
    #   (1, 3, 1): P = 1/3, R = 1, F1 = 2 * 1/3 * 1 / (4/3) = 0.5
    #   (0, 0, 0): nothing gold, nothing predicted -> 1, 1, 1
    #   (0, 0, 4): gold but no prediction -> 0, 0, 0
    #   (0, 2, 0): prediction but no gold -> 0, 0, 0
    #   (0, 2, 2): disjoint -> 0, 0, 0
    #   (2, 4, 2): P = 0.5, R = 1, F1 = 2/3
    p, r, f = metrics.per_example_prf([1, 0, 0, 0, 0, 2], [3, 0, 0, 2, 2, 4], [1, 0, 4, 0, 2, 2])
    np.testing.assert_allclose(p, [1 / 3, 1, 0, 0, 0, 0.5])
    np.testing.assert_allclose(r, [1, 1, 0, 0, 0, 1])
    np.testing.assert_allclose(f, [0.5, 1, 0, 0, 0, 2 / 3])


def test_pooled_prf_uses_the_same_rule():
    # 3 of 5 predicted are gold, 3 of 6 gold found: P = 0.6, R = 0.5, F1 = 2 * 0.3 / 1.1 = 6/11.
    assert metrics.pooled_prf(3, 5, 6) == pytest.approx((0.6, 0.5, 6 / 11))
    assert metrics.pooled_prf(0, 0, 0) == (1.0, 1.0, 1.0)
    assert metrics.pooled_prf(0, 4, 0) == (0.0, 0.0, 0.0)


def test_iou_from_counts():
    # |ref ∩ pred| = 1 of |ref ∪ pred| = 3 -> 1/3; an empty union -> 1.0; disjoint -> 0.
    np.testing.assert_allclose(metrics.iou([1, 0, 0], [3, 0, 5]), [1 / 3, 1.0, 0.0])


def test_cor_spearman_with_ties():
    # ref [1, 1, .5, 0] ranks [3.5, 3.5, 2, 1]; pred [0, .9, .9, 0] ranks [1.5, 3.5, 3.5, 1.5].
    # Deviations from 2.5: [1, 1, -.5, -1.5] and [-1, 1, 1, -1]: covariance sum 1, squares 4.5 and 4,
    # rho = 1 / sqrt(18).
    got = metrics.cor(np.array([1, 1, 0.5, 0]), np.array([0, 0.9, 0.9, 0]))
    assert got == pytest.approx(1 / math.sqrt(18))


def test_cor_constant_vector_rule():
    zeros, ones = np.zeros(4), np.ones(4)
    # Both constant: same number of distinct values (one) -> 1.0, whatever the constants are.
    assert metrics.cor(zeros, ones) == 1.0
    # One constant, the other not: different numbers of distinct values -> 0.0.
    assert metrics.cor(zeros, np.array([0, 1, 0, 0.0])) == 0.0
    # Values equal after rounding to 8 decimals count as one level.
    assert metrics.cor(np.array([0.5, 0.5 + 1e-10, 0.5, 0.5]), zeros) == 1.0


def test_bootstrap_weights_are_seeded_counts_of_draws():
    w = metrics.bootstrap_weights(7, "summ/toy", 50, seed=3)
    assert w.shape == (50, 7)
    assert w.dtype == np.float32
    assert (w.sum(axis=1) == 7).all()  # each resample draws n examples
    assert (w == metrics.bootstrap_weights(7, "summ/toy", 50, seed=3)).all()
    assert (w != metrics.bootstrap_weights(7, "summ/other", 50, seed=3)).any()
    assert (w != metrics.bootstrap_weights(7, "summ/toy", 50, seed=4)).any()


def test_bootstrap_replicates_equal_means_of_index_resamples():
    # The same generator stream, read as explicit index resamples, must give the same replicate means.
    values = np.array([[0.0, 1.0, 0.5, 0.25, 1.0], [1.0, 1.0, 0.0, 0.0, 0.5]])
    reps = metrics.bootstrap_replicates(values, metrics.bootstrap_weights(5, "g", 40, seed=9))
    rng = np.random.default_rng([9, zlib.crc32(b"g")])
    idx = rng.integers(0, 5, size=(40, 5), dtype=np.int32)
    np.testing.assert_allclose(reps, values[:, idx].mean(axis=2), atol=1e-6)


def test_percentile_ci():
    # 2.5th and 97.5th percentiles of 0..100 with linear interpolation: 2.5 and 97.5.
    assert metrics.percentile_ci(np.arange(101.0)) == (2.5, 97.5)


def dense_weights_as_before(n: int, name: str, n_resamples: int, seed: int) -> np.ndarray:
    """The resample weights as the scorer drew them before blocks: one float32 matrix, one bincount per 64 rows."""
    rng = np.random.default_rng([seed, zlib.crc32(name.encode())])
    out = np.empty((n_resamples, n), np.float32)
    for lo in range(0, n_resamples, 64):
        rows = min(64, n_resamples - lo)
        idx = rng.integers(0, n, size=(rows, n), dtype=np.int32) + (np.arange(rows) * n)[:, None]
        out[lo : lo + rows] = np.bincount(idx.ravel(), minlength=rows * n).reshape(rows, n)
    return out


@pytest.mark.parametrize("n", [1, 37, 9001])
def test_resamples_in_blocks_give_the_replicates_of_one_dense_matrix_exactly(n):
    values = np.random.default_rng(n).random((2, n))
    dense = dense_weights_as_before(n, "summ/toy", 150, seed=5)
    before = np.einsum("ln,rn->lr", values.astype(np.float32), dense).astype(np.float64) / n
    for keep in (True, False):
        resamples = metrics.Resamples(n, "summ/toy", 150, seed=5, keep=keep)
        blocks = list(resamples)
        # 150 resamples: blocks of 64, 64 and 22 rows, counts in one byte each.
        assert [b.shape for b in blocks] == [(64, n), (64, n), (22, n)]
        assert all(b.dtype == np.uint8 for b in blocks)
        assert np.array_equal(np.concatenate(blocks), dense)
        assert np.array_equal(metrics.bootstrap_replicates(values, resamples), before)
        # Kept blocks are the same objects on the next pass; unkept ones are drawn again.
        assert (list(resamples)[0] is blocks[0]) == keep
    assert np.array_equal(metrics.bootstrap_weights(n, "summ/toy", 150, seed=5), dense)
    # Counts kept elsewhere come back as the same blocks: the same replicates, nothing drawn.
    kept = metrics.Resamples(n, "other name", 1, seed=0)
    kept.keep_counts(metrics.Resamples(n, "summ/toy", 150, seed=5, keep=False).counts())
    assert [b.shape for b in kept] == [(64, n), (64, n), (22, n)]
    assert np.array_equal(metrics.bootstrap_replicates(values, kept), before)


@settings(max_examples=80, deadline=None)
@given(st.lists(st.tuples(st.sampled_from([0.0, 0.25, 0.5, 1.0, 0.3333]), st.floats(0, 1)), min_size=2, max_size=40))
def test_spearman_equals_scipys(pairs):
    from scipy.stats import spearmanr

    a, b = (np.array(v) for v in zip(*pairs))
    # Vectors constant to 8 decimals take the official rule instead (test_cor_constant_vector_rule).
    assume(len(set(np.round(a, 8))) > 1 and len(set(np.round(b, 8))) > 1)
    # The same rho up to the order of the sums (per-item sums here, BLAS's dot product in scipy's).
    assert metrics.cor(a, b) == pytest.approx(spearmanr(a, b).correlation, abs=1e-12)


VALUES = st.sampled_from([0.0, -0.0, 0.25, 1 / 3, 1.0]) | st.floats(0, 1) | st.just(math.nan)


@settings(max_examples=150, deadline=None)
@given(st.lists(st.lists(VALUES, max_size=12), min_size=1, max_size=6))
@example([[0.1, 0.2, 0.3, 0.4], [0.5, 0.6, 0.7, 0.8], [0.9]])  # more distinct values than items can tabulate
@example([[0.0, 1.0, 0.0, 1.0, 0.0], [1.0, 1.0, -0.0], [0.5, 0.0]])  # a few distinct values: counted in a table
def test_ranks_and_distinct_values_within_items_are_those_of_each_item_alone(items):
    # Within its item: the values below it, then the mean of the places its ties span; a NaN equals no value.
    values = np.array([v for item in items for v in item], float)
    lengths = np.array([len(item) for item in items])
    item = np.repeat(np.arange(len(items)), lengths)
    expected = [sum(x < v for x in it) + (sum(x == v for x in it) + 1) / 2 for it in items for v in it]
    ranks = metrics._average_ranks(values, item, lengths)
    assert [r for r, v in zip(ranks.tolist(), values.tolist()) if v == v] == [
        e for e, v in zip(expected, values) if v == v
    ]
    distinct = [len({v for v in it if v == v}) + sum(v != v for v in it) for it in items]
    assert metrics._distinct_per_item(values, item, len(items)).tolist() == distinct


@settings(max_examples=60, deadline=None)
@given(
    st.lists(
        st.lists(st.tuples(st.sampled_from([0.0, 0.5, 1.0, 0.3333]), st.sampled_from([0.0, 0.2, 1.0])), max_size=12),
        min_size=1,
        max_size=8,
    )
)
def test_cor_of_many_items_at_once_is_each_items_cor(items):
    # Items laid end to end (empty and constant ones included) score exactly as each one alone.
    lengths = [len(item) for item in items]
    ref, pred = (np.array([pair[k] for item in items for pair in item], float) for k in (0, 1))
    many = metrics.cor_many(metrics.SoftVectors(ref, lengths), metrics.SoftVectors(pred, lengths))
    alone = [metrics.cor(np.array([r for r, _ in item]), np.array([p for _, p in item])) for item in items]
    assert many.tolist() == alone


def test_draw_counts_widen_past_255_and_match_a_per_row_count():
    from shambench.scoring.metrics import _row_counts

    idx = np.zeros((3, 300), np.int32)
    idx[1, :] = np.arange(300)
    idx[2, :10] = 7
    counts = _row_counts(idx, 300)
    assert counts.dtype == np.uint16
    assert counts[0, 0] == 300 and counts[0, 1:].sum() == 0
    assert (counts[1] == 1).all()
    assert counts[2, 7] == 10 and counts[2, 0] == 290
    assert (counts == np.stack([np.bincount(row, minlength=300) for row in idx])).all()


def test_average_precision_and_roc_auc_by_hand():
    gold, scores = np.array([1, 0, 1, 0]), np.array([0.9, 0.8, 0.7, 0.1])
    # thresholds 0.9 (P 1, recall +1/2), 0.8 (recall +0), 0.7 (P 2/3, recall +1/2)
    assert metrics.average_precision(gold, scores) == pytest.approx(1 / 2 + 1 / 3)
    # of the four (gold, not gold) pairs, 0.7 < 0.8 is the one ordered wrongly
    assert metrics.roc_auc(gold, scores) == pytest.approx(3 / 4)
    tied = np.array([0.5, 0.5])
    assert metrics.average_precision(np.array([1, 0]), tied) == 0.5 and metrics.roc_auc(np.array([1, 0]), tied) == 0.5


@settings(max_examples=300)
@given(st.lists(st.tuples(st.booleans(), st.sampled_from([0.0, 0.1, 0.25, 0.5, 0.9, 1.0])), min_size=2, max_size=40))
def test_average_precision_and_roc_auc_equal_scikit_learns(pairs):
    from sklearn.metrics import average_precision_score, roc_auc_score

    gold = np.array([g for g, _ in pairs], dtype=np.int8)
    scores = np.array([s for _, s in pairs])
    assume(0 < gold.sum() < len(gold))
    assert metrics.average_precision(gold, scores) == pytest.approx(average_precision_score(gold, scores), abs=1e-12)
    assert metrics.roc_auc(gold, scores) == pytest.approx(roc_auc_score(gold, scores), abs=1e-12)
