"""FELM adapter: false segments placed as gold spans with their error types, on invented and real files."""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from pathlib import Path

import pytest

from shambench.adapters.felm import AMBIGUOUS, DOMAINS, LENGTHS, NOT_FOUND, NOT_TEXT, UNPLACED
from shambench.data.adapter import adapters
from shambench.errors import SourceError
from tests.conftest import require_shared


def _row(index: str, response, segments: list[str], labels: list[bool], types=None) -> dict:
    row = {
        "index": index,
        "source": "quora",
        "prompt": f"Prompt {index}?",
        "response": response,
        "segmented_response": segments,
        "labels": labels,
        "comment": ["" for _ in labels],
    }
    if types is not None:
        row["type"] = types
    return row


def _write(tmp_path: Path, rows: dict[str, list[dict]]) -> Path:
    """The five domain files as released (JSON lines; a NaN response written as JSON's `NaN`, as Python's json
    module writes it); a domain not given is an empty file."""
    folder = tmp_path / "felm"
    folder.mkdir()
    for domain in DOMAINS:
        lines = [json.dumps(row) for row in rows.get(domain, [])]
        (folder / f"{domain}.jsonl").write_text("".join(line + "\n" for line in lines), encoding="utf-8")
    return tmp_path


WK = [
    # "Paris is in Germany." is false (a knowledge error); the other segment is true.
    _row("0", "Paris is in Germany. It is big.", ["Paris is in Germany.", "It is big."], [False, True],
         ["knowledge_error", None]),
    # The segments add a full stop the response lacks (as GSM8K rows do): placed fuzzily, without it.
    _row("1", "It costs 2+2=<<2+2=4>>4 dollars\nSo 4 in total", ["It costs 2+2=<<2+2=4>>4 dollars.",
         "So 4 in total."], [True, False], [None, "reasoning_error"]),
    _row("2", float("nan"), ["A."], [True]),  # the release has two NaN responses
    _row("3", "One. Two.", ["One.", "Two."], [True, False, False]),  # more labels than segments
    _row("4", "Nothing here matches.", ["Completely different words entirely"], [False]),  # unplaced
]  # fmt: skip
MATH = [
    # "2 = 2." occurs twice: the cursor places the false one after the first segment; no type list.
    _row("0", "2 = 2. 2 = 2.", ["2 = 2.", "2 = 2."], [True, False]),
    _row("1", "Fooled.Off topic.", ["Fooled.", "Off topic."], [False, False], ["fooled", "irrelevant_with_qst"]),
]


def test_false_segments_are_typed_gold_spans_and_every_other_row_is_counted(tmp_path):
    result = adapters.create("felm").load(_write(tmp_path, {"wk": WK, "math": MATH}))
    by_id = {ex.id: ex for ex in result.examples}
    assert list(by_id) == ["felm/wk/0", "felm/wk/1", "felm/math/0", "felm/math/1"]
    paris = by_id["felm/wk/0"]
    assert (paris.partition, paris.question, paris.context) == ("open_qa_long/felm", "Prompt 0?", "")
    assert paris.meta == {"domain": "wk", "source": "quora", "index": "0"}
    assert [(s.start, s.end, s.label) for s in paris.hallu_spans] == [(0, 20, "knowledge")]
    # "It costs 2+2=<<2+2=4>>4 dollars\n" is 32 characters; "So 4 in total" runs to the end (45).
    assert [(s.start, s.end, s.label) for s in by_id["felm/wk/1"].hallu_spans] == [(32, 45, "reasoning")]
    assert [(s.start, s.end, s.label) for s in by_id["felm/math/0"].hallu_spans] == [(7, 13, None)]
    # Two touching false segments (no space between them, as in some MATH answers) merge into one span carrying
    # both types.
    assert [(s.start, s.end, s.label) for s in by_id["felm/math/1"].hallu_spans] == [(0, 17, "fooled|irrelevant")]
    assert result.dropped == {NOT_TEXT: 1, LENGTHS: 1, UNPLACED: 1}
    # Only false segments count: wk/0, wk/1 (fuzzy), wk/4 (unplaced), math/0 (ambiguous), math/1 (two).
    assert result.spans == {
        "placed: exact": 3,
        "placed: fuzzy": 1,
        f"ambiguous: {AMBIGUOUS}": 1,
        f"unplaced: {NOT_FOUND}": 1,
    }
    assert result.files == [f"{domain}.jsonl" for domain in DOMAINS]


