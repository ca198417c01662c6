"""RAGTruth adapter: the real test and train splits, the official release layout on an invented fixture, and errors."""

from __future__ import annotations

import ast
import csv
import json
import shutil
import sys
from collections import Counter
from pathlib import Path

import pandas as pd
import pytest
from hypothesis import given
from hypothesis import strategies as st

from shambench.adapters.ragtruth import CR_SOURCES, CR_TABLE, FAITHJUDGE_FILES, record_lines
from shambench.data.adapter import adapters
from shambench.data.benchmark import load_benchmark
from shambench.errors import DataError, SourceError
from tests.conftest import require_shared

FIXTURES = Path(__file__).parent / "fixtures"


def _load(data_dir: Path, split: str = "test"):
    return adapters.create("ragtruth").load(data_dir, split)


@pytest.fixture(scope="module")
def real_test():
    root = require_shared("ragtruth", "constrainedreasoner_test").parent
    return root, _load(root.parent)


def _released_table(root: Path) -> list[dict]:
    csv.field_size_limit(sys.maxsize)
    with (root / CR_TABLE).open(encoding="utf-8", newline="") as fh:
        return list(csv.DictReader(fh, delimiter="\t"))


def test_real_test_split_counts_match_sham_bench(real_test):
    _, result = real_test
    # SHAM-Bench Table 1: context_qa 875, data2txt 900, summ 900; nothing is defective.
    assert Counter(ex.task for ex in result.examples) == {"context_qa": 875, "data2txt": 900, "summ": 900}
    assert result.dropped == {}
    assert {ex.split for ex in result.examples} == {"test"}
    # SOURCE.md: hallucinated responses QA 160, Summary 204, Data2txt 579 (943 in all).
    hallucinated = Counter(ex.task for ex in result.examples if ex.hallu_spans)
    assert hallucinated == {"context_qa": 160, "summ": 204, "data2txt": 579}


def test_real_ids_are_the_released_response_ids_in_order(real_test):
    root, result = real_test
    table = _released_table(root)
    assert [ex.id for ex in result.examples] == [f"ragtruth/{row['id']}" for row in table]
    assert len({ex.id for ex in result.examples}) == 2675
    assert [ex.id for ex in _load(root.parent).examples] == [ex.id for ex in result.examples]


def test_real_spans_are_the_released_labels(real_test):
    root, result = real_test
    by_id = {ex.id: ex for ex in result.examples}
    labels = 0
    for row in _released_table(root):
        ex = by_id[f"ragtruth/{row['id']}"]
        released = ast.literal_eval(row["labels"])
        labels += len(released)
        for lab in released:
            # Every released label's text sits at its offsets, inside one gold span that carries its type.
            assert ex.response[lab["start"] : lab["end"]] == lab["text"]
            (span,) = [s for s in ex.hallu_spans if s.start <= lab["start"] and lab["end"] <= s.end]
            assert lab["label_type"] in span.label.split("|")
        for span in ex.hallu_spans:
            assert 0 <= span.start < span.end <= len(ex.response)
            assert any(span.start == lab["start"] for lab in released)
    # SOURCE.md: 1,533 labels; overlapping ones merge into 1,517 spans.
    assert labels == 1533
    assert sum(len(ex.hallu_spans) for ex in result.examples) == 1517


def test_real_contexts_render_each_task(real_test):
    root, result = real_test
    for ex in result.examples:
        grounding = (root / CR_SOURCES / f"{ex.meta['source_id']}.txt").read_text(encoding="utf-8")
        if ex.task == "summ":
            assert (ex.question, ex.context) == ("", grounding.strip())
        elif ex.task == "context_qa":
            record = json.loads(grounding)
            assert (ex.question, ex.context) == (record["question"].strip(), record["passages"].strip())
        else:
            record = json.loads(grounding)
            assert ex.question == ""
            assert ex.context.splitlines()[0] == f"name: {record['name']}"
    assert {ex.meta["model"] for ex in result.examples} >= {"gpt-4-0613", "llama-2-7b-chat"}


