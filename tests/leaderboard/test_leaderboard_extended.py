"""The extended view: runs ranked by the extended overall; the main board sees only the paper's partitions."""

from __future__ import annotations

import json

from click.testing import CliRunner

from shambench.cli import main
from shambench.leaderboard.extended import board, render, run_row
from shambench.schema import Example, Prediction
from shambench.scoring.scorer import score

# Tokens of "a b": a [0, 1), b [2, 3).
EXAMPLES = [
    Example(id="z1", task="summ", dataset="zhou", response="a b", hallu_spans=[[0, 1]]),
    Example(id="x1", task="summ", dataset="xsumfaith-gold", response="a b", hallu_spans=[[2, 3]]),
    Example(id="h1", task="open_qa_long", dataset="haluquestqa", response="a b", hallu_spans=[[0, 3]]),
]


def _results(detector: str, spans: dict[str, list[list[int]]], limit: int | None = None):
    results = score(EXAMPLES, [Prediction(id=i, spans=s) for i, s in spans.items()], n_resamples=10)
    results.run = results.run.model_copy(update={"detector": detector, "split": "test", "limit": limit})
    return results


def test_rows_are_ranked_by_the_extended_overall():
    # exact: every group 1.0. first-word: z1 1, x1 0 (summ 0.5), h1 P 1 R 1/2 F1 2/3: overall (0.5 + 2/3) / 2.
    exact = run_row("runs/exact", _results("exact", {"z1": [[0, 1]], "x1": [[2, 3]], "h1": [[0, 3]]}))
    first = run_row("runs/first", _results("first-word", {"z1": [[0, 1]], "x1": [[0, 1]], "h1": [[0, 1]]}))
    limited = run_row("runs/lim", _results("exact", {"z1": [[0, 1]], "x1": [[2, 3]], "h1": [[0, 3]]}, limit=1))
    reference = run_row("runs/none", _results("none", dict.fromkeys(("z1", "x1", "h1"), [])))
    extended = board([first, limited, reference, exact])
    assert [(r.name, r.rank, r.standing) for r in extended.rows] == [
        ("exact", 1, "ranked"),
        ("first-word", 2, "ranked"),
        ("none", None, "reference"),
        ("exact", None, "incomplete"),
    ]
    assert first.groups == {"open_qa_long": 2 / 3, "summ": 0.5}
    assert first.overall_f1 == (0.5 + 2 / 3) / 2
    assert extended.groups == {"open_qa_long": 1, "summ": 2}
    page = render(extended)
    assert page.count("<tr") == 5 and "first-word" in page and "--limit 1" in page


def test_build_writes_the_extended_view_and_keeps_the_main_board_to_the_paper(tmp_path):
    from shambench.io import write_jsonl
    from tests.leaderboard.toy import make_run

    # Run directories (config, journal, results): the build scores every row again from its journal.
    examples = tmp_path / "examples.jsonl"
    write_jsonl(examples, EXAMPLES)
    nothing = dict.fromkeys(("z1", "x1", "h1"), [])
    for name, spans in (("exact", {"z1": [[0, 1]], "x1": [[2, 3]], "h1": [[0, 3]]}), ("first-word", nothing)):
        make_run(tmp_path / "runs" / name, examples, name, spans=spans)
    site = tmp_path / "site"
    result = CliRunner().invoke(main, ["leaderboard", "build", "--runs", str(tmp_path / "runs"), "--out", str(site),
                                       "--no-reported"])  # fmt: skip
    assert result.exit_code == 0, result.output
    assert "extended suite: 2 runs" in result.output
    main_board = json.loads((site / "leaderboard.json").read_text())
    # The main board's data is the paper's partition only; the run's paper overall is summ/zhou's F1.
    assert main_board["partitions"] == {"summ/zhou": 1}
    assert {e["name"]: e["span"]["overall"]["f1"] for e in main_board["entries"]} == {"exact": 1.0, "first-word": 0.0}
    extended = json.loads((site / "extended.json").read_text())
    assert [(r["name"], r["rank"], r["overall_f1"]) for r in extended["rows"]] == [
        ("exact", 1, 1.0),
        ("first-word", 2, 0.0),
    ]
    assert (site / "extended.html").read_text(encoding="utf-8").startswith("<!doctype html>")
