"""The extended suite's view: its groups and overall, and the paper's tasks and overall left as they were."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench.schema import Example, Prediction
from shambench.scoring.extended import kept_apart
from shambench.scoring.results import MULTILINGUAL, ExtendedView
from shambench.scoring.scorer import score

PARTITIONS = (
    "summ/zhou",
    "summ/xsumfaith-gold",
    "open_qa_long/haluquestqa",
    "open_qa/mushroom-en",
    "open_qa/mushroom",
    "mt/zhou",
)


def _example(i: int, partition: str, gold: list[list[int]]) -> Example:
    task, dataset = partition.split("/")
    # Tokens of "a b": a [0, 1), b [2, 3).
    return Example(id=f"e{i}", task=task, dataset=dataset, response="a b", hallu_spans=gold)


def test_added_partitions_get_their_own_groups_and_overall():
    examples = [
        _example(1, "summ/zhou", [[0, 1]]),
        _example(2, "summ/xsumfaith-gold", [[0, 1]]),
        _example(3, "open_qa_long/haluquestqa", []),
        _example(4, "open_qa/mushroom-en", [[2, 3]]),
        _example(5, "open_qa/mushroom", []),
    ]
    predictions = [
        Prediction(id="e1", spans=[[0, 1]]),  # F1 1
        Prediction(id="e2"),  # gold missed: 0
        Prediction(id="e3"),  # nothing to find, nothing found: 1
        Prediction(id="e4", spans=[[2, 3]]),  # 1
        Prediction(id="e5", spans=[[0, 1]]),  # a false alarm: 0
    ]
    results = score(examples, predictions, n_resamples=50)
    # The paper's tasks hold none of the added partitions: summ = {e1}, open_qa = {e5}.
    assert {t: (g.n, g.token.f1) for t, g in results.tasks.items()} == {"open_qa": (1, 0.0), "summ": (1, 1.0)}
    assert results.overall is not None and results.overall.token.f1 == 0.5
    assert set(results.partitions) == {
        "summ/zhou",
        "summ/xsumfaith-gold",
        "open_qa_long/haluquestqa",
        "open_qa/mushroom-en",
        "open_qa/mushroom",
    }
    view = ExtendedView.model_validate(results.groups.extended)
    assert {g: (s.n, s.token.f1) for g, s in view.groups.items()} == {
        "open_qa": (1, 0.0),
        MULTILINGUAL: (1, 1.0),
        "open_qa_long": (1, 1.0),
        "summ": (2, 0.5),
    }
    assert view.partitions == {
        "open_qa": ["open_qa/mushroom"],
        MULTILINGUAL: ["open_qa/mushroom-en"],
        "open_qa_long": ["open_qa_long/haluquestqa"],
        "summ": ["summ/xsumfaith-gold", "summ/zhou"],
    }
    # (0 + 1 + 1 + 0.5) / 4, population std of those four values: sqrt(0.6875 / 4).
    assert view.overall.tasks == ["open_qa", "open_qa_long", MULTILINGUAL, "summ"]
    assert view.overall.token.f1 == 0.625
    assert view.overall.token.std == pytest.approx(0.171875**0.5)
    # A group that is a paper task with the same examples keeps that task's scores, interval included.
    assert view.groups["open_qa"] == results.tasks["open_qa"]


def test_without_an_added_partition_there_is_no_extended_view():
    examples = [_example(1, "open_qa/mushroom-en", [[2, 3]]), _example(2, "open_qa/mushroom", [])]
    results = score(examples, [], n_resamples=20)
    assert "extended" not in results.groups
    # Mu-SHROOM's languages have their own view (groups.mushroom) and stay out of the paper's tasks.
    assert list(results.tasks) == ["open_qa"] and results.tasks["open_qa"].n == 1


def test_only_added_partitions_give_no_paper_overall():
    results = score([_example(1, "open_qa_long/haluquestqa", [[0, 1]])], [], n_resamples=20)
    assert results.tasks == {} and results.overall is None
    assert ExtendedView.model_validate(results.groups.extended).overall.token.f1 == 0.0


@settings(max_examples=25, deadline=None)
@given(
    st.lists(
        st.tuples(
            st.sampled_from(PARTITIONS),
            st.sampled_from([[], [[0, 1]], [[2, 3]], [[0, 3]]]),
            st.sampled_from([[], [[0, 1]], [[2, 3]]]),
        ),
        min_size=1,
        max_size=12,
    )
)
def test_the_paper_overall_is_that_of_the_paper_partitions_alone(rows):
    examples = [_example(i, partition, gold) for i, (partition, gold, _) in enumerate(rows)]
    predictions = [Prediction(id=f"e{i}", spans=pred) for i, (_, _, pred) in enumerate(rows)]
    everything = score(examples, predictions, n_resamples=20)
    paper = [ex for ex in examples if not kept_apart(ex.partition)]
    if not paper:
        assert everything.overall is None and everything.tasks == {}
        return
    alone = score(paper, [p for p in predictions if not kept_apart(examples[int(p.id[1:])].partition)], n_resamples=20)
    assert everything.tasks == alone.tasks
    assert everything.overall == alone.overall
