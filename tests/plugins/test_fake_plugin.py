"""A third-party detector package, really installed with pip, found through its entry points and run by `eval`."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detection.detector import detectors
from shambench.io import write_jsonl
from shambench.schema import Example
from tests.plugins.installed import install_fake_plugin

# Tokens of the first response: It opened in 1998 with 40 rooms . (gold: "1998")
EXAMPLES = [
    Example(id="d1", dataset="toy", task="summ", response="It opened in 1998 with 40 rooms.", hallu_spans=[[13, 17]]),
    Example(id="d2", dataset="toy", task="summ", response="The bridge is 300 m long."),
    Example(id="d3", dataset="toy", task="summ", response="No numbers here."),
]


@pytest.fixture(scope="module")
def site(tmp_path_factory):
    return install_fake_plugin(tmp_path_factory.mktemp("plugin"))


@pytest.fixture
def examples_file(tmp_path):
    path = tmp_path / "examples.jsonl"
    write_jsonl(path, EXAMPLES)
    return path


def run_python(code: str, site, cwd) -> str:
    out = subprocess.run(
        [sys.executable, "-c", code],
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    return out.stdout


def test_eval_runs_the_plugin_detector_in_a_subprocess(site, examples_file, tmp_path):
    out = subprocess.run(
        [sys.executable, "-m", "shambench", "eval", "--detector", "fake-digits", "--examples", str(examples_file)]
        + ["--run-dir", "run", "--no-progress", "--bootstrap", "20"],
        env={**os.environ, "PYTHONPATH": str(site)},
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert out.returncode == 0, out.stdout + out.stderr
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    assert results["run"]["detector"] == "fake-digits"
    assert results["run"]["family"] == "fake-plugin"
    # d1: pred {1998, 40}, gold {1998}: P 1/2, R 1, F1 2/3; d2: pred {300}, no gold: 0; d3: nothing either side: 1.
    assert results["tasks"]["summ"]["token"]["f1"] == pytest.approx((2 / 3 + 0 + 1) / 3)
    journal = [json.loads(line) for line in (tmp_path / "run" / "predictions.jsonl").read_text().splitlines()]
    assert {p["id"]: [[s["start"], s["end"]] for s in p.get("spans", [])] for p in journal} == {
        "d1": [[13, 17], [23, 25]],
        "d2": [[14, 17]],
        "d3": [],
    }


def test_list_shows_plugins_keeps_builtins_and_never_imports_torch(site, tmp_path):
    code = (
        "import sys\n"
        "from shambench.cli import main\n"
        "main(['list', 'detectors'], standalone_mode=False)\n"
        "print('torch imported:', 'torch' in sys.modules)\n"
    )
    out = run_python(code, site, tmp_path)
    rows = {}
    for line in out.splitlines():  # table rows read "│ name │ description │ module │"
        cells = [c.strip() for c in line.split("│")]
        if len(cells) == 5 and cells[1]:
            rows[cells[1]] = cells[3]
    assert rows["fake-digits"] == "fake_shambench_plugin:digits"
    assert rows["none"] == "shambench.detectors.baselines"
    assert "torch imported: False" in out


def test_builtin_none_wins_over_the_plugins_none_through_eval(site, examples_file, tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(site))
    detectors.get("none")
    monkeypatch.setattr(detectors, "_entries", dict(detectors._entries))
    monkeypatch.setattr(detectors, "_entry_points_loaded", False)
    monkeypatch.setattr(detectors, "_broken", {})
    assert detectors.get("fake-slow").origin == "fake_shambench_plugin:slow"  # the installed package is visible
    result = CliRunner().invoke(
        main,
        ["eval", "--detector", "none", "--examples", str(examples_file), "--run-dir", str(tmp_path / "run")]
        + ["--no-progress", "--bootstrap", "20"],
    )
    assert result.exit_code == 0, result.output
    results = json.loads((tmp_path / "run" / "results.json").read_text())
    # Built-in none: d1 gold but nothing predicted 0, d2 and d3 empty/empty 1 -> 2/3.
    # (The plugin's impostor flags whole responses: d1 P 1/8, R 1, F1 2/9; d2 0; d3 0 -> 2/27.)
    assert results["tasks"]["summ"]["token"]["f1"] == pytest.approx(2 / 3)
