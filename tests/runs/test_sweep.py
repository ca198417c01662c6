"""Sweeps: planning a grid, running it on local processes and on a Dask cluster that loses a worker."""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest
from click.testing import CliRunner
from hypothesis import given
from hypothesis import strategies as st

from shambench.cli import main
from shambench.errors import DataError, ParameterError, UnknownPluginError
from shambench.runs.files import JOURNAL, RESULTS
from shambench.runs.rundir import examples_hash, load_config
from shambench.runs.sweep import (
    SUMMARY,
    DaskBackend,
    DetectorGrid,
    LocalBackend,
    cell_label,
    plan_sweep,
    run_sweep,
    run_tasks,
)
from tests.conftest import require_shared

# Two hand-made examples whose scores are worked out below, and ten more so that the grid has work to spread.
HAND = [
    # Tokens: The | tower | is | 300 | metres | tall | .  (7); gold "300 metres" covers 2 of them.
    {"response": "The tower is 300 metres tall.", "spans": [[13, 23]]},
    # Tokens: Water | boils | at | 100 | degrees | .  (6); no gold span.
    {"response": "Water boils at 100 degrees.", "spans": []},
]
WORDS = [
    "amber",
    "basalt",
    "cobalt",
    "dune",
    "ember",
    "fjord",
    "garnet",
    "harbour",
    "island",
    "juniper",
    "kelp",
    "lagoon",
    "marble",
    "nectar",
]


def write_examples(path: Path) -> Path:
    rows = [
        {
            "id": f"hand/{i}",
            "dataset": "hand",
            "task": "context_qa",
            "question": "How tall is the tower?",
            "context": "The tower is 120 metres tall.",
            "response": ex["response"],
            "hallu_spans": ex["spans"],
        }
        for i, ex in enumerate(HAND)
    ]
    for i in range(10):
        words = [WORDS[(i + k) % len(WORDS)] for k in range(5)]
        response = f"The {words[0]} {words[1]} lies near the {words[2]} {words[3]} by the {words[4]}."
        start = response.index(words[2])
        rows.append(
            {
                "id": f"gen/{i}",
                "dataset": "gen",
                "task": "summ",
                "context": f"A {words[0]} {words[1]} lies near the {words[4]}.",
                "response": response,
                "hallu_spans": [[start, start + len(words[2])]] if i % 3 else [],
            }
        )
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


SPEC = """\
examples: [toy.jsonl]
bootstrap: 50
leaderboard: false
detectors:
  - none
  - all
  - overlap
  - detector: random
    params: {seed: 3}
    grid: {rate: [0.2, 0.5]}
    shard_size: 3
"""


def write_sweep(folder: Path, text: str = SPEC) -> Path:
    write_examples(folder / "toy.jsonl")
    spec = folder / "sweep.yaml"
    spec.write_text(text, encoding="utf-8")
    return spec


def stable(results: dict) -> dict:
    """A results.json without what differs between two runs of the same cell (times, folder, commit)."""
    out = {k: v for k, v in results.items() if k not in ("created_at", "git_commit")}
    out["run"] = {
        k: v for k, v in results["run"].items() if k not in ("run_dir", "examples_file", "started_at", "finished_at")
    }
    return out


def outputs(plan) -> dict[str, tuple[dict, list[str]]]:
    """Per cell: its stable results and its journal lines sorted."""
    out = {}
    for cell in plan.cells:
        results = json.loads((cell.run_dir / RESULTS).read_text())
        lines = sorted((cell.run_dir / JOURNAL).read_text().splitlines())
        out[cell.name] = (stable(results), lines)
    return out


@pytest.fixture(scope="module")
def backend():
    with LocalBackend(2) as engine:
        yield engine


@pytest.fixture(scope="module")
def local_sweep(tmp_path_factory, backend):
    """The sweep above, run once on two local processes."""
    folder = tmp_path_factory.mktemp("local")
    plan = plan_sweep(write_sweep(folder))
    report = run_sweep(plan, backend)
    return plan, report


# ------------------------------------------------------------------------------------------------ planning


