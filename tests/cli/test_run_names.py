"""A run of an API detector is named for the model it asked for, alike on the board, in `analyze` and in `compare`;
its config and results record the structured-output mode the server was answered in and the model it served."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.leaderboard.build import load_leaderboard

FAST = ["-p", "backoff_base=0.001", "--bootstrap", "10", "--no-progress"]
RESPONSES = ["Paris is the capital of Spain.", "The moon is made of cheese.", "Water boils at 100 C."]


def cli(*args: str):
    return CliRunner().invoke(main, list(args), terminal_width=200)


def first_word(req) -> str:
    """A reply marking the answer's first word (the answer sits between `<answer>` lines of the prompt)."""
    answer = req.body["messages"][-1]["content"].split("<answer>\n", 1)[1]
    return json.dumps({"incorrect_spans": answer.split()[:1]})


@pytest.fixture
def examples(tmp_path: Path) -> Path:
    path = tmp_path / "examples.jsonl"
    lines = [
        {"id": f"t/{i}", "dataset": "toy", "task": "open_qa", "response": text, "hallu_spans": [[0, 5]]}
        for i, text in enumerate(RESPONSES)
    ]
    path.write_text("".join(json.dumps(x) + "\n" for x in lines))
    return path


def eval_openai(server, model: str, examples: Path, run: Path) -> None:
    args = ["--detector", "openai", "--model", model, "--base-url", server.base_url, "--examples", str(examples)]
    result = cli("eval", *args, "--run-dir", str(run), *FAST)
    assert result.exit_code == 0, result.output + repr(result.exception)
    assert f"openai:{model} on 3 examples" in result.output


def test_a_llama_cpp_like_run_is_named_for_its_model_and_records_mode_and_served_model(
    openai_server, examples, tmp_path, monkeypatch
):
    monkeypatch.chdir(tmp_path)
    # as llama-cpp-python: json_schema refused (HTTP 500), answered under the model file's own name
    openai_server.accepted_formats = frozenset({"text", "json_object"})
    openai_server.served_model = "/models/SmolLM2-135M-Instruct-Q8_0.gguf"
    openai_server.script = first_word
    eval_openai(openai_server, "smollm2", examples, tmp_path / "runs" / "a")
    config = json.loads((tmp_path / "runs" / "a" / "config.json").read_text())
    results = json.loads((tmp_path / "runs" / "a" / "results.json").read_text())
    for record in (config, results["run"]):
        assert record["detector"] == "openai" and record["params"]["model"] == "smollm2"
        assert record["structured_mode"] == "json_object+schema"
        assert record["served_model"] == "/models/SmolLM2-135M-Instruct-Q8_0.gguf"
    # a second model on a server that takes json_schema and answers under the name asked for
    openai_server.accepted_formats = None
    openai_server.served_model = None
    eval_openai(openai_server, "tinyllama", examples, tmp_path / "runs" / "b")
    second = json.loads((tmp_path / "runs" / "b" / "results.json").read_text())["run"]
    assert second["structured_mode"] == "json_schema" and second["served_model"] == "tinyllama"

    built = cli("leaderboard", "build", "--runs", "runs", "--out", "site", "--no-reported")
    assert built.exit_code == 0, built.output
    board = load_leaderboard("site")
    assert sorted(e.name for e in board.entries) == ["openai:smollm2", "openai:tinyllama"]
    assert board.skipped == {}
    # the served model on the public board: the model file's name, not where it lay on the serving machine
    served = {e.name: e.run.served_model for e in board.entries if e.run}
    assert served == {"openai:smollm2": "SmolLM2-135M-Instruct-Q8_0.gguf", "openai:tinyllama": "tinyllama"}
    assert "/models/" not in (tmp_path / "site" / "leaderboard.json").read_text()
    assert "openai:smollm2" in (tmp_path / "site" / "index.html").read_text()

    analysed = cli("analyze", "runs/a", "runs/b", "--no-figures", "--out", "analysis")
    assert analysed.exit_code == 0, analysed.output
    runs = json.loads((tmp_path / "analysis" / "analysis.json").read_text())["runs"]
    assert [r["detector"] for r in runs] == ["openai:smollm2", "openai:tinyllama"]
    assert "openai:smollm2" in analysed.output and "openai:tinyllama" in analysed.output

    compared = cli("compare", "runs/a", "runs/b", "--bootstrap", "10")
    assert compared.exit_code == 0, compared.output
    assert "run A (openai:smollm2)" in compared.output and "run B (openai:tinyllama)" in compared.output
