"""`shambench score` on a Mu-SHROOM submission file as participants sent it, against the organisers' computation.

The submissions are built from the real English test items in exactly the official format (extra keys, `[-1, -1]`
ranges, an empty soft range without prob, missing hard labels, probabilities that differ past the 15th digit);
the expected figures come from an independent computation in this file that follows the organisers' scorer
(`participant_kit/scorer.py`: `pandas.read_json`, `recompute_hard_labels`, character sets, `scipy.stats.spearmanr`).
"""

from __future__ import annotations

import io
import json

import numpy as np
import pandas as pd
import pytest
from click.testing import CliRunner
from scipy.stats import spearmanr

from shambench.cli import main
from shambench.scoring.shared_task import EXACT_READING, ORGANISERS_READING
from tests.conftest import require_shared


def organisers_scores(ref_text: str, pred_text: str, precise: bool = False) -> tuple[float, float]:
    """Mean IoU and Cor as the organisers' scorer computes them (precise: pandas' correctly rounded reading)."""

    def records(text: str, is_ref: bool) -> list[dict]:
        df = pd.read_json(io.StringIO(text), lines=True, precise_float=precise)
        if "hard_labels" not in df.columns:
            df["hard_labels"] = df.soft_labels.apply(hard_from_soft)
        elif "soft_labels" not in df.columns:
            df["soft_labels"] = df.hard_labels.apply(lambda h: [{"start": s, "end": e, "prob": 1.0} for s, e in h])
        if is_ref:
            df["text_len"] = df.model_output_text.apply(len)
        return df.sort_values("id").to_dict(orient="records")

    def hard_from_soft(soft: list[dict]) -> list[list[int]]:
        out: list[list[int]] = []
        prev_end = -1
        for lbl in sorted(soft, key=lambda s: (s["start"], s["end"])):
            if lbl["prob"] > 0.5:
                if lbl["start"] == prev_end:
                    out[-1][-1] = lbl["end"]
                else:
                    out.append([lbl["start"], lbl["end"]])
                prev_end = lbl["end"]
        return out

    ious, cors = [], []
    for ref, pred in zip(records(ref_text, True), records(pred_text, False), strict=True):
        assert ref["id"] == pred["id"]
        r = {i for s in ref["hard_labels"] for i in range(*s)}
        p = {i for s in pred["hard_labels"] for i in range(*s)}
        ious.append(1.0 if not r and not p else len(r & p) / len(r | p))
        vecs = []
        for labels in (ref["soft_labels"], pred["soft_labels"]):
            vec = [0.0] * ref["text_len"]
            for s in labels:
                for i in range(s["start"], s["end"]):
                    vec[i] = s["prob"]
            vecs.append(vec)
        levels = [len({round(v, 8) for v in vec}) for vec in vecs]
        cors.append(float(levels[0] == levels[1]) if min(levels) == 1 else spearmanr(*vecs).correlation)
    return float(np.mean(ious)), float(np.mean(cors))


@pytest.fixture(scope="module")
def gold():
    path = require_shared("mushroom", "multilingual", "mushroom.en-tst.v1.jsonl")
    return path.parents[2], path.read_text(encoding="utf-8")


def nudged(prob: float, d16: int, d17: int) -> str:
    """`prob` with two more digits after its 15th fraction digit (1 stays 1: a probability is at most 1)."""
    return "1.0" if prob == 1 else f"{prob:.15f}{d16}{d17}"


def soft_only_submission(gold_text: str) -> str:
    """Soft labels only (no line has hard_labels), with extra keys: each gold item's soft labels nudged so that
    neighbouring probabilities differ only in the 17th digit, and an empty range. (A range without prob would stop
    the organisers' scorer here: `recompute_hard_labels` reads every prob.)"""
    lines = []
    for k, line in enumerate(gold_text.splitlines()):
        row = json.loads(line)
        labels = ", ".join(
            f'{{"start": {s["start"]}, "end": {s["end"]}, "prob": {nudged(s["prob"], (i + k) % 3, i % 10)}}}'
            for i, s in enumerate(row["soft_labels"])
        )
        extra = {key: row[key] for key in ("lang", "model_input", "model_output_text", "model_id")}
        lines.append(
            f'{{"id": "{row["id"]}", {json.dumps(extra)[1:-1]}, "soft_labels": [{labels}, '
            '{"start": -1, "end": -1, "prob": 0.0}]}'
        )
    return "\n".join(lines) + "\n"


