"""Mu-SHROOM adapter: the real English test/validation files, and invented fixtures for the awkward cases."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shambench.adapters.mushroom import FILES, organisers_boundaries
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


def test_fixture_annotators_beside_the_majority_of_the_others():
    first = {ex.id: ex for ex in _load(FIXTURES).examples}["mushroom/tst-en-1"]
    a, b = first.annotations.readings
    # 0a marked "1843", 0b nothing. Left out 0a, the only other marked nothing; left out 0b, 0a is the gold.
    assert (a.annotator, [(s.start, s.end) for s in a.spans], a.others, a.others_soft) == (
        "annotator_0a",
        [(36, 40)],
        [],
        [],
    )
    assert (b.annotator, b.spans) == ("annotator_0b", [])
    assert [(s.start, s.end) for s in b.others] == [(36, 40)]
    assert [(s.start, s.end, s.prob) for s in b.others_soft] == [(36, 40, 1.0)]
    # One of two is not more than half: the two annotators' majority is empty, not the released "1843".
    assert first.annotations.reproduces_gold is False


def test_organisers_boundary_rule_by_hand():
    text = "Paris, the capital. Yes"
    # The start stays, the end runs over ", " and is then cut back before it.
    assert organisers_boundaries([(0, 6)], text) == [(0, 5)]
    # "the" runs on to 11, where " capital" starts once past its space: joined, then cut before ". ".
    assert organisers_boundaries([(7, 10), (10, 18)], text) == [(7, 18)]
    # A span that is only punctuation and space vanishes.
    assert organisers_boundaries([(5, 7)], text) == []
    # Only a new span moves the joining point: "ef" starts where the joined "ab, cd, " ends, yet stays apart, so
    # the comma and space before it are cut (had it joined, they would be marked).
    assert organisers_boundaries([(0, 2), (4, 6), (8, 10)], "ab, cd, ef") == [(0, 6), (8, 10)]
    # Unicode punctuation (。, category Po) and separators (U+3000, Zs) are trimmed too.
    assert organisers_boundaries([(0, 3)], "北京。上海") == [(0, 2)]
    assert organisers_boundaries([(2, 5)], "北京\u3000上海") == [(3, 5)]


def test_real_annotators_rebuild_the_released_gold_only_with_the_organisers_boundaries():
    path = require_shared("mushroom", FILES["test"])
    examples = _load(path.parent.parent).examples
    assert {len(ex.annotations.readings) for ex in examples} == {9, 10, 11, 12}
    assert sum(ex.annotations.reproduces_gold for ex in examples) == 154
    raw = adapters.create("mushroom", boundaries="raw").load(path.parent.parent).examples
    assert sum(ex.annotations.reproduces_gold for ex in raw) == 83
    validation = _load(path.parent.parent, "validation").examples
    # One validation span ends a character past its answer: cut there, and counted.
    assert [ex.annotations.unplaced for ex in validation if ex.annotations.unplaced] == [
        {"span ends past the answer (cut at its end, kept)": 1}
    ]


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
