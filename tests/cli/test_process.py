"""The process-wide settings the library asks for (`shambench.memory`): none in a user's process, and in the
command line's (`shambench.cli.process.CommandLineSettings`, installed by `shambench.cli.run`) long-lived objects
kept out of the cyclic collector and a shorter thread switch interval while requests are in flight."""

import gc
import json
import subprocess
import sys
import weakref
from pathlib import Path

import pytest

import shambench
from shambench import Detector, Example, Span
from shambench.memory import (
    ProcessSettings,
    collector_paused,
    freeze_long_lived,
    long_lived_frozen,
    use_process_settings,
)

ROOT = Path(__file__).parents[2]


@pytest.fixture(autouse=True)
def command_line(command_line_settings) -> None:
    """The command line's settings installed, as `shambench.cli.run` installs them (see tests/conftest.py)."""


class Node:
    def __init__(self) -> None:
        self.me = self  # a reference cycle: only the cyclic collector frees it


def test_a_block_freezes_what_is_alive_and_unfreezes_it_after():
    gc.unfreeze()
    with long_lived_frozen():
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_cyclic_garbage_frozen_in_a_block_is_collected_after_it():
    gc.unfreeze()
    node = Node()
    alive = weakref.ref(node)
    with long_lived_frozen():
        del node
        gc.collect()
        assert alive() is not None  # frozen: the collector does not see it
    gc.collect()
    assert alive() is None


def test_only_the_last_open_block_unfreezes():
    gc.unfreeze()
    with long_lived_frozen():
        with long_lived_frozen():
            pass
        assert gc.get_freeze_count() > 0
    assert gc.get_freeze_count() == 0


def test_freezing_more_happens_only_inside_a_block():
    gc.unfreeze()
    freeze_long_lived()
    assert gc.get_freeze_count() == 0
    with long_lived_frozen():
        before = gc.get_freeze_count()
        made = [Node() for _ in range(100)]
        freeze_long_lived()
        assert gc.get_freeze_count() >= before + 100
        del made
    assert gc.get_freeze_count() == 0


def test_the_collector_is_paused_in_a_block_and_left_as_it_was_after():
    assert gc.isenabled()
    with long_lived_frozen(), collector_paused():
        assert not gc.isenabled()
    assert gc.isenabled()
    gc.disable()
    try:
        with collector_paused():
            pass
        assert not gc.isenabled()  # a caller who paused it keeps it paused
    finally:
        gc.enable()


def test_an_error_in_a_paused_block_still_resumes_the_collector():
    try:
        with collector_paused():
            raise ValueError("boom")
    except ValueError:
        pass
    assert gc.isenabled()


def test_an_aged_block_restarts_the_collector_with_what_it_made_in_its_oldest_generation():
    gc.unfreeze()
    gc.collect()
    with collector_paused(aged=True):
        made = [Node() for _ in range(5000)]
        assert gc.get_count()[0] >= 5000  # young, while paused
    assert gc.isenabled() and gc.get_freeze_count() == 0
    assert gc.get_count()[0] < 100  # nothing young left for the next pass to walk
    # Still collectable: cyclic garbage in the oldest generation goes at the next full collection.
    alive = weakref.ref(made[0])
    del made
    gc.collect()
    assert alive() is None


def test_objects_frozen_by_someone_else_stay_frozen_through_a_paused_block():
    gc.unfreeze()
    gc.freeze()
    try:
        with collector_paused(aged=True):
            made = [Node() for _ in range(100)]
        # Still frozen (an aged restart would have unfrozen everything). Not the exact count: a frozen object
        # another thread of the process frees meanwhile leaves the permanent generation.
        assert gc.get_freeze_count() > 0 and len(made) == 100
    finally:
        gc.unfreeze()
    with long_lived_frozen():
        with collector_paused(aged=True):
            pass
        assert gc.get_freeze_count() > 0  # a run's frozen objects stay frozen till its block ends
    assert gc.get_freeze_count() == 0


class Watching(Detector):
    """Records, while it predicts, what the process's collector and thread switching are."""

    def __init__(self) -> None:
        self.seen: list[tuple[bool, int, float]] = []

    def detect(self, example: Example) -> list[Span]:
        self.seen.append((gc.isenabled(), gc.get_freeze_count(), sys.getswitchinterval()))
        return []


def test_evaluate_in_a_users_process_changes_no_process_wide_setting(tmp_path):
    use_process_settings(ProcessSettings())  # what a notebook has: nothing installed
    from shambench.llm.loop import LoopThread

    examples = tmp_path / "ex.jsonl"
    row = {"id": "a", "task": "qa", "dataset": "x", "response": "Paris.", "hallu_spans": []}
    examples.write_text(json.dumps(row) + "\n")
    interval, frozen = sys.getswitchinterval(), gc.get_freeze_count()
    watching = Watching()
    shambench.evaluate(watching, examples_file=examples, run_dir=tmp_path / "run", n_resamples=10)
    assert watching.seen == [(True, frozen, interval)]
    loop = LoopThread()  # what an API detector's requests run in
    assert sys.getswitchinterval() == interval
    loop.close()
    with collector_paused(aged=True), long_lived_frozen():
        freeze_long_lived()
        assert gc.isenabled() and gc.get_freeze_count() == frozen


def test_the_command_lines_entry_installs_the_settings(tmp_path):
    """`python -m shambench` (and the installed command) run in a process of their own: the settings are made."""
    code = (
        "import gc, sys\n"
        "import shambench.cli as cli\n"
        "from shambench.memory import long_lived_frozen\n"
        "from shambench.llm.loop import LoopThread\n"
        "def main(prog_name):\n"
        "    with long_lived_frozen():\n"
        "        frozen = gc.get_freeze_count()\n"
        "    loop = LoopThread(); interval = sys.getswitchinterval(); loop.close()\n"
        "    print(frozen > 0, interval)\n"
        "    raise SystemExit(0)\n"
        "cli.main = main\n"
        "cli.run()\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, timeout=120)
    assert done.returncode == 0, done.stderr
    frozen, interval = done.stdout.split()
    from shambench.llm.loop import HANDOVER_SECONDS

    assert frozen == "True" and float(interval) == pytest.approx(HANDOVER_SECONDS, rel=0.05)
