"""`.ci/typecheck.py`: the symlink layout mypy checks is the installed one, and errors point into the checkout."""

from __future__ import annotations

import importlib.util
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _typecheck():
    spec = importlib.util.spec_from_file_location("typecheck", ROOT / ".ci" / "typecheck.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_layout_maps_plugin_folders_into_the_package(tmp_path):
    tc = _typecheck()
    dirs = tc.package_dirs(ROOT / "pyproject.toml")
    assert dirs["shambench.adapters"] == ROOT / "adapters"
    tc.lay_out(tmp_path, dirs)
    assert (tmp_path / "shambench" / "scoring" / "scorer.py").resolve() == ROOT / "shambench" / "scoring" / "scorer.py"
    assert (tmp_path / "shambench" / "adapters" / "mushroom.py").resolve() == ROOT / "adapters" / "mushroom.py"
    assert (tmp_path / "shambench" / "leaderboard" / "build.py").resolve() == ROOT / "leaderboard" / "build.py"
    assert not (tmp_path / "shambench" / "__pycache__").exists()


def test_error_lines_are_reported_at_checkout_paths(tmp_path, monkeypatch):
    tc = _typecheck()
    monkeypatch.chdir(ROOT)
    tc.lay_out(tmp_path, tc.package_dirs(ROOT / "pyproject.toml"))
    line = f"{tmp_path}/shambench/adapters/mushroom.py:12: error: something  [misc]"
    assert tc.in_checkout(line, tmp_path) == "adapters/mushroom.py:12: error: something  [misc]"
    note = f"{tmp_path}/shambench/scoring/scorer.py:3: note: see here"
    assert tc.in_checkout(note, tmp_path) == "shambench/scoring/scorer.py:3: note: see here"
    # lines without a path in the tree pass unchanged
    assert tc.in_checkout("Found 3 errors in 1 file", tmp_path) == "Found 3 errors in 1 file"
    assert tc.in_checkout("tests/x.py:1: error: y", tmp_path) == "tests/x.py:1: error: y"
