"""Step-level metrics (shambench.scoring.steps), each rule checked on small cases computed by hand."""

from __future__ import annotations

import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench.data.steps import step_fields
from shambench.schema import Example, Prediction
from shambench.scoring.scorer import score
from shambench.scoring.steps import (
    GRID,
    binary_rates,
    dataset_scores,
    first_error_rates,
    math_group,
    outcome,
    tune_threshold,
    tuning_subset,
)
from shambench.sources import suite_of


def make(ident: str, labels: list[int | None], dataset: str = "hard2verify", sep: str = "\n\n") -> Example:
    texts = [f"step {i} of {ident}" for i in range(len(labels))]
    return Example(id=ident, dataset=dataset, task="math_step", **step_fields(texts, labels, sep))


def test_step_fields_offsets_and_gold_spans():
    fields = step_fields(["ab", "cde", "f"], [1, 0, None], "\n\n")
    # "ab" [0,2), separator [2,4), "cde" [4,7), separator [7,9), "f" [9,10)
    assert fields["response"] == "ab\n\ncde\n\nf"
    assert [(s["start"], s["end"], s["label"]) for s in fields["steps"]] == [(0, 2, 1), (4, 7, 0), (9, 10, None)]
    assert fields["hallu_spans"] == [[4, 7]]


def test_outcome_refuses_an_example_without_steps():
    # its gold first error is None, which the first-error rates cannot count
    plain = Example(id="x", dataset="ragtruth", task="qa", response="no steps here")
    with pytest.raises(ValueError, match="'x' has no steps"):
        outcome(plain, None)


def test_outcome_first_error_by_hand():
    # steps labelled 1, 0, None: gold first error at 1; the unlabelled step is left out of the step labels
    o = outcome(make("m", [1, 0, None]), Prediction(id="m", step_verdicts=[1, 1, 0]))
    assert (o.first_gold, o.first_pred, o.step_gold, o.step_pred) == (1, 2, [1, 0], [1, 1])


def test_binary_rates_by_hand():
    # gold 1 at positions 0, 3, 4 -> predicted 1, 0, 1: TPR = 2/3; gold 0 at 1, 2 -> predicted 1, 0: TNR = 1/2
    r = binary_rates([1, 1, 0, 0, 1], [1, 0, 0, 1, 1])
    assert r.tpr == pytest.approx(200 / 3)
    assert r.tnr == pytest.approx(50)
    assert r.balanced_accuracy == pytest.approx(100 * (2 / 3 + 1 / 2) / 2)  # 58.33
    assert r.balanced_f1 == pytest.approx(100 * 4 / 7)  # 2*(2/3)*(1/2) / (7/6) = 4/7
    assert (r.n_correct, r.n_erroneous) == (3, 2)


def test_processbench_f1_by_hand():
    # error-free responses (gold -1): predicted -1 and 0 -> acc_correct 1/2;
    # erroneous ones: gold 2 predicted 2 (right), gold 0 predicted 1 (wrong) -> acc_erroneous 1/2; F1 = 2ab/(a+b)
    r = first_error_rates([-1, 0, 2, 1], [-1, -1, 2, 0])
    assert (r.tpr, r.tnr) == (50, 50)
    assert r.balanced_f1 == pytest.approx(50)


def test_no_erroneous_samples_leaves_the_balanced_scores_undefined():
    r = first_error_rates([-1, 0], [-1, -1])
    assert r.tpr == 50 and r.tnr is None
    assert r.balanced_accuracy is None and r.balanced_f1 is None
    assert binary_rates([1, 1], [1, 1]).balanced_f1 is None


def test_both_rates_zero_gives_zero_f1():
    # gold -1 predicted 0 (wrong), gold 1 predicted 2 (wrong): TPR = TNR = 0 -> BF1 0, not a division by zero
    r = first_error_rates([0, 2], [-1, 1])
    assert (r.balanced_accuracy, r.balanced_f1) == (0, 0)


