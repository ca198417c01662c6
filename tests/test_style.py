"""The checkout passes the linter and the formatter CONTRIBUTING asks for (`ruff check .`, `ruff format --check .`),
so a file added later, a docs page's Python blocks included, is held to them by the suite and not only by habit."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@pytest.fixture(scope="module")
def ruff() -> list[str]:
    """The ruff command of this interpreter (the `dev` extra installs it)."""
    if importlib.util.find_spec("ruff") is None:
        pytest.fail("ruff is not installed: pip install -e '.[dev]'")
    return [sys.executable, "-m", "ruff"]


@pytest.mark.parametrize("check", [["check", "--no-cache", "."], ["format", "--no-cache", "--check", "."]])
def test_the_checkout_passes_ruff(ruff: list[str], check: list[str]) -> None:
    done = subprocess.run([*ruff, *check], cwd=REPO, capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
