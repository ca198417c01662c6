"""`shambench leaderboard build`: run discovery, ranking, reported rows kept apart, escaping, the CLI."""

from __future__ import annotations

import html
import json
import os
import re
import shutil
import signal
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detection.detector import create_detector
from shambench.errors import DataError
from shambench.leaderboard.build import DEFAULT_REPORTED, build, load_leaderboard, write_site
from shambench.leaderboard.page import render
from shambench.reporting.runfolders import LINKED_FOLDER, LINKED_RESULTS, UNSCORED, run_folders
from shambench.runs.scoring import run_results
from shambench.runs.spec import Scoring
from tests.conftest import require_shared
from tests.leaderboard.toy import (
    EXAMPLES,
    RUNS,
    SENTENCE_OVERALL,
    SPAN_OVERALL,
    make_run,
    run_detector,
    write_annotated,
    write_examples,
)

XSS = "<img src=x onerror=alert(1)>"


def test_finds_runs_recursively_and_ranks_by_overall_span_f1(toy_runs, monkeypatch):
    monkeypatch.chdir(toy_runs)
    board = build(["runs"], None)
    # exact 1 > none 0.25 > all (0.125 + 2/9) / 2 = 0.1736 (see tests/leaderboard/toy.py for the arithmetic);
    # `none` and `all` are reference baselines: ordered by score with the rest, never ranked.
    assert [e.name for e in board.entries] == ["exact", "none", "all"]
    assert [e.rank for e in board.entries] == [1, None, None]
    assert [e.standing for e in board.entries] == ["ranked", "reference", "reference"]
    assert [e.reference for e in board.entries] == [False, True, True]
    assert all(e.complete and not e.incomplete_because for e in board.entries)
    assert [e.id for e in board.entries] == ["run-1", "run-2", "run-3"]
    assert board.partitions == {"context_qa/toyqa": 2, "summ/toysum": 1}
    for e in board.entries:
        assert e.span.overall.f1 == pytest.approx(SPAN_OVERALL[e.name])
        assert e.sentence.overall.f1 == pytest.approx(SENTENCE_OVERALL[e.name])
    by_name = {e.name: e for e in board.entries}
    # `all`: context_qa = (0.25 + 0) / 2 = 0.125 over n = 2; summ = 2/9 over n = 1; sentence summ = 2/3.
    assert by_name["all"].span.tasks["context_qa"].f1 == pytest.approx(0.125)
    assert by_name["all"].span.tasks["context_qa"].n == 2
    assert by_name["all"].span.datasets["summ/toysum"].f1 == pytest.approx(2 / 9)
    assert by_name["all"].sentence.tasks["summ"].f1 == pytest.approx(2 / 3)
    # population std of the two task F1s of `none` (0.5 and 0): 0.25.
    assert by_name["none"].span.overall_std == pytest.approx(0.25)
    assert by_name["none"].source == "runs/none"
    assert by_name["all"].source == "runs/nested/all"
    assert board.tasks == ["context_qa", "summ"]
    assert board.datasets == ["context_qa/toyqa", "summ/toysum"]


def test_reported_rows_stay_apart_and_marked(toy_runs, reported_file):
    board = build([toy_runs / "runs"], reported_file)
    assert [e.name for e in board.entries] == ["exact", "none", "all"]
    # Ordered by reported overall span F1: 0.7 before 0.3; never ranked with the runs.
    assert [e.name for e in board.reported] == ["paper-large", "paper-small"]
    assert all(e.kind == "reported" and e.rank is None and e.origin == "paper" for e in board.reported)
    assert all(e.kind == "reproduced" for e in board.entries)
    large, small = board.reported
    assert large.span.overall.f1 == 0.7 and large.span.overall_std == 0.2
    assert large.sentence.tasks["summ"].f1 == 0.6
    assert small.sentence.overall is None
    assert small.span.datasets["summ/toysum"].f1 == 0.2
    assert board.reported_source == "An invented paper, Table 9"


def test_real_reported_scores_become_one_row_per_detector(toy_runs):
    path = require_shared("sham_bench_reported", "reported_f1.json")
    data = json.loads(path.read_text())
    board = build([toy_runs / "runs"], path)
    assert sorted(e.name for e in board.reported) == sorted(data["span_level"])
    for e in board.reported:
        assert e.span.overall.f1 == data["span_level"][e.name]["overall"]
        assert e.span.tasks == {t: e.span.tasks[t] for t in data["span_level"][e.name]["tasks"]}
    overall = [e.span.overall.f1 for e in board.reported]
    assert overall == sorted(overall, reverse=True)
    assert board.tasks[:6] == ["open_qa", "context_qa", "data2txt", "open_bio", "summ", "mt"]


