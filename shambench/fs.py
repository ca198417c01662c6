"""The one filesystem gate: every create, write, rename and delete the tool makes under its run, cache, data and
output folders goes through here.

A `Root` is the folder a write is confined to (a cache folder, a data folder, the folder a run directory or an
output file is named in). It is resolved once, when made: the links in the path the user gave are theirs to have.
Below it nothing is followed: each folder is opened with `O_NOFOLLOW | O_DIRECTORY` relative to its parent's
descriptor (`dir_fd`), and every file is created, opened, renamed or deleted relative to its folder's descriptor,
so a symbolic link planted at any component, before or during the operation, is refused rather than followed
(`FolderError`, with the path). A path that leaves its root (`..`, another absolute path) is refused before any
folder is created. Files are written whole (a temporary file in the same folder, fsync, rename); a folder is
removed only when it holds the marker file its writer left in it; and a write the disk refuses (a read-only
folder, a full disk) is one `FolderError` line, never a traceback.
"""

from __future__ import annotations

import errno
import io
import os
import secrets
import select
import shutil
import sqlite3
import stat
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path
from typing import Any
from urllib.parse import quote

from shambench.errors import DataError, FolderError

NOT_FOLLOWED = "shambench's folders are written and read without following links (remove the link)"
# Flags of every open below a root: never through a link, never blocking on a FIFO, never inherited.
_NOFOLLOW = os.O_NOFOLLOW | os.O_CLOEXEC
_DIR = os.O_RDONLY | os.O_DIRECTORY | _NOFOLLOW


def root_of(path: str | Path, root: str | Path | None) -> Path:
    """The root of a file's write: `root` when given, else the parent of the file's folder, so that the folder a
    file is written in is itself never a link (a folder a command names, `--out DIR`, included)."""
    return Path(os.path.abspath(path)).parent.parent if root is None else Path(root)


def folder_root(folder: str | Path) -> Path:
    """The root of every write in or below `folder`, a folder the tool writes as a whole (a run directory, an
    output folder a command names): its parent. The folder itself is then reached by name and never followed, as a
    run folder in a shared runs folder may be a link someone planted there; the links above it are the user's."""
    return Path(os.path.abspath(folder)).parent


def refusal(path: str | Path, err: OSError, doing: str) -> FolderError:
    """The one line for a filesystem operation that failed: a link or special file refused, or what the disk said."""
    if err.errno in (errno.ELOOP, errno.ENOTDIR) and _is_link(path):
        return FolderError(f"{path}: is a symbolic link; {NOT_FOLLOWED}")
    if err.errno in (errno.EACCES, errno.EPERM, errno.EROFS):
        return FolderError(f"{path}: cannot {doing} ({err.strerror}; is the folder read-only?)")
    return FolderError(f"{path}: cannot {doing} ({err.strerror or err})")


def _is_link(path: str | Path) -> bool:
    """Whether `path` or one of its ancestors is a symbolic link (for the message only)."""
    p = Path(path)
    return any(q.is_symlink() for q in (p, *p.parents))


