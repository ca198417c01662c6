"""Run directories: the prediction journal, resume, rescoring, and a run killed with SIGKILL then resumed."""

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
from shambench.io import Journal, write_json, write_jsonl
from shambench.registry import Entry
from shambench.runs.files import JOURNAL
from shambench.schema import Example, Prediction
from tests.plugins.installed import install_fake_plugin
from tests.run_helpers import wait_until

# Invented responses with numbers, so that the fake plugin's digit detector has something to flag.
RESPONSES = [
    ("It opened in 1998 with 40 rooms.", [[13, 17]]),
    ("The bridge is 300 m long.", []),
    ("No numbers here.", []),
    ("About 12 of 15 members voted.", [[6, 8]]),
    ("The 2004 season ended early.", [[4, 8]]),
    ("She wrote 7 novels.", []),
    ("Founded in 1850, it moved in 1901.", [[11, 15], [29, 33]]),
    ("Nothing to flag at all.", [[0, 7]]),
    ("It has 3 wings and 2 towers.", [[7, 8]]),
    ("Prices rose by 5 percent.", []),
    ("Route 66 runs west.", [[6, 8]]),
    ("The team scored 101 points.", []),
]
SCORE_KEYS = ("partitions", "tasks", "overall", "missing_predictions", "failed_predictions", "n_examples")


def write_examples(path: Path) -> Path:
    write_jsonl(
        path,
        [
            Example(id=f"n{i:02d}", dataset="toy", task="summ" if i % 2 else "qa", response=r, hallu_spans=g)
            for i, (r, g) in enumerate(RESPONSES)
        ],
    )
    return path


def scores_of(run_dir: Path) -> dict:
    results = json.loads((run_dir / "results.json").read_text())
    return {k: results[k] for k in SCORE_KEYS}


# --- the journal ------------------------------------------------------------------------------------------------


def test_journal_keeps_the_last_line_per_id_and_ignores_a_torn_final_line(tmp_path):
    path = tmp_path / JOURNAL
    path.write_text(
        '{"id": "a", "spans": [[0, 1]]}\n'
        '{"id": "b", "error": "timeout"}\n'
        '{"id": "b", "spans": [[2, 3]]}\n'
        '{"id": "c", "spa',  # the process died while writing this line
        encoding="utf-8",
    )
    journal = Journal(path)
    read = journal.read()
    assert sorted(read) == ["a", "b"]
    assert read["b"].error is None and read["b"].spans[0].start == 2
    with journal.appender() as append:  # repairs first: the torn line is cut, the new one starts on a fresh line
        append(Prediction(id="c", spans=[[4, 5]]))
    lines = path.read_text(encoding="utf-8").splitlines()
    assert len(lines) == 4
    assert json.loads(lines[-1]) == {"id": "c", "spans": [{"start": 4, "end": 5}], "meta": {}}
    assert sorted(journal.read()) == ["a", "b", "c"]


def test_a_final_line_without_newline_is_torn_even_when_it_parses(tmp_path):
    # A crash between writing a record and its newline: the id must run again, since `repair` will cut the line.
    path = tmp_path / JOURNAL
    path.write_text('{"id": "a"}\n{"id": "b"}', encoding="utf-8")
    journal = Journal(path)
    assert sorted(journal.read()) == ["a"]
    journal.repair()
    assert path.read_text(encoding="utf-8") == '{"id": "a"}\n'


def test_a_torn_final_line_may_end_inside_a_multibyte_character(tmp_path):
    # The crash cut "é" (two bytes in UTF-8) in half: the sound lines must still read, and resume must append.
    path = tmp_path / JOURNAL
    torn = Prediction(id="b", raw="café").model_dump_json().encode()
    path.write_bytes(b'{"id": "a"}\n' + torn[: torn.index("é".encode()) + 1])
    journal = Journal(path)
    assert sorted(journal.read()) == ["a"]
    with journal.appender() as append:
        append(Prediction(id="b", raw="café"))
    assert journal.read()["b"].raw == "café"


def test_a_line_that_is_not_utf8_names_the_file_and_line(tmp_path):
    path = tmp_path / JOURNAL
    path.write_bytes(b'{"id": "a"}\n{"id": "\xff"}\n{"id": "c"}\n')
    with pytest.raises(DataError, match=rf"{JOURNAL}:2: not UTF-8"):
        Journal(path).read()


