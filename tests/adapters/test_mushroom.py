"""Mu-SHROOM adapter: the real English test/validation files, and invented fixtures for the awkward cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shambench.adapters.mushroom import FILES
from shambench.data.adapter import adapters
from shambench.errors import DataError, SourceError
from tests.conftest import require_shared

FIXTURES = Path(__file__).parent / "fixtures"


def _load(data_dir: Path, split: str = "test"):
    return adapters.create("mushroom").load(data_dir, split)


def _released(path: Path) -> dict[str, dict]:
    return {row["id"]: row for row in map(json.loads, path.read_text(encoding="utf-8").splitlines())}


def test_real_test_split_matches_released_labels():
    path = require_shared("mushroom", FILES["test"])
    result = _load(path.parent.parent)
    released = _released(path)
    assert len(result.examples) == 154
    assert result.dropped == {}
    for ex in result.examples:
        row = released[ex.id.removeprefix("mushroom/")]
        assert ex.partition == "open_qa/mushroom"
        assert ex.response == row["model_output_text"]  # leading spaces kept: offsets count them
        assert [[s.start, s.end] for s in ex.hallu_spans] == row["hard_labels"]
        assert [(s.start, s.end, s.prob) for s in ex.soft_spans] == [
            (s["start"], s["end"], s["prob"]) for s in row["soft_labels"]
        ]
        assert all(0 <= s.start < s.end <= len(ex.response) for s in [*ex.hallu_spans, *ex.soft_spans])
        assert ex.meta["wikipedia_url"] == row["wikipedia_url"]
    # SOURCE.md: 149 of the 154 items have at least one hard span, 511 spans in all.
    assert sum(bool(ex.hallu_spans) for ex in result.examples) == 149
    assert sum(len(ex.hallu_spans) for ex in result.examples) == 511
    assert len({ex.id for ex in result.examples}) == 154


def test_real_validation_split_is_labelled():
    path = require_shared("mushroom", FILES["validation"])
    result = _load(path.parent.parent, "validation")
    assert len(result.examples) == 50
    assert {ex.split for ex in result.examples} == {"validation"}
    assert all(ex.soft_spans is not None for ex in result.examples)


def test_fixture_spans_keep_leading_space_and_strict_majority():
    by_id = {ex.id: ex for ex in _load(FIXTURES).examples}
    first = by_id["mushroom/tst-en-1"]
    # " The Pellow Lighthouse was built in " is 1+3+1+6+1+10+1+3+1+5+1+2+1 = 36 characters, so "1843" is [36, 40).
    assert [(s.start, s.end) for s in first.hallu_spans] == [(36, 40)]
    assert first.response[36:40] == "1843"
    # The 0.3 soft segment over "Edwin Carr" stays a soft span only.
    assert [(s.start, s.end, s.prob) for s in first.soft_spans] == [(36, 40, 0.8), (44, 54, 0.3)]
    # Two touching 0.6 segments [10, 15) + [15, 20) form one hard span.
    assert [(s.start, s.end) for s in by_id["mushroom/tst-en-2"].hallu_spans] == [(10, 20)]
    # prob = 0.5 is not a majority (prob > 0.5 is the rule).
    assert by_id["mushroom/tst-en-5"].hallu_spans == []
    assert by_id["mushroom/tst-en-5"].soft_spans[0].prob == 0.5
    assert first.meta == {
        "model": "mistralai/Mistral-7B-Instruct-v0.2",
        "lang": "EN",
        "wikipedia_url": "https://en.wikipedia.org/wiki/Item_tst_1",
    }


def _corrupt(tmp_path: Path, edit) -> Path:
    rows = [json.loads(line) for line in (FIXTURES / "mushroom" / FILES["test"]).read_text().splitlines()]
    edit(rows)
    (tmp_path / "mushroom").mkdir()
    (tmp_path / "mushroom" / FILES["test"]).write_text("".join(json.dumps(r) + "\n" for r in rows))
    return tmp_path / "mushroom" / FILES["test"]


def test_missing_field_names_file_line_and_field(tmp_path):
    path = _corrupt(tmp_path, lambda rows: rows[2].pop("model_output_text"))
    with pytest.raises(SourceError) as err:
        _load(tmp_path)
    assert str(err.value).startswith(f"{path}:3: model_output_text: Field required")
    assert "expected Mu-SHROOM JSON lines" in str(err.value)


def test_label_past_the_response_names_the_row(tmp_path):
    path = _corrupt(tmp_path, lambda rows: rows[0].update(hard_labels=[[36, 400]]))
    with pytest.raises(SourceError, match=rf"^{path}:1: .*'mushroom/tst-en-1'.*ends past the response"):
        _load(tmp_path)


def test_missing_file_and_unknown_split(tmp_path):
    assert not adapters.create("mushroom").available(tmp_path)
    with pytest.raises(
        SourceError, match=r"mushroom\.en-tst\.v1\.extra\.jsonl: file not found .*data download mushroom"
    ):
        _load(tmp_path)
    with pytest.raises(DataError, match=r"mushroom has no 'train' split \(it offers: test, validation\)"):
        _load(FIXTURES, "train")