def test_missing_or_empty_run_paths_are_errors_and_a_corrupt_run_is_skipped(toy_runs, tmp_path):
    with pytest.raises(DataError, match="no such run directory"):
        run_folders([tmp_path / "nowhere"])
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match="no results.json found"):
        run_folders([tmp_path / "empty"])
    bad = tmp_path / "bad"
    shutil.copytree(toy_runs / "runs" / "none", bad)
    results = json.loads((bad / "results.json").read_text())
    results["n_examples"] = "three"
    (bad / "results.json").write_text(json.dumps(results))
    board = build([bad, toy_runs / "runs"], None)
    assert len(board.entries) == 3
    ((where, why),) = board.skipped.items()
    assert where.endswith("bad") and re.search(r"bad/results.json: not a shambench results file \(n_examples", why)
    # a run that was never scored (interrupted, say) is skipped with its reason; a model's config.json is no run
    runs = tmp_path / "runs"
    shutil.copytree(toy_runs / "runs", runs)
    shutil.copytree(runs / "none", runs / "interrupted")
    (runs / "interrupted" / "results.json").unlink()
    (runs / "model").mkdir()
    (runs / "model" / "config.json").write_text("{}")
    board = build([runs], None)
    assert len(board.entries) == 3
    assert {k.rsplit("/", 1)[-1]: v for k, v in board.skipped.items()} == {
        "interrupted": "no results.json: the run was not finished or not scored"
    }
    with pytest.raises(
        DataError, match=r"interrupted: no results.json found \(.*interrupted: no results.json: the run"
    ):
        run_folders([runs / "interrupted"])


