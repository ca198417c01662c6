"""Rank stability: tau-b against scipy, ranks by hand, and a comparison of two runs' orders."""

from __future__ import annotations

import math

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench.reporting.compare import compare_predictions
from shambench.reporting.ranks import kendall_tau_b, min_ranks, point_figures, run_figures
from shambench.schema import Example, Prediction, Span
from shambench.scoring.scorer import Scorer

scipy_stats = pytest.importorskip("scipy.stats")


@settings(max_examples=300, deadline=None)
@given(st.lists(st.tuples(st.integers(0, 4), st.integers(0, 4)), min_size=2, max_size=12))
def test_tau_b_equals_scipy_with_ties(pairs):
    x, y = [float(a) for a, _ in pairs], [float(b) for _, b in pairs]
    expected = scipy_stats.kendalltau(x, y, variant="b").statistic
    got = kendall_tau_b(x, y)
    if math.isnan(expected):
        assert got is None
    else:
        assert got == pytest.approx(expected, abs=1e-12)


def test_tau_b_by_hand():
    # Three rows: one discordant pair of three, no ties: (2 - 1) / 3.
    assert kendall_tau_b([1.0, 0.25, 0.17], [1.0, 0.0, 0.24]) == pytest.approx(1 / 3)
    # A tie in x: pairs (a,b) concordant, (a,c) concordant, (b,c) tied in x: (2 - 0) / sqrt(2 * 3).
    assert kendall_tau_b([3.0, 1.0, 1.0], [3.0, 2.0, 1.0]) == pytest.approx(2 / math.sqrt(6))
    assert kendall_tau_b([1.0, 1.0], [0.0, 1.0]) is None


def test_min_ranks_share_the_better_rank_on_ties():
    assert min_ranks(np.array([0.5, 0.9, 0.5, 0.1])).tolist() == [2, 1, 2, 4]
    # Per resample (columns): the rows are ranked within each column.
    assert min_ranks(np.array([[0.1, 0.9], [0.2, 0.2]])).tolist() == [[2, 1], [1, 2]]
    # Figures that differ only past the 12th decimal tie.
    assert min_ranks(np.array([0.3, 0.1 + 0.2])).tolist() == [1, 1]


# "The cat sat. The dog ran." tokens: The cat sat . The dog ran . (8); gold "cat".
TEXT = "The cat sat. The dog ran."
CAT, DOG = Span(start=4, end=7), Span(start=17, end=20)


def examples():
    return [
        Example(id="h1", task="qa", dataset="toy", response=TEXT, hallu_spans=[CAT]),
        Example(id="h2", task="qa", dataset="toy", response=TEXT, hallu_spans=[CAT]),
        Example(id="e1", task="qa", dataset="toy", response=TEXT, hallu_spans=[]),
        Example(id="e2", task="qa", dataset="toy", response=TEXT, hallu_spans=[]),
    ]


def test_point_figures_by_hand():
    scorer = Scorer(examples(), n_resamples=20)
    # "dog" everywhere: on h1, h2 P 0 R 0 (F1 0); on e1, e2 a prediction without gold (F1 0).
    dog = run_figures(scorer, [Prediction(id=e.id, spans=[DOG]) for e in examples()])
    figures = point_figures(dog)
    assert figures["paper"] == 0.0 and figures["pooled_token"] == 0.0 and "iou" in figures
    assert math.isnan(figures["iou"]) and math.isnan(figures["cor"])
    # nothing: F1 1 on e1, e2 and 0 on h1, h2: paper 0.5; over the hallucinated examples 0; pooled 0.
    none = point_figures(run_figures(scorer, []))
    assert (none["paper"], none["hallucinated"], none["pooled_token"], none["pooled_char"]) == (0.5, 0.0, 0.0, 0.0)
    # Sentences: h1, h2 have gold in the first of two sentences (F1 0 predicting nothing), e1, e2 none (F1 1).
    assert none["sentence"] == 0.5


def test_compare_says_none_over_cat_is_convention_dependent():
    exs = examples()
    # "cat" on h1 only and on e1 (a false alarm): F1 1, 0, 0, 1 -> paper 0.5; `none` 0, 0, 1, 1 -> 0.5 too;
    # with "cat" also on e2 the detector falls to 0.25, below `none`, while it stays above under every
    # convention that does not reward silence.
    cat = [Prediction(id=i, spans=[CAT]) for i in ("h1", "e1", "e2")]
    result = compare_predictions(exs, [], cat, names=("none", "cat"), n_resamples=200)
    ranks = result.ranks
    assert [r.id for r in ranks.rows] == ["A", "B"] and [r.name for r in ranks.rows] == ["none", "cat"]
    assert ranks.rows[0].figures["paper"] == 0.5 and ranks.rows[1].figures["paper"] == 0.25
    # Over the hallucinated examples: none 0, cat (1 + 0) / 2.
    assert ranks.rows[1].figures["hallucinated"] == 0.5 and ranks.rows[1].ranks["hallucinated"] == 1
    (pair,) = ranks.pairs
    assert pair.verdict == "convention-dependent" and "hallucinated" in pair.reversed_under
    assert "paper" not in pair.reversed_under
    assert [t.tau for t in ranks.tau if (t.a, t.b) == ("paper", "hallucinated")] == [-1.0]


def test_every_board_view_of_the_registry_is_a_ranked_convention():
    from shambench.reporting.ranks import CONVENTIONS, METRIC_OF
    from shambench.scoring.measures import registered

    assert set(METRIC_OF) == set(CONVENTIONS)
    names = {m.name for m in registered()}
    assert {metric for metric, _ in METRIC_OF.values()} <= names
    assert {m.name for m in registered() if m.board} <= {metric for metric, _ in METRIC_OF.values()}


def test_each_conventions_figure_is_its_registered_metric_over_the_tasks():
    from shambench.reporting.ranks import METRIC_OF
    from shambench.schema import covered_shares

    marked = [[CAT], [CAT, DOG], [DOG]]
    soft = [{"start": s, "end": e, "prob": p} for s, e, p in covered_shares(marked)]
    exs = [
        *examples(),
        Example(id="m1", task="other", dataset="mu", response=TEXT, hallu_spans=[CAT, DOG], soft_spans=soft),
        Example(id="m2", task="other", dataset="mu", response=TEXT, hallu_spans=[], soft_spans=[]),
    ]
    predictions = [Prediction(id=i, spans=[CAT]) for i in ("h1", "e2", "m1", "m2")]
    scorer = Scorer(exs, n_resamples=20)
    results = scorer.score(predictions)
    figures = point_figures(run_figures(scorer, predictions))
    for convention, (name, field) in METRIC_OF.items():
        # Task `qa` has no soft labels (no mushroom figure): IoU and Cor are the mean over the tasks that have them.
        groups = [getattr(results.tasks[t], name) for t in results.overall.tasks]
        values = [getattr(g, field) for g in groups if g is not None]
        assert len(values) == (1 if name == "mushroom" else 2)
        assert figures[convention] == pytest.approx(sum(values) / len(values), abs=1e-12), convention
