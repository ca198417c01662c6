"""`--suite extended` of `eval` and `data stats`: its own view and overall, the paper's left as it is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.scoring.results import MULTILINGUAL
from tests.adapters.test_haluquestqa import ROWS, _write
from tests.conftest import require_shared

BASELINES = ("none", "all", "random", "overlap")


def run(*args) -> object:
    return CliRunner().invoke(main, [str(a) for a in args], catch_exceptions=False)


def _results(run_dir: Path) -> dict:
    return json.loads((run_dir / "results.json").read_text())


def test_eval_of_the_extended_suite_on_one_extended_source(tmp_path):
    data = _write(tmp_path, ROWS)
    run_dir = tmp_path / "run"
    result = run("eval", "--suite", "extended", "--detector", "none", "--data-dir", data, "--run-dir", run_dir,
                 "--no-progress", "--bootstrap", 20)  # fmt: skip
    assert result.exit_code == 0, result.output
    results = _results(run_dir)
    assert results["run"]["datasets"] == ["haluquestqa"]
    # Nothing of the paper's partitions: no paper task, no paper overall; the extended view has the one group.
    assert results["tasks"] == {} and results["overall"] is None
    view = results["groups"]["extended"]
    assert view["partitions"] == {"open_qa_long": ["open_qa_long/haluquestqa"]}
    # "none" on the 5 answers: the 3 with a span (row 0's two, row 2's first) score 0, row 1's two score 1.
    assert view["groups"]["open_qa_long"]["n"] == 5 and view["overall"]["tasks"] == ["open_qa_long"]
    assert view["groups"]["open_qa_long"]["token"]["f1"] == 0.4 and view["overall"]["token"]["f1"] == 0.4
    assert "extended overall (1 task)" in result.output


def test_the_extended_suite_needs_one_of_its_sources(tmp_path):
    result = run("eval", "--suite", "extended", "--detector", "none", "--data-dir", tmp_path, "--no-progress")
    assert result.exit_code == 2
    assert "no source of the extended suite is present for split 'test'" in result.output


@pytest.mark.parametrize("detector", BASELINES)
def test_real_extended_eval_keeps_the_paper_overall(detector, tmp_path):
    data = require_shared()
    common = ["--detector", detector, "--data-dir", data, "--limit", 5, "--no-progress", "--bootstrap", 50]
    extended = run("eval", "--suite", "extended", *common, "--run-dir", tmp_path / "extended")
    assert extended.exit_code == 0, extended.output
    paper = run("eval", *common, "--run-dir", tmp_path / "paper")
    assert paper.exit_code == 0, paper.output
    ext, base = _results(tmp_path / "extended"), _results(tmp_path / "paper")
    assert {"haluquestqa", "xsumfaith", "felm", "mushroom-multilingual"} <= set(ext["run"]["datasets"])
    # The paper's tasks and overall are exactly those of a run over the paper's partitions alone.
    assert ext["tasks"] == base["tasks"] and ext["overall"] == base["overall"]
    view = ext["groups"]["extended"]
    assert len(view["partitions"][MULTILINGUAL]) == 14
    assert "summ/xsumfaith-gold" in view["partitions"]["summ"] and "open_qa_long" in view["groups"]
    assert view["partitions"]["open_qa_long"] == ["open_qa_long/felm", "open_qa_long/haluquestqa"]
    # Every extended group is scored over 5 examples per partition (--limit 5).
    assert all(view["groups"][g]["n"] == 5 * len(p) for g, p in view["partitions"].items())
    assert "extended overall (7 tasks)" in extended.output


def test_real_stats_show_the_reported_counts_beside_ours(tmp_path):
    data = require_shared()
    result = run("data", "stats", "--suite", "extended", "--data-dir", data, "--json")
    assert result.exit_code == 0, result.output
    figures = json.loads(result.stdout)
    rows = {f"{p['task']}/{p['dataset']}": p for p in figures["partitions"]}
    haluquestqa, gold = rows["open_qa_long/haluquestqa"], rows["summ/xsumfaith-gold"]
    assert (haluquestqa["count"], haluquestqa["paper_count"]) == (1395, 1396)
    assert haluquestqa["count_source"].startswith("Sachdeva et al. 2024, arXiv:2407.11930")
    assert (gold["count"], gold["paper_count"]) == (500, 500)
    # FELM: 847 responses less the 2 whose response is NaN and the 7 with more labels than segments.
    felm = rows["open_qa_long/felm"]
    assert (felm["count"], felm["paper_count"]) == (838, 847)
    assert figures["dropped"]["felm"] == {
        "response is not text (NaN in the release)": 2,
        "labels and segmented_response differ in length": 7,
    }
    assert figures["spans"]["felm"] == {"placed: exact": 739, "placed: normalized": 4, "placed: fuzzy": 29}
    assert rows["summ/zhou"]["count_source"] == "SHAM-Bench, Table 1"
    assert sum(1 for name in rows if name.startswith("open_qa/mushroom-")) == 14
    # The total mixes SHAM-Bench's partitions with others: no paper figure for it.
    assert figures["total"]["paper_count"] is None
    assert figures["spans"]["haluquestqa"]["unplaced: not found in its answer"] == 1
    assert figures["spans"]["xsumfaith"] == {"placed: offset": 1983, "placed: nearest": 91, "placed: unescaped": 9}
    table = run("data", "stats", "--suite", "extended", "--data-dir", data)
    assert "paper n of open_qa_long/haluquestqa: Sachdeva et al. 2024" in table.output
    assert "gold spans placed by their text" in table.output


def test_real_dev_split_has_five_per_added_partition():
    data = require_shared()
    result = run("data", "stats", "--datasets", "haluquestqa,xsumfaith", "--split", "dev", "--data-dir", data, "--json")
    assert result.exit_code == 0, result.output
    counts = {f"{p['task']}/{p['dataset']}": p["count"] for p in json.loads(result.stdout)["partitions"]}
    assert counts == {"open_qa_long/haluquestqa": 5, "summ/xsumfaith-gold": 5}


def test_suite_and_datasets_together_are_refused(tmp_path):
    result = run("data", "stats", "--suite", "extended", "--datasets", "zhou", "--data-dir", tmp_path)
    assert result.exit_code == 2 and "give --suite or --datasets, not both" in result.output
