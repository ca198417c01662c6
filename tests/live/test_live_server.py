"""Smoke tests against a real local OpenAI-compatible server (llama-cpp-python or llama-server), run by hand.

Skipped unless `SHAMBENCH_LIVE_URL` names the server's base URL; never run in CI. See docs/detectors/prompted.md
("A local server, offline") for starting one with a small GGUF model from PyPI. Environment:
    SHAMBENCH_LIVE_URL          e.g. http://127.0.0.1:8080/v1
    SHAMBENCH_LIVE_MODEL        the model name to ask for (default smollm2)
    SHAMBENCH_LIVE_CONCURRENCY  the server's parallel slots (default 1)

A small model often answers badly: these tests check that shambench finishes, records what it talked to, and
keeps every failure with its reason and raw text, not that the model is any good.
"""

from __future__ import annotations

import json
import os
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.llm.negotiation import STRUCTURED_MODES
from tests.conftest import require_shared

URL = os.environ.get("SHAMBENCH_LIVE_URL")
MODEL = os.environ.get("SHAMBENCH_LIVE_MODEL", "smollm2")
CONCURRENCY = os.environ.get("SHAMBENCH_LIVE_CONCURRENCY", "1")

pytestmark = pytest.mark.skipif(not URL, reason="set SHAMBENCH_LIVE_URL to a local server's base URL")

SERVER = ["--model", MODEL, "--base-url", str(URL), "--max-concurrency", CONCURRENCY, "--timeout", "600"]
SMALL = ["-p", "max_tokens=512", "-p", "temperature=0"]


def invoke(*args: str):
    result = CliRunner().invoke(main, list(args), terminal_width=200)
    # 0, or 3: finished, with some predictions failed (a small model's bad answers; checked below).
    assert result.exit_code in (0, 3), result.output + repr(result.exception)
    return result


def journal(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]


def assert_failures_keep_their_reason(predictions: list[dict]) -> None:
    for p in predictions:
        if p.get("error") is not None:
            # A model answering badly is a failed prediction with its text; the transport must not fail.
            assert p["error"].startswith("unusable output"), p["error"]
            assert p["raw"]


def test_prompted_detector_negotiates_and_records_the_served_model(tmp_path):
    data = require_shared("mushroom").parent
    run = tmp_path / "run"
    args = ["eval", "--detector", "openai", *SERVER, *SMALL, "--datasets", "mushroom", "--limit", "3"]
    invoke(*args, "--data-dir", str(data), "--run-dir", str(run), "--no-progress", "--bootstrap", "10")
    predictions = journal(run)
    assert len(predictions) == 3
    assert_failures_keep_their_reason(predictions)
    answered = [p for p in predictions if p.get("error") is None]
    assert all(p["meta"]["structured"] in STRUCTURED_MODES and p["meta"]["served_model"] for p in answered)
    results = json.loads((run / "results.json").read_text())
    assert results["run"]["served_model"] or not answered


def test_critic_on_processbench(tmp_path):
    data = require_shared("processbench").parent
    run = tmp_path / "run"
    args = ["eval", "--suite", "processbench", "--detector", "critic", *SERVER, *SMALL, "--limit", "1"]
    invoke(*args, "--data-dir", str(data), "--run-dir", str(run), "--no-progress", "--bootstrap", "10")
    predictions = journal(run)
    assert predictions
    assert_failures_keep_their_reason(predictions)
    assert all(p["step_verdicts"] for p in predictions if p.get("error") is None)


def test_optimize_light_on_the_dev_split(tmp_path):
    data = require_shared("mushroom").parent
    out = tmp_path / "program.json"
    args = ["optimize", "--base", "openai", *SERVER, *SMALL, "--trainset", "dev", "--datasets", "mushroom"]
    result = invoke(*args, "--heldout-limit", "2", "--auto", "light", "--data-dir", str(data), "--out", str(out))
    program = json.loads(out.read_text())
    assert program["usage"]["lm_calls"] > 0 and program["model"] == MODEL
    assert "LM calls:" in result.output
