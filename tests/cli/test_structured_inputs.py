"""Structured input a person hands the CLI, made hostile: YAML aliases that expand to gigabytes, nesting past any
sane depth, broken syntax. Each is refused by the one bounded reader with one `error: FILE:LINE: ...` line and exit
status 2, never a traceback or a hang."""

from __future__ import annotations

import pytest
from click.testing import CliRunner

from shambench.cli import main

LAUGHS = "a: &a [x, x, x, x, x, x, x, x, x]\nb: &b [*a, *a, *a, *a, *a, *a, *a, *a, *a]\ndetectors: [*b, *b, *b]\n"
DEEP = "detectors: " + "[" * 200 + "]" * 200 + "\n"


def one_error_line(result) -> str:
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output
    lines = [line for line in result.stderr.splitlines() if line.strip()]
    assert len(lines) == 1 and lines[0].startswith("error: "), result.stderr
    return lines[0]


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        (LAUGHS, ":1: not valid YAML (aliases and anchors (&, *) are not accepted)"),
        (DEEP, ":1: not valid YAML (nested deeper than 64 levels)"),
        ("detectors: [\n", ":2: not valid YAML"),
    ],
)
def test_a_hostile_sweep_file(tmp_path, text, problem):
    path = tmp_path / "sweep.yaml"
    path.write_text(text)
    line = one_error_line(CliRunner().invoke(main, ["sweep", str(path)]))
    assert line.startswith(f"error: {path}{problem}")


def test_a_hostile_parameter_value(tmp_path):
    line = one_error_line(CliRunner().invoke(main, ["eval", "--detector", "random", "-p", "rate=&a [*a]"]))
    assert line.startswith("error: -p rate:1: not valid YAML (aliases and anchors (&, *) are not accepted)")


def test_a_hostile_price_file(tmp_path, monkeypatch, request):
    from shambench.llm.pricing import load_prices

    load_prices.cache_clear()  # the table is read once a process: read it from the file below, and again after
    request.addfinalizer(load_prices.cache_clear)
    path = tmp_path / "pricing.yaml"
    path.write_text(LAUGHS)
    monkeypatch.setenv("SHAMBENCH_PRICING", str(path))
    examples = tmp_path / "e.jsonl"
    examples.write_text('{"id": "a", "dataset": "toy", "task": "summ", "response": "x"}\n')
    args = ["eval", "--detector", "openai", "--model", "m", "--examples", str(examples), "--dry-run"]
    line = one_error_line(CliRunner().invoke(main, args))
    assert ":1: not valid YAML (aliases and anchors (&, *) are not accepted)" in line and str(path) in line
