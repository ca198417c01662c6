"""The private event loop thread (`shambench.llm.loop`)."""

import asyncio
import sys

import pytest

from shambench.llm.loop import HANDOVER_SECONDS, LoopThread


@pytest.fixture
def default_interval(command_line_settings, monkeypatch):
    """Python's default switch interval, in a process that allows the library to set it (the command line's), and
    no loop thread counted as running: one that an earlier test in this worker left open would otherwise keep the
    interval where it found it (the count is per process, whatever test started the thread)."""
    from shambench.llm import loop

    monkeypatch.setattr(loop, "_running", 0)
    before = sys.getswitchinterval()
    sys.setswitchinterval(0.005)
    yield 0.005
    sys.setswitchinterval(before)


async def _answer(value: int) -> int:
    await asyncio.sleep(0)
    return value


def test_a_running_loop_hands_the_gil_over_sooner_until_the_last_one_closes(default_interval):
    first = LoopThread()
    assert sys.getswitchinterval() == pytest.approx(HANDOVER_SECONDS, rel=0.05)
    second = LoopThread()
    assert first.submit(_answer(3)).result() == 3
    first.close()
    assert sys.getswitchinterval() == pytest.approx(HANDOVER_SECONDS, rel=0.05)  # the second still runs
    assert second.submit(_answer(4)).result() == 4
    second.close()
    assert sys.getswitchinterval() == pytest.approx(default_interval, rel=0.05)


def test_a_shorter_interval_set_by_the_caller_is_kept_and_restored(default_interval):
    sys.setswitchinterval(0.0001)
    loop = LoopThread()
    assert sys.getswitchinterval() == pytest.approx(0.0001, rel=0.05)
    loop.close()
    assert sys.getswitchinterval() == pytest.approx(0.0001, rel=0.05)
