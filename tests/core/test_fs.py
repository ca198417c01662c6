"""The filesystem gate: no link followed below a root, nothing made outside it, whole-file writes, deletes only of
marked folders, and a folder the disk refuses as one FolderError line."""

from __future__ import annotations

import errno
import os
import sqlite3
from pathlib import Path

import pytest

import shambench.fs as fs
from shambench.errors import FolderError
from tests.conftest import folder_tree


@pytest.fixture
def sandbox(tmp_path):
    """A root and, beside it, a folder with a file that nothing may touch."""
    root, outside = tmp_path / "root", tmp_path / "outside"
    root.mkdir()
    outside.mkdir()
    (outside / "precious.txt").write_text("keep me\n")
    return root, outside


def test_write_bytes_makes_folders_and_replaces_whole(sandbox):
    root, _ = sandbox
    fs.write_bytes(root / "a" / "b" / "f.txt", b"one", root)
    fs.write_bytes(root / "a" / "b" / "f.txt", b"two", root)
    assert folder_tree(root) == {"a": "dir", "a/b": "dir", "a/b/f.txt": b"two"}  # no temporary file left
    mask = os.umask(0)
    os.umask(mask)
    assert (root / "a" / "b" / "f.txt").stat().st_mode & 0o777 == 0o666 & ~mask


@pytest.mark.parametrize("where", ["a", "a/b", "a/b/f.txt"])
def test_a_link_at_any_component_is_refused_and_its_target_untouched(sandbox, where):
    root, outside = sandbox
    link = root / where
    link.parent.mkdir(parents=True, exist_ok=True)
    link.symlink_to(outside / "precious.txt" if where.endswith(".txt") else outside)
    before = folder_tree(outside)
    with pytest.raises(FolderError, match=f"^{link}: is a symbolic link; "):
        fs.write_bytes(root / "a" / "b" / "f.txt", b"x", root)
    with pytest.raises(FolderError, match="is a symbolic link"):
        fs.open_file(root / "a" / "b" / "f.txt", os.O_WRONLY | os.O_CREAT | os.O_APPEND, root)
    assert folder_tree(outside) == before


@pytest.mark.parametrize("name", ["../escape/f", "x/../../escape/f", "/abs/f"])
def test_a_path_leaving_the_root_is_refused_before_any_folder_is_made(tmp_path, name):
    root = tmp_path / "data" / "src"
    with pytest.raises(FolderError, match="leaves"):
        fs.make_dirs((root / name).parent, root)
    assert not (tmp_path / "data").exists() and not (tmp_path / "escape").exists()


def test_remove_tree_deletes_only_marked_real_folders(sandbox):
    root, outside = sandbox
    fs.mark(root / "mine", root, ".mark")
    (root / "mine" / "inner").mkdir()
    (root / "mine" / "inner" / "to-outside").symlink_to(outside)  # removed as a link, never followed
    (root / "unmarked").mkdir()
    (root / "planted").symlink_to(outside)
    (outside / ".mark").write_text("a marker at the link's target does not count\n")
    before = folder_tree(outside)
    assert fs.remove_tree(root / "mine", root, ".mark") is True
    assert fs.remove_tree(root / "unmarked", root, ".mark") is False
    assert fs.remove_tree(root / "planted", root, ".mark") is False
    assert fs.remove_tree(root / "absent", root, ".mark") is False
    assert folder_tree(root) == {"planted": f"-> {outside}", "unmarked": "dir"}
    assert folder_tree(outside) == before


def test_rename_refuses_a_link_at_the_destination(sandbox):
    root, outside = sandbox
    fs.write_bytes(root / "part", b"new", root)
    (root / "dest").symlink_to(outside / "precious.txt")
    with pytest.raises(FolderError, match="dest: is a symbolic link"):
        fs.rename(root / "part", root / "dest", root)
    assert (outside / "precious.txt").read_text() == "keep me\n"
    fs.rename(root / "part", root / "other", root)
    assert (root / "other").read_bytes() == b"new"


def test_unlink_removes_a_link_not_its_target(sandbox):
    root, outside = sandbox
    (root / "link").symlink_to(outside / "precious.txt")
    fs.unlink(root / "link", root)
    fs.unlink(root / "absent", root)  # missing_ok
    assert folder_tree(root) == {} and (outside / "precious.txt").read_text() == "keep me\n"


def test_a_file_with_another_hard_link_is_not_opened_for_writing(sandbox):
    root, outside = sandbox
    os.link(outside / "precious.txt", root / "f")
    with pytest.raises(FolderError, match="1 other hard link"):
        fs.open_file(root / "f", os.O_WRONLY | os.O_APPEND, root)
    os.close(fs.open_file(root / "f", os.O_RDONLY, root))  # reading is fine


