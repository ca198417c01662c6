"""Reading and writing JSON lines and results files, with errors that name the file and line."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import TYPE_CHECKING, Any

import orjson
from pydantic import BaseModel, ValidationError

import shambench.fs as fs
from shambench.errors import DataError
from shambench.schema import Prediction
from shambench.secrets import redact
from shambench.structured import reject_constant

if TYPE_CHECKING:
    from pydantic_core import ErrorDetails


def json_type(value: Any) -> str:
    """What kind of JSON value `value` is, as an error message names it (`an object`, `null`, `a number`, ...)."""
    names = {dict: "an object", list: "an array", str: "a string", bool: "a boolean", type(None): "null"}
    return names.get(type(value), "a number")


def validation_message(err: ValidationError) -> str:
    """A pydantic error as `field.path: message; ...`."""
    return "; ".join(f"{'.'.join(str(x) for x in e['loc']) or 'record'}: {error_text(e)}" for e in err.errors())


def error_text(error: ErrorDetails) -> str:
    """What one error of a pydantic ValidationError says, without where."""
    # A validator's own ValueError is already a sentence: without pydantic's "Value error, " before it.
    ctx = error.get("ctx") or {}
    return str(ctx["error"]) if error["type"] == "value_error" and "error" in ctx else error["msg"]


MAX_DEPTH = 32
"""Deepest nesting of arrays and objects accepted in one JSON record (a span list inside `meta` is depth 4)."""


# Digits as "0", exponent markers as "e", opening brackets (`[`, `{`) as "[", anything else as " ": the shapes of a
# line's numbers and how deep it may nest, found in one pass (a regex scan costs more than parsing the line).
# Readers of a line share one translation of it.
NUMBER_SHAPES = bytes(
    48 if 48 <= b <= 57 else 101 if b in (69, 101) else 91 if b in (91, 123) else 32 for b in range(256)
)
# A run of 19 digits may be an integer outside 64 bits (below -2**63 or past 2**64), which orjson reads as a float
# and `json` keeps exact; it may also overflow a float to infinity.
LONG_DIGIT_RUN = b"0" * 19


def parse_json_line(line: bytes | str, shapes: bytes | None = None) -> Any:
    """One JSON value from a line, strictly: UTF-8, no NaN/Infinity, no pathological nesting.

    orjson reads the line when it can (several times faster: it is most of reading a large file); whatever it
    refuses or might read differently (lone surrogates, NaN, deep nesting, integers past 64 bits, bad bytes) is read
    again by `json`, whose acceptance and messages are the rule. `shapes`: the line's bytes translated by
    `NUMBER_SHAPES`, when the caller has them already."""
    return json_line(line, shapes)[0]


def json_line(line: bytes | str, shapes: bytes | None = None) -> tuple[Any, bool]:
    """`parse_json_line`'s value, and whether orjson read it: such a value holds no infinite number (orjson refuses
    a number that overflows a float, which `json` reads as infinity), so a reader need not look for one."""
    raw = line.encode("utf-8", "surrogatepass") if isinstance(line, str) else line
    if shapes is None:
        shapes = raw.translate(NUMBER_SHAPES)
    if LONG_DIGIT_RUN not in shapes:
        try:
            return orjson.loads(raw), True
        except orjson.JSONDecodeError:
            pass
    return _parse_json_strictly(line), False


def _parse_json_strictly(line: bytes | str) -> Any:
    if isinstance(line, bytes):
        try:
            line = line.decode("utf-8")
        except UnicodeDecodeError as err:
            raise ValueError(f"not UTF-8 text (byte {line[err.start]:#04x} at column {err.start + 1})") from None
    try:
        return json.loads(line.rstrip("\r\n"), parse_constant=reject_constant)
    except json.JSONDecodeError as err:
        # json's "Unterminated string starting at" already ends in "at"
        raise ValueError(f"not valid JSON ({err.msg.removesuffix(' at')} at column {err.colno})") from None
    except RecursionError:
        raise ValueError(f"nested deeper than {MAX_DEPTH} levels") from None


def iter_lines(path: str | Path, named: bool = False) -> Iterator[tuple[int, bytes]]:
    """`(line number, raw bytes)` of each non-blank line; DataError when the file cannot be read (opened by
    `shambench.fs.open_input`: a FIFO only when `named` on the command line, never blocking for good)."""
    path = Path(path)
    try:
        with fs.open_input(path, named) as fh:
            # Only "\n" ends a line: JSON leaves U+2028 unescaped, and bytes keep non-UTF-8 lines reportable.
            for lineno, line in enumerate(fh, start=1):
                if line.strip():
                    yield lineno, line
    except FileNotFoundError:
        raise DataError(f"{path}: file not found") from None
    except IsADirectoryError:
        raise DataError(f"{path}: is a folder, expected a JSONL file") from None
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})") from None


def iter_jsonl(path: str | Path, named: bool = False) -> Iterator[tuple[int, dict[str, Any]]]:
    """`(line number, object)` for each non-blank line; DataError `FILE:LINE: what was expected` on a missing file,
    a line that is not UTF-8 or not strict JSON, or a value that is not an object (`named`: see `iter_lines`)."""
    for lineno, line in iter_lines(path, named):
        try:
            obj = parse_json_line(line)
        except ValueError as err:
            raise DataError(f"{path}:{lineno}: {err}") from None
        if not isinstance(obj, dict):
            raise DataError(f"{path}:{lineno}: expected a JSON object, got {type(obj).__name__}")
        yield lineno, obj


def model_json(obj: BaseModel, **options: Any) -> bytes:
    """The text `obj.model_dump_json(**options)` returns, as bytes, written by the model's serializer directly: the
    method's keyword handling cost a journal line 6.7k of its 31k instructions."""
    return obj.__pydantic_serializer__.to_json(obj, **options)