class Root:
    """A folder writes are confined to, resolved once; every path under it is reached without following a link."""

    def __init__(self, path: str | Path):
        self.path = Path(os.path.abspath(path))
        anchor = self.path
        while not anchor.exists() and anchor.parent != anchor:
            anchor = anchor.parent
        # The nearest existing ancestor is resolved (the user's links above the root are theirs); what this gate
        # creates below it is reached by name, one component at a time.
        self.real = os.path.realpath(anchor)
        self.below = self.path.relative_to(anchor).parts

    def parts(self, path: str | Path) -> tuple[str, ...]:
        """The components of `path` below the real anchor; FolderError when it leaves the root."""
        # `..` is resolved by name: below the root no link is followed, so the name is the way the path goes.
        try:
            rel = Path(os.path.abspath(path)).relative_to(self.path).parts
        except ValueError:
            raise FolderError(f"{path}: leaves {self.path}; refused") from None
        return (*self.below, *rel)

    @contextmanager
    def folder(self, parts: tuple[str, ...], create: bool = True) -> Iterator[int]:
        """A descriptor of the folder `parts` below the anchor, made when `create`; FileNotFoundError when it is
        missing and not made."""
        fd = os.open(self.real, _DIR)
        try:
            for i, name in enumerate(parts):
                if create:
                    with suppress(FileExistsError):
                        os.mkdir(name, 0o777, dir_fd=fd)
                try:
                    nfd = os.open(name, _DIR, dir_fd=fd)
                except OSError as err:
                    shown = Path(self.real, *parts[: i + 1])
                    if err.errno in (errno.ELOOP, errno.ENOTDIR) and os.path.islink(shown):
                        raise FolderError(f"{shown}: is a symbolic link; {NOT_FOLLOWED}") from None
                    raise
                os.close(fd)
                fd = nfd
            yield fd
        finally:
            os.close(fd)

    @contextmanager
    def parent(self, path: str | Path, create: bool = True) -> Iterator[tuple[int, str]]:
        """The descriptor of `path`'s folder and `path`'s name in it."""
        parts = self.parts(path)
        if not parts:
            raise FolderError(f"{path}: is the root folder itself, not a file in it")
        with self.folder(parts[:-1], create) as fd:
            yield fd, parts[-1]


def _translated(path: str | Path, doing: str) -> Iterator[None]:
    try:
        yield
    except FolderError:
        raise
    except FileNotFoundError:
        raise
    except OSError as err:
        raise refusal(path, err, doing) from None


translated = contextmanager(_translated)


def check_regular(fd: int, name: str, path: str | Path, folders: bool = False) -> None:
    """FolderError when `name` in the folder `fd` is a link or anything but a regular file (or, with `folders`, a
    folder); nothing there is fine."""
    try:
        mode = os.lstat(name, dir_fd=fd).st_mode
    except FileNotFoundError:
        return
    if stat.S_ISLNK(mode):
        raise FolderError(f"{path}: is a symbolic link; {NOT_FOLLOWED}")
    if not (stat.S_ISREG(mode) or (folders and stat.S_ISDIR(mode))):
        raise FolderError(f"{path}: not a regular file; {NOT_FOLLOWED}")


def open_file(path: str | Path, flags: int, root: str | Path | None = None, mode: int = 0o666) -> int:
    """A descriptor of the regular file `path` (under `root`, default: see `root_of`; for a read, its folder), opened without following a
    link at any component below the root and, opened for writing, only when it has no other hard link (it would
    be changed elsewhere too); FolderError otherwise. A FIFO or a device is refused, never blocked on."""
    writing = flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT)
    with translated(path, "write" if writing else "read"):
        # A file only read may sit in a folder the user linked (a run folder kept elsewhere); the file is no link.
        gate = Root(root_of(path, root) if writing or root else Path(os.path.abspath(path)).parent)
        with gate.parent(path, create=bool(flags & os.O_CREAT)) as (dir_fd, name):
            return _opened(dir_fd, name, path, flags, mode)


def _opened(dir_fd: int, name: str, path: str | Path, flags: int, mode: int = 0o666) -> int:
    """A descriptor of the regular file `name` in the folder `dir_fd`, as `open_file` opens it."""
    try:
        fd = os.open(name, flags | _NOFOLLOW | os.O_NONBLOCK, mode, dir_fd=dir_fd)
    except OSError as err:
        if err.errno == errno.ELOOP:
            raise FolderError(f"{path}: is a symbolic link; {NOT_FOLLOWED}") from None
        if err.errno == errno.ENXIO:  # a FIFO without a reader, or a device gone
            raise FolderError(f"{path}: not a regular file; {NOT_FOLLOWED}") from None
        raise
    info = os.fstat(fd)
    problem = None
    if not stat.S_ISREG(info.st_mode):
        problem = f"{path}: not a regular file; {NOT_FOLLOWED}"
    elif flags & (os.O_WRONLY | os.O_RDWR | os.O_CREAT) and info.st_nlink > 1:
        problem = f"{path}: has {info.st_nlink - 1} other hard link(s); {NOT_FOLLOWED} (copy the file instead)"
    if problem:
        os.close(fd)
        raise FolderError(problem)
    os.set_blocking(fd, True)
    return fd