@pytest.mark.parametrize(
    ("types", "message"),
    [(["knowledge_error"], "type has 1 entries for 2 labels"), (["typo", None], "unknown error type(s) ['typo']")],
)
def test_a_type_list_that_does_not_fit_is_refused(tmp_path, types, message):
    rows = {"science": [_row("0", "A. B.", ["A.", "B."], [False, True], types)]}
    with pytest.raises(SourceError, match=re.escape(f"science.jsonl:1: {message}")):
        adapters.create("felm").load(_write(tmp_path, rows))


def test_real_release_matches_the_pinned_downloads():
    folder = require_shared("felm")
    commit = "bdb2936639cb01c81ea60bc7926928c63ad2dd52"
    assert [(r.url, r.path) for r in adapters.create("felm").remote_files] == [
        (f"https://raw.githubusercontent.com/hkust-nlp/felm/{commit}/data/test/{domain}.jsonl", f"{domain}.jsonl")
        for domain in DOMAINS
    ]
    for domain, digest in DOMAINS.items():
        assert hashlib.sha256((folder / f"{domain}.jsonl").read_bytes()).hexdigest() == digest


def test_real_felm_keeps_838_of_847_responses():
    data = require_shared("felm").parent
    result = adapters.create("felm").load(data)
    assert len(result.examples) == 838
    assert result.dropped == {NOT_TEXT: 2, LENGTHS: 7}
    assert len(result.examples) + sum(result.dropped.values()) == 847
    assert result.spans == {"placed: exact": 739, "placed: normalized": 4, "placed: fuzzy": 29}
    assert Counter(ex.meta["domain"] for ex in result.examples) == {
        "wk": 183,
        "science": 125,
        "math": 194,
        "reasoning": 200,
        "writing_rec": 136,
    }
    # 772 false segments, of which 5 pairs touch and merge: 767 spans; 561 responses without an error.
    labels = Counter(s.label for ex in result.examples for s in ex.hallu_spans)
    assert labels == {"knowledge": 346, None: 245, "irrelevant": 103, "reasoning": 40, "fooled": 33}
    assert sum(not ex.hallu_spans for ex in result.examples) == 561


def test_real_rows_checked_by_hand():
    examples = {ex.id: ex for ex in adapters.create("felm").load(require_shared("felm").parent).examples}
    # The README's example: the first of two segments is false (a knowledge error, 94 reactors).
    wk = examples["felm/wk/0"]
    (span,) = wk.hallu_spans
    assert wk.response[span.start : span.end] == (
        "The United States has the highest number of nuclear power plants in the world, with 94 operating reactors."
    )
    assert (span.start, span.label) == (0, "knowledge")
    # GSM8K: the last four of eight segments are false, untyped; each segment adds a full stop the response
    # lacks, so the fuzzy placement ends at the line's last word.
    gsm = examples["felm/reasoning/7"]
    assert [gsm.response[s.start : s.end] for s in gsm.hallu_spans] == [
        "So he makes an extra 75,000-25,000=$<<75000-25000=50000>>50,000 per year",
        "So he makes back the lost income in 100,000/50,000=<<100000/50000=2>>2 years",
        "He also has to pay back the loans so that takes 200,000/50,000=<<200000/50000=4>>4 years",
        "So in total, it takes 2+4=<<2+4=6>>6 years. Answer: \\boxed{6}.",
    ]
    assert {s.label for s in gsm.hallu_spans} == {None}
    rec = examples["felm/writing_rec/5"]
    assert [(s.start, s.end, s.label) for s in rec.hallu_spans][:3] == [
        (204, 405, "knowledge"),
        (407, 528, "knowledge"),
        (529, 640, "irrelevant"),
    ]
    assert rec.response[529:640].startswith("As the evidence mounts against him, Merrill must unravel the truth")
