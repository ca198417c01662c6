"""The results schema: typed groups, `partitions` (schema 2.0), and files of schema 1.0 still read."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from pydantic import ValidationError

from shambench.leaderboard.build import load_results
from shambench.schema import Example, Prediction
from shambench.scoring.results import SCHEMA_VERSION, Results
from shambench.scoring.scorer import score
from shambench.scoring.steps import MathGroup

# A results.json written by shambench before schema 2.0 (`shambench eval --suite math-shepherd --detector
# first-step-wrong` on tests/adapters/fixtures): per-partition scores under `datasets`, groups untyped.
OLD = Path(__file__).parent / "fixtures" / "results_schema_1.0.json"


def test_a_schema_1_file_reads_as_2_0_with_its_partitions_and_typed_groups():
    raw = json.loads(OLD.read_text())
    assert raw["schema_version"] == "1.0" and "partitions" not in raw
    results = load_results(OLD)
    assert SCHEMA_VERSION == "2.0" == results.schema_version
    assert results.model_dump(mode="json")["partitions"] == raw["datasets"]
    assert results.partitions["math_step/math_shepherd"].n == 2
    # The math group is a MathGroup; its figures are those tests/detectors/test_math.py computes by hand.
    assert isinstance(results.groups.math, MathGroup) and results.groups.mushroom is None
    assert results.groups.math.datasets["math_shepherd"].char.precision == 50
    written = json.loads(results.model_dump_json())
    assert "datasets" not in written and written["groups"] == raw["groups"]


def test_groups_are_written_only_when_present_and_unknown_groups_are_kept():
    ex = Example(id="a", task="qa", dataset="d", response="Paris is big.", hallu_spans=[[0, 5]])
    results = score([ex], [Prediction(id="a", spans=[[0, 5]])], n_resamples=10)
    assert results.model_dump(mode="json")["groups"] == {}
    plugin = {"convention": "a plugin's own view", "partitions": {"qa/d": 0.5}}
    data = results.model_dump(mode="json") | {"groups": {"plugin_view": plugin}}
    again = Results.model_validate(data)
    assert again.model_dump(mode="json")["groups"] == {"plugin_view": plugin}


def test_a_known_group_of_the_wrong_shape_is_refused():
    data = json.loads(OLD.read_text())
    data["groups"]["math"] = {"suites": "none"}
    with pytest.raises(ValidationError, match="groups.math"):
        Results.model_validate(data)
