"""Every create, write, rename and delete of the package goes through the filesystem gate (`shambench/fs.py`): a
walk over the source of every module fails on a direct one anywhere else, unless the allow-list below names it
with its reason."""

from __future__ import annotations

import ast
from collections.abc import Callable, Mapping
from pathlib import Path

from tests.test_architecture import PACKAGE_DIRS, REPO

GATE = REPO / "shambench" / "fs.py"
# Methods and functions that create, write, rename or delete by path, whatever object they are called on.
WRITING_METHODS = {
    "write_text",
    "write_bytes",
    "unlink",
    "rmtree",
    "rename",
    "renames",
    "mkdir",
    "makedirs",
    "rmdir",
    "removedirs",
    "symlink_to",
    "hardlink_to",
    "touch",
    "savefig",
    "to_parquet",
    "to_csv",
    "to_json",
    "save_pretrained",
    "save_to_disk",
    "mkstemp",
    "mkdtemp",
    "NamedTemporaryFile",
    "TemporaryDirectory",
}
# Functions of these modules that write, under any name.
WRITING_FUNCTIONS = {
    "os": {"remove", "replace", "rename", "unlink", "rmdir", "mkdir", "makedirs", "symlink", "link", "truncate"},
    "shutil": {"rmtree", "move", "copy", "copy2", "copyfile", "copytree"},
    "np": {"save", "savez", "savez_compressed", "savetxt"},
    "numpy": {"save", "savez", "savez_compressed", "savetxt"},
    "sqlite3": {"connect"},
}
# Library functions, called by their bare name, that write files of their own.
WRITING_NAMES = {"hf_hub_download", "snapshot_download"}
# os.open flags that make it a write.
WRITE_FLAGS = {"O_WRONLY", "O_RDWR", "O_CREAT", "O_APPEND", "O_TRUNC"}
# (file relative to the checkout, call as written) -> why it is not the gate's business.
ALLOWED = {
    ("shambench/cli/__init__.py", "os.open"): "opens os.devnull to silence a closed stdout; writes nothing",
    ("detectors/miprov2_compile.py", "open"): "opens os.devnull as a sink for DSPy's prints; writes nothing",
    (
        "detectors/token_classifier_train.py",
        "save_pretrained",
    ): "transformers' own writers, into a new folder fs.new_dir made, whose files fs.rename moves into place",
    ("shambench/scoring/kept.py", "np.savez"): "into an in-memory buffer, which the gate writes",
    ("shambench/data/benchmark.py", "to_parquet"): "into an in-memory buffer, which the gate writes",
    ("shambench/reporting/figures.py", "savefig"): "into an in-memory buffer, which the gate writes",
    ("shambench/io.py", "to_json"): "pydantic's serializer, whose to_json returns bytes: no file",
}


def call_name(node: ast.Call) -> str | None:
    """The call as written (`open`, `os.replace`, `path.unlink` as `unlink`), when it creates, writes, renames or
    deletes by path; None otherwise."""
    func = node.func
    if isinstance(func, ast.Name) and func.id == "open":
        return "open" if _write_mode(node, 1) else None
    if isinstance(func, ast.Name) and func.id in WRITING_NAMES:
        return func.id
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    if owner == "fs":  # the gate's own functions
        return None
    if owner == "os" and func.attr == "open":
        return "os.open" if _write_flags(node) else None
    if owner in WRITING_FUNCTIONS and func.attr in WRITING_FUNCTIONS[owner]:
        return f"{owner}.{func.attr}"
    if func.attr == "open":  # Path.open(mode)
        return "open" if _write_mode(node, 0) else None
    if func.attr == "replace" and len(node.args) == 1 and not node.keywords:  # Path.replace(target), not str's
        return "replace"
    return func.attr if func.attr in WRITING_METHODS else None


def _write_mode(node: ast.Call, position: int) -> bool:
    mode = node.args[position] if len(node.args) > position else None
    mode = next((k.value for k in node.keywords if k.arg == "mode"), mode)
    if mode is None:
        return False
    if not isinstance(mode, ast.Constant):
        return True  # a mode computed at run time may write
    return any(c in str(mode.value) for c in "wax+")


def _write_flags(node: ast.Call) -> bool:
    flags = node.args[1] if len(node.args) > 1 else None
    return (
        flags is not None
        and any(isinstance(n, ast.Attribute) and n.attr in WRITE_FLAGS for n in ast.walk(flags))
        or not isinstance(flags, ast.BinOp | ast.Attribute)
    )


def calls_outside_gate(
    named: Callable[[ast.Call], str | None], allowed: Mapping[tuple[str, str], str], gate: Path = GATE
) -> list[str]:
    """`FILE:LINE: CALL` of every call in the package outside `gate` that `named` names and `allowed` (by file and
    call name) does not excuse, then `FILE: CALL excuses nothing` for each entry of `allowed` whose call is gone (it
    is removed, not left to excuse a later one): the one walk of the class tests of writes (here), reads
    (test_fs_inputs) and parses of structured input (core/test_structured)."""
    found, made = [], set()
    for folder in PACKAGE_DIRS.values():
        for path in sorted(folder.rglob("*.py")):
            if path == gate:
                continue
            rel = path.relative_to(REPO).as_posix()
            for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
                if isinstance(node, ast.Call) and (name := named(node)):
                    made.add((rel, name))
                    if (rel, name) not in allowed:
                        found.append(f"{rel}:{node.lineno}: {name}")
    return found + [f"{rel}: {name} excuses nothing" for rel, name in sorted(set(allowed) - made)]


def writes_outside_gate() -> list[str]:
    """`FILE:LINE: CALL` of every direct write outside the gate that the allow-list does not name."""
    return calls_outside_gate(call_name, ALLOWED)


def test_every_write_goes_through_the_gate():
    assert writes_outside_gate() == []


def test_an_allowed_write_that_is_gone_is_reported():
    stale = {**ALLOWED, ("shambench/io.py", "savefig"): "no such call"}
    assert calls_outside_gate(call_name, stale) == ["shambench/io.py: savefig excuses nothing"]


def test_the_walk_finds_each_kind_of_write():
    """The detector itself, on a small source: each kind of write found, reads and str.replace left alone."""
    source = """
open(p, "w"); open(p); open(p, "rb"); p.open("a"); p.open("rb"); p.write_text("x"); p.unlink()
shutil.rmtree(p); os.replace(a, b); p.replace(q); s.replace("a", "b"); p.mkdir(); os.makedirs(p)
os.open(p, os.O_RDONLY); os.open(p, os.O_WRONLY | os.O_CREAT); np.savez(p); sqlite3.connect(p); fig.savefig(p)
"""
    calls = [call_name(n) for n in ast.walk(ast.parse(source)) if isinstance(n, ast.Call)]
    assert sorted(c for c in calls if c) == sorted(
        [
            "open",
            "open",
            "write_text",
            "unlink",
            "shutil.rmtree",
            "os.replace",
            "replace",
            "mkdir",
            "os.makedirs",
            "os.open",
            "np.savez",
            "sqlite3.connect",
            "savefig",
        ]
    )
