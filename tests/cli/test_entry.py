"""The installed `shambench` command (`shambench.cli.run`): its exit skips the interpreter's teardown, and loses
nothing on the way out: the status, buffered output, exit handlers, and threads still working. Its `--help` lists
every command without importing any."""

from __future__ import annotations

import subprocess
import sys
import textwrap


def _shambench(prelude: str, *args: str) -> subprocess.CompletedProcess[str]:
    """`shambench ARGS` run through `run()` in a new interpreter, after the Python code `prelude`."""
    script = textwrap.dedent(prelude) + f"\nimport sys\nsys.argv = ['shambench', *{list(args)!r}]\n"
    script += "from shambench.cli import run\nrun()\n"
    return subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, timeout=60)


TORN_DOWN = """
class Marker:
    def __del__(self):
        print("torn down", flush=True)

marker = Marker()
"""


def test_the_exit_skips_the_teardown_and_keeps_the_status_the_output_and_the_exit_handlers():
    done = _shambench(
        TORN_DOWN
        + """
import atexit, sys
atexit.register(lambda: print("exit handler ran"))
sys.stdout.write("#" * 1_000_000)  # buffered, never flushed by the script
""",
        "score",
    )
    assert done.returncode == 2  # a usage error: no predictions given
    assert "give RUN_DIR, or --predictions" in done.stderr
    assert done.stdout.count("#") == 1_000_000
    assert done.stdout.endswith("exit handler ran\n")
    assert "torn down" not in done.stdout


# Python code that sets `command_ended` once the command returned and `run()` looked for threads still at work:
# a thread that waits for it is at work then, however long the command took.
COMMAND_ENDED = """
import threading
import shambench.cli

command_ended = threading.Event()
_look = shambench.cli._threads_still_working

def _looked():
    try:
        return _look()
    finally:
        command_ended.set()

shambench.cli._threads_still_working = _looked
"""


def test_a_command_leaving_a_thread_at_work_gets_the_ordinary_exit():
    done = _shambench(
        TORN_DOWN
        + COMMAND_ENDED
        + """
threading.Thread(target=lambda: (command_ended.wait(), print("thread finished", flush=True))).start()
""",
        "--version",
    )
    assert done.returncode == 0
    assert "shambench, version" in done.stdout
    assert "thread finished" in done.stdout
    assert "torn down" in done.stdout  # the interpreter's teardown ran


def test_python_dash_m_is_the_same_command():
    done = subprocess.run([sys.executable, "-m", "shambench", "list", "nothing"], capture_output=True, text=True)
    assert done.returncode == 2
    assert "nothing" in done.stderr


def test_a_mistyped_command_gets_the_nearest_name():
    from click.testing import CliRunner

    from shambench.cli import main

    res = CliRunner().invoke(main, ["evl", "--detector", "overlap"])
    assert res.exit_code == 2 and res.stderr.splitlines()[-1] == "Error: No such command 'evl'. Did you mean 'eval'?"
    assert CliRunner().invoke(main, ["data", "stat"]).stderr.splitlines()[-1].endswith("Did you mean 'stats'?")
    assert CliRunner().invoke(main, ["zzzz"]).stderr.splitlines()[-1] == "Error: No such command 'zzzz'."


def test_each_command_summary_is_the_first_paragraph_of_its_help():
    import click

    from shambench.cli import COMMANDS, main

    ctx = click.Context(main)
    for name, lazy in COMMANDS.items():
        command = main.get_command(ctx, name)
        assert lazy.summary.split() == command.help.partition("\n\n")[0].split(), name
        assert not command.hidden and not command.deprecated and command.short_help is None, name


def test_the_help_lists_every_command_as_click_would_without_importing_one():
    import click

    from shambench.cli import COMMANDS, main

    # In a fresh process: the group's help, and what it imported.
    code = (
        "import sys\nfrom shambench.cli import main\n"
        "try:\n    main(['--help'], prog_name='shambench', terminal_width={width})\nexcept SystemExit:\n    pass\n"
        "print('|'.join(m for m in sys.modules if m.startswith(('pydantic', 'shambench.cli.'))))"
    )
    ctx = click.Context(main)
    imported = click.Group("shambench", commands={name: main.get_command(ctx, name) for name in COMMANDS})
    for width in (40, 80, 200):
        done = subprocess.run([sys.executable, "-c", code.format(width=width)], capture_output=True, text=True)
        shown, modules = done.stdout.rsplit("\n", 2)[:2]
        assert sorted(modules.split("|")) == ["shambench.cli.exits"]
        formatter = click.HelpFormatter(width=width)
        imported.format_commands(click.Context(imported, terminal_width=width), formatter)
        assert shown.endswith(formatter.getvalue().rstrip("\n"))


def test_a_commands_help_imports_neither_the_status_line_nor_the_structured_reader():
    # The loading status line (rich, the detectors' registry) is imported when a first source is read, the
    # structured reader (YAML, SQLite, the filesystem gate) when a value is read.
    code = (
        "import sys\nfrom shambench.cli import main\n"
        "try:\n    main(['eval', '--help'], prog_name='shambench')\nexcept SystemExit:\n    pass\n"
        "print('|'.join(m for m in ('rich', 'shambench.cli.progress', 'shambench.structured', 'yaml') if m in sys.modules))"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert "--detector" in done.stdout and done.stdout.splitlines()[-1] == ""
