"""`RunSpec`: one description of a run, from which `shambench eval`'s options and `evaluate()`'s keywords are made,
which config.json embeds and which a resume compares; adding a field is adding an option everywhere."""

from __future__ import annotations

import ast
import json
from pathlib import Path

import click
import pytest
from click.testing import CliRunner
from pydantic import Field

import shambench
from shambench.cli import main
from shambench.cli.options import field_help, option_table_text, spec_fields, spec_options
from shambench.errors import DataError
from shambench.runs.spec import EvalOptions, Execution, RunSpec, Selection
from tests.run_helpers import TIMES, write_jsonl

ROOT = Path(__file__).parents[2]
FIXTURES = ROOT / "tests" / "adapters" / "fixtures"
ROWS = [
    {"id": "a", "task": "summ", "dataset": "x", "response": "The cat sat on the mat.", "hallu_spans": [[4, 7]]},
    {"id": "b", "task": "qa", "dataset": "y", "response": "Paris is big and old.", "hallu_spans": []},
    {"id": "c", "task": "summ", "dataset": "x", "response": "A dog ran.", "hallu_spans": [[2, 5]]},
]
# What `shambench eval` has beyond the run's spec: how it prints and exits, and `--resume RUN_DIR`.
CLI_ONLY = {"resume_dir", "no_progress", "allow_failures", "out", "as_json", "help"}


def without_provenance(obj):
    """A JSON value without the times, places and commit of its making, at any depth."""
    if isinstance(obj, dict):
        return {k: without_provenance(v) for k, v in obj.items() if k not in (*TIMES, "git_commit")}
    if isinstance(obj, list):
        return [without_provenance(v) for v in obj]
    return obj


def eval_cli(*args: str) -> None:
    res = CliRunner().invoke(main, ["eval", "--no-progress", *args])
    assert res.exit_code == 0, res.output


def test_runspec_is_public():
    assert shambench.RunSpec is RunSpec and "RunSpec" in shambench.__all__


@pytest.mark.parametrize(
    "options",
    [
        {"detector": "random", "params": {"rate": 0.5, "seed": 3}, "limit": 2, "n_resamples": 20, "seed": 4},
        {"detector": "overlap", "datasets": ["mushroom", "favabench"], "data_dir": FIXTURES, "n_resamples": 30},
    ],
)
def test_evaluate_of_a_spec_writes_the_results_json_of_eval_with_the_same_options(tmp_path, options):
    if "datasets" not in options:
        options = {**options, "examples_file": write_jsonl(tmp_path / "ex.jsonl", ROWS)}
    spec = RunSpec.of(**options, run_dir=tmp_path / "api")
    # The same options on the command line, written out by hand.
    args = ["--detector", options["detector"], "--run-dir", str(tmp_path / "cli"), "--bootstrap"]
    args += [str(options["n_resamples"])]
    args += [a for k, v in options.get("params", {}).items() for a in ("-p", f"{k}={v}")]
    args += ["--limit", str(options["limit"]), "--seed", str(options["seed"])] if "limit" in options else []
    args += ["--examples", str(options["examples_file"])] if "examples_file" in options else []
    args += ["-d", ",".join(options["datasets"]), "--data-dir", str(FIXTURES)] if "datasets" in options else []
    eval_cli(*args)
    assert shambench.evaluate(spec) is not None
    api, cli = tmp_path / "api", tmp_path / "cli"
    for name in ("results.json", "config.json"):
        got, want = (without_provenance(json.loads((run / name).read_text())) for run in (api, cli))
        assert got == want, name
    assert (api / "per_example.jsonl").read_text() == (cli / "per_example.jsonl").read_text()
    assert sorted((api / "predictions.jsonl").read_text().splitlines()) == sorted(
        (cli / "predictions.jsonl").read_text().splitlines()
    )
    # config.json embeds the spec as it was asked (here: identical apart from the run directory).
    embedded = RunSpec.model_validate(json.loads((api / "config.json").read_text())["spec"])
    assert embedded.selection == spec.selection and embedded.scoring == spec.scoring
    assert (embedded.detector, embedded.params) == (spec.detector, spec.params)


def test_a_spec_and_keywords_are_one_or_the_other(tmp_path):
    with pytest.raises(TypeError, match="a RunSpec holds every option: give limit in it instead"):
        shambench.evaluate(RunSpec(detector="none"), limit=1)  # type: ignore[call-overload]
    with pytest.raises(TypeError, match="unknown option 'rate'.*params="):
        RunSpec.of(detector="random", rate=0.2)


