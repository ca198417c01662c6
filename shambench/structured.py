"""The one bounded reader of structured input: JSON, YAML and Python-literal text, from files and from fields.

Every file the tool parses as a whole (a sweep grid, a program, a pricing or preset file, a submission, a model's
config, a corpus released as one JSON document, a dataset card's front matter) and every structured field (a
`-p key=value`, a label list written as a Python literal, a server's JSON) is read here, within three bounds:

- size: a file larger than its cap is refused before it is read (and one that grows while it is read, after the
  cap's worth), a field larger than its cap is refused before it is parsed;
- depth: arrays and objects nested deeper than MAX_DEPTH are refused (the code that walks a parsed value, pydantic
  or `json.dumps`, recurses);
- YAML aliases and anchors are refused: a few lines of them expand to gigabytes once walked.

Each failure is one line, `WHERE:LINE: what was wrong; expected WHAT` (a DataError, or the subclass the caller
names, e.g. an adapter's SourceError: the CLI prints it as `error:` and exits 2), never a traceback. JSON lines, read a line at a time, are `shambench.io.parse_json_line`'s.
"""

from __future__ import annotations

import ast
import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

import orjson
import yaml

import shambench.fs as fs
from shambench.errors import DataError

MAX_DEPTH = 64
"""Deepest nesting of arrays and objects accepted in a structured input."""

MAX_CONFIG_BYTES = 16 * 2**20
"""Largest file written by a person (sweep grid, program, pricing, presets, submission, model config)."""

MAX_DATA_BYTES = 2 * 2**30
"""Largest corpus file read as one document (the released ones are a few megabytes at most)."""

MAX_FIELD_CHARS = 8 * 2**20
"""Largest structured field (a label list, a parameter's value, a server's JSON body)."""


def _failure(where: str, line: int | None, problem: str, expected: str, error: type[DataError]) -> DataError:
    at = f"{where}:{line}" if line is not None else where
    return error(f"{at}: {problem}; expected {expected}")


def bounded_bytes(
    path: str | Path,
    expected: str,
    limit: int = MAX_CONFIG_BYTES,
    error: type[DataError] = DataError,
    named: bool = False,
) -> bytes:
    """The bytes of file `path`, refused (DataError) when it is missing, not a regular file (a FIFO is read when
    `named` on the command line, within `shambench.fs.open_input`'s deadline) or over `limit`."""
    path = Path(path)
    try:
        with fs.open_input(path, named) as fh:
            size = os.fstat(fh.fileno()).st_size
            if size > limit:
                raise _failure(str(path), None, f"{size:,} bytes, over the {limit:,} accepted", expected, error)
            data = fh.read(limit + 1)  # a file growing while it is read stops at the cap
    except FileNotFoundError:
        raise _failure(str(path), None, "file not found", expected, error) from None
    except IsADirectoryError:
        raise _failure(str(path), None, "is a folder", expected, error) from None
    except OSError as err:
        raise _failure(str(path), None, f"cannot be read ({err.strerror or err})", expected, error) from None
    if len(data) > limit:
        raise _failure(str(path), None, f"over the {limit:,} bytes accepted", expected, error)
    return data


_CONTAINERS = (dict, list, tuple, set)


def deeper_than(value: Any, limit: int) -> bool:
    """Whether `value` nests lists, tuples, sets or dicts deeper than `limit` levels (walked level by level, without
    recursion: a list comprehension a container, where a stack of (container, depth) pairs cost a tuple and a
    generator step each; the 13,342 containers of the corpora an eval loads 15.2 -> 11.1 ms)."""
    level = [value] if isinstance(value, _CONTAINERS) else []
    depth = 1
    while level:
        if depth > limit:
            return True
        below: list[Any] = []
        for item in level:
            below += [c for c in (item.values() if isinstance(item, dict) else item) if isinstance(c, _CONTAINERS)]
        level = below
        depth += 1
    return False


def _brackets(text: str | bytes, opening: str = "[{") -> int:
    """How many of the `opening` characters `text` holds. Every array or object of a JSON value opens with a `[` or a
    `{` of its text (every list, tuple, set or dict of a Python literal with a `[`, `(` or `{`, but a tuple without
    parentheses, which only the whole literal can be), so no value read from a text nests deeper than that count
    (plus one, for a literal): a text within the limit needs no walk of its value (a server's reply holds a handful
    of them, and the walk was most of reading one)."""
    if isinstance(text, bytes):
        return sum(text.count(ch.encode()) for ch in opening)
    return sum(text.count(ch) for ch in opening)


