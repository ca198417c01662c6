"""The board's rank stability on the toy runs, by hand: figures and ranks per convention, tau, intervals, the
share of resamples keeping each order (from the scorer's own draws), and the page's marks beside the ranks."""

from __future__ import annotations

import numpy as np
import pytest

from shambench.leaderboard.build import build
from shambench.leaderboard.page import render
from shambench.scoring import metrics

# The toy examples: context_qa q1 (gold "320" of 7 tokens, 29 characters) and q2 (no gold, 5 tokens, 19
# characters), summ s1 (gold "pears" of 8 tokens, 30 characters).
ALL = {
    "paper": (0.25 / 2 + 2 / 9) / 2,
    "hallucinated": (0.25 + 2 / 9) / 2,
    "pooled_token": (2 / 13 + 2 / 9) / 2,
    "pooled_char": (6 / 51 + 10 / 35) / 2,
    "sentence": (0.5 + 2 / 3) / 2,
}
NONE = {"paper": 0.25, "hallucinated": 0.0, "pooled_token": 0.0, "pooled_char": 0.0, "sentence": 0.25}


@pytest.fixture(scope="module")
def board(toy_runs):
    return build([toy_runs / "runs"], None)


def test_every_convention_ranks_the_rows_by_their_figures(board):
    st = board.stability
    assert list(st.conventions) == ["paper", "hallucinated", "pooled_token", "pooled_char", "sentence"]
    rows = {r.name: r for r in st.rows}
    assert [r.name for r in st.rows] == ["exact", "none", "all"]  # the board's order
    assert rows["exact"].figures == {c: 1.0 for c in st.conventions}
    assert rows["none"].figures == pytest.approx(NONE) and rows["all"].figures == pytest.approx(ALL)
    assert rows["none"].ranks == {"paper": 2, "hallucinated": 3, "pooled_token": 3, "pooled_char": 3, "sentence": 3}
    assert rows["all"].ranks == {"paper": 3, "hallucinated": 2, "pooled_token": 2, "pooled_char": 2, "sentence": 2}
    # The figures shown are the board's own.
    by_name = {e.name: e for e in board.entries}
    for name, row in rows.items():
        overall = by_name[name].span.overall
        assert row.figures["paper"] == pytest.approx(overall.f1, abs=1e-12)
        assert row.figures["hallucinated"] == pytest.approx(overall.f1_with_gold, abs=1e-12)
        assert row.figures["pooled_token"] == pytest.approx(overall.f1_pooled, abs=1e-12)
        assert row.figures["sentence"] == pytest.approx(by_name[name].sentence.overall.f1, abs=1e-12)


def test_tau_between_the_paper_and_the_others_is_one_third(board):
    taus = {(t.a, t.b): t.tau for t in board.stability.tau}
    # Of the three pairs, only none/all is reversed: (2 - 1) / 3.
    assert taus[("paper", "hallucinated")] == pytest.approx(1 / 3)
    assert taus[("paper", "sentence")] == pytest.approx(1 / 3)
    assert taus[("hallucinated", "pooled_char")] == 1.0
    assert len(taus) == 10


def test_orders_intervals_and_shares_from_the_scorers_draws(board):
    st = board.stability
    # none beats all in a resample unless both of context_qa's draws are q1 (none 0 + 0, all 0.25 + 2/9 over 2):
    # the share is read from the very draws the scorer makes for the task (ids in order: q1, q2).
    draws = metrics.bootstrap_weights(2, "context_qa", st.n_resamples, st.seed)
    share = float(np.mean(draws[:, 0] != 2))
    pairs = {(p.above, p.below): p for p in st.pairs}
    ids = {r.name: r.id for r in st.rows}
    none_all = pairs[(ids["none"], ids["all"])]
    assert none_all.share == pytest.approx(share) and 0.6 < share < 0.9
    assert none_all.adjacent and none_all.verdict == "convention-dependent"
    assert none_all.reversed_under == ["hallucinated", "pooled_token", "pooled_char", "sentence"]
    exact_none = pairs[(ids["exact"], ids["none"])]
    assert (exact_none.share, exact_none.reversed_under, exact_none.verdict) == (1.0, [], "holds")
    assert not pairs[(ids["exact"], ids["all"])].adjacent
    intervals = {r.name: r.interval for r in st.rows}
    assert intervals == {"exact": (1, 1), "none": (2, 3), "all": (2, 3)}


def test_the_page_shows_each_orders_verdict_beside_the_rank(board):
    page = render(board)
    assert "Does the ranking hold?" in page
    assert 'class="order holds" href="#ranks"' in page and 'class="order convention-dependent" href="#ranks"' in page
    assert "above all under 1 of 5 conventions (not under span F1, hallucinated examples" in page