def test_plan_expands_the_grid_data_outer_detectors_inner(tmp_path):
    spec = write_sweep(tmp_path)
    (tmp_path / "b.jsonl").write_text((tmp_path / "toy.jsonl").read_text())
    spec.write_text(SPEC.replace("[toy.jsonl]", "[toy.jsonl, b.jsonl]"))
    plan = plan_sweep(spec)
    # 2 files × (none, all, overlap, random × 2 rates) = 10 cells
    assert [c.name for c in plan.cells[:5]] == [
        "toy/none",
        "toy/all",
        "toy/overlap",
        "toy/random_rate=0.2_seed=3",
        "toy/random_rate=0.5_seed=3",
    ]
    assert len(plan.cells) == 10 and plan.cells[5].name == "b/none"
    assert plan.cells[3].params == {"seed": 3, "rate": 0.2} and plan.cells[3].shard_size == 3
    assert plan.runs == tmp_path / "runs" / "sweep"
    assert plan.cells[0].run_dir == tmp_path / "runs" / "sweep" / "toy" / "none"
    assert {plan.state_of(c) for c in plan.cells} == {"new"}


def test_plan_overrides_runs_and_retries(tmp_path):
    plan = plan_sweep(write_sweep(tmp_path), runs=tmp_path / "elsewhere", retries=5)
    assert plan.spec.retries == 5
    assert plan.cells[0].run_dir == tmp_path / "elsewhere" / "toy" / "none"


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("detectors: [overlpa]\nexamples: [toy.jsonl]\n", "unknown detector 'overlpa'; did you mean 'overlap'"),
        ("detectors: []\nexamples: [toy.jsonl]\n", "detectors: List should have at least 1 item"),
        (
            "detectors: [none]\nexamples: [toy.jsonl]\nretries: -1\n",
            "retries: Input should be greater than or equal to 0",
        ),
        ("detectors: [none]\nexamples: [toy.jsonl]\nworkers: 3\n", "workers: Extra inputs are not permitted"),
        ("detectors: [none, none]\nexamples: [toy.jsonl]\n", "two cells would share the run directory"),
        ("detectors: [none\n", "not valid YAML"),
        ("- none\n", "expected a mapping"),
    ],
)
def test_bad_sweep_files_name_the_file_and_the_problem(tmp_path, text, message):
    spec = write_sweep(tmp_path, text)
    with pytest.raises((DataError, UnknownPluginError)) as err:
        plan_sweep(spec)
    assert message in str(err.value)
    if isinstance(err.value, DataError):
        assert str(err.value).startswith(str(spec))


@given(
    st.dictionaries(
        st.text(min_size=1, max_size=12),
        st.one_of(st.integers(), st.floats(allow_nan=False), st.text(max_size=30), st.booleans()),
        max_size=6,
    )
)
def test_cell_labels_are_safe_folder_names(params):
    label = cell_label("random:some/prog file.py", params)
    assert re.fullmatch(r"[A-Za-z0-9_.=-]+", label) and len(label) <= 80
    assert label == cell_label("random:some/prog file.py", dict(reversed(params.items())))


@given(st.dictionaries(st.sampled_from("abcd"), st.lists(st.integers(), min_size=1, max_size=3), max_size=3))
def test_grid_combinations_are_the_product_of_the_value_lists(grid):
    entry = DetectorGrid(detector="random", params={"seed": 7}, grid=grid)
    combos = entry.combinations()
    expected = 1
    for values in grid.values():
        expected *= len(values)
    assert len(combos) == expected
    assert all(c["seed"] == 7 and c.keys() == {"seed", *grid} for c in combos)
    assert len({json.dumps(c, sort_keys=True) for c in combos}) == len({json.dumps(c) for c in map(dict, combos)})


# ------------------------------------------------------------------------------------------------ local runs


