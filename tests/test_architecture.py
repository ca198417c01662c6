"""The layout's promise: the core (everything under shambench/) never imports a built-in plugin module."""

from __future__ import annotations

import ast
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
PLUGIN_PACKAGES = ("shambench.detectors", "shambench.adapters")


def imported_modules(source: str, package: str) -> set[str]:
    """Every module the source imports, anywhere (function-level imports too), as absolute names."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = node.module or ""
            if node.level:
                parts = package.split(".")
                parent = parts[: len(parts) - node.level + 1]
                base = ".".join([*parent, base] if base else parent)
            names.add(base)
            names.update(f"{base}.{alias.name}" for alias in node.names)
    return names


def plugin_imports(path: Path) -> list[str]:
    package = ".".join(path.relative_to(REPO).parts[:-1])
    found = imported_modules(path.read_text(encoding="utf-8"), package)
    return sorted(m for m in found if m.startswith(PLUGIN_PACKAGES))


def test_the_core_imports_no_builtin_plugin_module():
    offenders = {str(p.relative_to(REPO)): plugin_imports(p) for p in (REPO / "shambench").rglob("*.py")}
    assert {k: v for k, v in offenders.items() if v} == {}


def test_function_level_and_relative_imports_are_seen():
    source = "def f():\n    from shambench.detectors.prompted import make\n    from ..detectors import baselines\n"
    found = imported_modules(source, "shambench.reporting")
    assert "shambench.detectors.prompted" in found
    assert "shambench.detectors.baselines" in found
    assert imported_modules("import shambench.adapters.fava as f\n", "shambench") == {"shambench.adapters.fava"}
