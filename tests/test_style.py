"""The checkout passes the linter and the formatter CONTRIBUTING asks for (`ruff check .`, `ruff format --check .`),
so a file added later, a docs page's Python blocks included, is held to them by the suite and not only by habit."""

from __future__ import annotations

import importlib.util
import re
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


MACHINE_PATHS = re.compile("|".join(f"/{root}/" for root in ("work", "root", "Users")))
"""Absolute folders of the machines this project was made on (a user's own `/home/me/...` in an example is
illustration, not a path of ours)."""


def test_no_tracked_text_names_a_machine_path():
    listed = subprocess.run(["git", "ls-files", "-z"], cwd=REPO, capture_output=True, check=True).stdout
    found = []
    for name in listed.decode().split("\0"):
        path = REPO / name
        if not name or not path.is_file() or path.suffix not in {".md", ".py", ".toml", ".yml", ".yaml", ".cfg", ""}:
            continue
        for number, line in enumerate(path.read_text(encoding="utf-8", errors="replace").splitlines(), 1):
            if MACHINE_PATHS.search(line):
                found.append(f"{name}:{number}")
    assert found == []
