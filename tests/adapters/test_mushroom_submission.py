"""Mu-SHROOM submission files read unchanged: ids, derived hard labels, skipped ranges, the organisers' float reading."""

from __future__ import annotations

import json
import math

import pytest

from shambench.adapters.mushroom_multilingual import MushroomSubmission
from shambench.data.formats import format_of, formats
from shambench.errors import DataError
from shambench.schema import Example, Prediction, SoftSpan, Span
from shambench.scoring.scorer import Scorer
from shambench.scoring.shared_task import EXACT_READING, ORGANISERS_READING

# Extra keys, as participants often sent the test line back with their labels filled in.
EXTRA = {"lang": "EN", "model_input": "Q?", "model_output_text": "text", "model_id": "m"}


def submission(tmp_path, *rows: dict | str) -> object:
    path = tmp_path / "mushroom.en-tst.v1.jsonl"
    path.write_text("".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows))
    return path


def read(path, exact=False):
    return MushroomSubmission().read(path, exact_floats=exact)


def test_ids_map_to_the_language_examples_and_extra_keys_are_ignored(tmp_path):
    path = submission(
        tmp_path,
        {"id": "tst-en-1", **EXTRA, "hard_labels": [[0, 4]], "soft_labels": [{"start": 0, "end": 4, "prob": 0.6}]},
        {"id": "val-de-3", "hard_labels": []},
    )
    got = read(path)
    assert [(line, p.id) for line, p in got.predictions] == [(1, "mushroom-en/tst-en-1"), (2, "mushroom-de/val-de-3")]
    first = got.predictions[0][1]
    # 0.6 as pandas reads it: 6 * 0.1.
    assert first.spans == [Span(start=0, end=4)] and first.soft_spans == [SoftSpan(start=0, end=4, prob=6 * 0.1)]
    assert 6 * 0.1 != 0.6
    # Without soft_labels, Cor reads the hard labels with probability 1 (the organisers' infer_soft_labels).
    assert got.predictions[1][1].soft_spans is None
    assert got.datasets == ["mushroom-de", "mushroom-en"] and got.skipped == {}
    assert got.conventions == {"mushroom_probabilities": ORGANISERS_READING}


def test_hard_labels_come_from_soft_labels_when_absent(tmp_path):
    # prob > 0.5 only (0.5 itself is not), sorted, adjacent ranges merged: [2, 9) and [12, 14).
    soft = [
        {"start": 12, "end": 14, "prob": 0.9},
        {"start": 2, "end": 5, "prob": 0.75},
        {"start": 5, "end": 9, "prob": 0.51},
        {"start": 9, "end": 12, "prob": 0.5},
    ]
    pred = read(submission(tmp_path, {"id": "tst-en-1", "soft_labels": soft})).predictions[0][1]
    assert pred.spans == [Span(start=2, end=9), Span(start=12, end=14)]
    # Cor keeps the file's order (a later range overwrites an earlier one, as in the organisers' scorer).
    assert [s.start for s in pred.soft_spans] == [12, 2, 5, 9]


def test_ranges_the_organisers_scorer_ignores_are_skipped_and_counted(tmp_path):
    row = {
        "id": "tst-en-1",
        "hard_labels": [[-1, -1], [3, 7], [5, 5]],
        "soft_labels": [
            {"start": -1, "end": -1, "prob": 0.0},
            {"start": -1, "end": -1},
            {"start": 3, "end": 7, "prob": 0.8},
            {"start": 8, "end": 9},
        ],
    }
    got = read(submission(tmp_path, row, {"id": "tst-en-2", "hard_labels": [[-1, -1]]}))
    assert got.skipped == {
        "hard_labels: empty range (end <= start), which the organisers' scorer ignores": 3,
        "soft_labels: empty range (end <= start), which the organisers' scorer ignores": 2,
        "soft_labels: non-empty range without prob (the organisers' scorer stops at it)": 1,
    }
    pred = got.predictions[0][1]
    assert pred.spans == [Span(start=3, end=7)] and pred.soft_spans == [SoftSpan(start=3, end=7, prob=0.8)]
    assert got.predictions[1][1].spans == []


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": "tst-EN-1", "hard_labels": []}', 'id "tst-EN-1" is not a Mu-SHROOM item id'),
        ('{"id": "tst-xx-1", "hard_labels": []}', 'id "tst-xx-1" is not a Mu-SHROOM item id'),
        ('{"id": "tst-en-1"}', "neither hard_labels nor soft_labels"),
        ('{"id": "tst-en-1", "hard_labels": [[-1, 4]]}', "hard_labels: [-1, 4) starts before the text"),
        ('{"id": "tst-en-1", "hard_labels": [[1, 4, 1]]}', "hard_labels.0: expected [start, end], got [1, 4, 1]"),
        ('{"id": "tst-en-1", "hard_labels": [[1.0, 4]]}', "hard_labels.0: expected an integer character offset"),
        ('{"id": "tst-en-1", "soft_labels": [{"start": 0, "end": 2, "prob": 1.5}]}', "expected a probability"),
        ('{"id": "tst-en-1", "soft_labels": [{"start": 0, "end": 2, "prob": NaN}]}', "NaN is not a JSON number"),
        ('{"id": "tst-en-1", "hard_labels": [[0, 2]', "Expecting"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, line, message):
    path = submission(tmp_path, {"id": "tst-en-2", "hard_labels": []}, line)
    with pytest.raises(DataError) as err:
        read(path)
    assert str(err.value).startswith(f"{path}:2: ") and message in str(err.value)
    assert "expected a Mu-SHROOM submission line" in str(err.value)


