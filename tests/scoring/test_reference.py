"""The plain reference definition (`shambench.scoring.reference`) on cases computed by hand; the vectorised scorer
is tested against it in tests/scoring/test_scorer.py."""

from __future__ import annotations

import pytest

from shambench.schema import Example, Prediction
from shambench.scoring.reference import example_reference, prf, reference_scores

# 8 tokens: The [0,3) cat [4,7) sat [8,11) . [11,12) It [13,15) was [16,19) red [20,23) . [23,24)
# 2 sentences: [0,12) and [13,24).
T1 = "The cat sat. It was red."


def ex(i: str, partition: str, gold=()) -> Example:
    task, dataset = partition.split("/")
    return Example(id=i, task=task, dataset=dataset, response=T1, hallu_spans=list(gold))


def test_the_empty_rule_and_undefined_ratios():
    assert prf(0, 0, 0).model_dump() == {"precision": 1.0, "recall": 1.0, "f1": 1.0}
    assert prf(0, 2, 0).model_dump() == {"precision": 0.0, "recall": 0.0, "f1": 0.0}  # no gold, some prediction
    assert prf(0, 0, 3).model_dump() == {"precision": 0.0, "recall": 0.0, "f1": 0.0}  # gold, nothing predicted


def test_one_example_by_hand():
    # gold "cat"; predicted "cat sat": tokens tp 1 of 2 predicted, 1 gold -> P 1/2, R 1, F1 2/3; both in sentence 0.
    got = example_reference(ex("a", "summ/x", [[4, 7]]), Prediction(id="a", spans=[[4, 11]]))
    assert got.token.model_dump() == {"precision": 0.5, "recall": 1.0, "f1": pytest.approx(2 / 3)}
    assert got.sentence.f1 == 1.0
    # characters: 3 gold inside 7 predicted -> P 3/7, R 1, F1 (6/7) / (10/7) = 0.6
    assert (got.token_counts, got.char_counts) == ((1, 2, 1), (3, 7, 3))


def test_failed_missing_and_sentence_labelled_predictions():
    gold = ex("a", "summ/x", [[4, 7]])
    failed = Prediction(id="a", spans=[[4, 7]], error="boom")
    assert example_reference(gold, failed).token.f1 == 0.0 == example_reference(gold, None).token.f1
    # sentence labels are the sentences predicted, whatever the spans overlap: sentence 1 predicted, 0 gold.
    labelled = Prediction(id="a", spans=[[4, 7]], sentence_labels=[0, 1])
    got = example_reference(gold, labelled)
    assert (got.token.f1, got.sentence.model_dump()) == (1.0, {"precision": 0.0, "recall": 0.0, "f1": 0.0})


def test_groups_average_per_example_and_overall_uses_the_population_std():
    examples = [ex("a", "summ/x", [[4, 7]]), ex("b", "summ/x"), ex("c", "qa/y")]
    predictions = [Prediction(id="a", spans=[[4, 11]]), Prediction(id="b", spans=[[13, 15]])]
    ref = reference_scores(examples, predictions)
    summ = ref.partitions["summ/x"]
    # per-example token F1 2/3 and 0 (b: no gold, "It" predicted) -> mean 1/3; pooled: tp 1, predicted 3, gold 1.
    assert summ.n == 2 and summ.token.f1 == pytest.approx(1 / 3)
    assert summ.token_pooled.model_dump() == {"precision": pytest.approx(1 / 3), "recall": 1.0, "f1": 0.5}
    assert ref.tasks["qa"].token.f1 == 1.0  # nothing gold, nothing predicted
    # overall: mean of 1/3 and 1 = 2/3; population std = 1/3 (the sample std would be 0.471)
    assert (ref.overall_token_f1, ref.overall_token_std) == (pytest.approx(2 / 3), pytest.approx(1 / 3))
