"""The terminal as a sink: the control sequences the tool writes (colours; a live display's cursor controls on a
terminal) pass, every other control character is shown escaped, whoever wrote it. As a class: every command of the
click group (`INVOCATIONS` of the filesystem class test) runs on folders whose EXAMPLES file, runs, predictions and
evidence carry escape sequences, bidirectional overrides and HTML in their texts, and HTML and the printable rest of
those sequences in their ids, dataset and task names (which refuse control characters when read)."""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest
from click.testing import CliRunner

from shambench.cli import RedactingStream, main, terminal_text
from tests.cli import test_fs_class as fs_class
from tests.cli.commands import runnable_commands
from tests.cli.test_fs_class import INVOCATIONS, check_outcome, make_template, run

# The filesystem class test's fixtures: its stand-ins on 127.0.0.1 and the copy of `template` each command runs on.
api, fava_on_the_hub, no_network, world = fs_class.api, fs_class.fava_on_the_hub, fs_class.no_network, fs_class.world

# Clears the screen, sets the window title, moves up and erases a line, returns to the line's start, reverses the
# text's direction, a C1 control sequence introducer, DEL, a backspace; and markup a page must not run.
HOSTILE = "\x1b[2J\x1b]0;pwned\x07\x1b[1A\x1b[2K\r\u202e\x9b\x7f\x08<script>alert(1)</script>"
# Any control character but line feed and tab; the tool's own colours (SGR) taken out first.
RAW_CONTROL = re.compile("[\x00-\x08\x0b-\x1f\x7f-\x9f\u202a-\u202e\u2066-\u2069]")
COLOURS = re.compile(r"\x1b\[[0-9;]*m")


@pytest.mark.parametrize(
    ("text", "terminal", "shown"),
    [
        ("plain\ttext\n", False, "plain\ttext\n"),
        ("\x1b[1;31mred\x1b[0m", False, "\x1b[1;31mred\x1b[0m"),  # colours pass anywhere
        ("\r\x1b[2K\x1b[1A\x1b[?25l", True, "\r\x1b[2K\x1b[1A\x1b[?25l"),  # a live display's, on a terminal
        ("\r\x1b[2K\x1b[1A\x1b[?25l", False, "\\x0d\\x1b[2K\\x1b[1A\\x1b[?25l"),  # ... not elsewhere
        ("a\x1b[2Jb", True, "a\\x1b[2Jb"),
        ("a\x1b]0;pwned\x07b", True, "a\\x1b]0;pwned\\x07b"),
        ("a\u202eb\u2066c", True, "a\\u202eb\\u2066c"),
        ("a\x9b2Jb\x7f\x00", True, "a\\x9b2Jb\\x7f\\x00"),
    ],
)
def test_only_the_tool_s_own_control_sequences_reach_a_terminal(text, terminal, shown):
    assert terminal_text(text, terminal) == shown


@pytest.mark.parametrize(
    ("env", "shown"),
    [({}, "\\x0d\\x1b[2Kbar"), ({"FORCE_COLOR": "1"}, "\r\x1b[2Kbar"), ({"TTY_COMPATIBLE": "1"}, "\r\x1b[2Kbar")],
)
def test_a_stream_the_environment_calls_a_terminal_takes_the_live_display_s_controls(env, shown, monkeypatch):
    # rich draws its live displays wherever these variables say there is a terminal; elsewhere none are drawn.
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    stream = RedactingStream(io.StringIO())
    stream.write("\r\x1b[2Kbar")
    assert stream.stream.getvalue() == shown


# What of `HOSTILE` an id or a name may carry: no control character (`shambench.schema.Name` refuses them when a
# file is read, tests/core/test_names.py), so its escape sequences' printable rest and the markup.
HOSTILE_NAME = RAW_CONTROL.sub("", HOSTILE)


