"""Run integrity through `shambench eval`: malformed replies, exit statuses, the failure summary, the cache across
servers, one writer per run directory, where credentials may go, and run files that are links or FIFOs."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.detection.detector import Detector, detectors
from shambench.errors import DataError
from shambench.fs import NOT_FOLLOWED
from shambench.registry import Entry
from shambench.runs.rundir import run_lock
from tests import leaks
from tests.openai_server import Fault, OpenAIServer, poison
from tests.run_helpers import wait_until

FAST = ["--no-progress", "--bootstrap", "10", "-p", "backoff_base=0.001", "-p", "max_retries=1"]
SECRET = "sk-test-" + "S3cr3tK3y" * 4
OTHER_SECRET = "sk-other-" + "0therK3y" * 4


def examples_file(path: Path, n: int, datasets: tuple[str, ...] = ("toy",)) -> Path:
    """`n` examples per dataset, each response with one gold span."""
    rows = []
    for name in datasets:
        for i in range(n):
            response = f"The {name} river Ilsa{i} flows through Varn{i}."
            start = response.index("Varn")
            rows.append(
                {"id": f"{name}/{i}", "dataset": name, "task": "open_qa", "question": f"Where does Ilsa{i} flow?",
                 "response": response, "hallu_spans": [[start, start + len(f"Varn{i}")]]}
            )  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


def invoke(*args: str, env: dict | None = None):
    return CliRunner().invoke(main, ["eval", *map(str, args)], env=env, terminal_width=200)


def openai_eval(server, examples: Path, run: Path, *extra: str, env: dict | None = None):
    args = ["--detector", "openai", "--model", "m", "--base-url", server.base_url, "--examples", examples]
    return invoke(*args, "--run-dir", run, *FAST, *extra, env=env)


def journal_lines(run: Path) -> list[dict]:
    return [json.loads(line) for line in (run / "predictions.jsonl").read_text().splitlines()]


def results_of(run: Path) -> dict:
    return json.loads((run / "results.json").read_text())


# --- every reply accounted for; exit status 3; resume completes ---------------------------------------------


def test_a_server_poisoning_one_reply_in_ten_gives_exit_3_and_resume_completes(openai_server, tmp_path):
    examples = examples_file(tmp_path / "ex.jsonl", 15, ("toy", "other"))
    openai_server.faults = poison(0.1, "content-number", seed=0)
    run = tmp_path / "run"
    res = openai_eval(openai_server, examples, run)
    lines = journal_lines(run)
    failed = sorted(row["id"] for row in lines if row.get("error"))
    # Every example has exactly one journal line, spans or an error.
    assert sorted(row["id"] for row in lines) == sorted(f"{d}/{i}" for d in ("toy", "other") for i in range(15))
    # Seed 0 poisons a few of the 30 prompts (on every attempt); exactly those examples failed.
    poisoned = {r.key for r in openai_server.log if r.fault}
    assert 1 <= len(failed) == len(poisoned) <= 10, failed
    assert res.exit_code == 3, res.output
    assert "Traceback" not in res.output
    assert f"{len(failed)} predictions failed:" in res.output
    assert f"{len(failed):>6}  malformed reply" in res.output
    assert "malformed reply: message content is a number after 2 attempts" in res.output
    assert f"retry them with: shambench eval --resume {run} --base-url {openai_server.base_url}" in res.output
    results = results_of(run)
    assert results["failed_predictions"] == results["missing_predictions"] == len(failed)
    per_partition = {k: v["failed_predictions"] for k, v in results["partitions"].items()}
    assert per_partition == {f"open_qa/{d}": sum(f.startswith(d + "/") for f in failed) for d in ("toy", "other")}

    openai_server.reset()
    openai_server.faults = None
    again = invoke("--resume", run, "--base-url", openai_server.base_url, "--no-progress", "--bootstrap", "10")
    assert again.exit_code == 0, again.output
    assert openai_server.count() == len(failed)
    assert results_of(run)["failed_predictions"] == 0


def test_allow_failures_turns_exit_3_into_0(openai_server, tmp_path):
    examples = examples_file(tmp_path / "ex.jsonl", 3)
    openai_server.faults = lambda req: Fault("null")
    res = openai_eval(openai_server, examples, tmp_path / "run", "--allow-failures")
    assert res.exit_code == 0, res.output
    assert "3 predictions failed:" in res.output and results_of(tmp_path / "run")["failed_predictions"] == 3


def test_repeated_authentication_errors_stop_the_run_with_exit_2(openai_server, tmp_path):
    examples = examples_file(tmp_path / "ex.jsonl", 30)
    openai_server.faults = lambda req: Fault("401")
    res = openai_eval(openai_server, examples, tmp_path / "run", "--max-concurrency", "1")
    assert res.exit_code == 2, res.output
    assert "stopped after 5 consecutive authentication errors (HTTP 401: Incorrect API key provided)" in res.stderr
    assert f"resume with: shambench eval --resume {tmp_path / 'run'}" in res.stderr
    assert openai_server.count() == 5


def test_ctrl_c_prints_how_to_resume(tmp_path, monkeypatch):
    class Interrupted(Detector):
        def predict(self, examples, monitor=None):
            yield from ()
            raise KeyboardInterrupt

    monkeypatch.setitem(detectors._entries, "test-interrupted", Entry("test-interrupted", Interrupted, "t", __name__))
    examples = examples_file(tmp_path / "ex.jsonl", 2)
    res = invoke("--detector", "test-interrupted", "--examples", examples, "--run-dir", tmp_path / "run", *FAST[:3])
    assert res.exit_code == 130
    assert f"interrupted; finish the run with: shambench eval --resume {tmp_path / 'run'}" in res.output


class Crashing(Detector):
    """Predicts nothing for the first example, then its own code fails (as a plugin's bug would)."""

    broken = True

    def detect(self, example):
        if self.broken and not example.id.endswith("/0"):
            raise ValueError("model exploded")
        return []


def test_a_detector_that_raises_is_one_line_naming_its_code_and_the_run_resumes(tmp_path, monkeypatch):
    monkeypatch.setitem(detectors._entries, "test-crashing", Entry("test-crashing", Crashing, "t", __name__))
    examples, run = examples_file(tmp_path / "ex.jsonl", 3), tmp_path / "run"
    res = invoke("--detector", "test-crashing", "--examples", examples, "--run-dir", run, *FAST[:3])
    assert res.exit_code == 2 and "Traceback" not in res.output
    line = Crashing.detect.__code__.co_firstlineno + 2  # the raise
    assert res.stderr.splitlines()[-2:] == [
        f"error: detector 'test-crashing' raised ValueError: model exploded ({__file__}:{line}, in detect); its "
        "predictions before it are journaled",
        f"after the fix, continue with: shambench eval --resume {run}",
    ]
    assert [json.loads(x)["id"] for x in (run / "predictions.jsonl").read_text().splitlines()] == ["toy/0"]
    monkeypatch.setattr(Crashing, "broken", False)  # fixed
    resumed = invoke("--resume", run, *FAST[:3])
    assert resumed.exit_code == 0, resumed.output
    assert len((run / "predictions.jsonl").read_text().splitlines()) == 3


class Unprintable(Exception):
    """An exception of a detector's own whose message cannot be made."""

    def __str__(self):
        raise ValueError("no message either")


class UnprintableData(DataError):
    """One of shambench's error classes, raised by a detector's code, with a message that cannot be made."""

    def __str__(self):
        raise ValueError("no message either")


class RaisingUnprintable(Detector):
    """Its own code raises the exception of the test, whose str() raises."""

    error: type[Exception] = Unprintable

    def detect(self, example):
        raise self.error("x")


@pytest.mark.parametrize(
    "error, line",
    [
        (Unprintable, "detector 'test-unprintable' raised Unprintable: (its str() raised; repr: Unprintable('x'))"),
        (UnprintableData, "(its str() raised; repr: UnprintableData('x'))"),
    ],
)
def test_a_detector_exception_whose_message_raises_is_still_one_line(tmp_path, monkeypatch, error, line):
    monkeypatch.setattr(RaisingUnprintable, "error", error)
    entry = Entry("test-unprintable", RaisingUnprintable, "t", __name__)
    monkeypatch.setitem(detectors._entries, "test-unprintable", entry)
    examples = examples_file(tmp_path / "ex.jsonl", 2)
    res = invoke("--detector", "test-unprintable", "--examples", examples, "--run-dir", tmp_path / "run", *FAST[:3])
    assert res.exit_code == 2 and "Traceback" not in res.output, res.output
    (shown,) = [x for x in res.stderr.splitlines() if x.startswith("error:")]
    assert shown.startswith(f"error: {line}"), shown


def test_resuming_a_run_of_a_detector_not_installed_here_says_so(tmp_path, monkeypatch):
    examples = examples_file(tmp_path / "ex.jsonl", 2)
    monkeypatch.setitem(
        detectors._entries, "test-plugin", Entry("test-plugin", detectors.get("none").factory, "t", __name__)
    )
    res = invoke("--detector", "test-plugin", "--examples", examples, "--run-dir", tmp_path / "run", *FAST[:3])
    assert res.exit_code == 0, res.output
    monkeypatch.delitem(detectors._entries, "test-plugin")  # its package uninstalled
    resumed = invoke("--resume", tmp_path / "run")
    assert resumed.exit_code == 2
    # not "unknown detector 'test-plugin'; did you mean ...?"
    assert resumed.stderr == (
        "error: the run was made with detector 'test-plugin', which is not registered here (see `shambench list "
        "detectors`): if a plugin package provided it, install that package to resume\n"
    )


def test_ctrl_c_before_the_run_starts_is_exit_130_too(tmp_path, monkeypatch):
    import shambench.runs.lifecycle

    def loading(*args, **kwargs):
        raise KeyboardInterrupt  # while the data loads, before the run directory exists

    monkeypatch.setattr(shambench.runs.lifecycle, "select_examples", loading)
    examples = examples_file(tmp_path / "ex.jsonl", 2)
    res = invoke("--detector", "none", "--examples", examples, "--run-dir", tmp_path / "run", *FAST[:3])
    assert res.exit_code == 130  # click's "Aborted!" and 1 before
    assert res.output == "interrupted before the run started: no example was run\n"
    assert not (tmp_path / "run").exists()


def test_a_requested_dataset_that_fails_to_load_is_exit_2(tmp_path):
    res = invoke("--detector", "overlap", "--datasets", "ragtruth", "--data-dir", tmp_path, "--run-dir", tmp_path / "r")
    assert res.exit_code == 2
    # One line naming the dataset, the data directory and what was not found there.
    assert res.stderr.startswith("error: ") and res.stderr.count("\n") == 1
    assert "ragtruth" in res.stderr and str(tmp_path) in res.stderr and "not found" in res.stderr
    assert not (tmp_path / "r").exists()


# --- the cache never crosses endpoints ---------------------------------------------------------------------


def test_a_second_server_with_the_same_model_name_receives_every_request(openai_server, tmp_path):
    examples = examples_file(tmp_path / "ex.jsonl", 6)
    assert openai_eval(openai_server, examples, tmp_path / "a").exit_code == 0
    with OpenAIServer() as other:
        res = openai_eval(other, examples, tmp_path / "b")
        assert res.exit_code == 0, res.output
        assert other.count() == 6
    # The first server's answers are cached for it, and only for it.
    assert openai_eval(openai_server, examples, tmp_path / "c").exit_code == 0
    assert openai_server.count() == 6


# --- one writer per run directory --------------------------------------------------------------------------


def test_a_resume_while_another_process_holds_the_run_is_refused_at_once(openai_server, tmp_path):
    examples = examples_file(tmp_path / "ex.jsonl", 4)
    run = tmp_path / "run"
    openai_server.faults = lambda req: Fault("500")
    assert openai_eval(openai_server, examples, run).exit_code == 3
    openai_server.reset()
    openai_server.faults = None
    with run_lock(run):
        res = invoke("--resume", run, "--base-url", openai_server.base_url, "--no-progress")
    assert res.exit_code == 2
    assert f"error: {run} is in use by another shambench process (pid {os.getpid()})" in res.stderr
    assert openai_server.count() == 0


def test_two_concurrent_resumes_one_is_refused(openai_server, tmp_path):
    examples = examples_file(tmp_path / "ex.jsonl", 3)
    run = tmp_path / "run"
    openai_server.faults = lambda req: Fault("500")
    assert openai_eval(openai_server, examples, run).exit_code == 3
    openai_server.reset()
    # The first resume (another process) is held by the server mid-request.
    openai_server.faults = lambda req: Fault("hang")
    cmd = [sys.executable, "-m", "shambench", "eval", "--resume", str(run), "--base-url", openai_server.base_url]
    proc = subprocess.Popen([*cmd, "--no-progress"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    try:
        wait_until(openai_server.held, "the first resume sends a request", proc)
        sent = openai_server.count()
        res = invoke("--resume", run, "--base-url", openai_server.base_url, "--no-progress")
        assert res.exit_code == 2 and "is in use by another shambench process" in res.stderr
        assert openai_server.count() == sent
    finally:
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        openai_server.release()


def test_a_journal_without_a_config_is_not_adopted(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    (run / "predictions.jsonl").write_text('{"id": "toy/0", "spans": []}\n')
    res = invoke("--detector", "overlap", "--examples", examples_file(tmp_path / "e.jsonl", 2), "--run-dir", run)
    assert res.exit_code == 2 and "holds predictions.jsonl but no config.json" in res.stderr
    assert sorted(p.name for p in run.iterdir()) == ["predictions.jsonl"]


# --- credentials go only where the user sends them ------------------------------------------------------------


def test_a_doctored_config_never_sends_the_key_elsewhere(openai_server, tmp_path, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OTHER_KEY", OTHER_SECRET)
    examples = examples_file(tmp_path / "ex.jsonl", 3)
    run = tmp_path / "run"
    openai_server.faults = lambda req: Fault("500")
    assert openai_eval(openai_server, examples, run).exit_code == 3
    with OpenAIServer() as attacker:
        config = json.loads((run / "config.json").read_text())
        config["params"].update(base_url=attacker.base_url, api_key_env="OTHER_KEY")
        (run / "config.json").write_text(json.dumps(config))
        plain = invoke("--resume", run, "--no-progress")
        named = invoke("--resume", run, "--base-url", openai_server.base_url, "--no-progress")
        assert attacker.count() == 0
    assert plain.exit_code == 2 and "the run was made with api_key_env=OTHER_KEY, base_url=" in plain.stderr
    assert "(--resume RUN_DIR continues a run, with --base-url/--api-key-env as it was made;" in plain.stderr
    assert named.exit_code == 2
    # Only the original server ever saw a key, and only the one named on the command line.
    assert {r.authorization for r in openai_server.log} == {f"Bearer {SECRET}"}


def test_a_program_file_neither_picks_the_key_variable_nor_the_server(openai_server, tmp_path, monkeypatch):
    from shambench.detectors.miprov2 import OptimisationUsage, ProgramFile, Prompt, Scores, dspy_version

    monkeypatch.setenv("OPENAI_API_KEY", SECRET)
    monkeypatch.setenv("OTHER_KEY", OTHER_SECRET)
    examples = examples_file(tmp_path / "ex.jsonl", 2)
    with OpenAIServer() as attacker:
        program = ProgramFile(
            dspy_version=dspy_version(), shambench_version="0", created_at="2026-01-01T00:00:00+00:00", base="openai",
            model="m", base_url=attacker.base_url, api_key_env="OTHER_KEY", instructions=Prompt(instructions="x").instructions,
            auto="light", seed=0, max_demos=0, trainset="dev", trainset_ids=[], heldout="test", heldout_ids=[],
            train=Scores(n=0, base=0, optimized=0), heldout_scores=Scores(n=0, base=0, optimized=0), usage=OptimisationUsage(),
        )  # fmt: skip
        path = tmp_path / "program.json"
        path.write_text(program.model_dump_json())
        refused = invoke("--detector", f"miprov2:{path}", "--examples", examples, "--run-dir", tmp_path / "r1")
        assert refused.exit_code == 2 and f"pass --base-url {attacker.base_url}" in refused.stderr
        refused = invoke("--detector", f"miprov2:{path}", "--base-url", openai_server.base_url, "--examples", examples,
                         "--run-dir", tmp_path / "r2", *FAST)  # fmt: skip
        assert refused.exit_code == 2 and "pass --api-key-env OTHER_KEY to use it" in refused.stderr
        ok = invoke("--detector", f"miprov2:{path}", "--base-url", openai_server.base_url, "--api-key-env",
                    "OPENAI_API_KEY", "--examples", examples, "--run-dir", tmp_path / "r2", *FAST)  # fmt: skip
        assert ok.exit_code == 0, ok.output
        assert attacker.count() == 0
    assert {r.authorization for r in openai_server.log} == {f"Bearer {SECRET}"}


def test_credentials_in_the_base_url_are_refused_and_reach_no_file(openai_server, tmp_path):
    url = openai_server.base_url.replace("http://", "http://alice:hunter2@")
    examples = examples_file(tmp_path / "ex.jsonl", 2)
    res = invoke("--detector", "openai", "--model", "m", "--base-url", url, "--examples", examples,
                 "--run-dir", tmp_path / "run")  # fmt: skip
    assert res.exit_code == 2
    assert "must not contain credentials" in res.stderr and "hunter2" not in res.stderr + res.output
    assert not (tmp_path / "run").exists() and openai_server.count() == 0
    assert not any("hunter2" in p.read_text(errors="replace") for p in tmp_path.rglob("*") if p.is_file())


def test_credentials_in_a_doctored_config_are_not_repeated_by_the_refusal(openai_server, tmp_path):
    # R21 of the attack reproductions: the resume refuses the recorded URL, quoting it, password and all.
    examples = examples_file(tmp_path / "ex.jsonl", 2)
    run = tmp_path / "run"
    openai_server.faults = lambda req: Fault("500")
    assert openai_eval(openai_server, examples, run).exit_code == 3
    config = json.loads((run / "config.json").read_text())
    config["params"]["base_url"] = openai_server.base_url.replace("http://", "http://alice:hunter2@")
    (run / "config.json").write_text(json.dumps(config))
    refused = invoke("--resume", run, "--no-progress")
    assert refused.exit_code == 2 and "base_url=http://***@127.0.0.1:" in refused.stderr
    assert "hunter2" not in refused.stderr + refused.output and "alice" not in refused.stderr


@pytest.mark.parametrize("detector", ["openai", "prm"])
def test_credentials_given_as_a_detector_parameter_are_refused_too(tmp_path, detector):
    examples = examples_file(tmp_path / "ex.jsonl", 1)
    res = invoke("--detector", detector, "--model", "m", "-p", "base_url=http://bob:s3cret@127.0.0.1:9/v1",
                 "--examples", examples, "--run-dir", tmp_path / "run")  # fmt: skip
    assert res.exit_code == 2 and "must not contain credentials" in res.stderr and "s3cret" not in res.stderr
    assert not (tmp_path / "run").exists()


def test_rows_an_adapter_drops_are_printed_by_eval_and_recorded_in_results(tmp_path, monkeypatch):
    from shambench.data.adapter import Adapter, LoadResult, adapters
    from shambench.schema import Example

    class Dropping(Adapter):
        name, tasks, suite = "dropper", ("open_qa",), "test"

        def available(self, data_dir):
            return True

        def load(self, data_dir, split="test"):
            ex = Example(id="d/0", dataset="dropper", task="open_qa", response="Paris is big.", hallu_spans=[[0, 5]])
            return LoadResult(examples=[ex], dropped={"no labels": 3, "empty response": 1})

    adapters.entries()  # load the built-ins first, so the test entry is not overwritten
    monkeypatch.setitem(adapters._entries, "dropper", Entry("dropper", Dropping, "test", __name__))
    run = tmp_path / "run"
    res = invoke("--detector", "all", "--datasets", "dropper", "--data-dir", tmp_path, "--run-dir", run, *FAST[:3])
    assert res.exit_code == 0, res.output
    assert "dropper: 4 source rows dropped by the adapter (1 empty response, 3 no labels)" in res.output
    assert results_of(run)["run"]["dropped_rows"] == {"dropper": {"no labels": 3, "empty response": 1}}


# --- run directories are opened, never followed -------------------------------------------------------------


def finished_run(tmp_path: Path) -> Path:
    """A finished run of `all` on two examples, whose files the tests replace by links and FIFOs."""
    run = tmp_path / "run"
    res = invoke(
        "--detector", "all", "--examples", examples_file(tmp_path / "ex.jsonl", 2), "--run-dir", run, *FAST[:3]
    )
    assert res.exit_code == 0, res.output
    return run


@pytest.mark.parametrize("name", [".lock", "predictions.jsonl", "results.json", "per_example.jsonl", "config.json"])
def test_a_planted_link_in_a_run_directory_is_refused_and_its_target_untouched(tmp_path, name):
    run = finished_run(tmp_path)
    outside = tmp_path / "precious.txt"
    outside.write_text("keep me\n")
    before = outside.read_bytes()
    (run / name).unlink(missing_ok=True)
    (run / name).symlink_to(outside)
    res = invoke("--resume", run, *FAST[:3])
    assert res.exit_code == 2, res.output
    assert f"{run / name}: is a symbolic link; {NOT_FOLLOWED}" in res.stderr
    assert "Traceback" not in res.output
    assert outside.read_bytes() == before


@pytest.mark.parametrize("name", ["predictions.jsonl", "results.json", "config.json"])
def test_a_fifo_in_a_run_directory_is_refused_without_blocking(tmp_path, name):
    run = finished_run(tmp_path)
    (run / name).unlink()
    os.mkfifo(run / name)
    res = invoke("--resume", run, *FAST[:3])
    assert res.exit_code == 2, res.output
    assert f"{run / name}: not a regular file" in res.stderr


@pytest.mark.parametrize("name", [".lock", "predictions.jsonl"])
def test_a_hard_link_to_a_file_elsewhere_is_never_written(tmp_path, name):
    run = finished_run(tmp_path)
    outside = tmp_path / "backup"
    outside.write_bytes((run / name).read_bytes() if (run / name).exists() else b"")
    before = outside.read_bytes()
    (run / name).unlink(missing_ok=True)
    os.link(outside, run / name)
    res = invoke("--resume", run, *FAST[:3])
    assert res.exit_code == 2, res.output
    assert f"{run / name}: has 1 other hard link(s)" in res.stderr
    assert outside.read_bytes() == before


# --- a server that echoes the key: never written, never printed ----------------------------------------------


def test_a_key_echoed_in_a_reply_is_written_and_printed_nowhere(openai_server, tmp_path, monkeypatch):
    # The key has no key shape, so only knowing the key in use can mask it; each reply carries it in every encoding
    # of tests.leaks as spans (a quoted span, JSON inside a span, ...), which the journal and the cache escape again.
    key = leaks.ODD_KEY
    monkeypatch.setenv("ECHO_TEST_KEY", key)
    openai_server.script = lambda req: json.dumps({"incorrect_spans": leaks.echo_spans(req.authorization or "", key)})
    run = tmp_path / "run"
    result = openai_eval(openai_server, examples_file(tmp_path / "e.jsonl", 3), run, "--api-key-env", "ECHO_TEST_KEY")
    assert {r.authorization for r in openai_server.log} == {f"Bearer {key}"}
    assert result.exit_code == 0, result.output
    shown = CliRunner().invoke(main, ["show", str(run), "--id", "toy/0"], env={"ECHO_TEST_KEY": key})
    assert shown.exit_code == 0 and "unplaced:" in shown.output, shown.output
    cache = Path(os.environ["SHAMBENCH_CACHE_DIR"])
    written = [p for root in (run, cache) for p in root.rglob("*") if p.is_file()]
    assert {"predictions.jsonl", "results.json", "responses.sqlite"} <= {p.name for p in written}
    outputs = [result.output, result.stderr, shown.output, shown.stderr]
    assert leaks.leaks(key, written, outputs) == []
    assert "Bearer ***" in (run / "predictions.jsonl").read_text()


def test_the_summary_says_how_many_answers_the_response_cache_gave(openai_server, tmp_path):
    """Issue #44 item 5: an API run's last lines say where its answers came from this time."""
    examples = examples_file(tmp_path / "ex.jsonl", 3)
    first = openai_eval(openai_server, examples, tmp_path / "first")
    assert first.exit_code == 0, first.output
    assert "answers: 3 predictions, 0 from the response cache, 3 HTTP requests sent" in first.output
    again = openai_eval(openai_server, examples, tmp_path / "again")  # the same requests, another run
    assert again.exit_code == 0, again.output
    assert "answers: 3 predictions, 3 from the response cache, 0 HTTP requests sent" in again.output
    assert len(openai_server.log) == 3