def test_journal_lines_may_hold_unicode_line_separators(tmp_path):
    # JSON leaves U+2028, U+2029 and U+0085 unescaped; they must not split a record.
    raw = "first\u2028second\u2029third\x85fourth"
    journal = Journal(tmp_path / JOURNAL)
    with journal.appender() as append:
        append(Prediction(id="a", raw=raw))
        append(Prediction(id="b"))
    assert journal.read()["a"].raw == raw
    assert sorted(journal.read()) == ["a", "b"]


def test_journal_rejects_a_bad_line_that_is_not_the_last(tmp_path):
    path = tmp_path / JOURNAL
    path.write_text('{"id": "a"}\n{"id": "b", "spans": [[3, 1]]}\n{"id": "c"}\n', encoding="utf-8")
    with pytest.raises(DataError, match=rf"{JOURNAL}:2: not a Prediction"):
        Journal(path).read()


def test_results_are_written_atomically(tmp_path, monkeypatch):
    out = tmp_path / "results.json"
    out.write_text("old\n")

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "rename", crash)  # the filesystem gate renames by descriptors (os.rename's dir_fd)
    with pytest.raises(OSError, match="disk full"):
        write_json(out, {"new": 1})
    assert out.read_text() == "old\n"
    assert [p.name for p in tmp_path.iterdir()] == ["results.json"]  # the temporary file is gone too
    monkeypatch.undo()
    write_json(out, {"new": 1})
    assert json.loads(out.read_text()) == {"new": 1}


# --- resume and rescoring through the CLI -----------------------------------------------------------------------


class Flaky(Detector):
    """Fails on some ids, and crashes the whole run at one id, until it is healed; records every call."""

    family = "test"
    calls: list[str] = []
    healed = False

    def detect(self, example: Example):
        Flaky.calls.append(example.id)
        if not Flaky.healed and example.id in ("n01", "n04"):
            return Prediction(id=example.id, error="upstream said 500")
        if not Flaky.healed and example.id == "n07":
            raise RuntimeError("process crashed")
        return [s for s in example.hallu_spans]  # an oracle, once it works


@pytest.fixture
def flaky(monkeypatch):
    monkeypatch.setattr(Flaky, "calls", [])
    monkeypatch.setattr(Flaky, "healed", False)
    detectors.entries()  # load built-ins and plugins first, so the test entry is not overwritten
    monkeypatch.setitem(detectors._entries, "test-flaky", Entry("test-flaky", Flaky, "test", __name__))
    return Flaky


def invoke(*args: str):
    return CliRunner().invoke(main, list(args), catch_exceptions=True)


def test_resume_runs_only_missing_and_failed_ids_and_rescoring_matches(tmp_path, flaky):
    examples = write_examples(tmp_path / "examples.jsonl")
    run = tmp_path / "run"
    first = invoke("eval", "--detector", "test-flaky", "--examples", str(examples), "--run-dir", str(run),
                   "--no-progress", "--bootstrap", "20")  # fmt: skip
    # crashed at n07 after journaling n00..n06: one line, which names the crash
    assert first.exit_code == 2 and "detector 'test-flaky' raised RuntimeError: process crashed" in first.stderr
    assert flaky.calls == [f"n{i:02d}" for i in range(8)]
    journaled = Journal(run / JOURNAL).read()
    assert sorted(journaled) == [f"n{i:02d}" for i in range(7)]
    assert {k for k, p in journaled.items() if p.error} == {"n01", "n04"}
    assert not (run / "results.json").exists()

    flaky.calls.clear()
    flaky.healed = True
    resumed = invoke("eval", "--resume", str(run), "--no-progress", "--bootstrap", "20")
    assert resumed.exit_code == 0, resumed.output
    # Only the failed ids and those never journaled run again.
    assert flaky.calls == ["n01", "n04", "n07", "n08", "n09", "n10", "n11"]
    eval_scores = scores_of(run)
    # The healed detector is an oracle: every example is right.
    assert eval_scores["overall"]["token"]["f1"] == 1.0
    assert eval_scores["missing_predictions"] == 0

    (run / "results.json").unlink()
    rescored = invoke("score", str(run), "--bootstrap", "20")
    assert rescored.exit_code == 0, rescored.output
    assert scores_of(run) == eval_scores
    assert flaky.calls == ["n01", "n04", "n07", "n08", "n09", "n10", "n11"]  # rescoring never calls the detector


