"""The alternative annotator test: the t distribution and the correction against scipy, hand-made cases, and the
whole test against an independent implementation (plain sets, scipy's t-test) on hand-made items and on the real
Mu-SHROOM languages."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench import Example, Prediction, Span
from shambench.schema import Annotations, covered_shares, marked_by_more_than
from shambench.scoring.alternative import (
    MIN_ITEMS,
    alternative_test,
    annotator_rows,
    by_adjusted,
    incomplete_beta,
    one_sided_t,
    t_cdf,
    t_sf,
)
from shambench.scoring.scorer import Scorer
from tests.conftest import require_shared

scipy_stats = pytest.importorskip("scipy.stats")
scipy_special = pytest.importorskip("scipy.special")

TEXT = "The cat sat. The dog ran."
WORDS = [Span(start=4, end=7), Span(start=8, end=11), Span(start=17, end=20), Span(start=21, end=24)]


@pytest.mark.parametrize("df", [2, 3, 5, 9, 29, 30, 57, 120, 499, 2000])
def test_t_distribution_equals_scipy_to_1e_12(df):
    for t in [-60.0, -12.5, -3.1, -1.0, -0.2, 0.0, 1e-9, 1e-6, 0.3, 1.0, 1.96, 2.5, 4.0, 8.0, 25.0, 60.0]:
        assert abs(t_cdf(t, df) - scipy_stats.t.cdf(t, df)) <= 1e-12
        assert abs(t_sf(t, df) - scipy_stats.t.sf(t, df)) <= 1e-12


@pytest.mark.parametrize("t", [-60.0, -3.1, -1e-4, -1e-11, 0.0, 1e-11, 1e-8, 1e-4, 0.3, 1.0, 4.0, 60.0])
def test_one_degree_of_freedom_is_the_cauchy_distribution(t):
    # With df = 1 scipy is off by up to 1.6e-9 near t = 0 (its sf(1e-8, 1) is 0.5 - 1.6e-9 - atan(1e-8) / pi), so
    # there the reference is the closed form; elsewhere scipy agrees to 1e-12.
    assert t_sf(t, 1) == pytest.approx(0.5 - math.atan(t) / math.pi, abs=1e-15)
    if abs(t) >= 1e-4:
        assert abs(t_sf(t, 1) - scipy_stats.t.sf(t, 1)) <= 1e-12


@settings(max_examples=300, deadline=None)
@given(
    st.floats(0.05, 500.0),
    st.floats(0.05, 500.0),
    st.floats(0.0, 1.0),
)
def test_incomplete_beta_equals_scipy(a, b, x):
    assert incomplete_beta(a, b, x) == pytest.approx(scipy_special.betainc(a, b, x), abs=1e-12)


@settings(max_examples=200, deadline=None)
@given(st.floats(-40, 40), st.integers(2, 3000))
def test_t_sf_equals_scipy_anywhere(t, df):
    assert abs(t_sf(t, df) - scipy_stats.t.sf(t, df)) <= 1e-12


def test_by_adjustment_by_hand():
    # m = 3, c(3) = 11/6: p_(k) * 3 * 11/6 / k is 0.055 for each.
    assert by_adjusted([0.03, 0.01, 0.02]) == pytest.approx([0.055, 0.055, 0.055])
    # m = 2, c(2) = 3/2: 0.5 * 2 * 1.5 / 2 = 0.75 and 0.001 * 2 * 1.5 / 1 = 0.003; 0.9 * 1.5 = 1.35 is capped at 1.
    assert by_adjusted([0.5, 0.001]) == pytest.approx([0.75, 0.003])
    assert by_adjusted([0.9, 0.001]) == pytest.approx([1.0, 0.003])
    # The step-up minimum: 0.03 (k = 2) scales to 0.03 * 5.5 / 2 = 0.0825, above 0.04 (k = 3) * 5.5 / 3 = 0.0733,
    # so it takes 0.0733.
    assert by_adjusted([0.001, 0.03, 0.04]) == pytest.approx([0.0055, 0.22 / 3, 0.22 / 3])
    assert by_adjusted([]) == []


def step_up_by(p, q):
    """Benjamini-Yekutieli by its definition: reject the k smallest, k the largest with p_(k) <= k q / (m c(m))."""
    m = len(p)
    c = sum(1 / i for i in range(1, m + 1))
    order = sorted(range(m), key=lambda i: p[i])
    k = max((r for r in range(1, m + 1) if p[order[r - 1]] <= r * q / (m * c)), default=0)
    return {order[r] for r in range(k)}


@settings(max_examples=200, deadline=None)
@given(st.lists(st.floats(0, 1), min_size=1, max_size=30))
def test_by_rejections_are_the_step_up_rule(p):
    adjusted = by_adjusted(p)
    assert {i for i, a in enumerate(adjusted) if a <= 0.05} == step_up_by(p, 0.05)


def test_no_variance_gives_p_0_or_1():
    assert one_sided_t(np.ones(40), 0.2) == (None, 0.0)
    assert one_sided_t(np.full(40, -1.0), 0.2) == (None, 1.0)
    # mean(d) = -0.2 exactly is H0's boundary: not above -epsilon.
    assert one_sided_t(np.zeros(40), 0.0) == (None, 1.0)


def test_one_annotator_by_hand():
    # 30 items: the detector aligns better on 10, worse on 10, equally on 10. d = +1 x10, -1 x10, 0 x10: mean 0,
    # sd = sqrt(20/29); t = 0.2 / (sd / sqrt(30)).
    det = np.array([1.0] * 10 + [0.0] * 10 + [0.5] * 10)
    hum = np.array([0.0] * 10 + [1.0] * 10 + [0.5] * 10)
    got = alternative_test(annotator_rows(["a"] * 30), det, hum, "iou", 0.2)
    (a,) = got.annotators
    assert (a.n, a.rho_f, a.rho_h, a.mean_d) == (30, 20 / 30, 20 / 30, 0.0)
    t = 0.2 / (math.sqrt(20 / 29) / math.sqrt(30))
    assert a.t == pytest.approx(t)
    assert a.p == pytest.approx(scipy_stats.t.sf(t, 29), abs=1e-12)
    assert a.p_adjusted == a.p and a.rejected == (a.p <= 0.05)
    assert got.omega == (1.0 if a.rejected else 0.0) and got.advantage == 20 / 30 and got.untested == {}


def test_annotator_rows_group_the_rows_by_annotator_in_id_order():
    got = annotator_rows(["b", "a", "b", "c#1", "a"])
    assert list(got) == ["a", "b", "c#1"]
    assert {name: idx.tolist() for name, idx in got.items()} == {"a": [1, 4], "b": [0, 2], "c#1": [3]}


def test_annotators_below_30_items_are_listed_untested():
    names = ["a"] * MIN_ITEMS + ["b"] * (MIN_ITEMS - 1)
    det = np.ones(len(names))
    got = alternative_test(annotator_rows(names), det, det * 0.5, "token_f1", 0.2)
    assert [a.annotator for a in got.annotators] == ["a"] and got.untested == {"b": MIN_ITEMS - 1}
    # The detector beats annotator a on every item: no variance, p = 0, rejected; omega 1, passed.
    assert (got.annotators[0].p, got.annotators[0].rejected, got.omega, got.passed) == (0.0, True, 1.0, True)


def test_nobody_tested_gives_no_verdict():
    got = alternative_test(annotator_rows(["a"] * 3), np.ones(3), np.ones(3), "iou", 0.2)
    assert (got.omega, got.passed, got.advantage, got.annotators) == (None, None, None, [])


def independent(rows, epsilon):
    """The test from (annotator, S_detector, S_annotator) rows: scipy's t-test and the step-up rule."""
    by = {}
    for name, sf, sh in rows:
        by.setdefault(name, []).append((sf >= sh, sh >= sf))
    tested = {}
    for name, ws in sorted(by.items()):
        if len(ws) < MIN_ITEMS:
            continue
        wf = np.array([w[0] for w in ws], float)
        wh = np.array([w[1] for w in ws], float)
        d = wf - wh
        if np.all(d == d[0]):
            p = 0.0 if d.mean() > -epsilon else 1.0
        else:
            p = scipy_stats.ttest_1samp(d, -epsilon, alternative="greater").pvalue
        tested[name] = (wf.mean(), wh.mean(), p)
    names = list(tested)
    rejected = step_up_by([tested[n][2] for n in names], 0.05)
    return {n: (*tested[n], i in rejected) for i, n in enumerate(names)}


