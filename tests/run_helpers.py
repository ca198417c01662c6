"""Helpers for tests that need real run directories: an examples file, `shambench eval` through click, waiting for
a run in another process to reach a point, and running a step that must end in a thread, to fail saying it hung
rather than to time it."""

from __future__ import annotations

import json
import subprocess
import threading
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from click.testing import CliRunner

from shambench.cli import main


def write_jsonl(path: Path, rows: list[dict]) -> Path:
    """Write rows as JSON lines; returns the path."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


# How long a test waits for something that must happen before it says it hung: three minutes, a bound on a hang,
# not a window (starting a Python process that imports the openai SDK is slow on a loaded machine).
HANG_SECONDS = 180


def wait_until(condition: Callable[[], bool], what: str, proc: subprocess.Popen | None = None) -> None:
    """Return once `condition()` holds; fail at once if `proc` ended (with the end of its stderr), or after
    `HANG_SECONDS`."""
    deadline = time.monotonic() + HANG_SECONDS
    while not condition():
        if proc is not None and proc.poll() is not None:
            stderr = proc.stderr.read()[-2000:] if proc.stderr else ""
            raise AssertionError(f"{what}: the process ended first ({proc.returncode}) {stderr!r}")
        if time.monotonic() > deadline:
            raise AssertionError(f"{what}: not after three minutes")
        time.sleep(0.02)


class Background:
    """`step()` running in a daemon thread from when this is made; `result()` waits for it to end."""

    def __init__(self, step: Callable[[], Any], what: str):
        self.what = what
        self._outcome: dict[str, Any] = {}
        self._thread = threading.Thread(target=self._run, args=(step,), daemon=True)
        self._thread.start()

    def _run(self, step: Callable[[], Any]) -> None:
        try:
            self._outcome["value"] = step()
        except BaseException as err:  # handed to the test's thread by result()
            self._outcome["error"] = err

    def ended(self) -> bool:
        """Whether `step()` has returned or raised."""
        return not self._thread.is_alive()

    def result(self) -> Any:
        """What `step()` returned (or the exception it raised, raised here); fails saying it hung when it has not
        ended after `HANG_SECONDS`."""
        self._thread.join(HANG_SECONDS)
        if self._thread.is_alive():
            raise AssertionError(f"{self.what}: hung (not done after {HANG_SECONDS} s)")
        if "error" in self._outcome:
            raise self._outcome["error"]
        return self._outcome["value"]


def unless_hung(step: Callable[[], Any], what: str) -> Any:
    """What `step()` returns, run in a thread; fails saying it hung when it has not ended after `HANG_SECONDS` (how
    a test bounds a step that must end, instead of asserting how long it took)."""
    return Background(step, what).result()


def eval_run(examples: Path, detector: str, run_dir: Path, *extra: str) -> dict:
    """Run `shambench eval` on an examples file into `run_dir` (few bootstrap draws); its results.json."""
    args = ["eval", "--detector", detector, "--examples", str(examples), "--no-progress", "--bootstrap", "20"]
    res = CliRunner().invoke(main, [*args, "--run-dir", str(run_dir), *extra])
    assert res.exit_code == 0, res.output
    return json.loads((run_dir / "results.json").read_text())


# What differs between two runs of the same thing: when, and where. Everything else in results.json must match.
TIMES = ("created_at", "started_at", "finished_at", "run_dir")


def without_times(obj):
    """A JSON value without the keys in TIMES, at any depth."""
    if isinstance(obj, dict):
        return {k: without_times(v) for k, v in obj.items() if k not in TIMES}
    if isinstance(obj, list):
        return [without_times(v) for v in obj]
    return obj