def test_real_train_split_is_faithjudge_minus_test_sources(real_test):
    root, _ = real_test
    require_shared("ragtruth", FAITHJUDGE_FILES["QA"])
    train = _load(root.parent, "train")
    # SOURCE.md: FaithJudge holds 265 QA and 126 Summary responses of train sources, no Data2txt ones.
    assert Counter(ex.task for ex in train.examples) == {"context_qa": 265, "summ": 126}
    assert train.dropped == {}
    assert {ex.split for ex in train.examples} == {"train"}
    assert len({ex.id for ex in train.examples}) == 391
    official = (root / "official_test_source_ids.tsv").read_text().splitlines()[1:]
    official_ids = {line.split("\t")[0] for line in official}
    table_ids = {row["EncounterID"] for row in _released_table(root)}
    assert table_ids == official_ids and len(official_ids) == 450
    assert not {ex.meta["source_id"] for ex in train.examples} & official_ids
    first = train.examples[0]
    assert first.id == f"ragtruth/{first.meta['source_id']}-{first.meta['model']}"


def test_official_layout_keeps_good_test_rows_and_counts_drops():
    result = _load(FIXTURES)
    assert result.files == ["source_info.jsonl", "response.jsonl"]
    by_id = {ex.id: ex for ex in result.examples}
    # 501 QA, 503 summary, 505 and 510 data2txt are good test rows; 504 and 509 are train.
    assert list(by_id) == ["ragtruth/501", "ragtruth/503", "ragtruth/505", "ragtruth/510"]
    assert result.dropped == {
        "quality incorrect_refusal (not good)": 1,  # 502
        "quality truncated (not good)": 1,  # 506
        "label text differs from the response at its offsets": 1,  # 507 says "muffins" over "scones"
        "no source record for its source_id": 1,  # 508 points at source 90009
    }
    qa = by_id["ragtruth/501"]
    assert (qa.task, qa.split, qa.question) == ("context_qa", "test", "how long do you roast beets")
    # "Beets are roasted at " is 5+1+3+1+7+1+2+1 = 21 characters, so "400 degrees" is [21, 32).
    assert [(s.start, s.end, s.label) for s in qa.hallu_spans] == [(21, 32, "Evident Conflict")]
    assert qa.context.startswith("passage 1:Preheat") and qa.context.endswith("with garlic.")
    passages = qa.meta.pop("reference")
    assert qa.meta == {"source_id": "90001", "model": "gpt-4-0613", "layout": "official", "temperature": 0.7}
    # The baseline's reference is the released passages, with the blank line after the last one.
    assert passages == qa.context + "\n\n"
    summ = by_id["ragtruth/503"]
    # "in March 2025" [43, 56) and "March 2025 and will cost $4 million" [46, 81) overlap: one span, both types.
    assert [(s.start, s.end, s.label) for s in summ.hallu_spans] == [(43, 81, "Evident Baseless Info|Subtle Conflict")]
    assert summ.response[43:81] == "in March 2025 and will cost $4 million"
    assert summ.context.endswith("open next year.")  # the article's trailing newline is not context
    assert summ.meta["reference"] == summ.context + "\n"  # but is the baseline's reference
    assert by_id["ragtruth/505"].hallu_spans == []
    # A data-to-text record's reference is its Python repr (str() of the dict, as prepare_dataset.py writes it):
    # single quotes, None/False/True, floats as Python prints them, the escaped newline of the review kept.
    assert by_id["ragtruth/505"].meta["reference"] == (
        "{'name': 'Blue Kettle Cafe', 'address': '12 Harbour Rd', 'city': 'Port Ellis', 'state': 'ME', "
        "'categories': 'Cafes, Breakfast & Brunch', 'hours': None, 'attributes': {'WiFi': 'free', "
        "'OutdoorSeating': False, 'Ambience': {'cozy': True, 'loud': None}, 'Tags': []}, 'business_stars': 4.5, "
        "'review_info': [{'review_stars': 5.0, 'review_date': '2023-04-01 09:15:00', "
        "'review_text': 'Great scones.\\nFriendly staff.'}]}"
    )


def test_official_layout_train_split():
    result = _load(FIXTURES, "train")
    assert [(ex.id, ex.task, ex.split) for ex in result.examples] == [("ragtruth/504", "summ", "train")]
    # "It costs " is 9 characters: "$5 million" is [9, 19).
    assert [(s.start, s.end) for s in result.examples[0].hallu_spans] == [(9, 19)]
    assert result.dropped == {"quality truncated (not good)": 1}  # 509