def test_resume_refuses_changed_examples(tmp_path, flaky):
    examples = write_examples(tmp_path / "examples.jsonl")
    run = tmp_path / "run"
    flaky.healed = True
    assert invoke("eval", "--detector", "test-flaky", "--examples", str(examples), "--run-dir", str(run),
                  "--no-progress", "--bootstrap", "20").exit_code == 0  # fmt: skip
    write_jsonl(examples, [Example(id="other", dataset="toy", task="qa", response="Changed.")])
    result = invoke("eval", "--resume", str(run), "--no-progress")
    assert result.exit_code == 2
    assert "the data changed since the run was made: ids, tasks and splits, questions, responses" in result.output


@pytest.mark.parametrize(
    ("extra", "message"),
    [
        (["--limit", "3", "--detector", "test-flaky"], "resuming would change --limit, which define the run's output"),
        (["--detector", "none", "--split", "dev"], "resuming would change --detector, --split, which define"),
        (["--run-dir", "elsewhere"], "--resume RUN_DIR names the run directory to finish; drop --run-dir"),
        (["--runs", "elsewhere"], "--runs is where new runs go: a resume finishes the run in --run-dir"),
    ],
)
def test_resume_refuses_options_it_would_ignore_or_that_change_the_output(tmp_path, flaky, extra, message):
    examples = write_examples(tmp_path / "examples.jsonl")
    run = tmp_path / "run"
    invoke("eval", "--detector", "test-flaky", "--examples", str(examples), "--run-dir", str(run), "--no-progress")
    journal = (run / JOURNAL).read_text()
    flaky.calls.clear()
    flaky.healed = True
    result = invoke("eval", "--resume", str(run), "--no-progress", *extra)
    assert result.exit_code == 2, result.output
    assert message in result.output
    assert flaky.calls == []  # nothing ran, nothing was written
    assert (run / JOURNAL).read_text() == journal
    assert not (run / "results.json").exists()


def test_resume_refuses_parameters_that_change_the_output(tmp_path):
    examples = write_examples(tmp_path / "examples.jsonl")
    run = tmp_path / "run"
    first = invoke("eval", "--detector", "random", "-p", "rate=0.2", "--examples", str(examples), "--run-dir",
                   str(run), "--no-progress", "--bootstrap", "20")  # fmt: skip
    assert first.exit_code == 0, first.output
    files = {p.name: p.read_bytes() for p in run.iterdir()}
    result = invoke("eval", "--resume", str(run), "--no-progress", "-p", "rate=0.5", "-p", "seed=3")
    assert result.exit_code == 2, result.output
    assert "resuming would change rate, seed, which define the run's output" in result.output
    assert {p.name: p.read_bytes() for p in run.iterdir()} == files
    same = invoke("eval", "--resume", str(run), "--no-progress", "-p", "rate=0.2", "--bootstrap", "20")
    assert same.exit_code == 0, same.output  # restating a recorded value is no change


# --- a real process killed mid-run ------------------------------------------------------------------------------


def shambench(args: list[str], env: dict, cwd: Path, **kw):
    return subprocess.Popen(
        [sys.executable, "-m", "shambench", *args],
        env=env,
        cwd=cwd,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        **kw,
    )


def finish(proc: subprocess.Popen) -> str:
    out, err = proc.communicate(timeout=120)
    assert proc.returncode == 0, out + err
    return out


