"""`shambench eval --context` and `shambench data add-context`: evidence changes the run and is recorded."""

from __future__ import annotations

import json

from click.testing import CliRunner

from shambench.cli import main
from shambench.cli.context import add_context_command

EXAMPLES = [
    {
        "id": "q1",
        "dataset": "toy",
        "task": "open_qa",
        "question": "Who wrote Hamlet?",
        "response": "Shakespeare wrote Hamlet in 1601.",
        "hallu_spans": [[29, 33]],
    },
    {
        "id": "q2",
        "dataset": "toy",
        "task": "open_qa",
        "question": "Where is Etna?",
        "response": "Etna is in Sicily.",
        "hallu_spans": [],
    },
    {
        "id": "d1",
        "dataset": "doc",
        "task": "summ",
        "context": "The cat sat on the mat.",
        "response": "The cat sat.",
        "hallu_spans": [],
    },
]
EVIDENCE = [
    {"id": "q1", "context": "Hamlet is a tragedy written by William Shakespeare around 1600."},
    {"id": "q2", "context": "Mount Etna is an active volcano on the east coast of Sicily."},
    {"id": "d1", "context": "Ignored: this example has its own source document."},
]


def _files(tmp_path):
    ex = tmp_path / "ex.jsonl"
    ex.write_text("".join(json.dumps(e) + "\n" for e in EXAMPLES))
    ev = tmp_path / "evidence.jsonl"
    ev.write_text("".join(json.dumps(e) + "\n" for e in EVIDENCE))
    return ex, ev


def _eval(tmp_path, ex, name, *extra):
    res = CliRunner().invoke(
        main,
        [
            "eval",
            "--detector",
            "overlap",
            "--examples",
            str(ex),
            "--no-progress",
            "--bootstrap",
            "20",
            "--run-dir",
            str(tmp_path / name),
            *extra,
        ],
    )
    assert res.exit_code == 0, res.output
    return json.loads((tmp_path / name / "results.json").read_text())


def test_eval_with_and_without_context_records_the_difference(tmp_path):
    ex, ev = _files(tmp_path)
    bare = _eval(tmp_path, ex, "bare")
    with_ctx = _eval(tmp_path, ex, "ctx", "--context", f"file:{ev}")
    assert bare["run"]["context"] is None and bare["run"]["context_provenance"] == {}
    prov = with_ctx["run"]["context_provenance"]
    assert with_ctx["run"]["context"] == f"file:{ev}"
    assert prov["open_qa/toy"]["n_with_context"] == 2
    assert prov["summ/doc"]["n_own_context"] == 1 and prov["summ/doc"]["n_with_context"] == 0
    # Without evidence overlap flags every content word of q2 ("Etna" is in the question, "Sicily" is not);
    # with it, "Sicily" is supported, so q2 (no gold) goes from F1 0 to F1 1.
    preds = [json.loads(line) for line in (tmp_path / "ctx" / "predictions.jsonl").read_text().splitlines()]
    assert next(p for p in preds if p["id"] == "q2")["spans"] == []
    assert with_ctx["datasets"]["open_qa/toy"]["token"]["f1"] > bare["datasets"]["open_qa/toy"]["token"]["f1"]
    # the summarisation example kept its own context, so its scores do not move
    assert with_ctx["datasets"]["summ/doc"] == bare["datasets"]["summ/doc"]


def test_resume_reapplies_the_same_context(tmp_path):
    ex, ev = _files(tmp_path)
    first = _eval(tmp_path, ex, "ctx", "--context", f"file:{ev}")
    res = CliRunner().invoke(main, ["eval", "--resume", str(tmp_path / "ctx"), "--no-progress", "--bootstrap", "20"])
    assert res.exit_code == 0, res.output
    again = json.loads((tmp_path / "ctx" / "results.json").read_text())
    assert again["datasets"] == first["datasets"]
    assert again["run"]["context_provenance"] == first["run"]["context_provenance"]


def test_add_context_command_counts_and_skips_stored(tmp_path):
    ex, ev = _files(tmp_path)
    runner = CliRunner()
    args = ["--provider", f"file:{ev}", "--examples", str(ex)]
    first = runner.invoke(add_context_command, args)
    assert first.exit_code == 0, first.output
    assert "2 open-domain examples (1 have their own context): 2 fetched, 0 failed, 0 already stored" in first.output
    second = runner.invoke(add_context_command, args)
    assert "0 fetched, 0 failed, 2 already stored" in second.output