def test_local_sweep_scores_every_cell_as_a_run_directory(local_sweep):
    plan, report = local_sweep
    assert [c.status for c in report.cells] == ["done"] * 5
    assert all(c.predicted == 12 for c in report.cells)
    by_name = {c.name: c for c in plan.cells}
    hand = {}
    for name in ("toy/all", "toy/none"):
        results = json.loads((by_name[name].run_dir / RESULTS).read_text())
        hand[name] = results["partitions"]["context_qa/hand"]["token"]
    # `all` on the tower example: P = 2/7, R = 1, F1 = 2·(2/7)/(2/7 + 1) = 4/9; on the boiling example it flags
    # 6 tokens where there is no gold, F1 = 0. Mean over the 2 examples: (4/9 + 0)/2 = 2/9.
    assert hand["toy/all"]["f1"] == pytest.approx(2 / 9)
    assert hand["toy/all"]["recall"] == pytest.approx((1 + 0) / 2)
    # `none`: the tower example has gold and no prediction, F1 = 0; the boiling one has neither, F1 = 1. Mean 1/2.
    assert hand["toy/none"]["f1"] == pytest.approx(0.5)
    config = load_config(by_name["toy/random_rate=0.5_seed=3"].run_dir)
    assert (config.detector, config.family, config.params) == ("random", "baseline", {"rate": 0.5, "seed": 3})
    assert config.n_examples == 12
    summary = json.loads((plan.runs / SUMMARY).read_text())
    assert [c["status"] for c in summary["cells"]] == ["done"] * 5 and summary["backend"] == "local"


def test_a_second_run_skips_complete_cells_and_resumes_a_partial_one(local_sweep, tmp_path, backend):
    plan, _ = local_sweep
    shutil.copytree(plan.runs.parent.parent, tmp_path, dirs_exist_ok=True)
    copy = plan_sweep(tmp_path / "sweep.yaml")
    before = outputs(copy)
    journals = {c.name: (c.run_dir / JOURNAL).read_bytes() for c in copy.cells}

    again = run_sweep(copy, backend)
    assert [c.status for c in again.cells] == ["skipped"] * 5 and all(c.predicted == 0 for c in again.cells)
    assert {c.name: (c.run_dir / JOURNAL).read_bytes() for c in copy.cells} == journals

    # Cut one journal to its first 5 lines and drop its results: only the 7 missing examples run again.
    cell = copy.cells[2]
    lines = (cell.run_dir / JOURNAL).read_text().splitlines(keepends=True)
    (cell.run_dir / JOURNAL).write_text("".join(lines[:5]))
    (cell.run_dir / RESULTS).unlink()
    resumed = run_sweep(copy, backend)
    assert [c.status for c in resumed.cells] == ["skipped", "skipped", "done", "skipped", "skipped"]
    assert resumed.cells[2].predicted == 7
    assert outputs(copy) == before


def test_a_value_the_factory_refuses_fails_its_cell_once_as_a_usage_error(tmp_path, backend):
    spec = write_sweep(
        tmp_path,
        "examples: [toy.jsonl]\nbootstrap: 20\nretries: 1\nleaderboard: false\n"
        "detectors:\n  - none\n  - {detector: random, params: {rate: 1.5}}\n",
    )
    report = run_sweep(plan_sweep(spec), backend)
    ok, bad = report.cells
    assert ok.status == "done" and ok.predicted == 12
    assert bad.status == "failed" and bad.predicted == 0 and bad.usage_error
    # The same refusal every time: sent once, whatever `retries` says.
    assert bad.error == "detector 'random': rate must be in [0, 1], got 1.5"
    assert report.failed == [bad]
    summary = json.loads((tmp_path / "runs" / "sweep" / SUMMARY).read_text())
    assert summary["cells"][1]["status"] == "failed" and summary["cells"][1]["usage_error"]


def test_an_unknown_parameter_or_a_wrong_type_is_refused_when_planning(tmp_path):
    spec = write_sweep(tmp_path, "examples: [toy.jsonl]\ndetectors:\n  - {detector: random, params: {rat: 0.2}}\n")
    with pytest.raises(ParameterError, match="detector 'random' has no parameter 'rat'; did you mean 'rate'?"):
        plan_sweep(spec)
    spec = write_sweep(
        tmp_path, "examples: [toy.jsonl]\ndetectors:\n  - {detector: random, grid: {rate: [0.1, abc]}}\n"
    )
    with pytest.raises(ParameterError, match="parameter rate='abc' is not of type float"):
        plan_sweep(spec)


def test_a_cell_whose_run_directory_another_process_holds_fails_at_once(tmp_path, backend):
    from shambench.runs.rundir import run_lock

    spec = write_sweep(tmp_path, "examples: [toy.jsonl]\nbootstrap: 20\nleaderboard: false\ndetectors: [none]\n")
    plan = plan_sweep(spec)
    (cell,) = plan.cells
    with run_lock(cell.run_dir):  # as an `eval --resume` of that folder would
        (report,) = run_sweep(plan, backend).cells
    assert report.status == "failed" and "in use" in report.error
    assert not (cell.run_dir / "predictions.jsonl").exists()
    (report,) = run_sweep(plan_sweep(spec), backend).cells
    assert report.status == "done"