def model_values(obj: BaseModel, **options: Any) -> Any:
    """What `obj.model_dump(**options)` returns, by the model's serializer directly (see `model_json`)."""
    return obj.__pydantic_serializer__.to_python(obj, **options)


def model_line(obj: BaseModel) -> str:
    """One compact JSON line for a model, without unset optional fields."""
    return model_json(obj, exclude_none=True).decode() + "\n"


def open_regular(path: str | Path, flags: int, root: str | Path | None = None) -> int:
    """A descriptor of the regular file `path`, through the filesystem gate (`shambench.fs.open_file`: no link
    followed below `root`, no FIFO or device, no other hard link when writing)."""
    return fs.open_file(path, flags, root)


def read_regular(path: str | Path, limit: int | None = None) -> bytes | None:
    """The bytes of a regular file opened as `open_regular` does (None when there is nothing at `path`);
    DataError when it holds more than `limit` bytes."""
    try:
        fd = open_regular(path, os.O_RDONLY)
    except FileNotFoundError:
        return None
    with os.fdopen(fd, "rb") as fh:
        data = fh.read() if limit is None else fh.read(limit + 1)
    if limit is not None and len(data) > limit:
        raise DataError(f"{path}: larger than {limit} bytes; not a file shambench wrote")
    return data


def write_atomic(path: str | Path, text: str | bytes, root: str | Path | None = None) -> None:
    """Write a whole file, redacted, so that readers see either the old content or the new, never a part
    (`shambench.fs.write_bytes`: nothing followed through a link below `root`; by default neither the file nor
    the folder it is in is a link).

    A FIFO, a terminal or a device the user named (`/dev/stdout`) is written in place when `root` is not given,
    since renaming onto it would swap the special file for a regular one.
    """
    data = redact(text).encode("utf-8") if isinstance(text, str) else text
    if root is None and fs.write_special(path, data):
        return
    fs.write_bytes(path, data, root)


def write_json(path: str | Path, obj: Any, root: str | Path | None = None) -> None:
    """Atomically write `obj` (a model or plain data) as indented JSON (`root`: see `write_atomic`)."""
    text = obj.model_dump_json(indent=2) if isinstance(obj, BaseModel) else json.dumps(obj, indent=2)
    write_atomic(path, text + "\n", root)


def write_jsonl(path: str | Path, rows: Iterable[BaseModel], root: str | Path | None = None) -> int:
    """Atomically write models as JSON lines; returns how many (`root`: see `write_atomic`)."""
    lines = [model_line(r) for r in rows]
    write_atomic(path, "".join(lines), root)
    return len(lines)


class Journal:
    """An append-only JSONL journal of records keyed by `id` (a run's predictions, a provider's contexts)."""

    def __init__(self, path: Path, model: type[BaseModel] = Prediction, root: Path | None = None):
        self.path = path
        self.model = model
        self.root = root
        """The folder its writes are confined to (`shambench.fs.root_of`; default: the parent of its folder)."""

    def read(self) -> dict[str, Any]:
        """The last record for each id; a torn final line (a crash mid-write) is ignored."""
        return self.parse(self.text())

    def text(self) -> str:
        """The journal's complete lines ("" when there is no journal), without a torn final line; DataError when
        the journal is a symbolic link or not a regular file (see `open_regular`)."""
        data = read_regular(self.path)
        if data is None:
            return ""
        # Cut the torn piece before decoding: a crash can split a multi-byte character, which must not make an
        # otherwise sound journal unreadable.
        complete = data[: data.rfind(b"\n") + 1]
        try:
            return complete.decode("utf-8")
        except UnicodeDecodeError as err:
            lineno = complete.count(b"\n", 0, err.start) + 1
            raise DataError(f"{self.path}:{lineno}: not UTF-8 text") from None

    def parse(self, text: str) -> dict[str, Any]:
        """The last record for each id in the journal's `text` (read here, or sent to a sweep worker)."""
        out: dict[str, Any] = {}
        # Split on "\n" only: str.splitlines would also cut at U+2028 or U+0085, which JSON leaves unescaped.
        # The piece after the last newline is empty, or a record torn by a crash mid-write: even when it parses
        # it is not done (`repair` cuts it before the next append).
        lines = text.split("\n")[:-1]
        for lineno, line in enumerate(lines, start=1):
            if not line.strip():
                continue
            try:
                # any journal model: each has the `id` its records are keyed by
                rec: Any = self.model.model_validate_json(line)
            except ValidationError as err:
                raise DataError(
                    f"{self.path}:{lineno}: not a {self.model.__name__} ({err.errors()[0]['msg']})"
                ) from None
            out[rec.id] = rec
        return out

    def repair(self) -> None:
        """Cut a torn final line so that appends start on a fresh line."""
        try:
            fd = open_regular(self.path, os.O_RDWR, self.root)
        except FileNotFoundError:
            return
        with os.fdopen(fd, "r+b") as fh:
            data = fh.read()
            if data and not data.endswith(b"\n"):
                fh.truncate(data.rfind(b"\n") + 1)

    @contextmanager
    def appender(self) -> Iterator[Callable[[BaseModel | str], None]]:
        """A function that appends one record (or its `model_line`, made elsewhere) and flushes it at once."""
        self.repair()
        fd = open_regular(self.path, os.O_WRONLY | os.O_APPEND | os.O_CREAT, self.root)
        with os.fdopen(fd, "a", encoding="utf-8") as fh:

            def append(rec: BaseModel | str) -> None:
                fh.write(redact(rec if isinstance(rec, str) else model_line(rec)))
                fh.flush()

            yield append
            os.fsync(fh.fileno())
