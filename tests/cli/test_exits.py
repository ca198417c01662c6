"""Confirmation prompts: declining is no error (exit 0, nothing done), a closed input is one error line (exit 2),
Ctrl-C is an interruption (130); never click's 'Aborted!' with exit status 1, which no command documents."""

from __future__ import annotations

import click
import pytest
from click.testing import CliRunner

from shambench.cli import main
from shambench.llm.cache import ResponseCache
from tests.conftest import modules_matching

# Every command that asks before it acts, with the arguments that make it ask.
ASKING = {"cache clear": ["cache", "clear"]}


def test_every_prompt_is_the_one_confirmation():
    assert modules_matching(r"click\.(confirm|prompt)\(|\binput\(") == {"cli/exits.py"}
    assert modules_matching(r"confirmed\(") - {"cli/exits.py"} == {"cli/cache.py"} and set(ASKING) == {"cache clear"}


def cached_answer() -> int:
    cache = ResponseCache()
    cache.put("x", "m", {"text": "1"})
    n = cache.stats().entries
    cache.close()
    return n


def entries() -> int:
    cache = ResponseCache()
    n = cache.stats().entries
    cache.close()
    return n


@pytest.mark.parametrize("command", sorted(ASKING))
def test_declining_does_nothing_and_exits_0(command):
    assert cached_answer() == 1
    result = CliRunner().invoke(main, ASKING[command], input="n\n")
    assert (result.exit_code, result.stdout.splitlines()[-1], result.stderr) == (0, "nothing removed", "")
    assert entries() == 1
    # the default answer is no
    assert CliRunner().invoke(main, ASKING[command], input="\n").stdout.endswith("nothing removed\n")
    assert entries() == 1


@pytest.mark.parametrize("command", sorted(ASKING))
def test_a_closed_input_is_one_error_line(command):
    assert cached_answer() == 1
    result = CliRunner().invoke(main, ASKING[command], input="")
    assert result.exit_code == 2
    assert result.stderr.startswith("error: no answer to 'Delete ") and result.stderr.endswith(
        "?' (input closed): nothing done; --yes does it without asking\n"
    )
    assert entries() == 1


@pytest.mark.parametrize("command", sorted(ASKING))
def test_ctrl_c_at_the_prompt_is_an_interruption(command, monkeypatch):
    def interrupted(*args, **kwargs):
        try:
            raise KeyboardInterrupt
        except KeyboardInterrupt:
            raise click.Abort() from None  # what click.confirm does with Ctrl-C

    monkeypatch.setattr(click, "confirm", interrupted)
    assert cached_answer() == 1
    result = CliRunner().invoke(main, ASKING[command])
    assert (result.exit_code, result.stderr) == (130, "interrupted\n")
    assert entries() == 1


@pytest.mark.parametrize("command", sorted(ASKING))
def test_yes_does_it(command):
    assert cached_answer() == 1
    result = CliRunner().invoke(main, ASKING[command], input="y\n")
    assert result.exit_code == 0 and "deleted 1 cached answers" in result.stdout
    assert entries() == 0