def die_once(marker: str, value: int) -> int:
    """Kills its worker process the first time it runs (per marker file), then returns `value` doubled."""
    try:
        os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
    except FileExistsError:
        return 2 * value
    os._exit(1)


def test_a_dead_local_worker_is_replaced_and_its_task_sent_again(tmp_path, backend):
    calls = [(die_once, (str(tmp_path / "died"), 21))]
    [(index, result, failure)] = list(run_tasks(backend, calls, retries=1))
    assert (index, result, failure) == (0, 42, None)
    assert (tmp_path / "died").exists()


def test_a_task_that_keeps_killing_workers_is_reported_after_its_retries(tmp_path, backend):
    calls = [(os._exit, (1,))]
    [(index, result, failure)] = list(run_tasks(backend, calls, retries=1))
    assert index == 0 and result is None
    assert failure.attempts == 2 and failure.error.startswith("BrokenProcessPool")


# -------------------------------------------------------------------------------------------------- the CLI


def test_cli_ctrl_c_is_exit_130_and_says_how_to_go_on(tmp_path, monkeypatch):
    import shambench.runs.sweep

    def interrupted(*args, **kwargs):
        raise KeyboardInterrupt

    monkeypatch.setattr(shambench.runs.sweep, "run_sweep", interrupted)
    spec = write_sweep(tmp_path, "examples: [toy.jsonl]\nleaderboard: false\ndetectors: [all]\n")
    ran = CliRunner().invoke(main, ["sweep", str(spec), "--workers", "1", "--no-progress"])
    assert ran.exit_code == 130  # click's "Aborted!" and 1 before
    assert ran.stderr == (
        "interrupted; each cell keeps its journal: run the same command again to skip complete cells and resume the "
        "rest\n"
    )


def test_cli_plan_run_and_failure_exit_status(tmp_path):
    spec = write_sweep(
        tmp_path,
        "examples: [toy.jsonl]\nbootstrap: 20\nretries: 0\nleaderboard: false\n"
        "detectors:\n  - all\n  - {detector: random, params: {rate: 2}}\n",
    )
    runner = CliRunner()
    planned = runner.invoke(main, ["sweep", str(spec), "--plan"])
    assert planned.exit_code == 0, planned.output
    assert "toy/all" in planned.output and "toy/random_rate=2" in planned.output and "new" in planned.output

    ran = runner.invoke(main, ["sweep", str(spec), "--workers", "1", "--no-progress"])
    # A parameter the detector refuses is a usage error: exit 2, and no "run again" advice.
    assert ran.exit_code == 2, ran.output
    assert "toy/random_rate=2: detector 'random': rate must be in [0, 1], got 2" in ran.output
    assert (
        "1 cells cannot run as given (a parameter their detector refuses, examples that cannot be used, or a folder"
        in ran.output
    )
    assert "run the same command again" not in ran.output
    assert (tmp_path / "runs" / "sweep" / "toy" / "all" / RESULTS).is_file()
    allowed = runner.invoke(main, ["sweep", str(spec), "--workers", "1", "--no-progress", "--allow-failures"])
    assert allowed.exit_code == 2

    replanned = runner.invoke(main, ["sweep", str(spec), "--plan"])
    assert re.search(r"toy/all .* complete", replanned.output)


def test_examples_that_cannot_be_used_fail_their_cells_as_a_usage_error(tmp_path):
    # R26 of the attack reproductions: a line that is not JSON failed the cell as if it might pass next time
    # (exit 3, "retry them: run the same command again"); the file must be mended first, as for eval (exit 2).
    spec = write_sweep(tmp_path, "examples: [toy.jsonl]\nretries: 0\nleaderboard: false\ndetectors: [all, none]\n")
    with (tmp_path / "toy.jsonl").open("a", encoding="utf-8") as f:
        f.write("not json\n")
    ran = CliRunner().invoke(main, ["sweep", str(spec), "--workers", "1", "--no-progress"])
    assert ran.exit_code == 2, ran.output
    assert "toy/all: " in ran.output and "toy.jsonl:" in ran.output and "not valid JSON" in ran.output
    assert "2 cells cannot run as given" in ran.output and "run the same command again" not in ran.output


