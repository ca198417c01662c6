"""`--suite`: the suites the sources declare, checked when given, never read for `--help`."""

from __future__ import annotations

import subprocess
import sys

from click.testing import CliRunner

from shambench.cli import main

HELP_IMPORTS = """
import sys
from click.testing import CliRunner
from shambench.cli import main
for argv in (["--help"], ["eval", "--help"], ["data", "stats", "--help"]):
    assert CliRunner().invoke(main, argv).exit_code == 0, argv
print(sorted(m for m in sys.modules if m.startswith("shambench.adapters") or m == "shambench.sources"))
"""


def test_help_imports_no_adapter():
    out = subprocess.run([sys.executable, "-c", HELP_IMPORTS], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_an_unknown_suite_is_a_usage_error_naming_the_declared_ones():
    result = CliRunner().invoke(main, ["data", "stats", "--suite", "nope"])
    assert result.exit_code == 2
    assert (
        "'nope' is not a suite (the registered sources declare: extended, hard2verify, math-shepherd" in result.output
    )