def test_a_run_killed_with_sigkill_then_resumed_equals_an_uninterrupted_run(tmp_path, tmp_path_factory):
    site = install_fake_plugin(tmp_path_factory.mktemp("plugin"))
    env = {**os.environ, "PYTHONPATH": str(site)}
    examples = write_examples(tmp_path / "examples.jsonl")
    common = ["--examples", str(examples), "--no-progress", "--bootstrap", "50"]

    slow = shambench(
        ["eval", "--detector", "fake-slow", "-p", "stall_after=3", "--run-dir", "killed", *common], env, tmp_path
    )
    whole = shambench(["eval", "--detector", "fake-slow", "--run-dir", "whole", *common], env, tmp_path)
    journal = tmp_path / "killed" / JOURNAL
    wait_until(lambda: journal.exists() and journal.read_text().count("\n") == 3, "3 journaled", slow)
    slow.send_signal(signal.SIGKILL)
    slow.communicate(timeout=30)
    done_before = journal.read_text().count("\n")
    assert done_before == 3 < len(RESPONSES)
    assert not (tmp_path / "killed" / "results.json").exists()
    finish(whole)

    # The stall is no parameter of the output (params() is empty), so the resumed run does not stall.
    finish(shambench(["eval", "--resume", "killed", "--no-progress", "--bootstrap", "50"], env, tmp_path))
    lines = [json.loads(line) for line in journal.read_text().splitlines()]
    assert len(lines) == len(RESPONSES)  # nothing journaled before the kill ran twice
    assert sorted(line["id"] for line in lines) == [f"n{i:02d}" for i in range(len(RESPONSES))]
    assert scores_of(tmp_path / "killed") == scores_of(tmp_path / "whole")


# --- fail fast ------------------------------------------------------------------------------------------------


def _failed(reason: str, i: int = 0) -> Prediction:
    return Prediction(id=f"x/{i}", error=reason)


def test_the_first_predictions_all_failing_alike_stop_the_run():
    from shambench.runs.failures import FailureWatch, SystematicFailure

    watch = FailureWatch(first=3, run=10)
    # Reply previews and numbers vary between examples; the reason is still the same.
    watch.see(_failed("unusable output: no list in the output ('Sure, here')"))
    watch.see(_failed("unusable output: no list in the output ('I think')"))
    with pytest.raises(SystematicFailure) as stop:
        watch.see(_failed("unusable output: no list in the output ('Well')"))
    assert stop.value.count == 3 and "the first 3 predictions failed" in str(stop.value)
    assert "likely fix: the model does not answer in the expected form" in str(stop.value)


def test_mixed_or_partly_successful_starts_do_not_stop_but_a_long_streak_does():
    from shambench.runs.failures import FailureWatch, SystematicFailure

    watch = FailureWatch(first=3, run=4)
    watch.see(_failed("HTTP 500: internal error after 7 attempts"))
    watch.see(_failed("timeout: 120 s"))
    watch.see(Prediction(id="ok"))
    for _ in range(3):
        watch.see(_failed("HTTP 500: internal error after 3 attempts"))
    with pytest.raises(SystematicFailure, match="4 predictions in a row failed"):
        watch.see(_failed("HTTP 500: internal error after 4 attempts"))


@pytest.mark.parametrize(
    "reason, fix",
    [
        ("HTTP 500: Input should be 'text' or 'json_object' (response_format)", "-p structured"),
        ("HTTP 401: invalid key", "--api-key-env"),
        ("ClientConnectorError: Cannot connect to host 127.0.0.1:9", "no server answers at --base-url"),
        ("timeout: ", "raise --timeout, or lower --max-concurrency"),
        ("HTTP 404: model not found", "--model"),
    ],
)
def test_the_likely_fix_matches_the_reason(reason, fix):
    from shambench.runs.failures import likely_fix

    assert fix in likely_fix(reason)


def test_an_exception_of_the_detectors_own_code_is_a_detector_error_naming_it():
    from shambench.errors import DetectorError
    from shambench.runs.runner import journal_predictions

    examples = {f"e{i}": Example(id=f"e{i}", dataset="toy", task="qa", response="A b.") for i in range(3)}
    journaled: list[Prediction] = []

    def made(error: Exception):
        yield Prediction(id="e0")
        raise error

    with pytest.raises(DetectorError) as caught:
        journal_predictions(made(KeyError("k")), examples, journaled.append, "mine")
    line = made.__code__.co_firstlineno + 2  # the raise
    assert str(caught.value) == f"detector 'mine' raised KeyError: 'k' ({__file__}:{line}, in made)"
    assert isinstance(caught.value.__cause__, KeyError) and [p.id for p in journaled] == ["e0"]
    # an error of shambench's own already says what is wrong: it passes unchanged
    with pytest.raises(DataError, match="^no context$"):
        journal_predictions(made(DataError("no context")), examples, journaled.append, "mine")
