"""Per-example scores (`per_example.jsonl`), Mu-SHROOM Cor's overwrite order and empty responses, and results
without NaN."""

from __future__ import annotations

import json
import math
import statistics

import pytest

from shambench.data.benchmark import load_benchmark
from shambench.detection.detector import create_detector
from shambench.schema import Example, Prediction, SoftSpan
from shambench.scoring.results import ExampleScores, Results
from shambench.scoring.scorer import Scorer
from tests.conftest import require_shared

TEN = "abcdefghij"


def _mushroom(id_: str, response: str = TEN, soft=None, gold=None) -> Example:
    return Example(
        id=id_,
        dataset="mushroom",
        task="open_qa",
        response=response,
        hallu_spans=gold or [],
        soft_spans=soft if soft is not None else [],
    )


def test_cor_writes_soft_spans_in_the_order_the_prediction_gives():
    example = _mushroom("m", soft=[SoftSpan(start=0, end=3, prob=1.0)], gold=[[0, 3]])
    first = [{"start": 0, "end": 6, "prob": 0.9}, {"start": 3, "end": 10, "prob": 0.2}]
    scorer = Scorer([example], n_resamples=10)
    # In this order the second range overwrites 3-5: pred = 0.9 x3, 0.2 x7, ranked exactly as ref = 1 x3, 0 x7.
    _, rows = scorer.score_with_examples([Prediction(id="m", soft_spans=first)])
    assert rows[0].cor == pytest.approx(1.0)
    # Reversed, the first range wins 3-5: pred = 0.9 x6, 0.2 x4. Spearman on two binary vectors is the phi
    # coefficient: (3*4 - 0*3) / sqrt(3*7*6*4) = 12 / sqrt(504).
    _, rows = scorer.score_with_examples([Prediction(id="m", soft_spans=first[::-1])])
    assert rows[0].cor == pytest.approx(12 / math.sqrt(504))
    # Hard labels from soft ones (prob > 0.5): [0, 6) in both orders; IoU 3/6.
    assert rows[0].iou == pytest.approx(0.5)


def test_an_empty_response_follows_the_constant_vector_rule_without_nan(tmp_path):
    examples = [_mushroom("empty", response=""), _mushroom("full", soft=[SoftSpan(start=0, end=2, prob=0.5)])]
    results, rows = Scorer(examples, n_resamples=10).score_with_examples([Prediction(id="empty")])
    # empty: both vectors empty (0 distinct values each): Cor 1, IoU 1 (nothing on either side).
    # full: ref has two levels, pred is all zero (constant, one level): Cor 0; no hard gold and no prediction: IoU 1.
    assert (rows[0].cor, rows[0].iou) == (1.0, 1.0)
    assert (rows[1].cor, rows[1].iou) == (0.0, 1.0)
    assert results.partitions["open_qa/mushroom"].mushroom.cor == 0.5
    text = results.model_dump_json()
    assert "NaN" not in text and "Infinity" not in text


def test_results_refuse_nan_so_none_can_be_written():
    with pytest.raises(ValueError, match="finite number"):
        ExampleScores(
            id="a",
            dataset="d",
            task="t",
            status="predicted",
            token={"precision": 1.0, "recall": 1.0, "f1": math.nan},
            sentence={"precision": 1.0, "recall": 1.0, "f1": 1.0},
        )


def _assert_means_equal_the_partitions(results: Results, rows: list[ExampleScores]) -> None:
    for name, group in results.partitions.items():
        mine = [r for r in rows if f"{r.task}/{r.dataset}" == name]
        assert len(mine) == group.n
        for level in ("token", "sentence"):
            for key in ("precision", "recall", "f1"):
                values = [getattr(getattr(r, level), key) for r in mine]
                # exactly, whatever the order (the scorer's means are exactly rounded)
                assert statistics.fmean(values) == getattr(getattr(group, level), key)
                assert statistics.fmean(values[::-1]) == getattr(getattr(group, level), key)
        if group.mushroom:
            assert statistics.fmean(r.cor for r in mine if r.cor is not None) == group.mushroom.cor
            assert statistics.fmean(r.iou for r in mine if r.iou is not None) == group.mushroom.iou
    for name, group in results.tasks.items():
        values = [r.token.f1 for r in rows if r.task == name]
        assert statistics.fmean(values) == group.token.f1


@pytest.mark.shared_data
def test_per_example_means_equal_the_reported_partition_scores_on_real_data():
    data = require_shared()
    bench = load_benchmark(["mushroom", "faithbench"], "test", data)
    examples = bench.examples
    detector = create_detector("random", rate=0.3, seed=1)
    predictions = list(detector.predict(examples))
    # a few predictions with scores, soft spans and failures, so that every column is exercised
    predictions[0] = Prediction(id=predictions[0].id, error="timeout")
    predictions = predictions[: len(predictions) - 5]
    results, rows = Scorer(examples, n_resamples=10).score_with_examples(predictions)
    assert len(rows) == len(examples) == 154 + 750
    assert [r.id for r in rows] == [ex.id for ex in examples]
    assert sum(r.status == "failed" for r in rows) == 1 and sum(r.status == "missing" for r in rows) == 5
    assert results.partitions["open_qa/mushroom"].mushroom is not None
    _assert_means_equal_the_partitions(results, rows)
    json.loads(results.model_dump_json())  # valid JSON: no NaN


def test_the_results_schema_refuses_null_where_a_number_is_promised():
    from jsonschema import Draft202012Validator

    from shambench.leaderboard.schema import RESULTS_SCHEMA, SCHEMA_DIR

    validator = Draft202012Validator(json.loads((SCHEMA_DIR / RESULTS_SCHEMA).read_text()))
    examples = [_mushroom("m", soft=[SoftSpan(start=0, end=3, prob=1.0)], gold=[[0, 3]])]
    results = json.loads(Scorer(examples, n_resamples=10).score([Prediction(id="m", spans=[[0, 3]])]).model_dump_json())
    assert list(validator.iter_errors(results)) == []
    for path in (("overall", "token", "f1"), ("partitions", "open_qa/mushroom", "mushroom", "cor"), ("n_examples",)):
        broken = json.loads(json.dumps(results))
        node = broken
        for key in path[:-1]:
            node = node[key]
        node[path[-1]] = None
        errors = [list(e.absolute_path) for e in validator.iter_errors(broken)]
        # refused (under a nullable parent, the error is reported at the parent)
        assert errors and all(list(path)[: len(e)] == e for e in errors)
