"""SHARP adapter: invented step and span views in the released layout, with the card's defects."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest

from shambench.adapters.sharp import SharpAdapter, hal_spans, moved_spans, restore_right
from shambench.errors import SourceError

FIXTURES = Path(__file__).parent / "fixtures"


@pytest.fixture(scope="module")
def loaded():
    return SharpAdapter().load(FIXTURES)


def test_views_joined_by_position(loaded):
    ids = [ex.id for ex in loaded.examples]
    assert ids == [
        "sharp/gsm8k/test/0",
        "sharp/gsm8k/test/1",
        "sharp/gsm8k/test/2",
        "sharp/math/test/0",
        "sharp/math/test/1",
    ]
    # gsm8k row 3's annotation says "x = 3." where the answer says "x = 2.": dropped and counted
    assert loaded.dropped == {"annotation differs from the answer beyond whitespace": 1}


def test_steps_after_the_first_error_are_unlabelled(loaded):
    eggs = loaded.examples[1]
    assert eggs.response == "A box holds 6 eggs.\n\nTwo boxes hold 6 * 2 = 14 eggs.\n\nThe answer is 14."
    assert [s.label for s in eggs.steps] == [1, 0, None] and eggs.first_error == 1
    # both HAL fragments "14" located in the clean text: 19 + 2 + len("Two boxes hold 6 * 2 = ") = 44
    assert [(sp.start, sp.end) for sp in eggs.hallu_spans] == [(44, 46), (68, 70)]
    assert [eggs.response[sp.start : sp.end] for sp in eggs.hallu_spans] == ["14", "14"]


def test_card_defects_are_repaired_and_counted(loaded):
    tom, _, mia, right, _ = loaded.examples
    assert tom.meta["defects"] == ["placeholder"] and tom.hallu_spans == [] and tom.first_error == -1
    # annotation "<HAL>Half of 10 is  4.</HAL>\n\nSo she keeps\n4." reflows whitespace: span moved onto the answer
    assert mia.meta["defects"] == ["whitespace reflow"]
    assert [(sp.start, sp.end) for sp in mia.hallu_spans] == [(0, 16)]
    assert right.meta["defects"] == ["crlf right"]
    assert right.response == "We have \\left( 2 \\right)^2 = 4." and "\r" not in right.question


def test_hal_parser_and_alignment():
    assert hal_spans("a <HAL>bc</HAL> d <HAL>e") == ("a bc d e", [(2, 4), (7, 8)])  # unclosed runs to the end
    assert moved_spans("a  b", "a b", [(3, 4)]) == [(2, 3)]
    assert moved_spans("a b", "a c", [(0, 1)]) is None
    assert restore_right("\\left(x\right)") == "\\left(x\\right)"


def test_one_view_missing_is_an_error(tmp_path):
    shutil.copytree(FIXTURES / "sharp" / "SHARP-Math", tmp_path / "sharp" / "SHARP-Math")
    assert not SharpAdapter().available(tmp_path)
    with pytest.raises(SourceError, match="SHARP-Math-SPAN: no test data files"):
        SharpAdapter().load(tmp_path)


def test_unknown_split_is_refused():
    with pytest.raises(Exception, match="no 'dev' split"):
        SharpAdapter().load(FIXTURES, "dev")


def test_configs_are_found_through_the_card_whatever_the_file_names(tmp_path):
    import pyarrow.parquet as pq

    root = tmp_path / "sharp"
    card = ["---", "configs:"]
    for config in ("SHARP-GSM8K", "SHARP-GSM8K-SPAN", "SHARP-Math", "SHARP-Math-SPAN"):
        rows = pq.read_table(FIXTURES / "sharp" / config / "test-00000-of-00001.parquet").to_pylist()
        target = root / "data" / f"{config.lower()}_test.jsonl"
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_text("".join(json.dumps(r) + "\n" for r in rows))
        card += [f"- config_name: {config}", "  data_files:", "  - split: test", f"    path: data/{target.name}"]
    (root / "README.md").write_text("\n".join([*card, "---", "# SHARP", ""]))
    loaded = SharpAdapter().load(tmp_path)
    expected = SharpAdapter().load(FIXTURES)
    assert [(e.id, e.response, e.hallu_spans) for e in loaded.examples] == [
        (e.id, e.response, e.hallu_spans) for e in expected.examples
    ]
    assert loaded.dropped == expected.dropped and loaded.files[0] == "data/sharp-gsm8k_test.jsonl"