def test_data2txt_record_renders_as_indented_lines():
    (ex,) = [ex for ex in _load(FIXTURES).examples if ex.id == "ragtruth/505"]
    assert ex.context == "\n".join(
        [
            "name: Blue Kettle Cafe",
            "address: 12 Harbour Rd",
            "city: Port Ellis",
            "state: ME",
            "categories: Cafes, Breakfast & Brunch",
            "hours: null",
            "attributes:",
            "  WiFi: free",
            "  OutdoorSeating: false",
            "  Ambience:",
            "    cozy: true",
            "    loud: null",
            "  Tags: []",
            "business_stars: 4.5",
            "review_info:",
            "  [1]:",
            "    review_stars: 5.0",
            "    review_date: 2023-04-01 09:15:00",
            "    review_text: Great scones.\nFriendly staff.",
        ]
    )


_words = st.text(st.characters(blacklist_characters="\n\r"), max_size=8)
_scalars = st.one_of(st.none(), st.booleans(), st.integers(), st.floats(allow_nan=False), _words)
_records = st.dictionaries(
    st.text("abcdefghij_", min_size=1, max_size=6),
    st.recursive(_scalars, lambda inner: st.lists(inner, max_size=3) | st.dictionaries(_words, inner, max_size=3)),
    max_size=5,
)


@given(_records)
def test_record_rendering_is_deterministic_with_one_unindented_line_per_key(record):
    lines = record_lines(record)
    assert lines == record_lines(json.loads(json.dumps(record)))
    # Without newlines in the values, each top-level key opens exactly one unindented line, in the record's order.
    top = [line for line in lines if not line.startswith(" ")]
    assert [line.split(":", 1)[0] for line in top] == list(record)
    assert all(line.startswith("  ") for line in lines if line not in top)


def _cr_layout(tmp_path: Path) -> Path:
    """A two-row ConstrainedReasoner table written by pandas, as the release was, with its grounding sources."""
    root = tmp_path / "ragtruth"
    (root / CR_SOURCES).mkdir(parents=True)
    labels = [
        {
            "start": 4,
            "end": 9,
            "text": "green",
            "meta": "EVIDENT CONFLICT\nred in the source",
            "label_type": "Evident Conflict",
            "implicit_true": False,
            "due_to_null": False,
        }
    ]
    rows = [
        ("7001", "80001", "gpt-4-0613", 0.7000000000000001, repr(labels), 'The green door opened.\nIt was "late".'),
        ("7002", "80002", "llama-2-7b-chat", 1.0, "[]", "Unable to answer based on given passages."),
    ]
    frame = pd.DataFrame(
        [
            {
                "id": rid,
                "EncounterID": sid,
                "model": model,
                "temperature": temp,
                "labels": lab,
                "split": "test",
                "quality": "good",
                "response": resp,
                "task_type": "Summary" if sid == "80001" else "QA",
                "hall spans": "[]",
                "IsHallucination_Res": int(lab != "[]"),
            }
            for rid, sid, model, temp, lab, resp in rows
        ]
    )
    frame.to_csv(root / CR_TABLE, sep="\t", index=False)
    (root / CR_SOURCES / "80001.txt").write_text("The red door opened late at night.", encoding="utf-8")
    qa = {"question": "what opens doors", "passages": "passage 1:Keys open doors.\n\n"}
    (root / CR_SOURCES / "80002.txt").write_text(json.dumps(qa), encoding="utf-8")
    return root


def test_constrainedreasoner_layout_parses_quoted_rows_and_python_label_lists(tmp_path):
    _cr_layout(tmp_path)
    result = _load(tmp_path)
    assert result.files == [CR_TABLE, f"{CR_SOURCES}/*.txt"]
    summ, qa = result.examples
    assert (summ.id, summ.task, summ.response) == ("ragtruth/7001", "summ", 'The green door opened.\nIt was "late".')
    assert [(s.start, s.end, s.label) for s in summ.hallu_spans] == [(4, 9, "Evident Conflict")]
    assert summ.context == "The red door opened late at night."
    assert summ.meta["temperature"] == 0.7  # 0.7000000000000001 in the table
    assert (qa.id, qa.task, qa.question, qa.context) == (
        "ragtruth/7002",
        "context_qa",
        "what opens doors",
        "passage 1:Keys open doors.",
    )


def test_official_layout_wins_over_constrainedreasoner(tmp_path):
    root = _cr_layout(tmp_path)
    for name in ("response.jsonl", "source_info.jsonl"):
        shutil.copy(FIXTURES / "ragtruth" / name, root / name)
    assert {ex.meta["layout"] for ex in _load(tmp_path).examples} == {"official"}


