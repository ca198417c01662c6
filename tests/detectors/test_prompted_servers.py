"""The prompted detector against servers that behave like real local ones: llama-cpp-python's format rejection
(HTTP 500), a served model other than the one asked for, and systematic failures that must stop a run."""

from __future__ import annotations

import json

from click.testing import CliRunner

from shambench.cli import main
from tests.conftest import require_shared
from tests.openai_server import Fault

FAST = ["-p", "backoff_base=0.001", "--bootstrap", "10", "--no-progress"]


def first_word_of_answer(req) -> str:
    """A valid reply marking the answer's first word, as a JSON object (what json_object mode yields)."""
    user = req.body["messages"][-1]["content"]
    answer = user.split("<answer>\n", 1)[1].rsplit("\n</answer>", 1)[0]
    return json.dumps({"incorrect_spans": answer.split()[:1]})


def eval_cli(*args: str):
    return CliRunner().invoke(main, ["eval", *args], terminal_width=200)


def test_llama_cpp_python_like_server_completes_all_of_mushroom(openai_server, tmp_path):
    data = require_shared("mushroom").parent
    openai_server.accepted_formats = frozenset({"text", "json_object"})
    openai_server.served_model = "smollm2-cpp"
    openai_server.script = first_word_of_answer
    run = tmp_path / "run"
    args = ["--detector", "openai", "--model", "Qwen/Qwen3-4B", "--base-url", openai_server.base_url]
    result = eval_cli(*args, "--datasets", "mushroom", "--data-dir", str(data), "--run-dir", str(run), *FAST)
    assert result.exit_code == 0, result.output + repr(result.exception)
    res = json.loads((run / "results.json").read_text())
    assert res["n_examples"] == 154 and res["failed_predictions"] == 0 and res["missing_predictions"] == 0
    # One json_schema request rejected with llama-cpp-python's 500, never retried; all 154 answered after it.
    assert openai_server.count(status=500) == 1 and openai_server.count(status=200) == 154
    assert len(openai_server.log) == 155
    assert all(r.body["response_format"]["type"] == "json_object" for r in openai_server.log[1:])
    assert res["run"]["served_model"] == "smollm2-cpp"
    assert json.loads((run / "config.json").read_text())["served_model"] == "smollm2-cpp"
    journal = [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]
    assert {p["meta"]["structured"] for p in journal} == {"json_object+schema"}
    assert {p["meta"]["served_model"] for p in journal} == {"smollm2-cpp"}
    # Each of the two notes is said once.
    assert result.output.count("using json_object+schema") == 1 and result.output.count("'smollm2-cpp'") == 1


def test_systematic_failure_stops_the_run_and_resume_continues_after_the_fix(openai_server, tmp_path, monkeypatch):
    examples = tmp_path / "ex.jsonl"
    lines = [
        {"id": f"t/{i}", "dataset": "toy", "task": "open_qa", "response": f"Answer number {i}."} for i in range(30)
    ]
    examples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    # A deterministic rejection (not an authentication failure, which has its own stop after five in a row) of the
    # first 8 requests; the later ones are held open, so the run sees the failures while requests are still to send
    # however fast the machine answers them.
    openai_server.faults = lambda req: Fault("404", message="model m does not exist") if req.n <= 8 else Fault("hang")
    run = tmp_path / "run"
    args = ["--detector", "openai", "--model", "m", "--base-url", openai_server.base_url, "--examples", str(examples)]
    result = eval_cli(*args, "--run-dir", str(run), *FAST)
    openai_server.release()
    assert result.exit_code == 2
    assert "stopped: the first 8 predictions failed for the same reason: HTTP 404: model m does not exist" in (
        result.output
    )
    assert "likely fix: check --base-url (it ends in /v1) and --model" in result.output
    assert f"shambench eval --resume {run}" in result.output
    # The run stopped early: the 8 failures and at most the 16 requests the held ones leave room for (16 at a
    # time), well short of 30, and the failures are journaled for --resume.
    assert len(openai_server.log) <= 8 + 16
    journal = (run / "predictions.jsonl").read_text().splitlines()
    assert len(journal) >= 8 and all(json.loads(line)["error"] for line in journal)
    openai_server.faults = None
    resumed = eval_cli("--resume", str(run), "--base-url", openai_server.base_url, *FAST)
    assert resumed.exit_code == 0, resumed.output
    assert json.loads((run / "results.json").read_text())["failed_predictions"] == 0


def test_keep_going_runs_every_example(openai_server, tmp_path):
    examples = tmp_path / "ex.jsonl"
    lines = [{"id": f"t/{i}", "dataset": "toy", "task": "open_qa", "response": f"Answer {i}."} for i in range(12)]
    examples.write_text("".join(json.dumps(x) + "\n" for x in lines))
    openai_server.script = lambda req: "```python\ndata = []\n```"
    run = tmp_path / "run"
    args = ["--detector", "openai", "--model", "m", "--base-url", openai_server.base_url, "--examples", str(examples)]
    result = eval_cli(*args, "--run-dir", str(run), "--keep-going", *FAST)
    # Every example was asked; the run finished with failed predictions: exit status 3.
    assert result.exit_code == 3 and len(openai_server.log) == 12
    assert json.loads((run / "results.json").read_text())["failed_predictions"] == 12