def test_every_eval_option_is_a_spec_field_with_its_docstring_as_help():
    fields = spec_fields()
    command = main.get_command(click.Context(main), "eval")
    assert command is not None
    options = {p.name: p for p in command.params if isinstance(p, click.Option)}
    shown = {name for name, (_, info) in fields.items() if name != "resume"}
    assert options.keys() - CLI_ONLY == shown
    for name in shown:
        assert options[name].help == field_help(fields[name][1], fields), name
    # Every field documents itself in one line of its own (the help is made of it) ...
    assert all(info.description for _, info in fields.values())
    # ... and `evaluate()` takes each of them by name: its keywords are the fields (the detector comes first, as a
    # name, a Detector or a whole RunSpec), and a monitor.
    assert set(EvalOptions.__annotations__) == fields.keys() - {"detector"} | {"monitor"}


def test_the_help_names_other_options_by_their_flags():
    fields = spec_fields()
    assert field_help(fields["examples_file"][1], fields).startswith("An EXAMPLES JSONL file instead of --datasets")
    assert "--keep-going" not in field_help(fields["fail_fast"][1], fields)  # the flag's own help
    assert field_help(fields["sopo_compat"][1], fields).startswith("With --suite math-shepherd: also report")


def test_adding_a_field_adds_the_option_to_the_command_line_and_the_python_api():
    """What CONTRIBUTING's "add an eval option" asks: one field, with its docstring, in a section of the spec."""

    class Shuffled(Execution):
        shuffle_seed: int | None = Field(default=None, ge=0)
        """Run the pending examples in an order shuffled with this seed."""

    class ShuffledSpec(RunSpec):
        execution: Shuffled = Field(default_factory=Shuffled)
        """Where its directory goes and how its predictions are made."""

    got: list[RunSpec] = []

    @click.command()
    @spec_options(spec=ShuffledSpec)
    def command(spec: RunSpec) -> None:
        got.append(spec)

    # `shambench eval` reads RunSpec's options from a table written from the fields (`python -m
    # shambench.cli.options` rewrites it; tests/cli/test_options.py says when it must): the field makes its row.
    assert "'shuffle_seed': {'flags': ('--shuffle-seed',)" in option_table_text(ShuffledSpec)
    shown = CliRunner().invoke(command, ["--help"])
    assert "--shuffle-seed INTEGER RANGE" in shown.output
    assert "Run the pending examples in an order shuffled with this seed." in " ".join(shown.output.split())
    assert CliRunner().invoke(command, ["--shuffle-seed", "7", "--limit", "2"]).exit_code == 0
    (spec,) = got
    assert isinstance(spec.execution, Shuffled) and spec.execution.shuffle_seed == 7 and spec.selection.limit == 2
    # Only what was given is set: a resume compares only those with the run it finishes.
    assert spec.execution.model_fields_set == {"shuffle_seed"} and spec.selection.model_fields_set == {"limit"}
    assert CliRunner().invoke(command, ["--shuffle-seed", "-1"]).exit_code == 2  # the field's own bound
    # The Python API: the same keyword.
    assert ShuffledSpec.of(shuffle_seed=7, limit=2) == spec


def test_a_resume_refuses_a_changed_selection_and_accepts_a_restated_one(tmp_path):
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    run = tmp_path / "run"
    eval_cli("--detector", "all", "--examples", str(examples), "--run-dir", str(run), "--limit", "1")
    journal = (run / "predictions.jsonl").read_text()
    res = CliRunner().invoke(main, ["eval", "--resume", str(run), "--no-progress", "--limit", "2"])
    assert res.exit_code == 2
    assert "resuming would change --limit, which define the run's output" in res.stderr
    assert (run / "predictions.jsonl").read_text() == journal
    eval_cli("--resume", str(run), "--limit", "1", "--examples", str(examples), "--detector", "all")
    with pytest.raises(DataError, match="resuming would change `examples_file`"):
        shambench.evaluate(resume=True, run_dir=run, examples_file=tmp_path / "other.jsonl")