INPUT_IDLE_SECONDS = 15.0
"""How long a FIFO or pipe named on the command line (`--predictions <(cmd)`) may stay silent before its read
fails: as long as the HTTP gate waits for a connection (`shambench.http`'s `connect_timeout`), the same kind of
wait for a peer to show up."""

_KINDS = {
    stat.S_IFIFO: "a FIFO",
    stat.S_IFCHR: "a character device",
    stat.S_IFBLK: "a block device",
    stat.S_IFSOCK: "a socket",
}


def _irregular(kind: int) -> str:
    """What a file of type `kind` (a `stat.S_IFMT` value, not a regular file) is, as every refusal says it."""
    return f"not a regular file ({_KINDS.get(kind, 'a special file')})"


def irregularity(path: str | Path) -> str | None:
    """Why `open_input` would refuse `path` as a file of the tool's folders (`not a regular file (a FIFO)`; a
    folder is one too), or None for a regular file (a link to one included, as `open_input` reads it); classified
    without opening it, so a FIFO is never waited on. FileNotFoundError when nothing is there."""
    kind = stat.S_IFMT(os.stat(path).st_mode)
    if kind == stat.S_IFDIR:
        return "not a regular file (a folder)"
    return None if kind == stat.S_IFREG else _irregular(kind)


def open_input(path: str | Path, named: bool = False, idle: float | None = None) -> io.BufferedReader:
    """The one way a file is opened for reading: without blocking at the open, then by what it is (fstat). A
    regular file is read as it is; a folder is IsADirectoryError. A FIFO or pipe is read only when `named` (a path
    the user gave on the command line, which may be a process substitution), each read failing (DataError) after
    `idle` seconds without a byte (default `INPUT_IDLE_SECONDS`), so one nobody writes to cannot hang the command.
    Anything else (a FIFO in the tool's own folders, a device, a socket) is refused at once: DataError
    `PATH: not a regular file (a FIFO)`."""
    fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK | os.O_CLOEXEC)
    try:
        kind = stat.S_IFMT(os.fstat(fd).st_mode)
        if kind == stat.S_IFDIR:
            raise IsADirectoryError(errno.EISDIR, os.strerror(errno.EISDIR), str(path))
        if kind == stat.S_IFREG:
            os.set_blocking(fd, True)
            return io.BufferedReader(io.FileIO(fd, "rb", closefd=True))
        if not (named and kind == stat.S_IFIFO):
            raise DataError(f"{path}: {_irregular(kind)}")
    except BaseException:
        os.close(fd)
        raise
    return io.BufferedReader(_IdleReader(fd, str(path), INPUT_IDLE_SECONDS if idle is None else idle))


def read_input(path: str | Path, named: bool = False) -> bytes:
    """The whole content of `path`, opened as `open_input` opens it."""
    with open_input(path, named) as fh:
        return fh.read()