def test_unparseable_missing_and_extra_verdicts_follow_hard2verify():
    examples = [make("a", [1, 0, 0]), make("b", [1, 1, 1]), make("c", [1, 0]), make("d", [1, 1])]
    preds = {
        # shorter and unparseable: fixed [1, wrong(0)=1, padded wrong(0)=1]; response uses the given prefix [1, 1]
        # -> predicted 1; first error: the first non-1 verdict is unparseable -> -2, never right
        "a": Prediction(id="a", step_verdicts=[1, -2]),
        # fixed [1, wrong(1)=0, padded wrong(1)=0]; response prefix [1, 0] -> 0; first error -2
        "b": Prediction(id="b", step_verdicts=[1, -2]),
        # longer: truncated to [1, 0]; response 0; first error 1
        "c": Prediction(id="c", step_verdicts=[1, 0, 1, 1]),
        # longer with a 0 only among the extras: [1, 1]; response 1; first error -1
        "d": Prediction(id="d", step_verdicts=[1, 1, 0]),
    }
    s = dataset_scores(examples, preds)
    # steps, gold -> fixed prediction: a 1->1 0->1 0->1; b 1->1 1->0 1->0; c 1->1 0->0; d 1->1 1->1
    # correct steps: 7, predicted correct 5 -> TPR 5/7; erroneous steps: 3, predicted erroneous 1 -> TNR 1/3
    assert s.step.tpr == pytest.approx(500 / 7)
    assert s.step.tnr == pytest.approx(100 / 3)
    # responses: gold a0 b1 c0 d1, predicted a1 b0 c0 d1 -> TPR 1/2 (d), TNR 1/2 (c)
    assert (s.response.tpr, s.response.tnr) == (50, 50)
    # first error: gold a1 b-1 c1 d-1, predicted a-2 b-2 c1 d-1 -> TPR 1/2 (d), TNR 1/2 (c)
    assert (s.first_error.tpr, s.first_error.tnr) == (50, 50)
    assert s.n_erroneous == 2 and s.missing_predictions == 0


def test_unlabelled_steps_after_the_first_error_are_skipped():
    # ProcessBench: [1, 0, None]; a prediction flagging only the unlabelled step counts 2 labelled steps
    ex = make("p", [1, 0, None], dataset="processbench/gsm8k")
    s = dataset_scores([ex], {"p": Prediction(id="p", step_verdicts=[1, 1, 0])})
    assert (s.step.n_correct, s.step.n_erroneous) == (1, 1)
    assert (s.step.tpr, s.step.tnr) == (100, 0)
    assert s.first_error.tnr == 0  # predicted first error 2, gold 1


def test_missing_and_failed_predictions_predict_every_step_correct():
    examples = [make("a", [1, 0]), make("b", [1, 1])]
    s = dataset_scores(examples, {"b": Prediction(id="b", error="timeout")})
    assert s.missing_predictions == 2
    assert (s.first_error.tpr, s.first_error.tnr) == (100, 0)


def test_prediction_kinds_give_the_same_verdicts():
    ex = make("a", [1, 0, 0])
    wrong_from_1 = [
        Prediction(id="a", step_verdicts=[1, 0, 0]),
        Prediction(id="a", step_scores=[0.9, 0.2, 0.1]),
        Prediction(id="a", first_error=1),
        Prediction(id="a", sentence_labels=[0, 1, 1]),
        Prediction(id="a", spans=[[ex.steps[1].start + 2, ex.steps[2].end]]),
    ]
    for pred in wrong_from_1:
        s = dataset_scores([ex], {"a": pred}, threshold=0.5)
        assert (s.step.tpr, s.step.tnr, s.first_error.tnr, s.response.tnr) == (100, 100, 100, 100), pred


def test_math_shepherd_char_f1_is_gold_independent_and_sopo_is_not():
    # "ab\ncd\nef": steps [0,2) [3,5) [6,8), labels 1 0 0; gold chars = [3,6) with its newline + [6,8) = 5 chars
    ex = Example(id="m", dataset="math-shepherd", task="math_step", **step_fields(["ab", "cd", "ef"], [1, 0, 0], "\n"))
    by_steps = {"m": Prediction(id="m", step_verdicts=[1, 1, 0])}  # flags [6,8): 2 chars, both gold
    s = dataset_scores([ex], by_steps, char=True)
    assert (s.char.precision, s.char.recall) == (100, 40)
    assert s.char.f1 == pytest.approx(100 * 2 * 0.4 / 1.4)  # 57.14
    assert (s.char.case_f1, s.char.case_accuracy) == (100, 100)
    by_span = {"m": Prediction(id="m", spans=[[7, 8]])}  # "f" only: 1 of 5 gold chars
    plain = dataset_scores([ex], by_span, char=True)
    assert plain.char.recall == 20 and plain.char.f1 == pytest.approx(100 * 2 * 0.2 / 1.2)
    with pytest.warns(UserWarning, match="SOPO"):
        group = math_group([ex], by_span, sopo_compat=True)
    sopo = group.datasets["math-shepherd"].char_sopo_compat
    # the kit snaps 7 back to the start (6) of the gold erroneous step it falls in: [6,8) -> recall 2/5
    assert (sopo.precision, sopo.recall) == (100, 40)
    early = dataset_scores([ex], {"m": Prediction(id="m", spans=[[1, 2]])}, char=True, sopo=True)
    # 1 is in a correct step: no snapping, the suffix [1,8) = 7 chars of which 5 gold -> P 5/7, R 1
    assert early.char_sopo_compat.precision == pytest.approx(500 / 7)
    assert early.char_sopo_compat.f1 == pytest.approx(100 * 10 / 12)
    assert math_group([ex], by_span).datasets["math-shepherd"].char_sopo_compat is None


