"""The one opener of files read (`shambench.fs.open_input`): a regular file is read; a FIFO in the tool's folders, a
device or a socket is refused at once; a FIFO named on the command line is read, and one nobody writes to fails
after the idle deadline instead of blocking. No wall clock is measured: the deadline is tiny and only the outcome is
asserted, each step under `unless_hung`."""

from __future__ import annotations

import ast
import os
import socket
import threading

import pytest

import shambench.fs as fs
from shambench.errors import DataError
from tests.run_helpers import unless_hung
from tests.test_fs_gate import calls_outside_gate


def test_a_regular_file_is_read_whole(tmp_path):
    (tmp_path / "f.jsonl").write_bytes(b'{"a": 1}\n')
    with fs.open_input(tmp_path / "f.jsonl") as fh:
        assert fh.read() == b'{"a": 1}\n'


def test_a_folder_is_a_folder(tmp_path):
    with pytest.raises(IsADirectoryError):
        fs.open_input(tmp_path)


@pytest.mark.parametrize("named", [False, True])
def test_a_fifo_nobody_writes_to_ends_in_one_error(tmp_path, named):
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)

    def read() -> str:
        with pytest.raises(DataError) as err, fs.open_input(fifo, named, idle=0.01) as fh:
            fh.read()
        return str(err.value)

    expected = "no data for 0.01 s (a FIFO or pipe nobody writes to)" if named else "not a regular file (a FIFO)"
    assert unless_hung(read, "a FIFO nobody writes to") == f"{fifo}: {expected}"


def test_a_named_fifo_that_is_written_to_is_read_to_its_end(tmp_path):
    fifo = tmp_path / "f.jsonl"
    os.mkfifo(fifo)
    body = b"".join(b'{"id": "%d"}\n' % i for i in range(20000))  # more than a pipe holds: several waits

    def write() -> None:
        with open(fifo, "wb") as fh:
            fh.write(body)

    writer = threading.Thread(target=write, daemon=True)
    writer.start()

    def read() -> bytes:
        # a generous idle deadline: the writer thread may be slow to start on a busy machine; it ends at once here
        with fs.open_input(fifo, named=True, idle=120) as fh:
            return fh.read()

    assert unless_hung(read, "a FIFO that is written to") == body
    writer.join()


def test_a_pipe_given_by_descriptor_is_read(tmp_path):
    """What `--predictions <(cmd)` names: /dev/fd/N, an anonymous pipe."""
    r, w = os.pipe()
    os.write(w, b"x\ny\n")
    os.close(w)
    try:
        with fs.open_input(f"/dev/fd/{r}", named=True, idle=120) as fh:
            assert fh.read() == b"x\ny\n"
    finally:
        os.close(r)


@pytest.mark.parametrize("named", [False, True])
def test_devices_and_sockets_are_refused(tmp_path, named):
    with pytest.raises(DataError, match=r"^/dev/zero: not a regular file \(a character device\)$"):
        fs.open_input("/dev/zero", named)
    server = socket.socket(socket.AF_UNIX)
    server.bind(str(tmp_path / "s"))
    try:
        with pytest.raises(OSError):  # a socket cannot even be opened: ENXIO, never a block
            fs.open_input(tmp_path / "s", named)
    finally:
        server.close()


def test_irregularity_classifies_as_the_opener_refuses_without_opening(tmp_path):
    """What `data verify` says of a file: the opener's refusal, read from the file's type (a FIFO never opened)."""
    (tmp_path / "f").write_text("x")
    (tmp_path / "link").symlink_to(tmp_path / "f")  # read through, as the opener reads it
    os.mkfifo(tmp_path / "fifo")
    (tmp_path / "dir").mkdir()
    got = {name: fs.irregularity(tmp_path / name) for name in ("f", "link", "fifo", "dir")}
    assert got == {
        "f": None,
        "link": None,
        "fifo": "not a regular file (a FIFO)",
        "dir": "not a regular file (a folder)",
    }
    assert fs.irregularity("/dev/zero") == "not a regular file (a character device)"
    with pytest.raises(DataError, match=r"not a regular file \(a FIFO\)$"):  # the same words as the opener's
        fs.open_input(tmp_path / "fifo")
    with pytest.raises(FileNotFoundError):
        fs.irregularity(tmp_path / "missing")


# Direct reads by path outside the opener, each with why it may stay: (file, call) -> reason.
READS_ALLOWED = {
    ("shambench/llm/presets.py", "read_text"): "the package's own presets.yaml (importlib.resources), not a user path",
    ("shambench/llm/pricing.py", "read_text"): "the package's own pricing.yaml (importlib.resources)",
    ("shambench/scoring/kept.py", "read_bytes"): "the source of shambench's own rule modules, hashed for a key",
    ("shambench/runs/evaluate.py", "open"): "journal.open(): a run's journal (written through the gate), no file read",
    ("shambench/runs/streamed.py", "open"): "self.open(): the streamed journal's, no file read",
    ("detectors/miprov2_compile.py", "open"): "os.devnull opened for writing, to silence a library",
    ("leaderboard/page.py", "read_text"): "the package's own page.css and page.js",
    ("shambench/data/providers/file.py", "read_text"): "hashed after iter_jsonl read the same path through the opener "
    "(which refuses a FIFO there)",
}
READ_METHODS = {"read_text", "read_bytes", "read_table", "read_parquet", "read_csv", "read_json", "load_dataset"}


def read_call(node: ast.Call) -> str | None:
    """The call as written when it opens a file by path for reading outside `shambench.fs`; None otherwise."""
    func = node.func
    if isinstance(func, ast.Name) and func.id == "open":
        return "open"
    if not isinstance(func, ast.Attribute):
        return None
    owner = func.value.id if isinstance(func.value, ast.Name) else None
    if func.attr == "open" and owner not in ("fs", "os"):  # Path.open; os.open's flags are the write walk's
        return "open"
    if func.attr in READ_METHODS and not (node.args and _is_file_object(node.args[0])):
        return func.attr
    return None


def _is_file_object(arg: ast.expr) -> bool:
    return isinstance(arg, ast.Name) and arg.id == "fh"


def reads_outside_opener() -> list[str]:
    """`FILE:LINE: CALL` of every direct read by path outside the opener that `READS_ALLOWED` does not name."""
    return calls_outside_gate(read_call, READS_ALLOWED)


def test_every_read_goes_through_the_opener():
    assert reads_outside_opener() == []