def test_faithjudge_train_skips_test_sources(tmp_path):
    root = _cr_layout(tmp_path)
    (root / "faithjudge_eval_data").mkdir()
    test_source = {"source_id": 80001, "source": "The red door.", "responses": []}
    train_source = {
        "source_id": 81234,
        "source": "Trains leave at noon.",
        "responses": [{"model": "gpt-4-0613", "response": "Trains leave at one.", "labels": []}],
    }
    lines = {"Summary": [test_source, train_source], "QA": [], "Data2txt": []}
    for task, name in FAITHJUDGE_FILES.items():
        (root / name).write_text("".join(json.dumps(obj) + "\n" for obj in lines[task]), encoding="utf-8")
    result = _load(tmp_path, "train")
    assert [(ex.id, ex.task, ex.split, ex.context) for ex in result.examples] == [
        ("ragtruth/81234-gpt-4-0613", "summ", "train", "Trains leave at noon.")
    ]


def _official_copy(tmp_path: Path) -> Path:
    root = tmp_path / "ragtruth"
    shutil.copytree(FIXTURES / "ragtruth", root)
    return root


def test_truncated_response_file_names_file_and_line(tmp_path):
    root = _official_copy(tmp_path)
    text = (root / "response.jsonl").read_text()
    (root / "response.jsonl").write_text(text[: text.index("\n") + 40])  # line 2 is cut short
    with pytest.raises(SourceError, match=r"response\.jsonl:2: not valid JSON .*expected RAGTruth response lines"):
        _load(tmp_path)


def test_response_without_split_field_names_the_field(tmp_path):
    root = _official_copy(tmp_path)
    rows = [json.loads(line) for line in (root / "response.jsonl").read_text().splitlines()]
    del rows[2]["split"]
    (root / "response.jsonl").write_text("".join(json.dumps(r) + "\n" for r in rows))
    with pytest.raises(SourceError, match=r"response\.jsonl:3: split: Field required"):
        _load(tmp_path)


def test_constrainedreasoner_table_with_wrong_columns(tmp_path):
    root = _cr_layout(tmp_path)
    frame = pd.read_csv(root / CR_TABLE, sep="\t").rename(columns={"EncounterID": "source"})
    frame.to_csv(root / CR_TABLE, sep="\t", index=False)
    with pytest.raises(SourceError, match=r"RAGTruth_responselevel_test\.tsv: header lacks column\(s\) EncounterID"):
        _load(tmp_path)


def test_constrainedreasoner_table_with_a_short_row(tmp_path):
    root = _cr_layout(tmp_path)
    lines = (root / CR_TABLE).read_text().splitlines(keepends=True)
    # The first row spans lines 2-3 (its response holds a newline); cut the second row after its labels.
    (root / CR_TABLE).write_text("".join(lines[:3]) + "\t".join(lines[3].split("\t")[:5]) + "\n")
    with pytest.raises(SourceError, match=r"RAGTruth_responselevel_test\.tsv:4: expected 11 tab-separated fields"):
        _load(tmp_path)


def test_missing_grounding_source_is_named(tmp_path):
    root = _cr_layout(tmp_path)
    (root / CR_SOURCES / "80002.txt").unlink()
    with pytest.raises(SourceError, match=r"groundingsources/80002\.txt: file not found"):
        _load(tmp_path)


def test_train_without_faithjudge_files_is_named(tmp_path):
    _cr_layout(tmp_path)
    with pytest.raises(SourceError, match=r"ragtruth_qa\.jsonl: file not found"):
        _load(tmp_path, "train")


def test_unknown_split_is_refused():
    with pytest.raises(DataError, match="ragtruth has no 'dev' split"):
        _load(FIXTURES, "dev")


def test_load_benchmark_reports_a_corrupt_source_and_keeps_going(tmp_path):
    root = _official_copy(tmp_path)
    (root / "source_info.jsonl").write_text('{"source_id": "1", "task_type": "QA"\n')
    # the only source asked for is corrupt: nothing loads, and the error says which file and line
    with pytest.raises(
        DataError, match=r"no dataset could be loaded .*ragtruth: .*source_info.jsonl:1: not valid JSON"
    ):
        load_benchmark("ragtruth", data_dir=tmp_path)