def _checked_depth(
    value: Any, where: str, expected: str, max_depth: int, error: type[DataError], line: int | None = None
) -> Any:
    if deeper_than(value, max_depth):
        raise _failure(where, line, f"nested deeper than {max_depth} levels", expected, error)
    return value


# A run of 19 digits may be an integer outside 64 bits, which orjson reads as a float and `json` keeps exact. It is
# found as 19 zeros once every ASCII digit is made a zero: one pass of bytes.translate and a substring search, where
# the expression [0-9]{19} counted every run of digits again from each of its digits (the long fractions of a
# corpus's soft labels), ten times the cost over the corpora an eval loads. UTF-8 writes no other character with
# an ASCII digit's byte, so the text's encoding holds such a run exactly when the text does.
_DIGITS_AS_ZERO = bytes.maketrans(b"123456789", b"000000000")
_LONG_DIGITS = b"0" * 19


def _orjson_reads_it_as_json(text: str | bytes) -> bool:
    data = text.encode("utf-8", "surrogatepass") if isinstance(text, str) else text
    return _LONG_DIGITS not in data.translate(_DIGITS_AS_ZERO)


def reject_constant(name: str) -> Any:
    """`json`'s `parse_constant`: NaN, Infinity and -Infinity are no JSON numbers."""
    raise ValueError(f"{name} is not a JSON number (expected a finite number)")


def json_value(
    text: str | bytes,
    where: str,
    expected: str,
    max_depth: int = MAX_DEPTH,
    parse_float: Callable[[str], Any] | None = None,
    error: type[DataError] = DataError,
    first_line: int | None = None,
    allow_nan: bool = False,
) -> Any:
    """One JSON document, strictly (no NaN or Infinity unless `allow_nan`: pandas writes them in some released
    files), within MAX_FIELD_CHARS and `max_depth`.

    orjson reads it when it can (fast, and bounded to 1024 levels without recursing); what it refuses is read again
    by `json`, whose acceptance and messages are the rule. `parse_float` (a source whose numbers are read as its
    authors' tools read them) sends it to `json` directly. `first_line`: the line of `where` that `text` starts at
    (a JSON line of a file), named in every failure."""

    def line(json_line: int = 1) -> int | None:
        return None if first_line is None else first_line + json_line - 1

    if len(text) > MAX_FIELD_CHARS:
        raise _failure(
            where, line(), f"{len(text):,} characters, over the {MAX_FIELD_CHARS:,} accepted", expected, error
        )
    if first_line is not None:  # a line of a file: its ending is not part of the document (nor of an error's place)
        text = text.rstrip(b"\r\n") if isinstance(text, bytes) else text.rstrip("\r\n")
    if parse_float is None and _orjson_reads_it_as_json(text):
        try:
            value = orjson.loads(text)
        except orjson.JSONDecodeError:
            pass
        else:
            if _brackets(text) <= max_depth:
                return value
            return _checked_depth(value, where, expected, max_depth, error, line())
    try:
        as_text = text.decode("utf-8") if isinstance(text, bytes) else text
        value = json.loads(as_text, parse_float=parse_float, parse_constant=None if allow_nan else reject_constant)
    except UnicodeDecodeError as err:
        raise _failure(where, line(), f"not UTF-8 text (byte {err.start})", expected, error) from None
    except json.JSONDecodeError as err:
        # json's "Unterminated string starting at" already ends in "at"
        problem = f"not valid JSON ({err.msg.removesuffix(' at')} at column {err.colno})"
        raise _failure(where, line(err.lineno) if first_line else err.lineno, problem, expected, error) from None
    except ValueError as err:  # a NaN or Infinity, or a number `parse_float` refused
        raise _failure(where, line(), f"not valid JSON ({err})", expected, error) from None
    except RecursionError:
        raise _failure(where, line(), f"nested deeper than {max_depth} levels", expected, error) from None
    return _checked_depth(value, where, expected, max_depth, error, line())


