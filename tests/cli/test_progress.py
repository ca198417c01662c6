"""Progress displays: on stderr only, never in stdout (the command's results, often a file); the status line
naming the source being read while sources load, on a terminal only and not with --no-progress."""

from __future__ import annotations

import re
import sys
from pathlib import Path
from types import SimpleNamespace

from click.testing import CliRunner

import shambench
from shambench.cli import main
from shambench.cli.progress import ProgressMonitor, progress_display
from tests.conftest import modules_matching

PACKAGE = Path(shambench.__file__).parent
FIXTURES = Path(__file__).parents[1] / "adapters" / "fixtures"
BAR = "━"  # what rich draws a bar with


def test_every_display_is_made_by_progress_display():
    assert modules_matching(r"\b(Progress|Live|Status)\(|\.status\(|\btrack\(") == {"cli/progress.py"}
    source = (PACKAGE / "cli" / "progress.py").read_text()
    assert len(re.findall(r"\bProgress\(", source)) == 1 and "return Progress(" in source


def test_the_display_writes_to_the_stderr_of_its_making(capsys):
    display = progress_display(enabled=True)
    assert display.console.file is sys.stderr
    assert display.live.console is display.console


def invoke(*args: str, env: dict[str, str] | None = None):
    return CliRunner().invoke(main, list(args), env=env)


def test_eval_keeps_its_bar_out_of_stdout(tmp_path):
    run = invoke(
        "eval", "--detector", "overlap", "-d", "mushroom", "--data-dir", str(FIXTURES), "--run-dir", str(tmp_path / "r")
    )
    assert run.exit_code == 0, run.output
    assert BAR not in run.stdout and "overlap" not in run.stdout.split("run directory")[0]
    # the last frame, where stderr is not a terminal
    assert re.search(rf"overlap {BAR}+ \d+/\d+", run.stderr)
    assert run.stdout.startswith("run directory: ")


def test_sources_loading_are_named_on_a_terminal(tmp_path):
    terminal = {"FORCE_COLOR": "1"}  # rich takes stderr for a terminal
    stats = invoke("data", "stats", "-d", "mushroom,favabench", "--data-dir", str(FIXTURES), env=terminal)
    assert stats.exit_code == 0, stats.output
    assert stats.stderr.index("loading mushroom (test)") < stats.stderr.index("loading favabench (test)")
    assert "loading" not in stats.stdout
    dev = invoke("data", "stats", "-d", "mushroom", "--split", "dev", "--data-dir", str(FIXTURES), env=terminal)
    assert "loading mushroom (dev)" in dev.stderr
    args = ["eval", "--detector", "overlap", "-d", "mushroom", "--data-dir", str(FIXTURES)]
    shown = invoke(*args, "--run-dir", str(tmp_path / "a"), "--bootstrap", "20", env=terminal)
    assert shown.exit_code == 0 and "loading mushroom (test)" in shown.stderr
    quiet = invoke(*args, "--run-dir", str(tmp_path / "b"), "--bootstrap", "20", "--no-progress", env=terminal)
    assert quiet.exit_code == 0 and "loading" not in quiet.stderr


def test_no_status_where_stderr_is_no_terminal():
    stats = invoke("data", "stats", "-d", "mushroom,favabench", "--data-dir", str(FIXTURES))
    assert stats.exit_code == 0 and stats.stderr == ""


def test_the_bar_counts_every_prediction_and_its_text_the_counters():
    monitor = ProgressMonitor(4, "run", enabled=False)
    monitor.count("cache_hits")
    for error in (None, "timeout", None, None):
        monitor.done(SimpleNamespace(error=error))
    monitor.count("retries", 2)
    (task,) = monitor.progress.tasks
    assert task.completed == 4
    assert task.fields["stats"] == "cache_hits=1 failed=1 retries=2"