def assert_equal_to_independent(got, expected):
    assert [a.annotator for a in got.annotators] == list(expected)
    for a in got.annotators:
        rho_f, rho_h, p, rejected = expected[a.annotator]
        assert abs(a.rho_f - rho_f) <= 1e-9 and abs(a.rho_h - rho_h) <= 1e-9
        assert abs(a.p - p) <= 1e-9 and a.rejected == rejected
    omega = sum(r for *_, r in expected.values()) / len(expected) if expected else None
    assert got.omega == pytest.approx(omega, abs=1e-9) if omega is not None else got.omega is None


def chars(spans):
    return {c for s in spans for c in range(s.start, s.end)}


def iou(a, b):
    return 1.0 if not a | b else len(a & b) / len(a | b)


def hand_items(rng, n_items):
    """Items of three or four annotators out of five, each marking random words, with soft labels."""
    out = []
    for k in range(n_items):
        who = rng.choice(["a", "b", "c", "d", "e"], size=int(rng.integers(3, 5)), replace=False)
        marked = {str(w): [WORDS[i] for i in np.flatnonzero(rng.random(4) < 0.4)] for w in who}
        lists = list(marked.values())
        out.append(
            Example(
                id=f"x{k:03d}",
                task="qa",
                dataset="toy",
                response=TEXT,
                hallu_spans=marked_by_more_than(lists, 0.5),
                soft_spans=[{"start": s, "end": e, "prob": p} for s, e, p in covered_shares(lists)],
                annotations=Annotations.leave_one_out(
                    marked, lambda ls: marked_by_more_than(ls, 0.5), "majority", soft=True
                ),
            )
        )
    return out