def test_a_run_folder_of_the_previous_version_resumes(tmp_path):
    """config.json as shambench wrote it before it embedded the spec: every field but `spec`."""
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    run = tmp_path / "run"
    eval_cli("--detector", "random", "-p", "rate=0.5", "--examples", str(examples), "--run-dir", str(run))
    config = json.loads((run / "config.json").read_text())
    del config["spec"]
    (run / "config.json").write_text(json.dumps(config))
    lines = (run / "predictions.jsonl").read_text().splitlines(keepends=True)
    (run / "predictions.jsonl").write_text(lines[0])
    before = json.loads((run / "results.json").read_text())
    # The recorded run is what its resolved fields say: the same options are no change, another value is.
    res = CliRunner().invoke(main, ["eval", "--resume", str(run), "--no-progress", "-p", "rate=0.3"])
    assert res.exit_code == 2 and "resuming would change rate" in res.stderr
    eval_cli("--resume", str(run), "-p", "rate=0.5", "--examples", str(examples))
    after = json.loads((run / "results.json").read_text())
    assert len((run / "predictions.jsonl").read_text().splitlines()) == 3
    assert without_provenance(after) == without_provenance(before)
    assert "spec" not in json.loads((run / "config.json").read_text())  # a resume rewrites no history


def parameters(function: ast.FunctionDef | ast.AsyncFunctionDef) -> int:
    a = function.args
    return len(a.posonlyargs) + len(a.args) + len(a.kwonlyargs) + (a.vararg is not None) + (a.kwarg is not None)


def test_no_function_of_runs_or_cli_takes_more_than_12_parameters():
    too_many = [
        f"{path.relative_to(ROOT)}:{node.name} ({parameters(node)})"
        for folder in ("shambench/runs", "shambench/cli")
        for path in sorted((ROOT / folder).rglob("*.py"))
        for node in ast.walk(ast.parse(path.read_text()))
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef) and parameters(node) > 12
    ]
    assert too_many == []


def declaring(name: str) -> set[str]:
    """The modules of the run's layers and interface that declare `name`: a field, or a function's parameter."""
    found = set()
    for folder in ("shambench/runs", "shambench/cli", "shambench/scoring", "leaderboard"):
        for path in (ROOT / folder).rglob("*.py"):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
                    a = node.args
                    names = {arg.arg for arg in a.posonlyargs + a.args + a.kwonlyargs}
                elif isinstance(node, ast.AnnAssign) and isinstance(node.target, ast.Name):
                    names = {node.target.id}
                else:
                    continue
                if name in names:
                    found.add(str(path.relative_to(ROOT)))
    return found


@pytest.mark.parametrize("name", ["examples_file", "context_params"])
def test_a_selection_field_is_declared_in_at_most_three_modules(name):
    # The spec, the config a run records (resolved) and the results' record of the run.
    assert declaring(name) <= {"shambench/runs/spec.py", "shambench/runs/rundir.py", "shambench/scoring/results.py"}


def test_selection_reads_a_comma_separated_string_as_the_command_line_gives_it():
    assert Selection(datasets="ragtruth, mushroom").datasets == ["ragtruth", "mushroom"]  # type: ignore[arg-type]


def test_the_same_eval_again_resumes_its_unfinished_run_and_new_run_starts_another(tmp_path):
    """Issue #44 item 5: re-running an interrupted eval takes up its folder instead of starting a second one."""
    examples = write_jsonl(tmp_path / "ex.jsonl", ROWS)
    runs = tmp_path / "runs"
    args = ["--detector", "random", "-p", "rate=0.5", "--examples", str(examples), "--runs", str(runs)]
    eval_cli(*args)
    (first,) = runs.iterdir()
    # As a Ctrl-C leaves it: config.json and part of the journal, no results.
    lines = (first / "predictions.jsonl").read_text().splitlines(keepends=True)
    (first / "predictions.jsonl").write_text(lines[0])
    (first / "results.json").unlink()
    res = CliRunner().invoke(main, ["eval", "--no-progress", *args])
    assert res.exit_code == 0, res.output
    assert f"resuming the unfinished run of the same spec in {first} (--new-run starts a new one)" in res.output
    assert f"run directory: {first}  (2 of 3 examples to run)" in res.output
    assert list(runs.iterdir()) == [first] and len((first / "predictions.jsonl").read_text().splitlines()) == 3
    # A finished run is never taken up; nor one of another selection; and --new-run starts a new one anyway.
    (first / "results.json").unlink()
    eval_cli(*args, "--limit", "1")
    eval_cli(*args, "--new-run")
    assert len(list(runs.iterdir())) == 3
    eval_cli(*args)
    assert len(list(runs.iterdir())) == 3  # `first`, unfinished again, was taken up: no fourth folder
    assert (first / "results.json").is_file()