def test_a_fifo_is_refused_without_blocking(sandbox):
    root, _ = sandbox
    os.mkfifo(root / "fifo")
    with pytest.raises(FolderError, match="not a regular file"):
        fs.open_file(root / "fifo", os.O_RDONLY, root)
    with pytest.raises(FolderError, match="not a regular file"):
        fs.write_bytes(root / "fifo", b"x", root)


def test_a_folder_the_disk_refuses_is_one_error_line(sandbox, monkeypatch):
    """Tests run as root, where chmod does not stop a write: the disk's refusal is stood in for by os.open and
    os.mkdir raising EROFS, as a read-only mount does."""
    root, _ = sandbox
    real_open, real_mkdir = os.open, os.mkdir

    def refuse(*args, **kwargs):
        flags = args[1] if len(args) > 1 else kwargs.get("flags", 0)
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(*args, **kwargs)

    def refuse_mkdir(*args, **kwargs):
        raise OSError(errno.EROFS, os.strerror(errno.EROFS))

    monkeypatch.setattr(os, "open", refuse)
    monkeypatch.setattr(os, "mkdir", refuse_mkdir)
    with pytest.raises(FolderError, match=r"f.txt: cannot write \(Read-only file system; is the folder read-only\?\)"):
        fs.write_bytes(root / "f.txt", b"x", root)
    with pytest.raises(FolderError, match="sub: cannot create"):
        fs.make_dirs(root / "sub", root)
    monkeypatch.setattr(os, "open", real_open)
    monkeypatch.setattr(os, "mkdir", real_mkdir)
    assert isinstance(FolderError("x"), OSError)  # caches that skip an unwritable folder skip this one too


def test_write_special_writes_a_fifo_in_place(tmp_path):
    import threading

    fifo = tmp_path / "fifo"
    os.mkfifo(fifo)
    got: list[bytes] = []
    reader = threading.Thread(target=lambda: got.append(fifo.read_bytes()))
    reader.start()
    assert fs.write_special(fifo, b"hello\n") is True
    reader.join(10)
    assert got == [b"hello\n"] and fifo.is_fifo()
    assert fs.write_special(tmp_path / "regular", b"x") is False


SCHEMA = "CREATE TABLE IF NOT EXISTS t (x)"


def test_sqlite_connect_makes_the_database_in_wal_mode_without_leaving_the_gate_s_descriptor(sandbox):
    root, _ = sandbox
    db = fs.sqlite_connect(root / "c" / "db.sqlite", SCHEMA, root)
    db.execute("INSERT INTO t VALUES (1)")
    assert db.execute("PRAGMA journal_mode").fetchone() == ("wal",)
    assert db.execute("SELECT x FROM t").fetchall() == [(1,)]
    names = {os.path.basename(os.readlink(f"/proc/self/fd/{fd}")) for fd in fs._open_files("db.sqlite") or {}}
    assert names == {"db.sqlite", "db.sqlite-wal", "db.sqlite-shm"}  # SQLite's three, the gate's closed
    db.close()
    again = fs.sqlite_connect(root / "c" / "db.sqlite", SCHEMA, root)
    assert again.execute("SELECT x FROM t").fetchall() == [(1,)]
    again.close()


@pytest.mark.parametrize("where", ["c", "c/db.sqlite", "c/db.sqlite-wal", "c/db.sqlite-shm", "c/db.sqlite-journal"])
def test_sqlite_connect_refuses_a_link_at_the_database_its_side_files_or_its_folder(sandbox, where):
    root, outside = sandbox
    if where != "c":
        (root / "c").mkdir()
    link = root / where
    link.symlink_to(outside if where == "c" else outside / "precious.txt")
    before = folder_tree(outside)
    with pytest.raises(FolderError, match=f"^{link}: is a symbolic link; "):
        fs.sqlite_connect(root / "c" / "db.sqlite", SCHEMA, root)
    assert folder_tree(outside) == before


def test_sqlite_connect_refuses_a_side_file_with_another_hard_link(sandbox):
    root, outside = sandbox
    (root / "c").mkdir()
    os.link(outside / "precious.txt", root / "c" / "db.sqlite-wal")
    with pytest.raises(FolderError, match="db.sqlite-wal: has another hard link"):
        fs.sqlite_connect(root / "c" / "db.sqlite", SCHEMA, root)
    assert (outside / "precious.txt").read_text() == "keep me\n"


def swap_for_link(folder: Path, target: Path) -> None:
    """Replace `folder` by a link to `target`, as an attacker racing the gate would."""
    folder.rename(folder.with_name("moved-away"))
    folder.symlink_to(target)


