"""FaithBench adapter: the real 750 samples, invented batches for the label rules, and corrupt files."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest

from shambench.adapters.faithbench import BATCHES
from shambench.data.adapter import adapters
from shambench.errors import SourceError
from tests.conftest import require_shared


def _load(data_dir: Path):
    return adapters.create("faithbench").load(data_dir)


def _covered(spans) -> set[int]:
    return {i for s in spans for i in range(s.start, s.end)}


@pytest.fixture(scope="module")
def real():
    folder = require_shared("faithbench", "data_for_release")
    return folder, _load(folder.parent.parent)


def test_real_counts_and_ids(real):
    _, result = real
    # All 15 batches x 50 samples are kept: none is defective (SHAM-Bench kept 745 without saying which).
    assert len(result.examples) == 750
    assert result.dropped == {}
    assert len({ex.id for ex in result.examples}) == 750
    assert {ex.partition for ex in result.examples} == {"summ/faithbench"}
    # SOURCE.md: with Questionable and Unwanted as hallucinations, 511 of 750 samples are hallucinated.
    assert sum(bool(ex.hallu_spans) for ex in result.examples) == 511
    # 144 summaries begin with whitespace, and the responses keep it (offsets count it).
    assert sum(ex.response[:1].isspace() for ex in result.examples) == 144


def test_real_first_sample_matches_the_readme(real):
    _, result = real
    first = result.examples[0]
    # The README's example: batch 1, sample 0, " The film ..." with "production" at [78, 88) marked Unwanted.
    assert first.id == "faithbench/1-0"
    assert [(s.start, s.end, s.label) for s in first.hallu_spans] == [(78, 88, "Unwanted|Unwanted.Intrinsic")]
    assert first.response[78:88] == "production"
    assert first.meta["summarizer"] == "mistralai/Mistral-7B-Instruct-v0.3"


def test_real_spans_are_the_union_of_hallucination_annotations(real):
    folder, result = real
    by_id = {ex.id: ex for ex in result.examples}
    for batch in BATCHES:
        for sample in json.loads((folder / f"batch_{batch}.json").read_text(encoding="utf-8"))["samples"]:
            ex = by_id[f"faithbench/{batch}-{sample['sample_id']}"]
            assert ex.response == sample["summary"]
            marked = set()
            for ann in sample["annotations"]:
                assert ex.response[ann["summary_start"] : ann["summary_end"]] == ann["summary_span"]
                if any(lab.startswith(("Unwanted", "Questionable")) for lab in ann["label"]):
                    marked |= set(range(ann["summary_start"], ann["summary_end"]))
            assert _covered(ex.hallu_spans) == marked
            assert all(0 <= s.start < s.end <= len(ex.response) for s in ex.hallu_spans)


def test_real_annotators_per_batch_and_the_gold_they_rebuild(real):
    _, result = real
    # 2-5 annotators per batch (the union over its 50 samples), and their union is the released gold everywhere.
    assert Counter(len(ex.annotations.readings) for ex in result.examples) == {2: 300, 3: 350, 4: 50, 5: 50}
    assert all(ex.annotations.reproduces_gold for ex in result.examples)


def _annotation(summary: str, text: str, label: list[str], annotator: str = "a1", **override) -> dict:
    start = summary.index(text)
    fields = {
        "annot_id": 1,
        "annotator_id": annotator,
        "annotator_name": annotator,
        "label": label,
        "note": "invented",
        "summary_span": text,
        "summary_start": start,
        "summary_end": start + len(text),
        "source_span": None,
        "source_start": None,
        "source_end": None,
    }
    return fields | override


def _write_batches(tmp_path: Path, samples: list[dict]) -> Path:
    """Batch 1 holds the samples; the other released batches are empty."""
    folder = tmp_path / "faithbench" / "data_for_release"
    folder.mkdir(parents=True)
    for batch in BATCHES:
        content = samples if batch == 1 else []
        (folder / f"batch_{batch}.json").write_text(json.dumps({"samples": content}, indent=2), encoding="utf-8")
    return folder


def _sample(sample_id: int, summary: str, annotations: list[dict]) -> dict:
    metadata = {"summarizer": "org/model-7b", "hhemv1": 0.5, "raw_sample_id": 100 + sample_id}
    return {
        "sample_id": sample_id,
        "source": "The mill opened in 1901 and closed in 1950.",
        "summary": summary,
        "annotations": annotations,
        "metadata": metadata,
    }


def test_label_rules_on_invented_batches(tmp_path):
    lead = " The mill opened in 1899 and shut in 1950 after a fire."
    benign = "The old mill opened in 1901."
    mixed = "The mill closed in 1950 forever."
    samples = [
        _sample(
            0,
            lead,
            [
                _annotation(lead, "1899", ["Unwanted", "Unwanted.Intrinsic"]),
                # A second annotator's overlapping span unites with the first: "in 1899" + "1899" = [17, 24).
                _annotation(lead, "in 1899", ["Questionable"], "a2"),
                _annotation(lead, "after a fire", ["Unwanted.Extrinsic", "Benign"], "a2"),
                _annotation(lead, "shut", ["Benign"]),
                _annotation(lead, "mill", []),
            ],
        ),
        _sample(1, benign, [_annotation(benign, "old", ["Benign"])]),
        _sample(2, mixed, [_annotation(mixed, "forever", ["Benign", "Questionable"])]),
        _sample(3, "No one annotated this.", []),
        _sample(4, "Offsets that miss.", [_annotation("Offsets that miss.", "miss", ["Unwanted"], summary_span="hit")]),
        _sample(5, "No offsets here.", [_annotation("No offsets here.", "here", ["Questionable"], summary_end=None)]),
    ]
    _write_batches(tmp_path, samples)
    result = _load(tmp_path)
    by_id = {ex.id: ex for ex in result.examples}
    assert list(by_id) == ["faithbench/1-0", "faithbench/1-1", "faithbench/1-2", "faithbench/1-3"]
    assert result.dropped == {
        "annotation summary_span differs from the summary at its offsets": 1,
        "annotation without summary offsets": 1,
    }
    first = by_id["faithbench/1-0"]
    assert first.response == lead  # not stripped
    # " The mill opened " is 1+3+1+4+1+6+1 = 17 characters: "in 1899" is [17, 24); "after a fire" starts at
    # 17 + len("in 1899 and shut in 1950 ") = 17 + 25 = 42 and ends at 54. "shut" (Benign) and "mill" (no label)
    # are not hallucinations.
    assert [(s.start, s.end, s.label) for s in first.hallu_spans] == [
        (17, 24, "Questionable|Unwanted|Unwanted.Intrinsic"),
        (42, 54, "Unwanted|Unwanted.Extrinsic"),  # the subtype implies its type
    ]
    assert first.response[42:54] == "after a fire"
    assert first.meta == {"batch": 1, "sample_id": 0, "summarizer": "org/model-7b", "raw_sample_id": 100}
    assert by_id["faithbench/1-1"].hallu_spans == []
    # "The mill closed in 1950 " is 24 characters: "forever" is [24, 31).
    assert [(s.start, s.end) for s in by_id["faithbench/1-2"].hallu_spans] == [(24, 31)]
    assert by_id["faithbench/1-3"].hallu_spans == []

    # Annotators: a1 and a2 annotated batch 1, so both read each of its samples, those they marked nothing in too.
    readings = {r.annotator: r for r in first.annotations.readings}
    assert [(s.start, s.end) for s in readings["a1"].spans] == [(20, 24)]  # "1899"; Benign and unlabelled left out
    assert [(s.start, s.end) for s in readings["a2"].spans] == [(17, 24), (42, 54)]
    # Each beside the union of the other's Unwanted/Questionable spans, and the union of all is the gold.
    assert [(s.start, s.end) for s in readings["a1"].others] == [(17, 24), (42, 54)]
    assert [(s.start, s.end) for s in readings["a2"].others] == [(20, 24)]
    assert all(ex.annotations.reproduces_gold for ex in result.examples)
    for silent in ("faithbench/1-1", "faithbench/1-3"):
        assert [(r.annotator, r.spans) for r in by_id[silent].annotations.readings] == [("a1", []), ("a2", [])]


def test_truncated_batch_names_the_file(tmp_path):
    folder = _write_batches(tmp_path, [_sample(0, "A summary.", [])])
    text = (folder / "batch_7.json").read_text()
    (folder / "batch_7.json").write_text(text[:-3])
    with pytest.raises(SourceError, match=r"batch_7\.json:2: not valid JSON .*expected FaithBench's"):
        _load(tmp_path)


def test_batch_without_samples_key_names_the_field(tmp_path):
    folder = _write_batches(tmp_path, [_sample(0, "A summary.", [])])
    (folder / "batch_3.json").write_text(json.dumps({"items": []}))
    with pytest.raises(SourceError, match=r"batch_3\.json: samples: Field required"):
        _load(tmp_path)


def test_sample_without_summary_names_the_record(tmp_path):
    sample = _sample(0, "A summary.", [])
    del sample["summary"]
    _write_batches(tmp_path, [sample])
    with pytest.raises(SourceError, match=r"batch_1\.json: samples\.0\.summary: Field required"):
        _load(tmp_path)


def test_missing_batch_names_the_file(tmp_path):
    folder = _write_batches(tmp_path, [])
    (folder / "batch_16.json").unlink()
    with pytest.raises(SourceError, match=r"batch_16\.json: file not found"):
        _load(tmp_path)