def score(data_dir, path, *options):
    out = path.parent / "results.json"
    result = CliRunner().invoke(
        main,
        ["score", "-d", "mushroom-multilingual", "--data-dir", str(data_dir), "--predictions", str(path),
         "--bootstrap", "10", "--out", str(out), *options],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads(out.read_text()), result.output


def test_a_soft_only_submission_scores_as_on_the_official_leaderboard(gold, tmp_path):
    data_dir, gold_text = gold
    text = soft_only_submission(gold_text)
    path = tmp_path / "mushroom.en-tst.v1.jsonl"
    path.write_text(text)
    results, output = score(data_dir, path)
    view = results["groups"]["mushroom"]
    assert list(view["languages"]) == ["en"] and view["languages"]["en"]["n"] == 154
    iou, cor = organisers_scores(gold_text, text)
    assert (view["languages"]["en"]["iou"], view["languages"]["en"]["cor"]) == pytest.approx((iou, cor), abs=1e-12)
    assert list(results["partitions"]) == ["open_qa/mushroom-en"] and results["missing_predictions"] == 0
    assert results["conventions"]["mushroom_probabilities"] == ORGANISERS_READING
    assert results["run"]["predictions_format"] == "mushroom"
    assert results["run"]["skipped_ranges"] == {
        "soft_labels: empty range (end <= start), which the organisers' scorer ignores": 154
    }
    assert "note: 154 ranges skipped: soft_labels: empty range (end <= start)" in output
    # The same file read exactly gives what pandas' precise reading gives, and here a different Cor.
    exact, _ = score(data_dir, path, "--exact-floats")
    precise = organisers_scores(gold_text, text, precise=True)
    got = exact["groups"]["mushroom"]["languages"]["en"]
    assert (got["iou"], got["cor"]) == pytest.approx(precise, abs=1e-12)
    assert abs(got["cor"] - cor) > 1e-6
    assert exact["conventions"]["mushroom_probabilities"] == EXACT_READING


@pytest.mark.parametrize("soft", [None, [{"start": -1, "end": -1}]])
def test_hard_labels_with_empty_ranges(gold, tmp_path, soft):
    data_dir, gold_text = gold
    rows = [json.loads(line) for line in gold_text.splitlines()]
    # Every other item: its gold hard labels shifted by one character, with a [-1, -1] range; no soft labels, or
    # only an empty one without prob (which the organisers' scorer never reads when hard labels are given).
    text = "".join(
        json.dumps(
            {"id": r["id"], "hard_labels": [[s + 1, e] for s, e in r["hard_labels"] if e > s + 1] + [[-1, -1]]}
            | ({} if soft is None else {"soft_labels": soft})
        )
        + "\n"
        for r in rows[::2]
    )
    path = tmp_path / "sub.jsonl"
    path.write_text(text)
    results, _ = score(data_dir, path, "--predictions-format", "mushroom")
    en = results["groups"]["mushroom"]["languages"]["en"]
    skipped = {"hard_labels: empty range (end <= start), which the organisers' scorer ignores": 77}
    if soft is not None:
        skipped["soft_labels: empty range (end <= start), which the organisers' scorer ignores"] = 77
    assert results["missing_predictions"] == 77 and results["run"]["skipped_ranges"] == skipped
    # The organisers' scorer needs every item: the 77 missing ones are scored as predicting nothing, as shambench
    # scores a missing prediction.
    empty = {"hard_labels": []} | ({} if soft is None else {"soft_labels": []})
    full = text + "".join(json.dumps({"id": r["id"]} | empty) + "\n" for r in rows[1::2])
    assert (en["iou"], en["cor"]) == pytest.approx(organisers_scores(gold_text, full), abs=1e-12)


def test_a_bad_submission_line_is_one_error(gold, tmp_path):
    data_dir, _ = gold
    path = tmp_path / "sub.jsonl"
    path.write_text('{"id": "tst-en-1", "hard_labels": []}\n{"id": "tst-en-9999", "hard_labels": [[0, 1]]}\n')
    result = CliRunner().invoke(
        main, ["score", "-d", "mushroom-multilingual", "--data-dir", str(data_dir), "--predictions", str(path)]
    )
    assert result.exit_code == 2
    assert f"{path}:2: prediction for unknown example id 'mushroom-en/tst-en-9999'" in result.output


def test_list_formats_names_shambench_and_mushroom():
    result = CliRunner().invoke(main, ["list", "formats"])
    assert result.exit_code == 0
    assert "shambench" in result.output and "mushroom" in result.output
    assert "shambench.adapters.mushroom_multilingual" in result.output


def test_exact_floats_needs_a_released_format(tmp_path):
    path = tmp_path / "pred.jsonl"
    path.write_text('{"id": "a", "spans": []}\n')
    result = CliRunner().invoke(main, ["score", "--examples", str(path), "--predictions", str(path), "--exact-floats"])
    assert result.exit_code == 2 and "--exact-floats applies to a released format" in result.output


def test_without_data_selected_the_format_names_its_source(gold, tmp_path):
    data_dir, _ = gold
    path = tmp_path / "sub.jsonl"
    path.write_text('{"id": "tst-fr-1", "hard_labels": []}\n')
    out = tmp_path / "results.json"
    result = CliRunner().invoke(
        main, ["score", "--data-dir", str(data_dir), "--predictions", str(path), "--bootstrap", "10", "--out", str(out)]
    )
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert list(results["partitions"]) == ["open_qa/mushroom-fr"] and results["run"]["predictions_format"] == "mushroom"
    assert results["n_examples"] == 150 and results["missing_predictions"] == 149
