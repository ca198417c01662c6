"""Inputs and outputs that never crash or mislead: literal text, JSON on stdout, per-example scores, parameters."""

from __future__ import annotations

import json
import statistics

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.leaderboard.submit import MAX_LISTED_IDS, missing_problem
from tests.run_helpers import eval_run, write_jsonl

# Ids, tasks and texts that rich would read as markup or emoji if they were not printed literally.
NASTY = [
    {
        "id": "[/x] closing tag",
        "dataset": "d[bold]",
        "task": "qa[/]",
        "question": "What is [red]this[/red]?",
        "context": "Context with [link=http://x]a link[/link].",
        "response": "The answer is [/] :smile: Lyon.",
        "hallu_spans": [[26, 30]],
    },
    {
        "id": "an-id-that-is-long-" + "x" * 150,
        "dataset": "d[bold]",
        "task": "qa[/]",
        "response": "Nothing wrong here.",
    },
]


def invoke(*args, **kwargs):
    return CliRunner().invoke(main, [str(a) for a in args], prog_name="shambench", **kwargs)


@pytest.fixture
def nasty_run(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", NASTY)
    eval_run(examples, "overlap", tmp_path / "run")
    return examples, tmp_path / "run"


def test_markup_in_ids_tasks_and_texts_is_printed_literally(nasty_run, tmp_path):
    examples, run = nasty_run
    predictions = tmp_path / "pred.jsonl"
    predictions.write_text(json.dumps({"id": NASTY[0]["id"], "spans": [[26, 30]]}) + "\n")
    res = invoke("score", "--examples", examples, "--predictions", predictions, "--bootstrap", 10)
    assert res.exit_code == 0, res.output
    assert "qa[/]/d[bold]" in res.stdout and "qa[/]" in res.stdout
    shown = invoke("show", run, "--id", NASTY[0]["id"])
    assert shown.exit_code == 0, shown.output
    assert "[/x] closing tag" in shown.stdout and "What is [red]this[/red]?" in shown.stdout
    assert "[link=http://x]a link[/link]" in shown.stdout
    # overlap flags the words absent from question and context: "answer", "smile" and the gold "Lyon"
    assert "The {{answer}} is [/] :{{smile}}: [[{{Lyon}}]]." in shown.stdout and "😄" not in shown.stdout
    compared = invoke("compare", run, run, "--bootstrap", 10)
    assert compared.exit_code == 0, compared.output
    assert "qa[/]" in compared.stdout
    analysed = invoke("analyze", run, "--out", tmp_path / "an", "--no-figures")
    assert analysed.exit_code == 0, analysed.output
    assert "qa[/]/d[bold]" in analysed.stdout
    missing = invoke("show", run, "--id", "[/nope]")
    assert missing.exit_code == 2 and "no example with id '[/nope]'" in missing.stderr


def test_tables_keep_full_ids_when_piped(nasty_run):
    _, run = nasty_run
    # No COLUMNS and not a terminal: the width follows the content, nothing is cut with an ellipsis.
    res = CliRunner().invoke(main, ["score", str(run), "--bootstrap", "10"], env={"COLUMNS": None})
    assert res.exit_code == 0, res.output
    assert "…" not in res.stdout
    long_id = NASTY[1]["id"]
    shown = CliRunner().invoke(main, ["show", str(run), "--id", long_id], env={"COLUMNS": None})
    assert long_id in shown.stdout
    # show marks the spans in plain text: overlap flags "Lyon" (absent from question and context) = gold
    shown = CliRunner().invoke(main, ["show", str(run), "--id", NASTY[0]["id"]], env={"COLUMNS": None})
    assert ":{{smile}}: [[{{Lyon}}]]." in shown.stdout


def test_out_dash_and_json_put_only_json_on_stdout(nasty_run, tmp_path, monkeypatch):
    examples, run = nasty_run
    monkeypatch.chdir(tmp_path)
    for args in (
        ["score", run, "--out", "-", "--bootstrap", 10],
        ["score", run, "--json", "--bootstrap", 10],
        ["eval", "--detector", "all", "--examples", examples, "--run-dir", tmp_path / "e", "--json", "--no-progress"],
    ):
        res = invoke(*args)
        assert res.exit_code == 0, res.output
        data = json.loads(res.stdout)
        assert data["n_examples"] == 2 and data["schema_version"]
        assert "qa[/]/d[bold]" in res.stderr  # the human table went to stderr
    assert not (tmp_path / "-").exists()
    both = invoke("score", run, "--json", "--out", tmp_path / "r.json", "--bootstrap", 10)
    assert json.loads(both.stdout) == json.loads((tmp_path / "r.json").read_text())


def test_per_example_file_and_run_directory(nasty_run, tmp_path):
    examples, run = nasty_run
    lines = [json.loads(line) for line in (run / "per_example.jsonl").read_text().splitlines()]
    assert [row["id"] for row in lines] == [ex["id"] for ex in NASTY]
    # overlap: example 0 finds the gold "Lyon" among false alarms (recall 1, precision < 1); example 1 has no
    # context, so its words are flagged against no gold: P = R = F1 = 0
    assert lines[0]["token"]["recall"] == 1.0 and lines[0]["token"]["precision"] < 1.0
    assert lines[1]["token"] == {"precision": 0.0, "recall": 0.0, "f1": 0.0}
    assert lines[0]["status"] == "predicted" and set(lines[0]) >= {"task", "dataset", "sentence"}
    predictions = tmp_path / "pred.jsonl"
    predictions.write_text(json.dumps({"id": NASTY[0]["id"], "spans": [[0, 30]]}) + "\n")
    out = tmp_path / "per.jsonl"
    res = invoke(
        "score", "--examples", examples, "--predictions", predictions, "--per-example", out, "--json", "--bootstrap", 10
    )
    assert res.exit_code == 0, res.output
    results = json.loads(res.stdout)
    rows = [json.loads(line) for line in out.read_text().splitlines()]
    assert [r["status"] for r in rows] == ["predicted", "missing"]
    group = results["partitions"]["qa[/]/d[bold]"]
    assert statistics.fmean(r["token"]["f1"] for r in rows) == group["token"]["f1"]
    assert statistics.fmean(r["sentence"]["recall"] for r in rows) == group["sentence"]["recall"]
    piped = invoke(
        "score", "--examples", examples, "--predictions", predictions, "--per-example", "-", "--bootstrap", 10
    )
    assert piped.exit_code == 0, piped.output
    assert [json.loads(line) for line in piped.stdout.splitlines()] == rows
    both = invoke("score", run, "--per-example", "-", "--json")
    assert both.exit_code == 2 and "cannot both go to stdout" in both.stderr
    # refused before anything is read or scored
    unread = invoke(
        "score", "--examples", "nowhere.jsonl", "--predictions", "nowhere.jsonl", "--per-example", "-", "--json"
    )
    assert unread.exit_code == 2 and "cannot both go to stdout" in unread.stderr


def test_list_detector_parameters_and_bad_params():
    res = invoke("list", "detectors", "random")
    assert res.exit_code == 0, res.output
    lines = res.stdout.splitlines()
    assert any("rate" in line and "float" in line and "0.1" in line and "probability" in line for line in lines)
    assert any("seed" in line and "int" in line for line in lines)
    for param, message in (
        ("rat=0.2", "detector 'random' has no parameter 'rat'; did you mean 'rate'?"),
        ("rate=abc", "detector 'random': parameter rate='abc' is not of type float"),
    ):
        bad = invoke("eval", "--detector", "random", "-p", param, "--examples", "nowhere.jsonl")
        assert bad.exit_code == 2
        assert bad.stderr.strip().splitlines() == [bad.stderr.strip()]
        assert message in bad.stderr and "rate (float, default 0.1), seed (int, default 0)" in bad.stderr
    # "its parameters: none" read as the detector's name
    takes_none = invoke("eval", "--detector", "none", "-p", "x=1", "--examples", "nowhere.jsonl")
    assert takes_none.exit_code == 2
    assert takes_none.stderr == (
        "error: detector 'none' has no parameter 'x' (it takes none; see `shambench list detectors none`)\n"
    )
    # NAME:ARG, as --detector takes it, lists NAME's parameters
    with_arg = invoke("list", "detectors", "token-classifier:models/rt")
    assert with_arg.exit_code == 0 and with_arg.stdout.startswith("token-classifier: ")
    unknown = invoke("list", "detectors", "randm")
    assert unknown.exit_code == 2 and "did you mean 'random'" in unknown.stderr


def test_a_value_the_factory_refuses_is_one_line_and_no_run(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", NASTY)
    bad = invoke("eval", "--detector", "random", "-p", "rate=2", "--examples", examples, "--runs", tmp_path / "runs")
    assert bad.exit_code == 2, bad.output
    assert bad.stderr == "error: detector 'random': rate must be in [0, 1], got 2.0\n"
    assert not (tmp_path / "runs").exists()


def test_ctrl_c_in_any_command_is_exit_130(nasty_run, monkeypatch):
    import shambench.runs.scoring

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(shambench.runs.scoring, "run_results_and_scores", interrupted)
    _, run = nasty_run
    res = invoke("score", run)
    assert res.exit_code == 130 and res.stderr == "interrupted\n"  # click's "Aborted!" and 1 before


def test_a_python_warning_is_printed_as_the_commands_warnings_are(nasty_run, monkeypatch):
    import sys
    import warnings

    import shambench.runs.scoring

    scored = shambench.runs.scoring.run_results_and_scores

    def warned(*args, **kwargs):
        warnings.warn("response cache c.sqlite: a stored answer failed its seal", RuntimeWarning, stacklevel=2)
        return scored(*args, **kwargs)

    monkeypatch.setattr(shambench.runs.scoring, "run_results_and_scores", warned)

    def printed(message, category, filename, lineno, file=None, line=None):
        # What Python's own showwarning does outside the tests (pytest records warnings instead of printing them).
        sys.stderr.write(warnings.formatwarning(message, category, filename, lineno, line))

    monkeypatch.setattr(warnings, "showwarning", printed)
    _, run = nasty_run
    res = invoke("score", run)
    assert res.exit_code == 0, res.output
    # One line, no source file and line of the code that warned (was ".../scoring.py:12: RuntimeWarning: ...").
    assert "warning: response cache c.sqlite: a stored answer failed its seal\n" in res.stderr
    assert "RuntimeWarning" not in res.stderr and ".py:" not in res.stderr
    assert warnings.formatwarning is not None and warnings.formatwarning.__module__ == "warnings"  # restored


def test_rejection_lists_at_most_twenty_missing_ids_and_the_count():
    ids = [f"id{i}" for i in range(45)]
    message = missing_problem(ids, 50)
    assert message.startswith("no prediction for 45 of the 50 test ids: 'id0', 'id1'")
    assert f"'id{MAX_LISTED_IDS - 1}', and {45 - MAX_LISTED_IDS} more" in message
    assert f"'id{MAX_LISTED_IDS}'" not in message
    assert missing_problem(["a"], 3) == "no prediction for 1 of the 3 test ids: 'a'"


# --- the first hour: what a new user mistypes is answered with what they meant ------------------------------------


def test_the_folder_above_the_data_is_answered_with_the_data_folder(shared_data, tmp_path):
    parent = shared_data.parent
    res = invoke("eval", "--detector", "none", "--data-dir", parent, "--run-dir", tmp_path / "run")
    assert res.exit_code == 2
    assert (
        f"but {shared_data} holds " in res.stderr and "mushroom" in res.stderr and ": pass that folder." in res.stderr
    )
    assert not (tmp_path / "run").exists()
    listed = invoke("list", "datasets", "--data-dir", parent)
    assert listed.exit_code == 0
    assert f"none is present in {parent}: {shared_data} holds some: pass --data-dir {shared_data}" in listed.stdout


def test_list_datasets_says_how_to_get_data_when_none_is_present(tmp_path):
    res = invoke("list", "datasets", "--data-dir", tmp_path)
    assert res.exit_code == 0
    assert (
        f"none is present in {tmp_path}: point at a folder that holds them (or set $SHAMBENCH_DATA_DIR)" in res.stdout
    )
    assert "shambench data download" in res.stdout
    gone = tmp_path / "nowhere"
    res = invoke("list", "datasets", "--data-dir", gone)
    assert f"{gone} does not exist: point at a folder that holds them" in res.stdout


def test_a_data_dir_variable_naming_no_folder_is_named_as_the_culprit(tmp_path, monkeypatch):
    monkeypatch.setenv("SHAMBENCH_DATA_DIR", str(tmp_path / "nope"))
    res = invoke("eval", "--detector", "none", "--run-dir", tmp_path / "run")
    assert res.exit_code == 2
    assert f"data directory {tmp_path / 'nope'} (from $SHAMBENCH_DATA_DIR) does not exist" in res.stderr
    # not "set $SHAMBENCH_DATA_DIR": it is set
    assert "(e.g. ../shared/data), point $SHAMBENCH_DATA_DIR at that folder, or run" in res.stderr


def test_data_verify_says_when_a_source_with_absent_files_loads_from_others(shared_data):
    # ../shared/data holds RAGTruth as ConstrainedReasoner's copy, not the two official files the download fetches
    res = invoke("data", "verify", "ragtruth", "--data-dir", shared_data)
    assert res.exit_code == 0, res.output
    assert "absent  ragtruth/response.jsonl" in res.stdout
    assert (
        "ragtruth: loads from the files present here (`shambench list datasets`), though 2 of those `data download` "
        "fetches are absent" in res.stdout
    )
    assert "loads from the files present" not in invoke("data", "verify", "mushroom", "--data-dir", shared_data).stdout


def test_data_verify_with_nothing_to_verify_says_so(shared_data, tmp_path):
    # it printed "0 ok, 0 unrecorded, 0 absent" and exited 0
    res = invoke("data", "verify", "--data-dir", tmp_path / "nowhere")
    assert res.exit_code == 2
    assert res.stderr == (
        f"error: nothing to verify: {tmp_path / 'nowhere'} does not exist: point at a folder that holds them (or set "
        "$SHAMBENCH_DATA_DIR), or fetch them with `shambench data download`\n"
    )
    above = invoke("data", "verify", "--data-dir", shared_data.parent)
    assert above.exit_code == 2
    assert f"nothing to verify: none is present in {shared_data.parent}: {shared_data} holds some" in above.stderr


def test_show_suggests_the_full_id_of_a_bare_number(tmp_path):
    examples = tmp_path / "e.jsonl"
    rows = [
        {"id": f"toy/{n}", "task": "summ", "dataset": "toy", "response": f"Response {n}.", "hallu_spans": []}
        for n in ("1-24", "2-24", "3-24", "4-24", 2, 24, 240)
    ]
    write_jsonl(examples, rows)
    eval_run(examples, "none", tmp_path / "run")
    bare = invoke("show", tmp_path / "run", "--id", "24")
    assert bare.exit_code == 2
    # the id that is only 24 after its source comes first, before those merely ending in -24 (FaithBench's)
    assert bare.stderr.strip().endswith(
        "no example with id '24'; did you mean 'toy/24' or 'toy/1-24' or 'toy/2-24'? (or 2 more ending in '24')"
    )
    far = invoke("show", tmp_path / "run", "--id", "zzzzzz")
    assert far.stderr.strip().endswith("no example with id 'zzzzzz'")


def test_a_preset_lists_its_own_values_as_defaults():
    res = invoke("list", "detectors", "gpt5mini")
    assert res.exit_code == 0, res.output
    rows = {line.split("│")[1].strip(): line.split("│")[3].strip() for line in res.stdout.splitlines() if "│" in line}
    assert rows["model"] == "gpt-5-mini" and rows["api_key_env"] == "OPENAI_API_KEY"
    assert rows["max_concurrency"] == "16" and rows["min_similarity"] == "0.8"
    assert "'reasoning_effort': 'minimal'" in rows["generation"]


# Every command reading an EXAMPLES file (`--examples`), with the other arguments it needs to get that far.
EXAMPLES_READERS = {
    "agreement": ["agreement"],
    "data add-context": ["data", "add-context", "--provider", "file:{empty}"],
    "eval": ["eval", "--detector", "overlap", "--run-dir", "{tmp}/run"],
    "leaderboard submit": ["leaderboard", "submit", "{empty}", "--name", "x"],
    "score": ["score", "--predictions", "{empty}"],
}


def test_every_examples_reader_is_listed():
    from tests.cli.test_output_folders import every_command

    readers = {
        path.removeprefix("shambench ") for path, c in every_command() if "examples_file" in {p.name for p in c.params}
    }
    # train reads its EXAMPLES file for training, where an empty one is 'no training examples' (tested in tests/train)
    assert readers - {"train token-classifier"} == set(EXAMPLES_READERS)


@pytest.mark.parametrize("command", sorted(EXAMPLES_READERS))
def test_an_empty_examples_file_is_named_as_empty(tmp_path, command):
    empty = tmp_path / "EMPTY.jsonl"
    empty.write_text("")
    args = [a.format(empty=empty, tmp=tmp_path) for a in EXAMPLES_READERS[command]]
    result = invoke(*args, "--examples", empty)
    assert result.exit_code == 2, result.output
    assert result.stderr == f"error: {empty}: holds no example\n"
    assert not (tmp_path / "run").exists()