@pytest.mark.parametrize("there", ["nothing", "a database"])
def test_a_folder_swapped_for_a_link_before_sqlite_opens_is_refused_before_any_write(sandbox, monkeypatch, there):
    """SQLite is given the path the gate walked and resolves it itself: a folder swapped after the gate's walk
    leads it elsewhere, which `mode=rw` (nothing made) and the path SQLite names (compared) refuse."""
    root, outside = sandbox
    if there == "a database":
        other = sqlite3.connect(outside / "db.sqlite")
        other.execute("CREATE TABLE kept (y)")
        other.commit()
        other.close()
    before = folder_tree(outside)
    real_connect = sqlite3.connect

    def racing(*args, **kwargs):
        swap_for_link(root / "c", outside)
        return real_connect(*args, **kwargs)

    monkeypatch.setattr(sqlite3, "connect", racing)
    refused = "a folder on the way is a symbolic link" if there == "nothing" else f"SQLite opened {outside}/db.sqlite "
    with pytest.raises(FolderError, match=refused):
        fs.sqlite_connect(root / "c" / "db.sqlite", SCHEMA, root)
    assert folder_tree(outside) == before


@pytest.mark.parametrize("there", ["nothing", "a file of its name"])
def test_a_folder_swapped_for_a_link_after_sqlite_opened_is_seen_in_the_files_it_opens_next(
    sandbox, monkeypatch, there
):
    """The database SQLite holds is the gate's; a folder swapped after that is seen by SQLite (it checks the
    database's name before opening its log: 'disk I/O error') or, where a file of the database's name is at the
    link's target, in the log SQLite opened there, and the connection is refused. What remains (the docstring of
    `fs.sqlite_connect`), measured here: SQLite has made that log (`-wal`, `-shm`) beside the other file by then."""
    root, outside = sandbox
    if there != "nothing":
        (outside / "db.sqlite").write_bytes(b"")
    before = folder_tree(outside)
    real_check = fs._check_sqlite

    def racing(db, real, path, held, opened):
        real_check(db, real, path, held, opened)
        if held[2] is not None:  # after the first check, before the log is opened
            swap_for_link(root / "c", outside)

    monkeypatch.setattr(fs, "_check_sqlite", racing)
    if there == "nothing":
        with pytest.raises(FolderError, match="db.sqlite: a folder on the way is a symbolic link"):
            fs.sqlite_connect(root / "c" / "db.sqlite", SCHEMA, root)
        assert folder_tree(outside) == before
    else:
        with pytest.raises(FolderError, match=rf"SQLite opened {outside}/db.sqlite-(wal|shm), not the file of that"):
            fs.sqlite_connect(root / "c" / "db.sqlite", SCHEMA, root)
        after = folder_tree(outside)
        assert {k: v for k, v in after.items() if k in before} == before  # the other file itself unchanged
        assert sorted(after.keys() - before.keys()) == ["db.sqlite-shm", "db.sqlite-wal"]  # the residue
    assert fs._open_files("db.sqlite") == {}  # the refused connection is closed


def test_sqlite_reader_makes_nothing_and_reads_a_database_the_disk_will_not_write(sandbox, monkeypatch):
    """What `cache stats` reads with: no database is none (none made); a writable one is `sqlite_connect`'s; one
    the disk refuses to write (os.open's write flags raising EROFS, as a read-only mount does: tests run as root)
    is read as it is, read-only, changing nothing; a link at it is refused either way."""
    root, outside = sandbox
    path = root / "c" / "db.sqlite"
    assert fs.sqlite_reader(path, SCHEMA, root) is None and not (root / "c").exists()
    db = fs.sqlite_connect(path, SCHEMA, root)
    db.execute("INSERT INTO t VALUES (1), (2)")
    db.close()
    writable = fs.sqlite_reader(path, SCHEMA, root)
    assert writable.execute("PRAGMA journal_mode").fetchone() == ("wal",)  # sqlite_connect's
    writable.close()
    before = folder_tree(root)
    real_open = os.open

    def refuse(path, flags, *args, **kwargs):
        if flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT):
            raise OSError(errno.EROFS, os.strerror(errno.EROFS))
        return real_open(path, flags, *args, **kwargs)

    monkeypatch.setattr(os, "open", refuse)
    read_only = fs.sqlite_reader(path, SCHEMA, root)
    assert read_only.execute("SELECT x FROM t ORDER BY x").fetchall() == [(1,), (2,)]
    with pytest.raises(sqlite3.OperationalError, match="readonly"):
        read_only.execute("INSERT INTO t VALUES (3)")
    read_only.close()
    assert folder_tree(root) == before
    path.unlink()
    path.symlink_to(outside / "precious.txt")
    with pytest.raises(FolderError, match=f"^{path}: is a symbolic link; "):
        fs.sqlite_reader(path, SCHEMA, root)