@pytest.mark.parametrize(
    ("where", "key", "value"),
    [
        ("params", "api_key_env", "AWS_SECRET"),
        ("params", "base_url", "http://127.0.0.1:9/v1"),
        ("grid", "base_url", ["http://127.0.0.1:9/v1"]),
    ],
)
def test_a_sweep_file_may_not_route_the_key(tmp_path, where, key, value):
    entry = json.dumps({"detector": "gpt5mini", where: {key: value}})
    spec = write_sweep(tmp_path, f"examples: [toy.jsonl]\ndetectors:\n  - {entry}\n")
    result = CliRunner().invoke(main, ["sweep", str(spec), "--plan"])
    assert result.exit_code == 2
    flag = "--" + key.replace("_", "-")
    assert f"may not set {key}: the API key goes only where the command line says; pass {flag}" in result.output


def test_the_command_lines_endpoint_reaches_the_workers_and_a_changed_one_is_refused(tmp_path, monkeypatch):
    from tests.openai_server import OpenAIServer

    monkeypatch.setenv("OPENAI_API_KEY", "sk-for-the-first-server")
    spec = write_sweep(
        tmp_path,
        "examples: [toy.jsonl]\nbootstrap: 10\nleaderboard: false\ndetectors:\n  - {detector: openai, params: {model: m}}\n",
    )
    # Workers read the key from their own environment: started after it is set (as on a cluster's nodes).
    with OpenAIServer() as first, OpenAIServer() as other, LocalBackend(1) as backend:
        first.script = other.script = lambda req: '{"incorrect_spans": []}'
        plan = plan_sweep(spec, endpoint={"base_url": first.base_url})
        [done] = run_sweep(plan, backend).cells
        assert done.status == "done" and done.failed_predictions == 0, done.error
        assert {r.authorization for r in first.log} == {"Bearer sk-for-the-first-server"} and len(first.log) == 12
        assert load_config(plan.cells[0].run_dir).params["base_url"] == first.base_url
        # The same cell against another server would mix two servers' answers in one run: refused, nothing sent.
        (plan.cells[0].run_dir / RESULTS).unlink()
        [refused] = run_sweep(plan_sweep(spec, endpoint={"base_url": other.base_url}), backend).cells
        assert refused.status == "failed" and "not of this cell" in refused.error
        assert other.log == []


def test_a_huge_grid_is_refused_before_it_is_expanded(tmp_path, monkeypatch):
    from shambench.runs.sweep.grid import DetectorGrid

    values = json.dumps(list(range(40)))
    grid = "{" + ", ".join(f"p{i}: {values}" for i in range(4)) + "}"  # 40**4 = 2,560,000 cells
    spec = write_sweep(
        tmp_path, f"examples: [toy.jsonl]\ndetectors:\n  - {{detector: embedding-support, grid: {grid}}}\n"
    )
    expanded: list[int] = []
    combinations = DetectorGrid.combinations
    monkeypatch.setattr(DetectorGrid, "combinations", lambda self: expanded.append(self.size()) or combinations(self))
    result = CliRunner().invoke(main, ["sweep", str(spec), "--plan"])
    assert expanded == []  # counted, never expanded: no list of 2,560,000 parameter sets was made
    assert result.exit_code == 2, result.output
    assert "the grid makes 2,560,000 cells, more than the 10,000 one sweep runs" in result.output


def test_cli_bad_spec_is_one_line_error(tmp_path):
    spec = write_sweep(tmp_path, "detectors: [none]\nexamples: [toy.jsonl]\nbogus: 1\n")
    result = CliRunner().invoke(main, ["sweep", str(spec), "--plan"])
    assert result.exit_code == 2
    assert f"error: {spec}: bogus: Extra inputs are not permitted" in result.output


# ------------------------------------------------------------------------------------------------ Dask