def json_file(
    path: str | Path,
    expected: str,
    limit: int = MAX_CONFIG_BYTES,
    max_depth: int = MAX_DEPTH,
    error: type[DataError] = DataError,
    named: bool = False,
) -> Any:
    """The JSON document in file `path` (see `json_value`; a file may be up to `limit` bytes; `named`: see
    `bounded_bytes`)."""
    data = bounded_bytes(path, expected, limit, error, named)
    if len(data) <= MAX_FIELD_CHARS or not _orjson_reads_it_as_json(data):
        return json_value(data, str(path), expected, max_depth, error=error)
    try:
        value = orjson.loads(data)
    except orjson.JSONDecodeError as err:
        raise _failure(str(path), err.lineno, f"not valid JSON ({err.msg})", expected, error) from None
    return _checked_depth(value, str(path), expected, max_depth, error)


class _BoundedLoader(yaml.SafeLoader):
    """PyYAML's safe loader, refusing aliases and anchors and nesting deeper than MAX_DEPTH."""

    max_depth = MAX_DEPTH
    depth = 0

    def compose_node(self, parent: Any, index: Any) -> Any:
        event = self.peek_event()
        if isinstance(event, yaml.AliasEvent) or getattr(event, "anchor", None) is not None:
            raise yaml.MarkedYAMLError(
                problem="aliases and anchors (&, *) are not accepted", problem_mark=event.start_mark
            )
        self.depth += 1
        try:
            if self.depth > self.max_depth:
                raise yaml.MarkedYAMLError(
                    problem=f"nested deeper than {self.max_depth} levels", problem_mark=event.start_mark
                )
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1


def yaml_value(text: str, where: str, expected: str, first_line: int = 1, error: type[DataError] = DataError) -> Any:
    """One YAML document, safely (plain data only), within MAX_FIELD_CHARS, MAX_DEPTH and with no aliases;
    `first_line`: the line of `where` that `text` starts at (front matter inside a file)."""
    if len(text) > MAX_FIELD_CHARS:
        raise _failure(where, None, f"{len(text):,} characters, over the {MAX_FIELD_CHARS:,} accepted", expected, error)
    loader = _BoundedLoader(text)
    try:
        return loader.get_single_data()
    except yaml.MarkedYAMLError as err:
        mark = err.problem_mark or err.context_mark
        line = mark.line + first_line if mark is not None else None
        raise _failure(where, line, f"not valid YAML ({err.problem or err.context})", expected, error) from None
    except yaml.YAMLError as err:
        raise _failure(where, None, f"not valid YAML ({err})", expected, error) from None
    finally:
        loader.dispose()


def yaml_file(
    path: str | Path,
    expected: str,
    limit: int = MAX_CONFIG_BYTES,
    error: type[DataError] = DataError,
    named: bool = False,
) -> Any:
    """The YAML document in file `path` (see `yaml_value`; a file may be up to `limit` bytes; `named`: see
    `bounded_bytes`)."""
    data = bounded_bytes(path, expected, limit, error, named)
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _failure(str(path), data.count(b"\n", 0, err.start) + 1, "not UTF-8 text", expected, error) from None
    return yaml_value(text, str(path), expected, error=error)


def literal_value(
    text: str, where: str, expected: str, max_depth: int = MAX_DEPTH, error: type[DataError] = DataError
) -> Any:
    """A Python literal (strings, numbers, True/False/None, lists, tuples, dicts, sets), as some corpora write
    their label lists, within MAX_FIELD_CHARS and `max_depth`. `ast.literal_eval` evaluates nothing but literals,
    and CPython's tokenizer refuses brackets nested past 200 levels before any recursion: with the size capped
    first, its work is linear in the field."""
    if len(text) > MAX_FIELD_CHARS:
        raise _failure(where, None, f"{len(text):,} characters, over the {MAX_FIELD_CHARS:,} accepted", expected, error)
    try:
        value = ast.literal_eval(text)
    except SyntaxError as err:
        raise _failure(where, None, f"not a Python literal ({err.msg})", expected, error) from None
    except (ValueError, TypeError, MemoryError, RecursionError) as err:
        raise _failure(where, None, f"not a Python literal ({type(err).__name__}: {err})", expected, error) from None
    if _brackets(text, "[{(") + 1 <= max_depth:
        return value
    return _checked_depth(value, where, expected, max_depth, error)