def hostile_examples(path: Path) -> Path:
    """Three examples whose question and response carry `HOSTILE`, and whose id, dataset and task `HOSTILE_NAME`."""
    rows = []
    for i in range(3):
        response = f"The river Ilsa{i}{HOSTILE} flows through Varn{i}."
        start = response.index("Varn")
        rows.append(
            {"id": f"toy{HOSTILE_NAME}/{i}", "dataset": f"toy{HOSTILE_NAME}", "task": f"open_qa{HOSTILE_NAME}",
             "question": f"Where{HOSTILE}?", "response": response, "hallu_spans": [[start, start + len(f"Varn{i}")]]}
        )  # fmt: skip
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


@pytest.fixture(scope="module")
def template(tmp_path_factory):
    """The filesystem class test's folders (`world` copies them), made from the hostile EXAMPLES file."""
    return make_template(tmp_path_factory.mktemp("hostile"), hostile_examples)


def test_every_command_is_run():
    assert sorted(INVOCATIONS) == sorted(list(runnable_commands()))


# Beside each command's invocation, those that print an example's own texts or read the EXAMPLES file directly.
MORE = {
    "show": ["{work}/run", "--id", f"toy{HOSTILE_NAME}/0"],
    "score": ["--examples", "{work}/ex.jsonl", "--predictions", "{work}/pred.jsonl", "--bootstrap", "10"],
    "agreement": ["--examples", "{work}/ex.jsonl", "--bootstrap", "10"],
}
CASES = [(name, None) for name in sorted(INVOCATIONS)] + sorted(MORE.items())


@pytest.mark.parametrize(("name", "invocation"), CASES)
def test_no_command_prints_a_control_character_from_its_inputs(name, invocation, world):
    home, _ = world
    res = run(name, home, invocation)
    check_outcome(res)
    for stream in (res.stdout, res.stderr):
        found = RAW_CONTROL.search(COLOURS.sub("", stream))
        assert found is None, f"{name} printed {found[0]!r}: {stream[max(0, found.start() - 80) : found.end() + 80]!r}"
    pages = [p for p in (home / "work").rglob("*.html") if p.is_file()]
    assert all("<script>alert(1)" not in p.read_text() for p in pages), name


def test_a_name_with_a_control_character_in_a_file_is_refused_in_one_escaped_line(world):
    """The names carry no control character (`HOSTILE_NAME`), so their printable rest is shown as it is; a file
    whose dataset name holds `HOSTILE` is refused when read, in one line, which shows no raw control either."""
    home, _ = world
    res = run("score", home)
    assert res.exit_code == 0, res.output
    assert "toy[2J]0;pwned" in res.stdout
    examples = home / "work" / "ex.jsonl"
    rows = [json.loads(line) for line in examples.read_text().splitlines()]
    examples.write_text("".join(json.dumps({**r, "dataset": f"toy{HOSTILE}"}) + "\n" for r in rows))
    refused = run("score", home, ["--examples", str(examples), "--predictions", "{work}/pred.jsonl"])
    assert refused.exit_code == 2 and RAW_CONTROL.search(refused.output) is None, refused.output
    assert refused.stderr.startswith(f"error: {examples}:1: dataset: U+001B at position 3: an id or a name holds no")


@pytest.mark.parametrize(
    "args",
    [
        ["eval", "--detector", "no\nne", "--examples", "ex.jsonl"],
        ["eval", "--detector", "none", "-d", "mush\x1b[2Jroom"],
        ["optimize", "-d", "mush\x1b[2Jroom", "--out", "program.json"],
        ["train", "token-classifier", "--train", "mush\x1b[2Jroom", "--out", "trained", "--base", "base"],
    ],
)
def test_a_name_with_a_control_character_on_the_command_line_is_one_error_line(args, tmp_path, monkeypatch):
    """A value no click type checks, refused by the model it fills (`shambench.schema.Name`): one line naming the
    option, exit 2, never a traceback (the command line turns any model's refusal of a value into that line)."""
    monkeypatch.chdir(tmp_path)
    res = CliRunner().invoke(main, args)
    check_outcome(res, (2,))
    assert re.fullmatch(r"error: --\w+: U\+00(0A|1B) at position \d+: an id or a name holds no control character.*\n",
                        res.stderr), res.output  # fmt: skip
    assert RAW_CONTROL.search(res.output) is None