def test_every_run_folder_passed_over_is_listed_with_its_reason_a_link_never_followed(toy_runs, tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    runs = tmp_path / "runs"
    shutil.copytree(toy_runs / "runs", runs)
    elsewhere = tmp_path / "elsewhere"
    shutil.copytree(toy_runs / "runs" / "none", elsewhere / "linked")
    (runs / "linked").symlink_to(elsewhere / "linked", target_is_directory=True)
    shutil.copytree(toy_runs / "runs" / "none", runs / "linked-results")
    (runs / "linked-results" / "results.json").unlink()
    (runs / "linked-results" / "results.json").symlink_to(elsewhere / "linked" / "results.json")
    shutil.copytree(toy_runs / "runs" / "none", runs / "unread")
    real_scandir = os.scandir

    def refusing(path=".", *args):
        # a folder the search may not list (root sees every folder: the refusal is made, not chmodded)
        if str(path).endswith("unread"):
            raise PermissionError(13, "Permission denied", str(path))
        return real_scandir(path, *args)

    monkeypatch.setattr(os, "scandir", refusing)
    board = build(["runs"], None)
    # the three toy runs, each once: the linked copy of `none` is not a fourth row
    assert sorted(e.name for e in board.entries) == ["all", "exact", "none"]
    assert board.skipped == {
        "runs/linked": LINKED_FOLDER,
        "runs/linked-results": LINKED_RESULTS,
        "runs/unread": "cannot be read (Permission denied)",
    }
    assert LINKED_FOLDER == "a symbolic link: run folders are opened, never followed"
    # the same list in leaderboard.json and in the command's output
    json_path, _ = write_site(board, tmp_path / "site")
    assert json.loads(json_path.read_text())["skipped"] == board.skipped
    monkeypatch.setattr(os, "scandir", real_scandir)
    result = CliRunner().invoke(main, ["leaderboard", "build", "--runs", "runs", "--out", "site2", "--no-reported"])
    assert result.exit_code == 0, result.output
    assert "runs/linked: a symbolic link: run folders are opened, never followed" in result.output
    assert f"runs/linked-results: {LINKED_RESULTS}" in result.output
    # a folder of nothing but a link holds no run to read, and says why
    (tmp_path / "only").mkdir()
    (tmp_path / "only" / "run").symlink_to(elsewhere / "linked", target_is_directory=True)
    with pytest.raises(DataError, match=r"only: no results.json found \(only/run: a symbolic link: run folders"):
        run_folders(["only"])
    # the folder given is the root of the search: a link given is followed, once
    (tmp_path / "given").symlink_to(elsewhere, target_is_directory=True)
    assert run_folders(["given"]).results == [Path("given/linked/results.json")]
    assert UNSCORED == "no results.json: the run was not finished or not scored"


def test_page_escapes_names_params_and_meta(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    examples = write_examples(tmp_path / "examples.jsonl")
    run = make_run(tmp_path / "runs" / "x", examples, XSS, spans={"q1": [[13, 16]]})
    results = json.loads((run / "results.json").read_text())
    results["run"]["params"] = {"note": "</script><script>alert(2)</script>"}
    results["run"]["meta"] = {"url": 'javascript:alert(3)" onmouseover="alert(4)'}
    (run / "results.json").write_text(json.dumps(results))
    board = build(["runs"], None)
    page = render(board)
    assert XSS not in page and "&lt;img src=x onerror=alert(1)&gt;" in page
    assert "<script>alert(2)" not in page and "&lt;/script&gt;&lt;script&gt;alert(2)" in page
    assert 'onmouseover="alert(4)' not in page
    # Exactly one script element (ours), and nothing loaded from anywhere.
    assert page.count("<script") == 1
    assert not re.search(r"\s(src|href)=\"(https?:)?//", page)
    assert "<link" not in page


def test_site_is_self_contained_with_a_restrictive_policy(toy_runs, tmp_path):
    json_path, html_path = write_site(build([toy_runs / "runs"], None), tmp_path / "site")
    page = html_path.read_text()
    policy = html.unescape(re.search(r'http-equiv="Content-Security-Policy" content="([^"]*)"', page).group(1))
    assert policy.startswith("default-src 'none'; style-src 'sha256-")
    assert "script-src 'sha256-" in policy and "unsafe-inline" not in policy
    assert load_leaderboard(tmp_path / "site").entries[0].name == "exact"
    assert json_path.stat().st_mode & 0o044 == 0o044, "the site must be readable by a web server"


def test_run_metadata_keeps_file_names_only(toy_runs, monkeypatch):
    monkeypatch.chdir(toy_runs)
    board = build([toy_runs / "runs"], None)
    assert str(toy_runs) not in board.model_dump_json()
    assert board.entries[0].source == "runs/exact"
    assert board.entries[0].run.examples_file == "examples.jsonl"
    assert board.entries[0].run.run_dir is None


def test_cli_build_writes_both_files(toy_runs, reported_file, tmp_path):
    out = tmp_path / "site"
    result = CliRunner().invoke(
        main,
        ["leaderboard", "build", "--runs", str(toy_runs / "runs"), "--out", str(out), "--reported", str(reported_file)],
    )
    assert result.exit_code == 0, result.output
    assert "3 runs (1 ranked, 2 reference, 0 partial, 0 incomplete), 2 reported rows" in result.output
    data = json.loads((out / "leaderboard.json").read_text())
    assert [e["name"] for e in data["entries"]] == ["exact", "none", "all"]
    assert [e["name"] for e in data["reported"]] == ["paper-large", "paper-small"]
    assert "reported in paper" in (out / "index.html").read_text()


def test_cli_build_reports_a_missing_reported_file(toy_runs, tmp_path):
    result = CliRunner().invoke(
        main,
        ["leaderboard", "build", "--runs", str(toy_runs / "runs"), "--out", str(tmp_path), "--reported", "nope.json"],
    )
    assert result.exit_code == 2
    assert "error: nope.json: reported scores not found" in result.output
    assert not (tmp_path / "leaderboard.json").exists()


def _rewrite_results(run_dir, **run_fields) -> None:
    results = json.loads((run_dir / "results.json").read_text())
    results["run"].update(run_fields)
    (run_dir / "results.json").write_text(json.dumps(results))


def _fail(run_dir, example_id: str) -> None:
    """Record a failed prediction for one example (the journal's last record wins) and rescore the run."""
    with (run_dir / "predictions.jsonl").open("a") as journal:
        journal.write(json.dumps({"id": example_id, "spans": [], "error": "TimeoutError: no reply"}) + "\n")
    run_results(run_dir, scoring=Scoring(n_resamples=50))


def test_limited_failed_dev_split_and_partial_runs_are_never_ranked(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    examples = write_examples(tmp_path / "examples.jsonl")
    qa_only = write_examples(tmp_path / "qa.jsonl", [e for e in EXAMPLES if e["task"] == "context_qa"])
    exact = RUNS["exact"]
    make_run(tmp_path / "runs" / "exact", examples, "exact")
    make_run(tmp_path / "runs" / "limited", examples, "limited", spans=exact, limit=1)
    _fail(make_run(tmp_path / "runs" / "failed", examples, "failed", spans=exact), "s1")
    _rewrite_results(make_run(tmp_path / "runs" / "dev", examples, "dev", spans=exact), split="dev", examples_file=None)
    make_run(tmp_path / "runs" / "qa-only", qa_only, "qa-only", spans=exact)
    make_run(tmp_path / "runs" / "none", examples, "none")
    board = build(["runs"], None)
    rows = {e.name: e for e in board.entries}
    # All but `none` predict the gold spans of what they cover, yet only the complete `exact` is ranked.
    assert [(e.name, e.rank) for e in board.entries if e.rank] == [("exact", 1)]
    assert rows["none"].standing == "reference" and rows["none"].rank is None
    assert rows["qa-only"].standing == "partial" and rows["qa-only"].complete
    assert board.partitions == {"context_qa/toyqa": 2, "summ/toysum": 1}
    for name in ("limited", "failed", "dev"):
        assert rows[name].standing == "incomplete" and not rows[name].complete and rows[name].rank is None
    assert rows["limited"].incomplete_because == ["--limit 1 (first 1 examples per partition)"]
    assert rows["limited"].coverage.model_dump() == {"total": 2, "predicted": 2, "failed": 0, "missing": 0}
    assert rows["failed"].incomplete_because == ["1 failed prediction(s)"]
    assert rows["failed"].coverage.model_dump() == {"total": 3, "predicted": 2, "failed": 1, "missing": 0}
    assert rows["dev"].incomplete_because == ["dev split, not test"]
    # Ranked and reference rows first (by score), then partial, then incomplete; anchors follow that order.
    assert [e.standing for e in board.entries] == ["ranked", "reference", "partial", *["incomplete"] * 3]
    assert [e.id for e in board.entries] == [f"run-{i}" for i in range(1, 7)]


def test_views_that_do_not_reward_silence(toy_runs):
    board = build([toy_runs / "runs"], None)
    rows = {e.name: e.span for e in board.entries}
    # Over examples with gold only: `none` 0 everywhere; `all` context_qa = q1 = 0.25, summ = s1 = 2/9.
    assert rows["none"].overall.f1_with_gold == 0 and rows["exact"].overall.f1_with_gold == 1
    assert rows["all"].tasks["context_qa"].f1_with_gold == pytest.approx(0.25)
    assert rows["all"].overall.f1_with_gold == pytest.approx((0.25 + 2 / 9) / 2)
    # Pooled tokens of `all`: context_qa 12 predicted, 1 gold, 1 hit -> P 1/12, R 1, F1 2/13; summ 8, 1, 1 -> 2/9.
    assert rows["all"].tasks["context_qa"].f1_pooled == pytest.approx(2 / 13)
    assert rows["all"].overall.f1_pooled == pytest.approx((2 / 13 + 2 / 9) / 2)
    assert board.none_scores == {"f1": 0.25, "f1_with_gold": 0.0, "f1_pooled": 0.0}
    text = " ".join(html.unescape(render(board)).split())
    assert board.empty_rule in text
    assert (
        "`none` (predicts nothing) scores 0.250 on the paper's per-example F1, 0.000 over the examples with a hallucination and 0.000"
        in text.replace("<code>none</code>", "`none`")
    )


def test_sweep_cells_become_one_row_per_configuration(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    qa = write_examples(tmp_path / "qa.jsonl", [e for e in EXAMPLES if e["task"] == "context_qa"])
    summ = write_examples(tmp_path / "summ.jsonl", [e for e in EXAMPLES if e["task"] == "summ"])
    for rate in (0.3, 0.6):
        for data in (qa, summ):
            run_detector(
                tmp_path / "sweep" / data.stem / f"random_rate={rate}", data, create_detector("random", rate=rate)
            )
        run_detector(
            tmp_path / "whole" / str(rate), write_examples(tmp_path / "all.jsonl"), create_detector("random", rate=rate)
        )
    run_detector(tmp_path / "sweep" / "qa" / "overlap", qa, create_detector("overlap"))
    run_detector(tmp_path / "sweep" / "summ" / "overlap", summ, create_detector("overlap"))
    board = build(["sweep"], None)
    rows = {e.name: e for e in board.entries}
    assert sorted(rows) == ["overlap", "random rate=0.3", "random rate=0.6"]
    assert rows["overlap"].rank == 1 and rows["overlap"].runs == 2
    assert rows["overlap"].source == "sweep/qa/overlap, sweep/summ/overlap"
    for rate in (0.3, 0.6):
        row = rows[f"random rate={rate}"]
        assert row.reference and row.complete and row.runs == 2
        assert set(row.span.datasets) == {"context_qa/toyqa", "summ/toysum"}
        # The merged row scores exactly what one run of the configuration over all the data scores.
        whole = build([tmp_path / "whole" / str(rate)], None).entries[0]
        assert row.span.overall.f1 == pytest.approx(whole.span.overall.f1)
        assert row.span.overall.f1_pooled == pytest.approx(whole.span.overall.f1_pooled)
        assert row.span.datasets["summ/toysum"].f1 == pytest.approx(whole.span.datasets["summ/toysum"].f1)
        assert row.sentence.overall.f1 == pytest.approx(whole.sentence.overall.f1)


def test_builds_with_the_packaged_reported_scores_from_any_folder(toy_runs, tmp_path, monkeypatch):
    # No ../shared beside the working folder: the paper's rows come from the package's copy of its figures.
    folder = tmp_path / "elsewhere"
    folder.mkdir()
    monkeypatch.chdir(folder)
    result = CliRunner().invoke(main, ["leaderboard", "build", "--runs", str(toy_runs / "runs"), "--out", "site"])
    assert result.exit_code == 0, result.output
    board = load_leaderboard(folder / "site")
    packaged = json.loads(DEFAULT_REPORTED.read_text())
    assert packaged["source"].startswith("SHAM-Bench paper, Tables")
    assert sorted(e.name for e in board.reported) == sorted(packaged["span_level"])
    assert board.reported_source == packaged["source"]
    lettuce = next(e for e in board.reported if e.name == "lettucedetect-large")
    assert lettuce.span.overall.f1 == 0.482 and lettuce.rank is None and lettuce.standing == "reported"
    assert [(e.name, e.rank) for e in board.entries] == [("exact", 1), ("none", None), ("all", None)]


def test_packaged_reported_scores_are_the_shared_figures():
    shared = require_shared("sham_bench_reported", "reported_f1.json")
    assert json.loads(DEFAULT_REPORTED.read_text()) == json.loads(shared.read_text())


def test_rows_of_one_configuration_on_the_same_data_are_named_by_their_run_directory(toy_runs, tmp_path):
    shutil.copytree(toy_runs / "runs" / "exact", tmp_path / "again")
    board = build([toy_runs / "runs" / "exact", tmp_path / "again"], None)
    # The same data twice: not merged, each ranked, told apart by the folder they came from.
    assert sorted((e.name, e.rank) for e in board.entries) == [("exact (again)", 1), ("exact (exact)", 2)]


def test_the_human_row_is_labelled_never_ranked_and_each_row_gets_its_gap(tmp_path, monkeypatch):
    from shambench.io import write_jsonl
    from shambench.leaderboard.schema import HUMAN_NAME
    from shambench.schema import Annotations, Example, Span, marked_by_more_than

    monkeypatch.chdir(tmp_path)
    # s1 "Bob bought pears. He ate them.": a marks "pears" [11, 16), b "bought pears" [4, 16).
    # a against b: P 1 R 1/2; b against a: P 1/2 R 1: one annotator's F1 is 2/3.
    marked = {"a": [Span(start=11, end=16)], "b": [Span(start=4, end=16)]}
    annotations = Annotations.leave_one_out(marked, lambda lists: marked_by_more_than(lists, 0.5), "majority")
    rows = [Example.model_validate(r) for r in EXAMPLES]
    rows[2] = rows[2].model_copy(update={"annotations": annotations})
    examples = tmp_path / "examples.jsonl"
    write_jsonl(examples, rows)
    for name in ("exact", "none"):
        make_run(tmp_path / "runs" / name, examples, name)
    board = build([tmp_path / "runs"], None)
    assert board.human.name == HUMAN_NAME
    cell = board.human.partitions["summ/toysum"]
    assert (cell.items, cell.f1) == (1, pytest.approx(2 / 3))
    by_name = {e.name: e for e in board.entries}
    # exact predicts "pears": against b's "bought pears" P 1 R 1/2 (F1 2/3), against a's "pears" 1: mean 5/6.
    exact = by_name["exact"].agreement["summ/toysum"]
    assert (exact.f1, exact.human_f1, exact.gap) == (pytest.approx(5 / 6), pytest.approx(2 / 3), pytest.approx(1 / 6))
    assert by_name["none"].agreement["summ/toysum"].f1 == 0.0
    # Partitions without annotators have no human figure; the human row is in no ranking.
    assert set(board.human.partitions) == {"summ/toysum"} and "toyqa" not in str(by_name["exact"].agreement)
    assert HUMAN_NAME not in {e.name for e in board.entries}
    page = render(board)
    assert "How good is good?" in page and f'{HUMAN_NAME} <span class="badge reference">' in page
    assert "gap +0.167" in page and "gap -0.667" in page


def test_each_row_carries_the_alternative_annotator_tests_verdict_per_partition(tmp_path, monkeypatch):
    monkeypatch.chdir(tmp_path)
    # 30 items read by a, b and c, all marking "pears" [11, 16): left out, each has the gold "pears" of the other
    # two and matches it (F1 1). `exact` predicts "pears" too: a tie on every item (d = 0, no variance, p = 0):
    # it can replace each annotator. `none` scores 0 on every item (d = -1, p = 1): it replaces nobody.
    examples, spans = write_annotated(tmp_path / "examples.jsonl")
    make_run(tmp_path / "runs" / "exact", examples, "exact", spans)
    make_run(tmp_path / "runs" / "none", examples, "none", {})
    board = build([tmp_path / "runs"], None)
    cells = {e.name: e.agreement["summ/toysum"] for e in board.entries}
    assert (cells["exact"].alt_passed, cells["exact"].alt_omega) == (True, 1.0)
    assert (cells["none"].alt_passed, cells["none"].alt_omega) == (False, 0.0)
    page = render(board)
    assert "alt. test pass (ω 1.00)" in page and "alt. test fail (ω 0.00)" in page


# --- runs whose files lie --------------------------------------------------------------------------------------


def doctored_runs(toy_runs, root):
    """Copies of the toy runs, each lying in one way, beside an honest copy of `exact`."""
    from shambench.runs.files import JOURNAL, RESULTS

    runs = root / "runs"
    shutil.copytree(toy_runs / "runs" / "exact", runs / "honest")
    # `all` scores (0.125 + 2/9) / 2 = 0.174; its results file claims 0.99 overall and per partition.
    shutil.copytree(toy_runs / "runs" / "nested" / "all", runs / "boasting")
    claimed = json.loads((runs / "boasting" / RESULTS).read_text())
    claimed["overall"]["token"]["f1"] = 0.99
    for group in claimed["partitions"].values():
        group["token"]["f1"] = 0.99
    (runs / "boasting" / RESULTS).write_text(json.dumps(claimed))
    # `all` again, its partitions left true and only its overall doctored.
    shutil.copytree(toy_runs / "runs" / "nested" / "all", runs / "headline")
    claimed = json.loads((runs / "headline" / RESULTS).read_text())
    claimed["overall"]["token"]["f1"] = 0.99
    (runs / "headline" / RESULTS).write_text(json.dumps(claimed))
    # `exact` with two of its three journal lines deleted: its results file still says complete at 1.0.
    shutil.copytree(toy_runs / "runs" / "exact", runs / "torn")
    lines = (runs / "torn" / JOURNAL).read_text().splitlines(keepends=True)
    (runs / "torn" / JOURNAL).write_text(lines[0])
    # A NaN in the results file.
    shutil.copytree(toy_runs / "runs" / "none", runs / "nan")
    nan = json.loads((runs / "nan" / RESULTS).read_text())
    nan["overall"]["token"]["f1"] = float("nan")
    (runs / "nan" / RESULTS).write_text(json.dumps(nan))
    # Files that never end: a FIFO and a link to /dev/zero named results.json (never followed), a FIFO named
    # predictions.jsonl.
    for name in ("fifo", "zero", "fifo-journal"):
        shutil.copytree(toy_runs / "runs" / "none", runs / name)
    for path in (runs / "fifo" / RESULTS, runs / "fifo-journal" / JOURNAL):
        path.unlink()
        os.mkfifo(path)
    (runs / "zero" / RESULTS).unlink()
    (runs / "zero" / RESULTS).symlink_to("/dev/zero")
    return runs


@pytest.fixture
def never_hangs():
    """A build that blocks on a file fails the test after 60 s instead of hanging the suite."""

    def hung(*_):
        raise AssertionError("the build blocked on a file")

    old = signal.signal(signal.SIGALRM, hung)
    signal.alarm(60)
    yield
    signal.alarm(0)
    signal.signal(signal.SIGALRM, old)


def test_every_row_is_rescored_and_lying_files_are_flagged_or_skipped(toy_runs, tmp_path, monkeypatch, never_hangs):
    monkeypatch.chdir(tmp_path)
    runs = doctored_runs(toy_runs, tmp_path)
    before = {p: p.read_bytes() for p in runs.rglob("*") if p.is_file() and not p.is_symlink() and p.suffix != ""}
    result = CliRunner().invoke(
        main, ["leaderboard", "build", "--runs", runs, "--out", tmp_path / "site", "--no-reported"]
    )
    assert result.exit_code == 0 and result.exception is None, result.output
    board = load_leaderboard(tmp_path / "site")
    rows = {e.source: e for e in board.entries}
    # The boasting run shows what its journal gives, is not complete, and says why.
    boasting = rows["runs/boasting"]
    assert boasting.span.overall.f1 == pytest.approx(SPAN_OVERALL["all"])
    assert not boasting.complete and boasting.standing == "incomplete" and boasting.rank is None
    assert (
        "results.json disagrees with its journal (runs/boasting/results.json): context_qa/toyqa span F1 0.990 there, 0.125 from the journal"
        in boasting.incomplete_because
    )
    # A doctored headline alone is caught too: the overall is compared, not only the partitions.
    headline = rows["runs/headline"]
    assert headline.span.overall.f1 == pytest.approx(SPAN_OVERALL["all"]) and headline.rank is None
    assert (
        "results.json disagrees with its journal (runs/headline/results.json): overall span F1 0.990 there, 0.174 from the journal"
        in headline.incomplete_because
    )
    # The torn run: one prediction of three, so incomplete; its stale results file is flagged too.
    torn = rows["runs/torn"]
    assert not torn.complete and "2 example(s) without a prediction" in torn.incomplete_because
    assert (
        "results.json disagrees with its journal: 0 examples without a prediction there, 2 from the journal"
        in torn.incomplete_because
    )
    # Only the honest run is ranked.
    assert [e.source for e in board.entries if e.standing == "ranked"] == ["runs/honest"]
    assert rows["runs/honest"].span.overall.f1 == 1.0 and rows["runs/honest"].complete
    # The NaN is never shown: its file is refused, the run skipped with the reason.
    assert board.skipped == {
        "runs/nan": "runs/nan/results.json: not a shambench results file (overall.token.f1: Input should be a finite number)",
        "runs/fifo": "runs/fifo/results.json: not a regular file",
        "runs/zero": LINKED_RESULTS,  # a link to /dev/zero: never opened
        "runs/fifo-journal": "not rescored from its journal: runs/fifo-journal/predictions.jsonl: not a regular file",
    }
    assert (
        "warning: 4 run(s) skipped:" in result.stderr
        and "runs/fifo: runs/fifo/results.json: not a regular file" in result.stderr
    )
    assert (
        "warning: 'all (boasting)' (runs/boasting): results.json disagrees" in result.stderr
        and "Traceback" not in result.output
    )
    assert {p: p.read_bytes() for p in before} == before


def test_an_oversized_results_file_is_skipped_unread(toy_runs, tmp_path, monkeypatch):
    from shambench.leaderboard import build as build_module

    monkeypatch.chdir(tmp_path)
    shutil.copytree(toy_runs / "runs" / "none", tmp_path / "runs" / "big")
    monkeypatch.setattr(build_module, "MAX_RESULTS_BYTES", 100)
    board = build(["runs"], None)
    size = (tmp_path / "runs" / "big" / "results.json").stat().st_size
    assert board.entries == [] and board.skipped == {
        "runs/big": f"runs/big/results.json: {size} bytes, more than a run file holds (100)"
    }