def test_threshold_sweep_picks_the_first_best_grid_value():
    examples = [make("a", [1, 0]), make("b", [1, 1])]
    preds = {"a": Prediction(id="a", step_scores=[0.8, 0.3]), "b": Prediction(id="b", step_scores=[0.7, 0.6])}
    # t <= 0.30 calls every step correct (step TNR 0 -> objective 0); 0.35..0.60 is perfect on all three levels
    # (0.6 >= 0.60 is correct); 0.65 flags b's second step. The first maximum is 0.35.
    choice = tune_threshold(examples, preds, seed=0)
    assert choice.threshold == 0.35 and choice.objective == pytest.approx(100)
    assert sorted(choice.tuning_ids) == ["a", "b"]
    group = math_group(examples, preds)
    assert group.suites["hard2verify"].threshold.threshold == 0.35
    assert group.datasets["hard2verify"].threshold == 0.35
    assert group.datasets["hard2verify"].step.balanced_f1 == pytest.approx(100)
    assert GRID[0] == 0.10 and GRID[-1] == 0.90 and len(GRID) == 17


def test_verdicts_need_no_threshold():
    group = math_group([make("a", [1, 0])], {"a": Prediction(id="a", step_verdicts=[1, 0])})
    assert group.suites["hard2verify"].threshold is None


def test_suite_mean_f1_over_subsets():
    # gsm8k: perfect (F1 100); math: error-free gold predicted -1 right, erroneous predicted wrong -> F1 0
    examples = [
        make("g1", [1, 0], "processbench/gsm8k"),
        make("g2", [1, 1], "processbench/gsm8k"),
        make("m1", [1, 0], "processbench/math"),
        make("m2", [1, 1], "processbench/math"),
    ]
    preds = {"g1": Prediction(id="g1", first_error=1), "m1": Prediction(id="m1", first_error=0)}
    group = math_group(examples, preds)
    assert group.datasets["processbench/gsm8k"].first_error.balanced_f1 == 100
    assert group.datasets["processbench/math"].first_error.balanced_f1 == 0
    assert group.suites["processbench"].mean_f1 == 50
    assert suite_of("math-shepherd") == "math-shepherd" and suite_of("sharp/gsm8k") == "sharp"


def test_tuning_subset_is_seeded_and_order_free():
    examples = [make(f"e{i:03d}", [1]) for i in range(150)]
    first = [ex.id for ex in tuning_subset(examples, seed=3)]
    assert len(first) == 100 and len(set(first)) == 100
    assert [ex.id for ex in tuning_subset(examples[::-1], seed=3)] == first
    assert [ex.id for ex in tuning_subset(examples, seed=4)] != first


def test_scorer_puts_math_in_its_own_group_and_not_in_the_overall():
    examples = [make("a", [1, 0]), make("b", [1, 1])]
    results = score(examples, [Prediction(id="a", step_verdicts=[1, 0])], n_resamples=10)
    assert results.overall is None
    math = results.groups.math
    assert math is not None and math.datasets["hard2verify"].first_error.balanced_f1 == 100
    assert "scale" in math.conventions


labels = st.lists(st.integers(0, 1), min_size=1, max_size=30)


@given(labels, st.data())
def test_balanced_scores_are_bounded_and_perfect_on_gold(gold, data):
    pred = data.draw(st.lists(st.integers(0, 1), min_size=len(gold), max_size=len(gold)))
    r = binary_rates(pred, gold)
    if r.balanced_accuracy is not None:
        assert 0 <= r.balanced_f1 <= r.balanced_accuracy + 1e-9 <= 100 + 1e-9  # harmonic <= arithmetic mean
    perfect = binary_rates(gold, gold)
    assert perfect.balanced_f1 in (None, 100)
