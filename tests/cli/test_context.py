"""`shambench eval --context` and `shambench data add-context`: evidence changes the run and is recorded."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.cli.context import add_context_command
from shambench.data.context import ContextProvider, providers
from shambench.registry import Entry
from tests.run_helpers import eval_run, write_jsonl

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
    return write_jsonl(tmp_path / "ex.jsonl", EXAMPLES), write_jsonl(tmp_path / "evidence.jsonl", EVIDENCE)


def _eval(tmp_path, ex, name, *extra):
    return eval_run(ex, "overlap", tmp_path / name, *extra)


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
    assert with_ctx["partitions"]["open_qa/toy"]["token"]["f1"] > bare["partitions"]["open_qa/toy"]["token"]["f1"]
    # the summarisation example kept its own context, so its scores do not move
    assert with_ctx["partitions"]["summ/doc"] == bare["partitions"]["summ/doc"]


def test_resume_reapplies_the_same_context(tmp_path):
    ex, ev = _files(tmp_path)
    first = _eval(tmp_path, ex, "ctx", "--context", f"file:{ev}")
    res = CliRunner().invoke(main, ["eval", "--resume", str(tmp_path / "ctx"), "--no-progress", "--bootstrap", "20"])
    assert res.exit_code == 0, res.output
    again = json.loads((tmp_path / "ctx" / "results.json").read_text())
    assert again["partitions"] == first["partitions"]
    assert again["run"]["context_provenance"] == first["run"]["context_provenance"]


class Flaky(ContextProvider):
    """Evidence "about ID"; fails for q2 until healed; counts its fetches."""

    fetched: list[str] = []
    healed = False

    def fetch_one(self, example):
        Flaky.fetched.append(example.id)
        if example.id == "q2" and not Flaky.healed:
            return self.record(example, error="page not found")
        return self.record(example, f"about {example.id}")


@pytest.fixture
def flaky_provider(monkeypatch):
    monkeypatch.setattr(Flaky, "fetched", [])
    monkeypatch.setattr(Flaky, "healed", False)
    providers.entries()  # load built-ins and plugins first, so the test entry is not overwritten
    monkeypatch.setitem(providers._entries, "test-flaky", Entry("test-flaky", Flaky, "test", __name__))
    return Flaky


def test_rescoring_never_fetches_and_resume_refuses_evidence_that_changed(tmp_path, flaky_provider):
    ex, _ = _files(tmp_path)
    first = _eval(tmp_path, ex, "ctx", "--context", "test-flaky")
    assert flaky_provider.fetched == ["q1", "q2"]
    assert first["run"]["context_provenance"]["open_qa/toy"]["n_failed"] == 1
    runner = CliRunner()
    rescored = runner.invoke(main, ["score", str(tmp_path / "ctx"), "--bootstrap", "20"])
    assert rescored.exit_code == 0, rescored.output
    resumed = runner.invoke(main, ["eval", "--resume", str(tmp_path / "ctx"), "--no-progress", "--bootstrap", "20"])
    assert resumed.exit_code == 0, resumed.output
    assert flaky_provider.fetched == ["q1", "q2"]  # neither rescoring nor resuming called the provider

    # Another command stores evidence for q2 at last: resuming would show the detector other evidence.
    flaky_provider.healed = True
    assert runner.invoke(add_context_command, ["--provider", "test-flaky", "--examples", str(ex)]).exit_code == 0
    assert flaky_provider.fetched == ["q1", "q2", "q2"]
    refused = runner.invoke(main, ["eval", "--resume", str(tmp_path / "ctx"), "--no-progress"])
    assert refused.exit_code == 2
    assert "the evidence stored for context provider test-flaky is no longer what the run used" in refused.output
    # Rescoring does not depend on the evidence, so it still works.
    assert runner.invoke(main, ["score", str(tmp_path / "ctx"), "--bootstrap", "20"]).exit_code == 0


def test_add_context_exits_3_when_a_fetch_failed(tmp_path, flaky_provider):
    ex, _ = _files(tmp_path)
    runner = CliRunner()
    failed = runner.invoke(add_context_command, ["--provider", "test-flaky", "--examples", str(ex)])
    assert failed.exit_code == 3, failed.output
    assert "1 fetches failed:" in failed.output and "q2: page not found" in failed.output
    allowed = runner.invoke(
        add_context_command, ["--provider", "test-flaky", "--examples", str(ex), "--allow-failures"]
    )
    assert allowed.exit_code == 0 and "1 fetches failed:" in allowed.output
    flaky_provider.healed = True
    healed = runner.invoke(add_context_command, ["--provider", "test-flaky", "--examples", str(ex)])
    assert healed.exit_code == 0 and "failed:" not in healed.output


def test_add_context_command_counts_and_skips_stored(tmp_path):
    ex, ev = _files(tmp_path)
    runner = CliRunner()
    args = ["--provider", f"file:{ev}", "--examples", str(ex)]
    first = runner.invoke(add_context_command, args)
    assert first.exit_code == 0, first.output
    assert "2 open-domain examples (1 have their own context): 2 fetched, 0 failed, 0 already stored" in first.output
    second = runner.invoke(add_context_command, args)
    assert "0 fetched, 0 failed, 2 already stored" in second.output


def test_mushroom_with_file_context_and_without_differ_and_compare_shows_it(tmp_path):
    from shambench.data.benchmark import load_benchmark
    from tests.conftest import require_shared

    data = require_shared()
    require_shared("mushroom", "mushroom.en-tst.v1.extra.jsonl")
    examples = load_benchmark("mushroom", data_dir=data).examples[:20]
    # Evidence a group might share; here each item's own question and a neutral sentence, so that it is ours.
    evidence = tmp_path / "evidence.jsonl"
    evidence.write_text(
        "".join(json.dumps({"id": ex.id, "context": f"{ex.question} {ex.response}"}) + "\n" for ex in examples)
    )
    common = [
        "--detector",
        "overlap",
        "--datasets",
        "mushroom",
        "--data-dir",
        str(data),
        "--limit",
        "20",
        "--no-progress",
        "--bootstrap",
        "50",
    ]
    runner = CliRunner()
    for name, extra in (("bare", []), ("file", ["--context", f"file:{evidence}"])):
        res = runner.invoke(main, ["eval", *common, "--run-dir", str(tmp_path / name), *extra])
        assert res.exit_code == 0, res.output
    bare = json.loads((tmp_path / "bare" / "results.json").read_text())
    ctx = json.loads((tmp_path / "file" / "results.json").read_text())
    assert bare["run"]["context"] is None
    assert ctx["run"]["context_provenance"]["open_qa/mushroom"]["n_with_context"] == 20
    # evidence containing the response itself leaves overlap nothing to flag
    preds = [json.loads(line) for line in (tmp_path / "file" / "predictions.jsonl").read_text().splitlines()]
    assert len(preds) == 20 and all(p["spans"] == [] for p in preds)
    assert bare["partitions"]["open_qa/mushroom"]["token"]["recall"] > 0.5
    out = tmp_path / "cmp.json"
    res = runner.invoke(
        main, ["compare", str(tmp_path / "bare"), str(tmp_path / "file"), "--bootstrap", "50", "--out", str(out)]
    )
    assert res.exit_code == 0, res.output
    assert "open_qa" in res.output
    rows = {(d["group"], d["level"]): d for d in json.loads(out.read_text())["differences"]}
    expected = bare["tasks"]["open_qa"]["token"]["f1"] - ctx["tasks"]["open_qa"]["token"]["f1"]
    assert rows[("open_qa", "span")]["diff"] == pytest.approx(expected, abs=1e-12)
    assert rows[("open_qa", "span")]["ci"][0] > 0  # the evidence really changes this detector's scores


def test_leaderboard_shows_which_evidence_a_run_used(tmp_path):
    ex, ev = _files(tmp_path)
    with_ctx = _eval(tmp_path / "runs", ex, "ctx", "--context", f"file:{ev}")
    _eval(tmp_path / "runs", ex, "bare")
    site = tmp_path / "site"
    res = CliRunner().invoke(
        main, ["leaderboard", "build", "--runs", str(tmp_path / "runs"), "--out", str(site), "--no-reported"]
    )
    assert res.exit_code == 0, res.output
    html = (site / "index.html").read_text()
    digest = with_ctx["run"]["context_provenance"]["open_qa/toy"]["content_hash"][:12]
    assert (
        "context provider <code>file:" in html and f"open_qa/toy: 2 with evidence (hash <code>{digest}</code>)" in html
    )
    assert "each source&#39;s own context" in html or "each source's own context" in html
    board = json.loads((site / "leaderboard.json").read_text())
    by_ctx = {e["run"]["context"] is not None: e for e in board["entries"]}
    assert by_ctx[True]["run"]["context_provenance"]["open_qa/toy"]["content_hash"].startswith(digest)


def test_an_unknown_provider_names_the_command_that_lists_them(tmp_path):
    runner = CliRunner()
    res = runner.invoke(main, ["data", "add-context", "--provider", "wikipedio", "--examples", str(tmp_path / "x")])
    assert res.exit_code == 2
    # it named `shambench list context providers`, which does not exist
    assert res.stderr == (
        "error: unknown context provider 'wikipedio'; did you mean 'wikipedia'? (see `shambench list providers`)\n"
    )
    listed = runner.invoke(main, ["list", "providers"], env={"COLUMNS": "200"})
    assert listed.exit_code == 0
    assert [line.split("│")[1].strip() for line in listed.stdout.splitlines() if line.startswith("│ ")] == [
        "file",
        "llm",
        "wikipedia",
    ]
