"""The unified schema: spans are validated, normalised and kept inside the response; errors name the id."""

from __future__ import annotations

import pytest
from pydantic import ValidationError

from shambench.schema import Example, Prediction, SoftSpan, Span, Step, marked_by_more_than


def example(response: str = "Paris is in Italy.", **fields) -> Example:
    return Example(id=fields.pop("id", "t/1"), dataset="toy", task="summ", response=response, **fields)


@pytest.mark.parametrize("start,end", [(3, 3), (5, 2)])
def test_empty_or_reversed_span_is_rejected(start, end):
    with pytest.raises(ValidationError, match=rf"span \[{start}, {end}\) is empty or reversed"):
        Span(start=start, end=end)


def test_negative_start_is_rejected():
    with pytest.raises(ValidationError):
        Span(start=-1, end=2)


@pytest.mark.parametrize(
    "raw,expected",
    [
        ([1, 4], Span(start=1, end=4)),
        ((1, 4, "Evident Conflict"), Span(start=1, end=4, label="Evident Conflict")),
        ({"start": 1, "end": 4, "score": 0.25}, Span(start=1, end=4, score=0.25)),
        (Span(start=1, end=4), Span(start=1, end=4)),
    ],
)
def test_span_coerce_reads_lists_tuples_dicts_and_spans(raw, expected):
    assert Span.coerce(raw) == expected


@pytest.mark.parametrize("raw", [[1], [1, 2, "x", 4], "1-2", 7])
def test_span_coerce_rejects_other_shapes(raw):
    with pytest.raises(ValueError):
        Span.coerce(raw)


def test_example_spans_are_sorted_and_merged():
    # [9, 14) and [12, 18) overlap -> [9, 18); [0, 5) and [5, 8) touch -> [0, 8); labels join, the max score stays.
    ex = example(
        hallu_spans=[
            {"start": 12, "end": 18, "label": "b", "score": 0.2},
            [0, 5, "a"],
            {"start": 9, "end": 14, "label": "a", "score": 0.7},
            [5, 8, "a"],
        ]
    )
    assert ex.hallu_spans == [
        Span(start=0, end=8, label="a"),
        Span(start=9, end=18, label="a|b", score=0.7),
    ]


def test_example_span_past_the_end_names_the_id():
    # "Paris is in Italy." has 18 characters, so [12, 19) ends one past it.
    with pytest.raises(ValidationError, match=r"example 'bad/7': span \[12, 19\) ends past the response \(length 18\)"):
        example(id="bad/7", hallu_spans=[[12, 19]])


def test_soft_spans_and_steps_must_be_inside_the_response():
    with pytest.raises(ValidationError, match="soft span"):
        example(soft_spans=[SoftSpan(start=0, end=40, prob=0.5)])
    with pytest.raises(ValidationError, match="step"):
        example(steps=[Step(start=0, end=40, label=1)])


def test_partition_and_first_error():
    ex = example(steps=[Step(start=0, end=5, label=1), Step(start=6, end=11, label=0), Step(start=12, end=18)])
    assert ex.partition == "summ/toy"
    assert ex.first_error == 1
    assert example(steps=[Step(start=0, end=5, label=1)]).first_error == -1
    assert example().first_error is None


def test_prediction_spans_are_merged_and_scores_kept_as_given():
    pred = Prediction(id="t/1", spans=[[4, 6], [0, 5]], scores=[[4, 6], [0, 5]])
    assert pred.spans == [Span(start=0, end=6)]
    # Scored ranges are not merged: each keeps its own score for the threshold-free metrics.
    assert pred.scores == [Span(start=4, end=6), Span(start=0, end=5)]


def test_sentence_labels_must_be_binary():
    with pytest.raises(ValidationError, match="sentence_labels must be 0 or 1"):
        Prediction(id="t/1", sentence_labels=[0, 2])


def test_check_against_names_the_prediction_id():
    pred = Prediction(id="t/1", spans=[[3, 30]])
    with pytest.raises(
        ValueError, match=r"example 't/1': predicted span \[3, 30\) ends past the response \(length 18\)"
    ):
        pred.check_against(example())
    Prediction(id="t/1", spans=[[0, 18]]).check_against(example())


def _steps(*triples):
    return [{"start": s, "end": e, "label": lab} for s, e, lab in triples]


def test_steps_must_be_in_order_and_disjoint():
    from shambench.schema import Example

    ok = Example(id="m", dataset="d", task="math", response="a\nb\nc", steps=_steps((0, 1, 1), (2, 3, 1), (4, 5, 0)))
    assert ok.first_error == 2
    for bad in (_steps((2, 3, 1), (0, 1, 1)), _steps((0, 3, 1), (2, 5, 0)), _steps((3, 1, 1))):
        with pytest.raises(ValueError, match="step .* overlaps the step before it"):
            Example(id="m", dataset="d", task="math", response="a\nb\nc", steps=bad)


def test_soft_spans_must_not_be_empty():
    from shambench.schema import Example

    with pytest.raises(ValueError, match="soft span \\[3, 3\\) is empty"):
        Example(id="s", dataset="d", task="t", response="abcdef", soft_spans=[{"start": 3, "end": 3, "prob": 0.5}])


def test_more_annotators_of_one_example_than_the_cap_is_an_input_error():
    from shambench.errors import SourceError
    from shambench.schema import MAX_ANNOTATORS, Annotations, MarkedByMoreThan

    def majority(lists):
        return marked_by_more_than(lists, 0.5)

    # Every one of them marks [0, 4): each reading's gold (the others' majority) is that span.
    marked = {f"a{i}": [Span(start=0, end=4)] for i in range(MAX_ANNOTATORS)}
    readings = Annotations.leave_one_out(marked, majority, "majority").readings
    assert len(readings) == MAX_ANNOTATORS and readings[-1].others == [Span(start=0, end=4)]
    marked["one more"] = []
    for rule in (majority, MarkedByMoreThan(share=0.5)):  # called per annotator, or counted
        with pytest.raises(SourceError, match=f"^{MAX_ANNOTATORS + 1} annotators of one example, more than the 256"):
            Annotations.leave_one_out(marked, rule, "majority")
