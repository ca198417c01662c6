"""An example's `meta.lang` is checked where EXAMPLES are read, by every command that reads them (R13 of the attack
reproductions: `eval --detector overlap` printed spaCy's ImportError instead of a line naming the example)."""

from __future__ import annotations

import json

import pytest
from click.testing import CliRunner

from shambench.cli import main
from tests.cli.commands import runnable_commands


def odd_language_files(tmp_path):
    """An EXAMPLES file whose second example's language spaCy cannot tokenise, predictions for both, a sweep file
    over them and a context provider's file."""
    rows = [
        {"id": "fine", "dataset": "d", "task": "summ", "response": "Hello there.", "hallu_spans": [], "meta": {"lang": "en-US"}},
        {"id": "odd", "dataset": "d", "task": "summ", "response": "Qq qq.", "hallu_spans": [], "meta": {"lang": "qq"}},
    ]  # fmt: skip
    examples = tmp_path / "examples.jsonl"
    examples.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text('{"id": "fine", "spans": []}\n{"id": "odd", "spans": []}\n', encoding="utf-8")
    sweep = tmp_path / "sweep.yaml"
    sweep.write_text(f"examples: [{examples}]\nruns: {tmp_path / 'swept'}\ndetectors:\n  - detector: overlap\n")
    evidence = tmp_path / "evidence.jsonl"
    evidence.write_text('{"id": "odd", "context": "Qq."}\n', encoding="utf-8")
    return examples, predictions, sweep, evidence


# Every command that reads EXAMPLES (by its path), with detectors that segment (overlap) and that do not (random).
EXAMPLES_COMMANDS = {
    "score": ("score", lambda e, p, s, c, t: ["--examples", e, "--predictions", p, "--bootstrap", 10]),
    "eval overlap": ("eval", lambda e, p, s, c, t: ["--detector", "overlap", "--examples", e, "--run-dir", t / "r"]),
    "eval random": ("eval", lambda e, p, s, c, t: ["--detector", "random", "--examples", e, "--run-dir", t / "r"]),
    "sweep": ("sweep", lambda e, p, s, c, t: [s, "--workers", "1", "--no-progress"]),
    "submit": ("leaderboard submit", lambda e, p, s, c, t: [p, "--name", "x", "--examples", e, "--runs-dir", t / "b"]),
    "agreement": ("agreement", lambda e, p, s, c, t: ["--examples", e, "--bootstrap", 10]),
    "add-context": ("data add-context", lambda e, p, s, c, t: ["--provider", f"file:{c}", "--examples", e]),
}
# Commands that read EXAMPLES but give no example's language to anything, each with its reason.
LANGUAGE_UNUSED = {
    "train token-classifier": "trains on the base model's own tokenizer; no example's text reaches spaCy",
}


def test_every_command_reading_examples_is_checked():
    """Every command of the click group with an `--examples` option is run below or named as not using the
    language, so a command added later is covered."""
    reading = {path for path, cmd in runnable_commands().items() if any(p.name == "examples_file" for p in cmd.params)}
    run = {path for path, _ in EXAMPLES_COMMANDS.values()}
    assert reading - LANGUAGE_UNUSED.keys() <= run
    assert LANGUAGE_UNUSED.keys() <= reading and all(LANGUAGE_UNUSED.values())


@pytest.mark.parametrize("case", sorted(EXAMPLES_COMMANDS))
def test_an_unknown_language_is_a_one_line_error_naming_the_example(tmp_path, case):
    path, arguments = EXAMPLES_COMMANDS[case]
    args = [*path.split(), *arguments(*odd_language_files(tmp_path), tmp_path)]
    result = CliRunner().invoke(main, list(map(str, args)))
    assert result.exit_code == 2, result.output
    assert "Traceback" not in result.output and not isinstance(result.exception, ImportError)
    lines = result.output.splitlines()
    assert len([x for x in lines if x.startswith("error:")]) == 1, result.output
    assert any("example 'odd': meta.lang 'qq' is not a language spaCy can tokenise" in x for x in lines)
    assert "ImportError" not in result.output and "run the same command again" not in result.output
