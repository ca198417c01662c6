"""The run options' table (`shambench/cli/option_table.py`), and what a command's `--help` imports."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

from shambench.cli import option_table
from shambench.cli.options import OptionRow, option_rows, spec_rows
from tests.cli.commands import every_command

# What a command's help has no use for: the models (pydantic), the data stack, the API clients and the model stack.
NOT_FOR_HELP = ("pydantic", "numpy", "pandas", "datasets", "spacy", "openai", "dspy", "torch", "transformers")


def test_the_table_is_the_one_the_spec_fields_make(tmp_path):
    written = tmp_path / "option_table.py"
    subprocess.run([sys.executable, "-m", "shambench.cli.options", str(written)], check=True, cwd=tmp_path)
    assert written.read_text() == Path(option_table.__file__).read_text(), (
        "shambench/cli/option_table.py is not what RunSpec's fields make: `python -m shambench.cli.options` rewrites it"
    )
    assert spec_rows() == option_rows()


def test_a_row_says_what_its_field_declares():
    rows = spec_rows()
    assert rows["n_resamples"] == OptionRow(
        section="scoring",
        flags=("--bootstrap",),
        kind="int",
        low=10,
        low_open=False,
        default=1000,
        show_default=True,
        metavar=None,
        inverse=False,
        shown=True,
        help="Bootstrap resamples for the 95% confidence intervals.",
    )
    assert rows["datasets"].flags == ("--datasets", "-d") and rows["datasets"].section == "selection"
    assert (rows["runs_root"].flags, rows["runs_root"].kind, rows["runs_root"].default) == (("--runs",), "dir", "runs")
    params = rows["params"]
    assert (params.kind, params.low, params.default, params.show_default, params.metavar) == (
        "pairs",
        None,
        (),
        False,
        "KEY=VALUE",
    )
    assert (
        rows["fail_fast"].inverse and rows["fail_fast"].kind == "bool" and rows["fail_fast"].flags == ("--keep-going",)
    )
    assert not rows["resume"].shown


@pytest.mark.parametrize("path", [path for path, _ in every_command()])
def test_a_command_help_imports_nothing_it_does_not_show(path):
    """Every command's --help (and the groups'): the run options come from the table, not from the models."""
    args = path.split()[1:]
    script = (
        "import sys\nfrom shambench.cli import main\n"
        f"try:\n    main({[*args, '--help']!r}, prog_name='shambench')\nexcept SystemExit as done:\n    assert not done.code\n"
        f"print(sorted(m for m in {NOT_FOR_HELP!r} if m in sys.modules))"
    )
    shown = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    assert shown.stdout.splitlines()[-1] == "[]", path
