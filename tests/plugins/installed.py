"""Installs the fake plugin package (tests/plugins/fake_plugin) once per test session, into a temporary folder."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

SOURCE = Path(__file__).resolve().parent / "fake_plugin"
_installed: dict[str, Path] = {}


def install_fake_plugin(tmp_root: Path) -> Path:
    """The folder the plugin was installed into with pip (put it on PYTHONPATH); installed on first call only."""
    if "target" not in _installed:
        # Build from a copy: setuptools writes build/ and *.egg-info next to the sources it builds.
        source = tmp_root / "fake_plugin_src"
        shutil.copytree(SOURCE, source)
        target = tmp_root / "site"
        subprocess.run(
            [sys.executable, "-m", "pip", "install", "--quiet", "--no-deps", "--no-build-isolation", "--no-index"]
            + ["--disable-pip-version-check", "--target", str(target), str(source)],
            check=True,
            capture_output=True,
            timeout=120,
        )
        _installed["target"] = target
    return _installed["target"]
