"""Error lines cut to a readable length (redacted first). Confirmation prompts: declining is no error (exit 0, nothing done), a closed input is one error line (exit 2),
Ctrl-C is an interruption (130); never click's 'Aborted!' with exit status 1, which no command documents."""

from __future__ import annotations

import json

import click
import pytest
from click.testing import CliRunner

from shambench import secrets
from shambench.cli import main
from shambench.cli.exits import ERROR_LINE_CHARS, shortened
from shambench.llm.cache import ResponseCache
from shambench.scoring.text import unknown_language
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


def test_an_error_line_quoting_a_huge_value_is_cut_and_says_how_much(tmp_path):
    # A hostile EXAMPLES file's meta.lang of 10,000 characters is quoted in the refusal; the line stays readable.
    lang = "q" * 10_000
    row = {"id": "odd", "dataset": "d", "task": "summ", "response": "Qq.", "hallu_spans": [], "meta": {"lang": lang}}
    examples = tmp_path / "examples.jsonl"
    examples.write_text(json.dumps(row) + "\n", encoding="utf-8")
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"id": "odd", "spans": []}\n', encoding="utf-8")
    result = CliRunner().invoke(main, ["score", "--examples", str(examples), "--predictions", str(predictions)])
    assert result.exit_code == 2, result.output
    (line,) = [x for x in result.output.splitlines() if x.startswith("error:")]
    refusal = f"example 'odd': {unknown_language(lang)}"
    assert len(refusal) == 15 + 10 + 10_002 + 82  # the example named, "meta.lang ", the quoted code, why
    assert line == f"error: {refusal[:ERROR_LINE_CHARS]}... (8,109 more characters)"


def test_a_key_is_redacted_before_the_line_is_cut():
    # Cut first, the line would end in the key's first half, which no redactor can recognise any more.
    key = "Zq9xLEAKcanary7731tail"
    secrets.remember(key)
    message = "x" * (ERROR_LINE_CHARS - 10) + key + "y" * 50
    shown = shortened(message)
    assert key[:10] not in shown and shown.startswith("x" * (ERROR_LINE_CHARS - 10))
    assert shortened("short") == "short"
