"""Where a result came from: package version, git commit, time, library versions."""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime
from functools import cache
from importlib import metadata
from pathlib import Path

TRACKED_PACKAGES = (
    "shambench",
    "numpy",
    "pandas",
    "spacy",
    "pydantic",
    "datasets",
    "openai",
    "dspy",
    "scikit-learn",
)


def shambench_version() -> str:
    """The installed shambench version."""
    try:
        return metadata.version("shambench")
    except metadata.PackageNotFoundError:
        return "0+unknown"


@cache
def git_commit() -> str | None:
    """The commit of the checkout shambench runs from, or None outside a git checkout."""
    try:
        out = subprocess.run(
            ["git", "rev-parse", "HEAD"],
            cwd=Path(__file__).resolve().parent,
            capture_output=True,
            text=True,
            timeout=5,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return out.stdout.strip() or None if out.returncode == 0 else None


def now_iso() -> str:
    """The current UTC time, ISO 8601 with seconds."""
    return datetime.now(UTC).isoformat(timespec="seconds")


def package_versions() -> dict[str, str]:
    """Versions of the libraries that can change a score."""
    out = {}
    for name in TRACKED_PACKAGES:
        try:
            out[name] = metadata.version(name)
        except metadata.PackageNotFoundError:
            continue
    return out
