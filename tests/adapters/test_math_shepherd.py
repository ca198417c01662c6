"""Math-Shepherd adapter: openr's real 7-row sample, and invented rows in the raw and TRL formats."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from shambench.adapters.math_shepherd import MathShepherdAdapter, RawRow, raw_steps
from shambench.errors import SourceError
from tests.conftest import require_shared

FIXTURES = Path(__file__).parent / "fixtures"


def test_real_sample_counts():
    loaded = MathShepherdAdapter().load(require_shared("math_shepherd").parent, "sample")
    labels = [s.label for ex in loaded.examples for s in ex.steps]
    # SOURCE.md: 7 rows, 25 steps, 5 labelled + and 20 labelled -, every row with at least one -
    assert (len(loaded.examples), len(labels), sum(labels)) == (7, 25, 5)
    assert all(ex.first_error >= 0 for ex in loaded.examples)
    assert all(ex.response.startswith("Step 1:") for ex in loaded.examples)


def test_real_data_has_no_test_split_and_says_so():
    with pytest.raises(SourceError, match="pass --split sample"):
        MathShepherdAdapter().load(require_shared("math_shepherd").parent, "test")


def test_raw_format_fixture():
    loaded = MathShepherdAdapter().load(FIXTURES, "train")
    assert loaded.dropped == {"annotation leaked into the prompt (TRL's twelve prefixes)": 1}
    first, second, third = loaded.examples
    assert first.question == "Sam has 5 pens and gives away 2. How many pens are left?"
    assert [s.label for s in first.steps] == [1, 1] and first.hallu_spans == []
    # labels - + -: not monotone, every - step is a gold span; the response joins steps with one newline
    assert [s.label for s in second.steps] == [0, 1, 0]
    lines = second.response.split("\n")
    assert lines == ["Step 1: Multiply first: 2 * 3 = 5.", "Step 2: Then 2 + 6 = 8.", "Step 3: The answer is: 7"]
    assert [(sp.start, sp.end) for sp in second.hallu_spans] == [(0, 34), (59, 83)]  # 34 + 1 + 23 + 1 = 59
    # no "Step 1:" in the prompt: split on the first "?" and the first step gets the "Step 1:" prefix
    assert third.question == "Find 10 / 2?"
    assert third.response.split("\n") == ["Step 1: First, 10 / 2 = 5.", "The answer is: 5"]
    assert second.meta["source_task"] == "MATH"


def test_trl_format_fixture():
    loaded = MathShepherdAdapter().load(FIXTURES, "test")
    assert [ex.id for ex in loaded.examples] == ["math-shepherd/test/0", "math-shepherd/test/1"]
    ok, wrong = loaded.examples
    assert ok.response == "Step 1: 7 - 2 = 5.\nStep 2: The answer is: 5" and ok.first_error == -1
    assert [s.label for s in wrong.steps] == [0, 0] and len(wrong.hallu_spans) == 2


def test_raw_row_rules():
    row = RawRow(input="Q? Step 1: a ки\nStep 2: b ки", label="Q? Step 1: a -\nStep 2: b +")
    assert raw_steps(row) == ("Q?", ["Step 1: a", "Step 2: b"], [0, 1])
    with pytest.raises(ValueError, match="expected \\+ or -"):
        raw_steps(RawRow(input="Q? Step 1: a ки", label="Q? Step 1: a x"))
    with pytest.raises(ValueError, match="label has"):
        raw_steps(RawRow(input="Q? Step 1: a ки", label="Q? Step 1: a +  "))


def test_a_broken_raw_line_names_the_line(tmp_path):
    folder = tmp_path / "math_shepherd"
    folder.mkdir()
    good = {"input": "Q? Step 1: a ки", "label": "Q? Step 1: a +"}
    bad = {"input": "Q? Step 1: a ки", "label": "Q? Step 1: a ?"}
    (folder / "math-shepherd.jsonl").write_text(json.dumps(good) + "\n" + json.dumps(bad) + "\n")
    with pytest.raises(SourceError, match=r"math-shepherd\.jsonl:2: .*expected \+ or -"):
        MathShepherdAdapter().load(tmp_path, "train")
