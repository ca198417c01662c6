"""The exported JSON Schemas: current with the models, and every results.json and leaderboard.json validates."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner
from jsonschema import Draft202012Validator

from shambench.cli import main
from shambench.leaderboard.build import build
from shambench.leaderboard.schema import LEADERBOARD_SCHEMA, RESULTS_SCHEMA, SCHEMA_DIR, schema_text, schemas

REPO = SCHEMA_DIR.parent


def _validator(name: str) -> Draft202012Validator:
    schema = json.loads((SCHEMA_DIR / name).read_text())
    Draft202012Validator.check_schema(schema)
    return Draft202012Validator(schema)


@pytest.mark.parametrize("name", [RESULTS_SCHEMA, LEADERBOARD_SCHEMA])
def test_committed_schema_matches_the_models(name):
    assert (SCHEMA_DIR / name).read_text() == schema_text(schemas()[name]), (
        f"leaderboard/{name} is stale: run `shambench leaderboard schema`"
    )


def test_every_run_results_validates(toy_runs):
    validator = _validator(RESULTS_SCHEMA)
    found = sorted((toy_runs / "runs").rglob("results.json"))
    assert len(found) == 3
    for path in found:
        results = json.loads(path.read_text())
        assert list(validator.iter_errors(results)) == []
        # The typed run record carries provenance: detector, data hash and counts, versions, timestamps.
        assert results["run"]["examples_hash"] and results["run"]["dataset_counts"] == {"toyqa": 2, "toysum": 1}
        assert results["run"]["started_at"] and results["run"]["finished_at"] and results["run"]["packages"]


def test_score_predictions_output_validates(toy_runs, tmp_path):
    preds = tmp_path / "p.jsonl"
    preds.write_text('{"id": "q1", "spans": [[13, 16]]}\n')
    out = tmp_path / "results.json"
    args = ["score", "--examples", str(toy_runs / "examples.jsonl"), "--predictions", str(preds), "--out", str(out)]
    result = CliRunner().invoke(main, [*args, "--bootstrap", "20"])
    assert result.exit_code == 0, result.output
    results = json.loads(out.read_text())
    assert list(_validator(RESULTS_SCHEMA).iter_errors(results)) == []
    assert results["run"]["origin"] == "predictions"


def test_schema_rejects_a_wrong_type(toy_runs):
    results = json.loads(next((toy_runs / "runs").rglob("results.json")).read_text())
    results["tasks"]["summ"]["token"]["f1"] = "high"
    errors = list(_validator(RESULTS_SCHEMA).iter_errors(results))
    assert [list(e.absolute_path) for e in errors] == [["tasks", "summ", "token", "f1"]]


def test_built_leaderboard_validates(toy_runs, reported_file):
    board = json.loads(build([toy_runs / "runs"], reported_file).model_dump_json())
    assert list(_validator(LEADERBOARD_SCHEMA).iter_errors(board)) == []


def test_committed_leaderboard_validates():
    path = REPO / "leaderboard" / "site" / "leaderboard.json"
    board = json.loads(path.read_text())
    assert list(_validator(LEADERBOARD_SCHEMA).iter_errors(board)) == []
    assert board["entries"] and board["reported"]


def test_cli_exports_the_schemas(tmp_path):
    result = CliRunner().invoke(main, ["leaderboard", "schema", "--out", str(tmp_path)])
    assert result.exit_code == 0, result.output
    assert json.loads((tmp_path / RESULTS_SCHEMA).read_text())["title"].startswith("Results (schema version ")
