"""ProcessBench adapter: the real release in ../shared/data, and broken invented files."""

from __future__ import annotations

import json
from collections import Counter

import pytest

from shambench.adapters.processbench import SUBSETS, ProcessBenchAdapter, step_labels
from shambench.errors import SourceError
from tests.conftest import require_shared


@pytest.fixture(scope="module")
def loaded():
    return ProcessBenchAdapter().load(require_shared("processbench").parent)


def test_counts_match_the_paper(loaded):
    n = Counter(ex.dataset for ex in loaded.examples)
    erroneous = Counter(ex.dataset for ex in loaded.examples if ex.first_error >= 0)
    assert [n[f"processbench/{s}"] for s in SUBSETS] == [400, 1000, 1000, 1000]
    assert [erroneous[f"processbench/{s}"] for s in SUBSETS] == [207, 594, 661, 759]
    assert sum(len(ex.steps) for ex in loaded.examples) == 25697  # SOURCE.md: steps total


def test_steps_rebuild_the_released_paragraphs(loaded):
    raw = json.loads(require_shared("processbench", "gsm8k.json").read_text(encoding="utf-8"))
    by_id = {ex.id: ex for ex in loaded.examples}
    for record in raw[:50]:
        ex = by_id[f"processbench/{record['id']}"]
        assert [ex.response[s.start : s.end] for s in ex.steps] == record["steps"]
        assert ex.first_error == record["label"]
        label = record["label"]
        if label >= 0:
            step = ex.steps[label]
            assert [(sp.start, sp.end) for sp in ex.hallu_spans] == [(step.start, step.end)]
            assert all(s.label is None for s in ex.steps[label + 1 :])
        else:
            assert ex.hallu_spans == [] and all(s.label == 1 for s in ex.steps)


def test_step_labels_stop_at_the_first_error():
    assert step_labels(4, 1) == [1, 0, None, None]
    assert step_labels(2, -1) == [1, 1]


def _write_release(root, records):
    folder = root / "processbench"
    folder.mkdir()
    for subset in SUBSETS:
        (folder / f"{subset}.json").write_text(json.dumps(records if subset == "math" else []), encoding="utf-8")
    return root


def test_a_label_past_the_steps_names_the_record(tmp_path):
    record = {"id": "math-0", "problem": "1+1?", "steps": ["It is 2."], "label": 3}
    with pytest.raises(SourceError, match=r"math\.json record 0: label 3 but only 1 steps"):
        ProcessBenchAdapter().load(_write_release(tmp_path, [record]))


def test_a_missing_field_names_the_record(tmp_path):
    with pytest.raises(SourceError, match=r"math\.json record 0: steps"):
        ProcessBenchAdapter().load(_write_release(tmp_path, [{"id": "math-0", "problem": "?", "label": -1}]))


def test_remote_files_are_pinned_with_checksums():
    files = ProcessBenchAdapter.remote_files
    assert [f.path for f in files] == [f"{s}.json" for s in SUBSETS]
    assert all(f.sha256 and len(f.sha256) == 64 and "raw.githubusercontent.com/QwenLM" in f.url for f in files)
