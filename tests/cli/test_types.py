"""Per error type figures of real runs (`groups.types` of results.json), checked against an independent count."""

from __future__ import annotations

import json
from collections import Counter
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.data.adapter import adapters
from shambench.schema import Prediction
from tests.conftest import require_shared

TYPED = ("ragtruth", "favabench", "faithbench", "felm")


def run(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _eval(detector: str, datasets: tuple[str, ...], run_dir: Path) -> dict:
    data = require_shared()
    result = run("eval", "--datasets", ",".join(datasets), "--detector", detector, "--data-dir", data,
                 "--run-dir", run_dir, "--no-progress", "--bootstrap", 50)  # fmt: skip
    assert result.exit_code == 0, result.output
    return json.loads((run_dir / "results.json").read_text())


def test_real_overlap_char_recall_per_type_equals_a_count_from_the_predictions_and_the_labels(tmp_path):
    datasets = ("ragtruth", "favabench")
    results = _eval("overlap", datasets, tmp_path / "run")
    predicted = {}
    for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines():
        pred = Prediction.model_validate_json(line)
        predicted[pred.id] = {k for s in pred.spans for k in range(s.start, s.end)}
    # The released labels as the adapters read them; characters are counted without whitespace.
    for name in datasets:
        gold, found = Counter(), Counter()
        for ex in adapters.create(name).load(require_shared()).examples:
            for span in ex.hallu_spans:
                chars = {k for k in range(span.start, span.end) if not ex.response[k].isspace()}
                for t in set(span.label.split("|")):
                    gold[t] += len(chars)
                    found[t] += len(chars & predicted.get(ex.id, set()))
        figures = results["groups"]["types"]["datasets"][name]["types"]
        assert set(figures) == set(gold)
        for t, scores in figures.items():
            assert scores["gold_chars"] == gold[t]
            assert scores["char_recall"]["recall"] == pytest.approx(found[t] / gold[t], abs=1e-12)
            low, high = scores["char_recall"]["ci"]
            assert low <= scores["char_recall"]["recall"] <= high
    # Every type of both sources, as the adapters declare them (FAVABench's `sentence` has no span in the release).
    types = results["groups"]["types"]["datasets"]
    assert set(types["ragtruth"]["types"]) == set(adapters.create("ragtruth").span_types)
    assert set(types["favabench"]["types"]) == set(adapters.create("favabench").span_types) - {"sentence"}


@pytest.mark.parametrize(("detector", "expected"), [("all", 1.0), ("none", 0.0)])
def test_real_all_finds_every_type_and_none_finds_none(detector, expected, tmp_path):
    types = _eval(detector, TYPED, tmp_path / "run")["groups"]["types"]["datasets"]
    assert set(types) == set(TYPED)
    for name in TYPED:
        assert types[name]["types"], name
        for scores in types[name]["types"].values():
            assert scores["char_recall"]["recall"] == scores["token_recall"]["recall"] == expected
            assert scores["char_recall"]["ci"] == scores["token_recall"]["ci"] == [expected, expected]