@pytest.mark.parametrize("epsilon", [0.0, 0.2, 0.5])
def test_hand_made_items_equal_the_independent_test(epsilon):
    rng = np.random.default_rng(7)
    examples = hand_items(rng, 90)
    predictions = [
        Prediction(id=ex.id, spans=[WORDS[i] for i in np.flatnonzero(rng.random(4) < 0.3)]) for ex in examples
    ]
    results = Scorer(examples, n_resamples=20, alt_epsilon=epsilon).score(predictions)
    got = results.groups.agreement.partitions["qa/toy"].alternative
    assert got.metric == "iou" and got.epsilon == epsilon
    rows = []
    for ex, pred in zip(examples, predictions):
        for r in ex.annotations.readings:
            others = chars(r.others)
            rows.append((r.annotator, iou(chars(pred.spans), others), iou(chars(r.spans), others)))
    expected = independent(rows, epsilon)
    assert len(expected) == 5
    assert_equal_to_independent(got, expected)


def test_the_real_mushroom_languages_with_the_overlap_detector_equal_the_independent_test():
    from shambench import load_benchmark
    from shambench.detection.detector import create_detector

    data = require_shared("mushroom")
    bench = load_benchmark("mushroom-multilingual", data_dir=data.parent)
    examples = bench.examples
    predictions = list(create_detector("overlap").predict(examples))
    results = Scorer(examples, n_resamples=20).score(predictions)
    by_id = {p.id: p for p in predictions}
    by_partition = {}
    for ex in examples:
        if ex.annotations is None or len(ex.annotations.readings) < 3:
            continue
        predicted = chars(by_id[ex.id].spans)
        for r in ex.annotations.readings:
            others = chars(r.others)
            by_partition.setdefault(ex.partition, []).append(
                (r.annotator, iou(predicted, others), iou(chars(r.spans), others))
            )
    partitions = results.groups.agreement.partitions
    languages = [p for p in partitions if p != "open_qa/mushroom"]
    assert len(languages) == 14
    tested = 0
    for name in languages:
        got = partitions[name].alternative
        assert got.metric == "iou"
        expected = independent(by_partition.get(name, []), 0.2)
        assert_equal_to_independent(got, expected)
        tested += len(expected)
    assert tested > 14
