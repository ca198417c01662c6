"""`shambench leaderboard submit`: all-or-nothing validation, scoring, and adding the run to the site."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.errors import SubmissionError
from shambench.leaderboard.build import build, load_leaderboard, write_site
from shambench.leaderboard.submit import submit
from shambench.runs.spec import Selection
from shambench.scoring.results import Results
from tests.leaderboard.toy import RUNS

EXACT = [{"id": i, "spans": spans} for i, spans in RUNS["exact"].items()]


def _lines(rows: list) -> str:
    return "".join((r if isinstance(r, str) else json.dumps(r)) + "\n" for r in rows)


def _snapshot(*folders: Path) -> dict[str, bytes]:
    """Every file below the folders with its content: what "nothing was added" compares."""
    return {str(p): p.read_bytes() for f in folders if f.exists() for p in sorted(f.rglob("*")) if p.is_file()}


@pytest.fixture
def board(toy_runs, tmp_path, monkeypatch) -> dict[str, Path]:
    """A built site of the three toy runs, a submissions folder, and the current directory set to tmp_path."""
    monkeypatch.chdir(tmp_path)
    site = tmp_path / "site"
    write_site(build([toy_runs / "runs"], None), site)
    return {"site": site, "runs": tmp_path / "submissions", "examples": toy_runs / "examples.jsonl"}


def _submit(board, rows, name="mine", preds="preds.jsonl", **kwargs):
    path = board["site"].parent / preds
    path.write_text(_lines(rows), encoding="utf-8")
    return submit(
        path,
        name,
        selection=Selection(examples_file=board["examples"]),
        runs_dir=board["runs"],
        site_dir=board["site"],
        n_resamples=50,
        **kwargs,
    )


def test_valid_submission_is_scored_and_ranked_into_the_site(board, tmp_path):
    meta = tmp_path / "about.yaml"
    meta.write_text("family: prompted\nparams: {model: tiny}\nauthors: A. Tester\nurl: https://example.org/x\n")
    # q1 exact; q2 flags "Paris" [0, 5) with no gold -> 0; s1 exact. context_qa = (1 + 0) / 2 = 0.5, summ = 1,
    # overall span F1 = 0.75: between `exact` (1) and `none` (0.25).
    rows = [{"id": "q1", "spans": [[13, 16]]}, {"id": "q2", "spans": [[0, 5]]}, {"id": "s1", "spans": [[11, 16]]}]
    run_dir = _submit(board, rows, meta_file=meta)
    results = Results.model_validate_json((run_dir / "results.json").read_text())
    assert results.overall.token.f1 == pytest.approx(0.75)
    assert results.run.origin == "submission" and results.run.detector == "mine"
    assert results.run.family == "prompted" and results.run.params == {"model": "tiny"}
    assert results.run.meta == {"authors": "A. Tester", "url": "https://example.org/x"}
    assert (run_dir / "predictions.jsonl").read_text().count("\n") == 3
    site = load_leaderboard(board["site"])
    assert [(e.name, e.rank) for e in site.entries] == [("exact", 1), ("mine", 2), ("none", None), ("all", None)]
    assert site.entries[1].origin == "submission"
    assert "mine" in (board["site"] / "index.html").read_text()
    # A rebuild from the run folders finds the submission as an ordinary run.
    assert "mine" in [e.name for e in build([board["runs"]], None).entries]


@pytest.mark.parametrize(
    ("rows", "expected"),
    [
        (
            EXACT[:2],
            "no prediction for 1 of the 3 test ids: 's1'; none at all for toysum (to submit the others alone, select them with --datasets)",
        ),
        ([*EXACT, EXACT[0]], "line 4: id 'q1' was already given on line 1"),
        (
            [EXACT[0], EXACT[1], {"id": "s1", "spans": [[11, 31]]}],
            "line 3: example 's1': predicted span [11, 31) ends past the response (length 30)",
        ),
        ([EXACT[0], '{"id": "q2", "spans": [', EXACT[2]], "line 2: not valid JSON (Expecting value at column 24)"),
    ],
    ids=["missing-id", "duplicate-id", "span-past-end", "not-json"],
)
def test_invalid_submission_is_rejected_and_changes_nothing(board, rows, expected):
    before = _snapshot(board["site"], board["runs"])
    with pytest.raises(SubmissionError) as err:
        _submit(board, rows)
    assert expected in err.value.problems
    assert expected in str(err.value) and "nothing was added" in str(err.value)
    assert _snapshot(board["site"], board["runs"]) == before


def test_every_problem_is_listed_at_once(board):
    rows = [
        "not json",
        ["a", "list"],
        {"id": "q1", "spans": [[5, 2]]},
        {"id": "nope", "spans": []},
        {"id": "q2", "sentence_labels": [1, 0]},
    ]
    with pytest.raises(SubmissionError) as err:
        _submit(board, rows)
    assert err.value.problems == [
        "line 1: not valid JSON (Expecting value at column 1)",
        "line 2: expected a JSON object, got an array",
        "line 3: spans: span [5, 2) is empty or reversed (start must be < end)",
        "line 4: id 'nope' is not an example of the selected test data",
        "line 5: id 'q2' has 2 sentence_labels for 1 sentence units",
        "no prediction for 1 of the 3 test ids: 's1'; none at all for toysum (to submit the others alone, select them with --datasets)",
    ]


def test_name_and_meta_problems_are_listed_too(board, tmp_path):
    meta = tmp_path / "about.json"
    meta.write_text(json.dumps({"family": "x", "licence": "MIT"}))
    with pytest.raises(SubmissionError) as err:
        _submit(board, EXACT, name="exact", meta_file=meta)
    assert err.value.problems == [
        "the leaderboard already has a row named 'exact'",
        f"{meta}: licence: Extra inputs are not permitted",
    ]


def test_a_submission_name_is_taken_once(board):
    _submit(board, EXACT, name="twice")
    before = _snapshot(board["site"], board["runs"])
    with pytest.raises(SubmissionError) as err:
        _submit(board, EXACT, name="twice")
    assert err.value.problems == [
        "the leaderboard already has a row named 'twice'",
        f"{board['runs']} already holds a submission named 'twice'",
    ]
    assert _snapshot(board["site"], board["runs"]) == before


def test_cli_rejects_with_the_list_and_exit_status_2(board):
    preds = board["site"].parent / "bad.jsonl"
    preds.write_text(_lines([EXACT[0], EXACT[0]]))
    before = _snapshot(board["site"], board["runs"])
    args = ["leaderboard", "submit", str(preds), "--name", "cli", "--examples", str(board["examples"])]
    args += ["--runs-dir", str(board["runs"]), "--site", str(board["site"]), "--bootstrap", "20"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 2
    assert "submission rejected (2 problem(s)); nothing was added" in result.output
    assert "  - line 2: id 'q1' was already given on line 1" in result.output
    # s1 is toysum's only example: the file covers none of that dataset, and how to submit the rest is said
    assert (
        "  - no prediction for 2 of the 3 test ids: 'q2', 's1'; none at all for toysum (to submit the others alone, "
        "select them with --datasets)\n" in result.output
    )
    assert _snapshot(board["site"], board["runs"]) == before


def test_cli_accepts_a_valid_file(board):
    preds = board["site"].parent / "good.jsonl"
    preds.write_text(_lines(EXACT))
    args = ["leaderboard", "submit", str(preds), "--name", "cli-ok", "--examples", str(board["examples"])]
    args += ["--runs-dir", str(board["runs"]), "--bootstrap", "20"]
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output
    assert "accepted: cli-ok" in result.output
    # the score it accepted, overall and per partition (exact predictions: 1 everywhere)
    assert "overall span F1 1.000 (95% CI 1.000-1.000), sentence F1 1.000, over 2 tasks and 3 examples" in result.output
    assert "  context_qa/toyqa: span F1 1.000, sentence F1 1.000 (n=2)" in result.output
    (run_dir,) = [p.parent for p in board["runs"].rglob("results.json")]
    assert (run_dir / "per_example.jsonl").read_text().count("\n") == 3
    assert Results.model_validate_json((run_dir / "results.json").read_text()).overall.token.f1 == 1.0


@pytest.mark.parametrize(
    ("name", "expected"),
    [
        ("\x1b[2J\x1b[31mred", r"--name '\x1b[2J\x1b[31mred' contains control characters"),
        ("exact ", "--name 'exact ' has leading or trailing whitespace"),
        ("EXACT", "the leaderboard already has a row named 'EXACT'"),
        ("   ", "--name '   ' is empty"),
    ],
    ids=["ansi", "trailing-space", "case-only", "blank"],
)
def test_a_name_that_would_mislead_is_refused_and_never_printed_raw(board, name, expected):
    before = _snapshot(board["site"], board["runs"])
    with pytest.raises(SubmissionError) as err:
        _submit(board, EXACT, name=name)
    assert expected in err.value.problems and "\x1b" not in str(err.value)
    assert _snapshot(board["site"], board["runs"]) == before


def test_concurrent_submits_to_one_site_are_all_kept(board):
    import threading

    names = [f"mine-{i}" for i in range(4)]
    start = threading.Barrier(len(names))
    errors: list[BaseException] = []

    def one(name: str) -> None:
        start.wait()
        try:
            _submit(board, EXACT, name=name, preds=f"{name}.jsonl")
        except BaseException as err:  # reported below: a thread's exception would otherwise vanish
            errors.append(err)

    threads = [threading.Thread(target=one, args=(n,)) for n in names]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    rows = {e.name for e in load_leaderboard(board["site"]).entries}
    assert set(names) <= rows and len(rows) == 3 + len(names)
    assert sorted(p.name for p in board["site"].iterdir()) == ["index.html", "leaderboard.json"]