class _IdleReader(io.RawIOBase):
    """A FIFO's descriptor (non-blocking) read with a deadline on each wait for bytes."""

    def __init__(self, fd: int, path: str, idle: float):
        self.fd, self.path, self.idle = fd, path, idle

    def readable(self) -> bool:
        """Always: it is opened for reading."""
        return True

    def fileno(self) -> int:
        """The FIFO's descriptor."""
        return self.fd

    def readinto(self, buffer: bytearray | memoryview) -> int:  # type: ignore[override]
        """Bytes into `buffer` once some arrive (0 at the end: the writer closed); DataError after `idle` s without."""
        poller = select.poll()
        poller.register(self.fd, select.POLLIN)
        # Before a writer opens it a FIFO reads as ended; poll waits for a writer's bytes or its close.
        if not poller.poll(self.idle * 1000):
            raise DataError(f"{self.path}: no data for {self.idle:g} s (a FIFO or pipe nobody writes to)")
        data = os.read(self.fd, len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def close(self) -> None:
        """Close the descriptor once."""
        if not self.closed:
            os.close(self.fd)
        super().close()


def write_bytes(path: str | Path, data: bytes | memoryview, root: str | Path | None = None, sync: bool = True) -> None:
    """Write a whole file under `root` (default: see `root_of`) so that readers see the old content or the new,
    never a part: a new file in the same folder, fsync (unless `sync` is false: a sealed cache file, checked
    when read), rename over `path`. A link or a special file at `path` is refused."""
    with translated(path, "write"), Root(root_of(path, root)).parent(path) as (fd, name):
        check_regular(fd, name, path)
        tmp = f".{name[:64]}.{secrets.token_hex(6)}.tmp"
        out = os.open(tmp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | _NOFOLLOW, 0o666, dir_fd=fd)
        try:
            with os.fdopen(out, "wb") as fh:
                fh.write(data)
                fh.flush()
                if sync:
                    os.fsync(fh.fileno())
            os.rename(tmp, name, src_dir_fd=fd, dst_dir_fd=fd)
        except BaseException:
            with suppress(OSError):
                os.unlink(tmp, dir_fd=fd)
            raise


def write_special(path: str | Path, data: bytes) -> bool:
    """Write `data` in place when `path` is a FIFO, a terminal or a device the user named (`/dev/stdout`, which
    renaming onto would replace); False when it is not one (write it with `write_bytes`)."""
    try:
        info = os.stat(path)
    except OSError:
        return False
    if stat.S_ISDIR(info.st_mode):
        raise FolderError(f"{path}: is a folder, expected a file to write")
    if not (stat.S_ISFIFO(info.st_mode) or stat.S_ISCHR(info.st_mode)):
        return False
    with translated(path, "write"), open(path, "wb") as fh:  # fs-gate: a device or FIFO the user named
        fh.write(data)
    return True


def make_dirs(path: str | Path, root: str | Path | None = None) -> Path:
    """Create the folder `path` (and its missing parents) under `root` (default: its parent); returns `path`."""
    gate = Root(Path(os.path.abspath(path)).parent if root is None else root)
    with translated(path, "create"), gate.folder(gate.parts(path)):
        pass
    return Path(path)


def unlink(path: str | Path, root: str | Path | None = None, missing_ok: bool = True) -> None:
    """Delete the file (or link) `path` itself under `root` (default: see `root_of`), never what a link points to."""
    with translated(path, "delete"):
        try:
            with Root(root_of(path, root)).parent(path, create=False) as (fd, name):
                os.unlink(name, dir_fd=fd)
        except FileNotFoundError:
            if not missing_ok:
                raise


def remove_empty_dir(path: str | Path, root: str | Path) -> bool:
    """Remove the folder `path` when it is empty (and not a link); whether it went."""
    try:
        with Root(root).parent(path, create=False) as (fd, name):
            os.rmdir(name, dir_fd=fd)
    except (OSError, FolderError):
        return False
    return True


def rename(src: str | Path, dst: str | Path, root: str | Path) -> None:
    """Rename `src` to `dst`, both under `root`, neither followed through a link (a link at `dst` is refused)."""
    gate = Root(root)
    with (
        translated(dst, "rename into"),
        gate.parent(src, create=False) as (sfd, sname),
        gate.parent(dst) as (
            dfd,
            dname,
        ),
    ):
        check_regular(dfd, dname, dst, folders=True)
        os.rename(sname, dname, src_dir_fd=sfd, dst_dir_fd=dfd)


def new_dir(parent: str | Path, root: str | Path, prefix: str = ".tmp-") -> Path:
    """A new empty folder in `parent` (under `root`) with a random name, made by this process alone."""
    name = f"{prefix}{secrets.token_hex(8)}"
    gate = Root(root)
    with translated(parent, "create a folder in"), gate.folder(gate.parts(parent)) as fd:
        os.mkdir(name, 0o777, dir_fd=fd)
    return Path(parent) / name


def mark(folder: str | Path, root: str | Path, marker: str) -> None:
    """Leave the marker file that lets `remove_tree` delete `folder` later (its content: who made it)."""
    write_bytes(Path(folder) / marker, b"made by shambench\n", root)


def marked(folder: str | Path, root: str | Path, marker: str) -> bool:
    """Whether `folder` under `root` is a real folder (not a link) holding the regular file `marker` (see `mark`)."""
    gate = Root(root)
    with translated(folder, "read"):
        try:
            with gate.folder(gate.parts(folder), create=False) as fd:
                return stat.S_ISREG(os.lstat(marker, dir_fd=fd).st_mode)
        except (FileNotFoundError, NotADirectoryError, FolderError):
            return False


def remove_tree(path: str | Path, root: str | Path, marker: str) -> bool:
    """Delete the folder `path` under `root` and all it holds, only when it is a real folder (not a link) holding
    the regular file `marker` its writer left; links inside are removed as links, never followed. Whether it
    went."""
    gate = Root(root)
    with translated(path, "delete"):
        try:
            with gate.parent(path, create=False) as (fd, name):
                if not marked(path, root, marker):
                    return False
                # shutil's fd-based walk: relative to `fd`, no link followed at any depth.
                shutil.rmtree(name, dir_fd=fd)  # fs-gate: the walk itself, under a descriptor of the gate's
        except FileNotFoundError:
            return False
    return True


def entries(folder: str | Path, root: str | Path) -> list[str]:
    """The names in `folder` under `root` (none when it is missing), read without following a link to it."""
    gate = Root(root)
    try:
        with gate.folder(gate.parts(folder), create=False) as fd:
            return sorted(os.listdir(fd))
    except (FileNotFoundError, FolderError, NotADirectoryError):
        return []


# The files SQLite keeps beside a database, named after it.
SQLITE_SIDES = ("-wal", "-shm", "-journal")


def sqlite_connect(
    path: str | Path, schema: str, root: str | Path | None = None, timeout: float = 30.0, threads: bool = False
) -> sqlite3.Connection:
    """A connection, in write-ahead-log mode with `schema` made, to the SQLite database `path` (under `root`,
    default: see `root_of`), refused (FolderError, the connection closed) when any file SQLite opened for it is
    not the file of that name in the folder the gate reached without following a link. `threads`: the
    connection may be used from several threads (behind the caller's lock).

    SQLite takes no descriptor: it opens its files by absolute name (measured with SQLite 3.40 under strace:
    the database, `-journal`, `-wal` and `-shm` each `O_NOFOLLOW` on the last component, the folders on the way
    followed). So, in order:
    1. the gate makes the folders and opens (makes) the database without following a link, refuses a link, a
       special file or a file with another hard link at the database and at its `-wal`, `-shm` and `-journal`
       names, and keeps the database's descriptor open until SQLite has its own;
    2. SQLite opens the path the gate walked (its real path) with `mode=rw`: it never creates the database, so a
       folder swapped for a link after step 1 cannot make it create one elsewhere;
    3. before any statement writes, the database SQLite names (`PRAGMA database_list`; it resolves links) must
       be that path, and every file of the database's names the process opened since step 2 (`/proc/self/fd`)
       must be the file the gate sees at that name in its folder's descriptor, the database among them;
    4. the write-ahead log is turned on and the schema made (SQLite opens `-wal` and `-shm` here and keeps them
       open for the connection's life), and step 3's check is made again on them.

    What remains, and why: SQLite's library offers no descriptor-relative open (Python's sqlite3 takes no VFS of
    ours, no `SQLITE_OPEN_NOFOLLOW` and, before 3.12, no way to keep the log at close), so a folder on the way
    swapped for a link (by someone who may rename in its parent folder) after step 3 is seen only once SQLite has
    used it. SQLite checks the database's name before it opens its log and fails ('disk I/O error', refused)
    when nothing is there; where the link's target holds a file of the database's name, SQLite makes its
    transient `-journal` (a new database) and its `-wal` and `-shm` there, writes them (the cache's own pages)
    and leaves the last two: step 4 refuses the connection, but after the fact (measured in tests/core/test_fs.py).
    The same window is open whenever SQLite later opens or deletes those files by name: the `-wal` and `-shm` it
    deletes when the last connection closes, a rollback journal if it cannot keep the log. Where `/proc/self/fd`
    is missing (not Linux), step 3's descriptor check is skipped and only the path SQLite names is compared. A
    file of the database's names opened at the same moment by another thread of this process, in another folder,
    is taken for SQLite's (a spurious refusal, one line)."""
    gate = Root(root_of(path, root))
    with translated(path, "write"), gate.parent(path) as (dir_fd, name):
        for side in SQLITE_SIDES:
            _check_single(dir_fd, name + side, Path(path).with_name(name + side))
        fd = _opened(dir_fd, name, path, os.O_RDWR | os.O_CREAT)
        try:
            real = os.path.join(gate.real, *gate.parts(path))
            before = _open_files(name)
            uri = f"file:{quote(real)}?mode=rw"
            db = _connected(
                path, (uri, real), (dir_fd, name, fd), before, timeout=timeout, check_same_thread=not threads
            )
            try:
                try:
                    for statement in ("PRAGMA journal_mode=WAL", "PRAGMA synchronous=NORMAL", schema):
                        db.execute(statement)
                except sqlite3.Error as err:
                    # A file SQLite opened elsewhere is the likelier cause: said first when it is.
                    _check_sqlite(db, real, path, (dir_fd, name, None), before)
                    raise _sqlite_refusal(path, err) from None
                _check_sqlite(db, real, path, (dir_fd, name, None), before)
            except BaseException:
                db.close()
                raise
        finally:
            os.close(fd)
    return db


def sqlite_reader(path: str | Path, schema: str, root: str | Path | None = None) -> sqlite3.Connection | None:
    """A connection for a command that only reads the SQLite database `path` (`cache stats`): None when there is
    none (nothing is made); `sqlite_connect`'s where its folder takes writes; where the disk refuses them (a
    read-only mount), a read-only connection to the file the gate opened without following a link, checked as
    `sqlite_connect` checks its own. SQLite cannot keep its write-ahead log's index beside a database there, so it
    reads the file as immutable (nothing can change it on that disk), without a log left behind by a writer that
    did not close."""
    gate = Root(root_of(path, root))
    with translated(path, "read"):
        try:
            with gate.parent(path, create=False) as (dir_fd, name):
                os.lstat(name, dir_fd=dir_fd)
                if _takes_writes(dir_fd, name, path):
                    return sqlite_connect(path, schema, root)
                return _read_only_sqlite(gate, path, dir_fd, name)
        except FileNotFoundError:
            return None


def _takes_writes(dir_fd: int, name: str, path: str | Path) -> bool:
    """Whether the database `name` in the folder `dir_fd` can be opened for writing, and its folder written (its
    log is made there); False where the disk refuses (read-only, no permission)."""
    try:
        os.close(_opened(dir_fd, name, path, os.O_RDWR))
    except OSError as err:
        if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
            return False
        raise
    return os.access(".", os.W_OK, dir_fd=dir_fd)


def _read_only_sqlite(gate: Root, path: str | Path, dir_fd: int, name: str) -> sqlite3.Connection:
    """A read-only, immutable connection to `name` in `dir_fd`, checked to be the file the gate opened."""
    fd = _opened(dir_fd, name, path, os.O_RDONLY)
    try:
        real = os.path.join(gate.real, *gate.parts(path))
        before = _open_files(name)
        return _connected(path, (f"file:{quote(real)}?mode=ro&immutable=1", real), (dir_fd, name, fd), before)
    finally:
        os.close(fd)


def _connected(
    path: str | Path,
    target: tuple[str, str],
    held: tuple[int, str, int | None],
    before: dict[int, tuple[str, int, int]] | None,
    **options: Any,
) -> sqlite3.Connection:
    """SQLite's connection to `target` (its URI, and the real path the gate reached), checked to be the file the
    gate holds (`_check_sqlite`); closed and refused (FolderError) otherwise."""
    uri, real = target
    try:
        db = sqlite3.connect(uri, uri=True, isolation_level=None, **options)
    except sqlite3.Error as err:
        raise _sqlite_refusal(path, err) from None
    try:
        _check_sqlite(db, real, path, held, before)
    except BaseException:
        db.close()
        raise
    return db


def _sqlite_refusal(path: str | Path, err: sqlite3.Error) -> FolderError:
    """The one line for SQLite failing on the gate's file: a folder on the way now a link, or what SQLite said."""
    if _is_link(path):
        return FolderError(f"{path}: a folder on the way is a symbolic link; {NOT_FOLLOWED}")
    return FolderError(f"{path}: SQLite cannot open it ({err})")


def _check_single(fd: int, name: str, path: str | Path) -> None:
    """`check_regular`, and FolderError when the file has another hard link (a write would change it there too)."""
    check_regular(fd, name, path)
    with suppress(FileNotFoundError):
        if os.lstat(name, dir_fd=fd).st_nlink > 1:
            raise FolderError(f"{path}: has another hard link; {NOT_FOLLOWED} (copy the file instead)")


def _open_files(name: str) -> dict[int, tuple[str, int, int]] | None:
    """The process's descriptors of files named `name` or `name` and a side's suffix: fd -> (the path the kernel
    shows, device, inode); None where `/proc/self/fd` is missing."""
    try:
        fds = os.listdir("/proc/self/fd")
    except OSError:
        return None
    names = {name, *(name + side for side in SQLITE_SIDES)}
    out = {}
    for entry in fds:
        with suppress(OSError):  # a descriptor closed meanwhile (the listing's own among them)
            info = os.fstat(int(entry))
            if not stat.S_ISREG(info.st_mode):  # sockets, pipes, devices: no path to read (fstat is cheaper)
                continue
            shown = os.readlink(f"/proc/self/fd/{entry}").removesuffix(" (deleted)")
            if os.path.basename(shown) in names:
                out[int(entry)] = (shown, info.st_dev, info.st_ino)
    return out


def _check_sqlite(
    db: sqlite3.Connection,
    real: str,
    path: str | Path,
    held: tuple[int, str, int | None],
    before: dict[int, tuple[str, int, int]] | None,
) -> None:
    """FolderError unless SQLite's database is `real` and every file of its names opened since `before` is the
    one of that name in the folder `held[0]`; given the gate's own descriptor `held[2]`, SQLite must hold its file
    too."""
    dir_fd, name, mine = held
    listed = {row[1]: row[2] for row in db.execute("PRAGMA database_list")}
    if listed.get("main") != real:
        raise FolderError(f"{path}: SQLite opened {listed.get('main')} instead; {NOT_FOLLOWED}")
    now = _open_files(name)
    if now is None or before is None:
        return
    for fd, (shown, dev, ino) in now.items():
        if before.get(fd) == (shown, dev, ino):
            continue
        try:
            there = os.lstat(os.path.basename(shown), dir_fd=dir_fd)
        except FileNotFoundError:
            there = None
        if there is None or (there.st_dev, there.st_ino) != (dev, ino) or not stat.S_ISREG(there.st_mode):
            folder = Path(real).parent
            raise FolderError(f"{path}: SQLite opened {shown}, not the file of that name in {folder}; {NOT_FOLLOWED}")
    made = os.fstat(mine) if mine is not None else None
    if made and not any((dev, ino) == (made.st_dev, made.st_ino) for fd, (_, dev, ino) in now.items() if fd != mine):
        raise FolderError(f"{path}: SQLite did not open the file the gate made; {NOT_FOLLOWED}")