def test_recognised_by_its_keys_or_named(tmp_path):
    mushroom = submission(tmp_path, {"id": "tst-en-1", "soft_labels": []})
    native = tmp_path / "pred.jsonl"
    native.write_text('{"id": "mushroom-en/tst-en-1", "spans": []}\n')
    assert isinstance(format_of(mushroom, None), MushroomSubmission)
    assert format_of(native, None) is None
    assert format_of(mushroom, "shambench") is None
    assert isinstance(format_of(native, "mushroom"), MushroomSubmission)
    assert "mushroom" in [e.name for e in formats.entries()]


def _probability_ties(tmp_path, exact):
    """Item of 4 characters: gold 0 / 0.2 / 0.6 / 0.8; predicted 0 / 0.10000000000000001 / 0.10000000000000002 /
    0.9, and 0.5000000000000001 on a second item, written as a participant's float32-to-text might."""
    examples = [
        Example(
            id="mushroom-en/tst-en-1",
            task="open_qa",
            dataset="mushroom-en",
            response="abcd",
            hallu_spans=[[2, 4]],
            soft_spans=[{"start": 1, "end": 2, "prob": 0.2}, {"start": 2, "end": 3, "prob": 0.6}, {"start": 3, "end": 4, "prob": 0.8}],
        ),
        Example(id="mushroom-en/tst-en-2", task="open_qa", dataset="mushroom-en", response="wxyz", hallu_spans=[[0, 2]],
                soft_spans=[{"start": 0, "end": 2, "prob": 0.6}]),
    ]  # fmt: skip
    path = submission(
        tmp_path,
        '{"id": "tst-en-1", "soft_labels": [{"start": 1, "end": 2, "prob": 0.10000000000000001}, '
        '{"start": 2, "end": 3, "prob": 0.10000000000000002}, {"start": 3, "end": 4, "prob": 0.9}]}',
        '{"id": "tst-en-2", "soft_labels": [{"start": 0, "end": 2, "prob": 0.5000000000000001}]}',
    )
    got = read(path, exact)
    results = Scorer(examples, n_resamples=10).score(p for _, p in got.predictions)
    view = results.model_dump(mode="json")["groups"]["mushroom"]["languages"]["en"]
    return got, results.partitions["open_qa/mushroom-en"].mushroom, view


def test_probabilities_differing_past_the_15th_digit_tie_as_on_the_leaderboard(tmp_path):
    got, scores, view = _probability_ties(tmp_path, exact=False)
    assert got.predictions[0][1].soft_spans[0].prob == got.predictions[0][1].soft_spans[1].prob == 0.1
    # Item 1, ranks gold [1, 2, 3, 4] against predicted [1, 2.5, 2.5, 4]: covariance 4.5 over sqrt(5 * 4.5),
    # sqrt(0.9); hard label [3, 4) (0.9 > 0.5) against gold [2, 4): IoU 1/2.
    # Item 2: 0.5000000000000001 reads 0.5, so no hard label: IoU 0; Cor of [.6 .6 0 0] and [.5 .5 0 0]: 1.
    assert scores.iou == 0.25
    assert math.isclose(scores.cor, (math.sqrt(0.9) + 1.0) / 2, rel_tol=1e-15)
    assert (view["iou"], view["cor"]) == (scores.iou, scores.cor)


def test_the_exact_reading_is_one_option_away(tmp_path):
    got, scores, _ = _probability_ties(tmp_path, exact=True)
    assert got.conventions == {"mushroom_probabilities": EXACT_READING}
    # Item 1 ranks [1, 2, 3, 4] both sides: Cor 1, IoU 1/2 as before; item 2's 0.5000000000000001 > 0.5 is a hard
    # label [0, 2): IoU 1.
    assert (scores.iou, scores.cor) == (0.75, 1.0)


def test_a_prediction_read_from_a_submission_is_a_plain_prediction(tmp_path):
    # The reader's output is validated like any prediction: the scorer needs no Mu-SHROOM rule of its own.
    pred = read(submission(tmp_path, {"id": "tst-en-1", "hard_labels": [[0, 2], [1, 3]]})).predictions[0][1]
    assert pred == Prediction(id="mushroom-en/tst-en-1", spans=[[0, 3]])
