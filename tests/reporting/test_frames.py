"""Results and run folders as DataFrames: values by hand on a two-example run, and run folders read back."""

from __future__ import annotations

import json

import pytest

from shambench.reporting.frames import runs_df, samples_df
from shambench.schema import Example, Prediction, Span
from shambench.scoring.scorer import score
from tests.run_helpers import eval_run, write_jsonl

# Tokens: The [0,3) cat [4,7) sat [8,11) . [11,12)
TEXT = "The cat sat."


def example(i: str, gold: list[list[int]]) -> Example:
    return Example(id=i, task="summ", dataset="x", response=TEXT, hallu_spans=[Span(start=a, end=b) for a, b in gold])


def test_results_frame_has_a_row_per_partition_task_and_overall_with_hand_values():
    examples = [example("a", [[4, 7]]), example("b", [])]
    # a: predicts "cat sat" -> token P 1/2, R 1, F1 2/3; b: predicts nothing with no gold -> P = R = F1 = 1.
    preds = [Prediction(id="a", spans=[Span(start=4, end=11)]), Prediction(id="b")]
    frame = score(examples, preds, n_resamples=10).to_pandas()
    assert list(frame["level"]) == ["partition", "task", "overall"]
    assert list(frame["name"]) == ["summ/x", "summ", "overall (1 task)"]
    row = frame.iloc[0]
    assert row["n"] == 2 and row["n_with_gold"] == 1
    assert row["token_precision"] == pytest.approx((0.5 + 1) / 2)
    assert row["token_recall"] == pytest.approx(1.0)
    assert row["token_f1"] == pytest.approx((2 / 3 + 1) / 2)
    # pooled over both examples' tokens: tp 1, predicted 2, gold 1
    assert row["token_pooled_precision"] == pytest.approx(0.5)
    assert row["token_pooled_f1"] == pytest.approx(2 / 3)
    assert frame.iloc[2]["token_f1"] == pytest.approx((2 / 3 + 1) / 2)
    assert frame.iloc[2]["token_std"] == 0.0


def test_runs_df_and_samples_df_read_every_run_below_a_folder(tmp_path):
    examples = write_jsonl(
        tmp_path / "examples.jsonl",
        [
            {"id": "a", "task": "summ", "dataset": "x", "response": TEXT, "hallu_spans": [[4, 7]]},
            {"id": "b", "task": "qa", "dataset": "y", "response": TEXT, "hallu_spans": []},
        ],
    )
    runs = tmp_path / "runs"
    eval_run(examples, "none", runs / "none")
    eval_run(examples, "all", runs / "nested" / "all")
    # a linked run folder is not followed: `none` is read once
    (runs / "linked").symlink_to(runs / "none", target_is_directory=True)
    frame = runs_df(runs).set_index("detector")
    assert sorted(frame.index) == ["all", "none"]
    assert list(frame["name"]) == list(frame.index)  # no model asked for: the name is the detector
    # none: a has gold -> F1 0; b has none -> F1 1. all: a -> P 1/4, R 1, F1 0.4; b -> F1 0.
    assert frame.loc["none", "f1/summ"] == 0.0 and frame.loc["none", "f1/qa"] == 1.0
    assert frame.loc["all", "f1/summ"] == pytest.approx(0.4)
    assert frame.loc["all", "overall_f1"] == pytest.approx(0.2)
    assert frame.loc["none", "n_examples"] == 2
    assert json.loads(frame.loc["none", "params"]) == {}
    samples = samples_df(runs)
    assert len(samples) == 4
    assert set(samples["detector"]) == {"all", "none"} and set(samples["name"]) == {"all", "none"}


def test_runs_df_names_a_missing_folder(tmp_path):
    with pytest.raises(FileNotFoundError, match="no such folder"):
        runs_df(tmp_path / "absent")
