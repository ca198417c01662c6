"""Every ```python block of the README and CONTRIBUTING runs as written, each in a fresh interpreter."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

from tests.conftest import require_shared

REPO = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "CONTRIBUTING.md")


def python_blocks(text: str) -> list[str]:
    """The bodies of the ```python fenced blocks of a Markdown text, in order."""
    return re.findall(r"^```python\n(.*?)^```$", text, flags=re.S | re.M)


BLOCKS = [(doc, i, block) for doc in DOCS for i, block in enumerate(python_blocks((REPO / doc).read_text()))]


def test_the_block_finder_reads_fenced_python_only():
    text = "x\n```python\na = 1\n```\n```bash\nls\n```\n```python\nb = 2\nc = 3\n```\n"
    assert python_blocks(text) == ["a = 1\n", "b = 2\nc = 3\n"]


def test_the_docs_have_blocks_to_run():
    assert {doc for doc, _, _ in BLOCKS} == set(DOCS)


@pytest.mark.parametrize(("doc", "index", "block"), BLOCKS, ids=[f"{d}#{i}" for d, i, _ in BLOCKS])
def test_block_runs_as_written(doc, index, block, tmp_path):
    # A user's own project folder with ../shared beside it, as the README assumes; nothing lands in the checkout.
    shared = require_shared()
    project = tmp_path / "project"
    project.mkdir()
    (tmp_path / "shared").symlink_to(shared.parent)
    env = {k: v for k, v in os.environ.items() if k != "SHAMBENCH_DATA_DIR"}
    done = subprocess.run(
        [sys.executable, "-c", block], cwd=project, env=env, capture_output=True, text=True, timeout=600
    )
    assert done.returncode == 0, f"{doc} block {index} failed:\n{block}\n{done.stderr[-3000:]}"
