"""Span recovery, boundary errors and rates on hand-made predictions with known overlaps."""

from __future__ import annotations

import pytest

from shambench.reporting.analysis import analyse, missed_spans
from shambench.schema import Example, Prediction


def _ex(id_, response, spans, task="qa"):
    return Example(id=id_, dataset="toy", task=task, response=response, hallu_spans=spans)


# Tokens of "Alpha beta gamma delta epsilon zeta.":
#   0 Alpha[0,5) 1 beta[6,10) 2 gamma[11,16) 3 delta[17,22) 4 epsilon[23,30) 5 zeta[31,35) 6 .[35,36)
EXAMPLES = [
    _ex("mixed", "Alpha beta gamma delta epsilon zeta.", [[6, 16], [23, 30]]),
    _ex("clean", "Nothing here.", []),
    _ex("wrong", "Wrong.", [[0, 6]]),  # tokens Wrong[0,5) .[5,6): every token is gold
]
PREDICTIONS = {
    # p1 "Alpha beta" overlaps gold "beta gamma": one token too many (Alpha), one too few (gamma).
    # p2 "zeta." overlaps no gold span: a false alarm. Gold "epsilon" is missed.
    "mixed": Prediction(id="mixed", spans=[[0, 10], [31, 36]]),
    "clean": Prediction(id="clean", spans=[]),
    # "Wrong" without the full stop: recovered, zero tokens over, one token under.
    "wrong": Prediction(id="wrong", spans=[[0, 5]]),
}


def test_recovery_false_alarms_and_boundaries():
    g = analyse(EXAMPLES, PREDICTIONS).datasets["qa/toy"]
    assert (g.n_gold_spans, g.n_pred_spans) == (3, 3)
    assert g.recovered_share == pytest.approx(2 / 3)  # beta-gamma and Wrong. recovered, epsilon missed
    assert g.false_alarm_share == pytest.approx(1 / 3)  # zeta.
    # recovered spans: (over, under) = (1, 1) for beta-gamma, (0, 1) for "Wrong."
    assert g.boundary.over_share == pytest.approx(1 / 2)
    assert g.boundary.over_mean == pytest.approx(1.0)
    assert g.boundary.under_share == pytest.approx(1.0)
    assert g.boundary.under_mean == pytest.approx(1.0)


def test_edge_case_f1_and_rates():
    g = analyse(EXAMPLES, PREDICTIONS).datasets["qa/toy"]
    assert (g.n_no_gold, g.f1_no_gold) == (1, 1.0)  # nothing gold, nothing predicted
    # "Wrong.": P = 1/1, R = 1/2, F1 = 2/3
    assert g.n_all_hallucinated == 1
    assert g.f1_all_hallucinated == pytest.approx(2 / 3)
    # gold rates 3/7, 0/2, 2/2; predicted rates 4/7, 0/2, 1/2
    assert g.gold_rate_mean == pytest.approx((3 / 7 + 0 + 1) / 3)
    assert g.pred_rate_mean == pytest.approx((4 / 7 + 0 + 0.5) / 3)
    # bins of width 0.1: 3/7=0.43 -> bin 4, 0 -> bin 0, 1.0 -> last bin (closed)
    assert g.gold_rate_hist == [1, 0, 0, 0, 1, 0, 0, 0, 0, 1]
    assert g.pred_rate_hist == [1, 0, 0, 0, 0, 2, 0, 0, 0, 0]


def test_failed_or_missing_predictions_count_as_empty():
    preds = {"mixed": Prediction(id="mixed", spans=[[0, 10]], error="timeout")}
    g = analyse(EXAMPLES, preds).datasets["qa/toy"]
    assert g.recovered_share == 0.0
    assert g.n_pred_spans == 0 and g.false_alarm_share is None and g.boundary is None


def test_missed_spans_lists_unrecovered_gold():
    missed = missed_spans(EXAMPLES, PREDICTIONS)
    assert [(ex.id, ex.response[s.start : s.end]) for ex, s in missed] == [("mixed", "epsilon")]


def test_task_groups_pool_their_partitions():
    exs = [*EXAMPLES, _ex("other", "Fine.", [], task="summ")]
    result = analyse(exs, PREDICTIONS)
    assert set(result.tasks) == {"qa", "summ"}
    assert result.tasks["summ"].n_examples == 1 and result.tasks["qa"].n_examples == 3
