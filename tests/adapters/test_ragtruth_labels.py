"""Predictions in RAGTruth's own label format (`response.jsonl` lines), read unchanged."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from shambench.adapters.ragtruth import LABEL_FORMAT_READING, RAGTruthLabels
from shambench.cli import main
from shambench.data.benchmark import load_benchmark
from shambench.data.formats import format_of
from shambench.errors import DataError
from shambench.schema import Span
from tests.conftest import require_shared

LINE = {
    "id": "24",
    "source_id": "15596",
    "model": "gpt-4-0613",
    "temperature": 0.7,
    "labels": [
        {"start": 30, "end": 41, "text": "Philadelphia", "meta": "x", "label_type": "Evident Conflict"},
        {"start": 3, "end": 9, "text": "FBI ha", "label_type": "Subtle Baseless Info", "implicit_true": True},
        {"start": 35, "end": 50, "label_type": "Subtle Conflict", "due_to_null": False},
    ],
    "split": "test",
    "quality": "good",
    "response": "The FBI has charged ...",
}


def test_labels_become_spans_of_their_type_and_other_keys_are_ignored(tmp_path):
    path = tmp_path / "pred.jsonl"
    path.write_text(json.dumps(LINE) + "\n" + json.dumps({"id": "25", "labels": []}) + "\n")
    assert isinstance(format_of(path, None), RAGTruthLabels)
    got = RAGTruthLabels().read(path)
    first = got.predictions[0][1]
    # Every type is a hallucination, implicit_true too (the adapter's gold rule); overlapping labels merge.
    assert first.id == "ragtruth/24"
    assert first.spans == [
        Span(start=3, end=9, label="Subtle Baseless Info"),
        Span(start=30, end=50, label="Evident Conflict|Subtle Conflict"),
    ]
    assert got.predictions[1] == (2, got.predictions[1][1]) and got.predictions[1][1].spans == []
    assert got.datasets == ["ragtruth"] and got.skipped == {}
    assert got.conventions == {"ragtruth_labels": LABEL_FORMAT_READING}


@pytest.mark.parametrize(
    ("line", "message"),
    [
        ('{"id": 24, "labels": []}', "id: Input should be a valid string"),
        ('{"id": "24", "labels": [{"start": 3.0, "end": 9, "label_type": "Evident Conflict"}]}', "labels.0.start"),
        ('{"id": "24", "labels": [{"start": 3, "end": 9}]}', "labels.0.label_type: Field required"),
        ('{"id": "24", "labels": [{"start": 9, "end": 9, "label_type": "Evident Conflict"}]}', "empty or reversed"),
        ('{"id": "24", "labels": [', "not valid JSON"),
    ],
)
def test_a_bad_line_is_one_error_naming_file_and_line(tmp_path, line, message):
    path = tmp_path / "pred.jsonl"
    path.write_text('{"id": "23", "labels": []}\n' + line + "\n")
    with pytest.raises(DataError) as err:
        RAGTruthLabels().read(path)
    assert str(err.value).startswith(f"{path}:2: ") and message in str(err.value)


def test_score_reads_a_label_format_file_of_real_test_responses(tmp_path):
    root = require_shared("ragtruth").parent
    examples = [ex for ex in load_benchmark("ragtruth", data_dir=root).examples if ex.hallu_spans][:3]
    # The gold labels written back as response.jsonl lines: each predicted example scores 1.
    lines = [
        {
            "id": ex.id.removeprefix("ragtruth/"),
            "model": ex.meta["model"],
            "response": ex.response,
            "labels": [
                {"start": s.start, "end": s.end, "text": ex.response[s.start : s.end], "label_type": s.label}
                for s in ex.hallu_spans
            ],
        }
        for ex in examples
    ]
    path = tmp_path / "pred.jsonl"
    path.write_text("".join(json.dumps(line) + "\n" for line in lines))
    out, rows = tmp_path / "results.json", tmp_path / "rows.jsonl"
    result = CliRunner().invoke(
        main,
        ["score", "-d", "ragtruth", "--data-dir", str(root), "--predictions", str(path), "--bootstrap", "10",
         "--out", str(out), "--per-example", str(rows)],
    )  # fmt: skip
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert results["run"]["predictions_format"] == "ragtruth-labels"
    assert results["conventions"]["ragtruth_labels"] == LABEL_FORMAT_READING
    assert results["n_examples"] - results["missing_predictions"] == 3
    scored = {r["id"]: r for r in map(json.loads, rows.read_text().splitlines()) if r["status"] == "predicted"}
    assert sorted(scored) == sorted(ex.id for ex in examples)
    assert all(r["token"]["f1"] == 1.0 and r["sentence"]["f1"] == 1.0 for r in scored.values())
