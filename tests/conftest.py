"""Shared fixtures: the real corpora in ../shared/data, and offline settings for every test."""

from __future__ import annotations

import json
import os
import socket
import tempfile
import threading
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis.configuration import set_hypothesis_home_dir

from tests.batch_server import batch_server  # noqa: F401  (the fixture, for every test)
from tests.hub_server import hub  # noqa: F401  (the fixture, for every test)
from tests.openai_server import openai_server  # noqa: F401  (the fixture, for every test)

REPO = Path(__file__).resolve().parents[1]
SHARED_DATA = Path(os.environ.get("SHAMBENCH_SHARED_DATA", REPO.parent / "shared" / "data"))

# Tests write nothing into the checkout: no hypothesis example database or caches (.hypothesis/); pytest's own
# cache is off in pyproject.toml (-p no:cacheprovider). No example has a deadline, nor is data generation checked
# for speed: on a loaded machine both fail tests whose code is right (tests/test_timing.py keeps them off).
# Derandomized: every run, on CI as here, tries the same examples, so a failure is seen again by whoever runs it.
settings.register_profile(
    "shambench", database=None, deadline=None, derandomize=True, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile("shambench")
set_hypothesis_home_dir(tempfile.mkdtemp(prefix="shambench-hypothesis-"))

# No test may reach the network: the hub clients and litellm must stay offline.
os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("HF_DATASETS_OFFLINE", "1")
os.environ.setdefault("LITELLM_LOCAL_MODEL_COST_MAP", "True")


def modules_matching(pattern: str) -> set[str]:
    """The package's modules (paths below shambench/) whose source matches the regular expression `pattern`."""
    import re

    import shambench

    package = Path(shambench.__file__).parent
    return {str(p.relative_to(package)) for p in package.rglob("*.py") if re.search(pattern, p.read_text())}


def require_shared(*parts: str) -> Path:
    """The path below ../shared/data; missing data fails under CI=true and skips elsewhere."""
    path = SHARED_DATA.joinpath(*parts)
    if not path.exists():
        message = f"real data not found at {path}"
        if os.environ.get("CI", "").lower() in ("1", "true", "yes"):
            pytest.fail(message + " (CI=true: the shared data must be beside the checkout)")
        pytest.skip(message)
    return path


def mushroom_english_responses() -> list[str]:
    """The 154 responses of Mu-SHROOM's English test file, in file order (real data, see `require_shared`)."""
    path = require_shared("mushroom", "mushroom.en-tst.v1.extra.jsonl")
    return [json.loads(line)["model_output_text"] for line in path.read_text(encoding="utf-8").splitlines()]


@pytest.fixture
def shared_data() -> Path:
    """The ../shared/data folder (fails under CI when absent, skips otherwise)."""
    return require_shared()


@pytest.fixture(autouse=True)
def _isolated_cache(tmp_path_factory, monkeypatch):
    """Point every user-level cache at a temporary folder, so tests never touch the user's files."""
    root = tmp_path_factory.mktemp("cache")
    monkeypatch.setenv("SHAMBENCH_CACHE_DIR", str(root / "shambench"))
    monkeypatch.setenv("DSPY_CACHEDIR", str(root / "dspy"))
    monkeypatch.delenv("SHAMBENCH_DATA_DIR", raising=False)
    # CLI output must not depend on the terminal the tests run in: a fixed width, no colour codes.
    monkeypatch.setenv("COLUMNS", "200")
    for var in ("FORCE_COLOR", "TTY_COMPATIBLE", "TTY_INTERACTIVE"):
        monkeypatch.delenv(var, raising=False)


@pytest.fixture
def mute_port():
    """A port that accepts connections and never says a word."""
    sock = socket.create_server(("127.0.0.1", 0))
    accepted: list[socket.socket] = []
    stop = threading.Event()

    def accept() -> None:
        sock.settimeout(0.05)
        while not stop.is_set():
            try:
                accepted.append(sock.accept()[0])
            except TimeoutError:
                continue

    thread = threading.Thread(target=accept, daemon=True)
    thread.start()
    yield sock.getsockname()[1]
    stop.set()
    thread.join(5)
    for conn in accepted:
        conn.close()
    sock.close()


@pytest.fixture
def command_line_settings():
    """The process-wide settings of the command line's process installed (`shambench.cli.run` installs them; a
    test process, like a user's, has none), and the default restored after."""
    from shambench.cli.process import CommandLineSettings
    from shambench.memory import use_process_settings

    previous = use_process_settings(CommandLineSettings())
    yield
    use_process_settings(previous)


def folder_tree(folder: Path) -> dict[str, bytes | str]:
    """Every entry under `folder`: a file's bytes, a link's target, a folder as "dir"."""
    out: dict[str, bytes | str] = {}
    for p in sorted(folder.rglob("*")):
        rel = p.relative_to(folder).as_posix()
        out[rel] = f"-> {os.readlink(p)}" if p.is_symlink() else "dir" if p.is_dir() else p.read_bytes()
    return out