def kill_once(marker: str):
    """A Dask worker plugin: the first worker to start its second prediction task dies on the spot."""
    from distributed.diagnostics.plugin import WorkerPlugin

    class KillOnce(WorkerPlugin):
        name = "kill-once"

        def setup(self, worker) -> None:
            self.started = 0

        def transition(self, key, start, finish, **kwargs) -> None:
            if finish != "executing" or "predict_shard" not in str(key):
                return
            self.started += 1
            if self.started == 2:
                try:
                    os.close(os.open(marker, os.O_CREAT | os.O_EXCL))
                except FileExistsError:
                    return
                os._exit(1)

    return KillOnce()


def require_dask():
    """The `distributed` package; missing, it fails under CI=true (CI installs the dask extra) and skips elsewhere."""
    try:
        import distributed
    except ImportError:
        message = "the dask extra is not installed (pip install -e '.[dev,dask]')"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message)
        pytest.skip(message)
    return distributed


def test_a_dask_scheduler_that_never_answers_is_a_data_error_naming_it(mute_port):
    require_dask()
    address = f"tcp://127.0.0.1:{mute_port}"
    with pytest.raises(DataError, match=f"^no answer from the Dask scheduler at {address} within 0.3 s$"):
        DaskBackend(address, deadline=0.3)


def test_sweep_against_a_mute_scheduler_is_one_error_line(tmp_path, mute_port, monkeypatch):
    require_dask()
    import shambench.runs.sweep.backends

    monkeypatch.setattr(shambench.runs.sweep.backends, "SCHEDULER_DEADLINE", 0.3)
    spec = write_sweep(tmp_path, "examples: [toy.jsonl]\nleaderboard: false\ndetectors: [all]\n")
    address = f"tcp://127.0.0.1:{mute_port}"
    ran = CliRunner().invoke(main, ["sweep", str(spec), "--backend", "dask", "--scheduler", address, "--no-progress"])
    assert ran.exit_code == 2, ran.output
    errors = [line for line in ran.output.splitlines() if line.startswith("error:")]
    assert errors == [f"error: no answer from the Dask scheduler at {address} within 0.3 s"], ran.output
    assert "Traceback" not in ran.output


def test_dask_sweep_survives_a_killed_worker_with_results_identical_to_local(local_sweep, tmp_path):
    distributed = require_dask()
    from shambench.runs.sweep import DaskBackend

    local_plan, _ = local_sweep
    plan = plan_sweep(write_sweep(tmp_path))
    marker = tmp_path / "killed"
    with (
        distributed.LocalCluster(
            n_workers=2, threads_per_worker=1, host="127.0.0.1", dashboard_address=None
        ) as cluster,
        DaskBackend(cluster.scheduler_address) as backend,
    ):
        backend.client.register_plugin(kill_once(str(marker)))
        report = run_sweep(plan, backend)
    assert marker.exists(), "no worker was killed: the test did not test recovery"
    assert [c.status for c in report.cells] == ["done"] * 5 and report.backend == "dask"
    assert outputs(plan) == outputs(local_plan)


# ------------------------------------------------------------------------------------------------ real data


def test_sweep_over_real_data_defaults_to_the_shambench_sources(tmp_path, backend):
    from shambench.data.benchmark import default_datasets, load_benchmark

    shared = require_shared("mushroom")
    spec = tmp_path / "sweep.yaml"
    spec.write_text("detectors: [all]\nlimit: 3\nbootstrap: 20\nleaderboard: false\n")
    plan = plan_sweep(spec, data_dir=shared.parent)
    assert [c.data.dataset for c in plan.cells] == default_datasets(shared.parent)
    assert "mushroom" in [c.data.dataset for c in plan.cells]

    spec.write_text("detectors: [all]\ndatasets: [mushroom]\nlimit: 3\nbootstrap: 20\nleaderboard: false\n")
    plan = plan_sweep(spec, data_dir=shared.parent)
    [cell] = run_sweep(plan, backend).cells
    assert cell.status == "done" and cell.predicted == 3
    # The cell is an ordinary run: its results match scoring the same 3 examples directly.
    results = json.loads((plan.cells[0].run_dir / RESULTS).read_text())
    first3 = load_benchmark("mushroom", "test", shared.parent).examples[:3]
    assert results["n_examples"] == 3 and results["run"]["datasets"] == ["mushroom"]
    assert load_config(plan.cells[0].run_dir).examples_hash == examples_hash(first3)
