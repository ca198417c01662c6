"""Strict reading of prediction and example records: one validator for files, submissions and detector output.

Pydantic alone is lenient where a benchmark must not be: it turns `"3"`, `3.0` or `true` into the offset 3, ignores
a misspelt key (so `"span": [...]` silently predicts nothing) and lets NaN scores through. These checks run on the
plain JSON value first, so every record entering a score was written as documented.
"""

from __future__ import annotations

import json
import math
import re
from collections.abc import Iterator, Sequence
from functools import cache
from pathlib import Path
from typing import Any

from pydantic import BaseModel, ValidationError

from shambench.errors import DataError
from shambench.io import (
    LONG_DIGIT_RUN,
    MAX_DEPTH,
    NUMBER_SHAPES,
    iter_jsonl,
    iter_lines,
    json_line,
    json_type,
    model_values,
    parse_json_line,
    validation_message,
)
from shambench.memory import collector_paused
from shambench.schema import Example, Prediction

# Fields holding character ranges: `[start, end]`, `[start, end, label]` or an object with `start` and `end`.
RANGE_FIELDS = {
    Prediction: ("spans", "scores", "soft_spans"),
    Example: ("hallu_spans", "soft_spans", "steps"),
}
# Fields holding lists of integer labels, where a boolean or a float is a mistake.
INT_LIST_FIELDS = {Prediction: ("sentence_labels", "step_verdicts"), Example: ()}
RANGE_KEYS = {"start", "end", "label", "score", "prob"}


def allowed_keys(model: type[BaseModel]) -> list[str]:
    """The keys a record of `model` may have, in the documented order."""
    return list(model.model_fields)


@cache
def _field_names(model: type[BaseModel]) -> frozenset[str]:
    # Read once per model: pydantic's `model_fields` costs more than the rest of a line's key check.
    return frozenset(model.model_fields)


@cache
def _required(model: type[BaseModel]) -> tuple[str, ...]:
    return tuple(name for name, f in model.model_fields.items() if f.is_required())


def _is_int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool)


def _scan(value: Any) -> tuple[int, bool]:
    """Nesting depth of a JSON value (a scalar is 0; stops counting past `MAX_DEPTH`) and whether a NaN or
    infinite number occurs in it: one walk over its containers, without recursion."""
    deepest, non_finite, stack = 0, False, [(value, 0)]
    while stack:
        node, depth = stack.pop()
        children = node.values() if isinstance(node, dict) else node if isinstance(node, _SEQUENCES) else ()
        if children:
            deepest = max(deepest, depth + 1)
            if deepest > MAX_DEPTH:
                break
        for child in children:
            if isinstance(child, _CONTAINERS):
                stack.append((child, depth + 1))
            elif isinstance(child, float) and not math.isfinite(child):
                non_finite = True
    return deepest, non_finite


# Tuples, not `list | tuple` unions: a union written in the loop is a new object at each value, and isinstance
# checks a union more slowly (a journal line's prediction, of which bench_eval's eval checks 6,330: 83k -> 48.5k
# instructions).
_SEQUENCES = (list, tuple)
_CONTAINERS = (dict, list, tuple)


def _non_finite(value: Any, where: str = "") -> str:
    """The path of the first NaN or infinite number in a JSON value (which has one)."""
    stack = [(value, where)]
    while stack:
        node, path = stack.pop()
        if isinstance(node, float) and not math.isfinite(node):
            return path or "value"
        if isinstance(node, dict):
            stack.extend((v, f"{path}.{k}" if path else str(k)) for k, v in node.items())
        elif isinstance(node, _SEQUENCES):
            stack.extend((v, f"{path}.{i}" if path else str(i)) for i, v in enumerate(node))
    raise AssertionError("no NaN or infinite number in the value")


def _range_problem(field: str, i: int, item: Any) -> str | None:
    where = f"{field}.{i}"
    if isinstance(item, list):
        if len(item) not in (2, 3):
            return f"{where}: expected [start, end] or [start, end, label], got {len(item)} values"
        bounds = item[:2]
    elif isinstance(item, dict):
        unknown = sorted(set(item) - RANGE_KEYS)
        if unknown:
            return f"{where}: unknown key {unknown[0]!r} (a range has start, end and optionally label, score, prob)"
        bounds = [item.get("start"), item.get("end")]
    else:
        return f"{where}: expected [start, end] or an object with start and end, got {type(item).__name__}"
    for name, value in zip(("start", "end"), bounds):
        if not _is_int(value):
            return f"{where}: {name} must be an integer character offset, got {json.dumps(value)}"
    if bounds[0] < 0:
        return f"{where}: start must be a character offset of at least 0, got {bounds[0]}"
    return None


def may_hide_problems(raw: bytes, shapes: bytes, finite: bool = False) -> bool:
    """Whether a valid JSON line nests deeper than `MAX_DEPTH` or may hold an infinite number (only an exponent
    or a run of 19 or more digits overflows; NaN and Infinity are refused as the line is read). Only such lines
    need their values walked, which costs more than reading them. `shapes`: the line translated by
    `io.NUMBER_SHAPES`; `finite`: its value holds no infinite number (`io.json_line`), only its nesting is in
    doubt."""
    many_brackets = shapes.count(b"[") > MAX_DEPTH
    if not (many_brackets or (not finite and (b"0e" in shapes or LONG_DIGIT_RUN in shapes))):
        return False
    # Looked at again without its strings (ids and texts with digits, brackets of their own).
    bare = _JSON_STRING.sub(b"", raw)
    if not finite:
        bare_shapes = bare.translate(NUMBER_SHAPES)
        if b"0e" in bare_shapes or LONG_DIGIT_RUN in bare_shapes:
            return True
    return _nesting(bare) > MAX_DEPTH


# A JSON string (its escapes included), and the bytes that are not brackets.
_JSON_STRING = re.compile(rb'"[^"\\]*(?:\\.[^"\\]*)*"')
_NOT_BRACKETS = bytes(b for b in range(256) if b not in b"[]{}")
_ONE_KIND = bytes.maketrans(b"{}", b"[]")


def _nesting(bare: bytes) -> int:
    """How deep a valid JSON line without its strings nests arrays and objects, counted up to `MAX_DEPTH` + 1:
    its brackets, each pass removing the innermost pairs (in C, unlike a walk over the parsed values)."""
    brackets = bare.translate(_ONE_KIND, _NOT_BRACKETS)
    depth = 0
    while brackets and depth <= MAX_DEPTH:
        brackets = brackets.replace(b"[]", b"")
        depth += 1
    return depth


def record_problem(obj: Any, model: type[BaseModel], walk: bool = True) -> str | None:
    """What is wrong with a plain JSON value as a record of `model` (Prediction or Example), or None. `walk` false
    skips looking for deep nesting and non-finite numbers (for a line `may_hide_problems` clears)."""
    if not isinstance(obj, dict):
        return f"expected a JSON object, got {json_type(obj)}"
    depth, non_finite = _scan(obj) if walk else (0, False)
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    unknown = sorted(obj.keys() - _field_names(model))
    if unknown:
        return f"unknown key {unknown[0]!r} (allowed: {', '.join(allowed_keys(model))})"
    if not isinstance(obj.get("id"), str):
        return "expected a string id" if "id" in obj else "missing key 'id'"
    missing = [name for name in _required(model) if name not in obj]
    if missing:
        return f"missing key {missing[0]!r} (required: {', '.join(_required(model))})"
    if non_finite:
        # Found again, with its path, only when there is one: building paths for every value costs more.
        return f"{_non_finite(obj)}: expected a finite number, got NaN or infinity"
    for field in RANGE_FIELDS.get(model, ()):
        value = obj.get(field)
        if value is None:
            continue
        if not isinstance(value, list):
            return f"{field}: expected a list of ranges, got {json_type(value)}"
        for i, item in enumerate(value):
            problem = _range_problem(field, i, item)
            if problem:
                return problem
    for field in INT_LIST_FIELDS.get(model, ()):
        value = obj.get(field)
        if isinstance(value, list):
            wrong = [v for v in value if not _is_int(v)]
            if wrong:
                return f"{field}: expected integers, got {json.dumps(wrong[0])}"
    return None


def parse_record(obj: Any, model: type[BaseModel], drop: Sequence[str] = (), walk: bool = True) -> Any:
    """A checked record of `model` from a plain JSON value; ValueError says what was expected.

    The fields in `drop` are checked, then left out of the record (they take their defaults), so a caller that
    needs few fields never holds the others. `walk`: see `record_problem`."""
    problem = record_problem(obj, model, walk)
    if problem:
        raise ValueError(problem)
    for name in drop:
        obj.pop(name, None)
    try:
        return model.model_validate(obj)
    except ValidationError as err:
        raise ValueError(validation_message(err)) from None


def parse_line(line: bytes | str, model: type[BaseModel], drop: Sequence[str] = ()) -> Any:
    """A checked record of `model` from one JSONL line; ValueError says what was expected."""
    if isinstance(line, str):
        return parse_record(parse_json_line(line), model, drop)
    shapes = line.translate(NUMBER_SHAPES)
    value, finite = json_line(line, shapes)
    return parse_record(value, model, drop, may_hide_problems(line, shapes, finite))


def iter_records(path: str | Path, model: type[BaseModel], drop: Sequence[str] = ()) -> Iterator[tuple[int, Any]]:
    """Each record of a JSONL file with its line number, read and checked as it is reached (`drop`: see
    `parse_record`); DataError `FILE:LINE: what was expected` at the first bad line, and at a repeated id (naming
    the line that first gave it)."""
    first: dict[str, int] = {}
    for lineno, line in iter_lines(path, named=True):
        try:
            rec = parse_line(line, model, drop)
        except ValueError as err:
            raise DataError(f"{path}:{lineno}: {err}") from None
        if rec.id in first:
            raise DataError(f"{path}:{lineno}: id {rec.id!r} repeats line {first[rec.id]} (ids must be unique)")
        first[rec.id] = lineno
        yield lineno, rec


def read_records(path: str | Path, model: type[BaseModel], drop: Sequence[str] = ()) -> list[tuple[int, Any]]:
    """Every record of a JSONL file with its line number (see `iter_records`): a bad line fails before any
    record is used. The records outlive the reading and form no cycles: the cyclic collector is paused while they
    are made, since its full passes over every record made so far grew the time faster than the file (100,000
    examples: 3.3 s of CPU with it, 1.7 without; 10,000: 0.23 and 0.16), where the process lets the library pause it
    (`shambench.memory`: the command line)."""
    with collector_paused():
        return list(iter_records(path, model, drop))


def line_of_id(path: str | Path, record_id: str | None) -> int | None:
    """The line of a JSONL file whose record has that id (read again: only an error message needs it)."""
    try:
        for lineno, obj in iter_jsonl(path):
            if obj.get("id") == record_id:
                return lineno
    except DataError:  # not to be read twice (a FIFO named on the command line): the message goes without its line
        pass
    return None


def read_predictions(path: str | Path, drop: Sequence[str] = ()) -> list[tuple[int, Prediction]]:
    """The predictions of a PRED file with their line numbers (see `read_records`)."""
    return read_records(path, Prediction, drop)


def read_examples(path: str | Path, drop: Sequence[str] = ()) -> list[Example]:
    """The examples of an EXAMPLES file (see `read_records`): duplicate ids fail before anything runs."""
    return [ex for _, ex in read_records(path, Example, drop)]


def check_detector_prediction(pred: Any, example: Example | None, detector: str) -> Prediction:
    """A prediction a detector returned, checked by the same rules as a file line before it is journaled;
    DataError names the detector and the example id."""
    pid = getattr(pred, "id", None)
    where = f"detector {detector!r}, example {pid!r}"
    if not isinstance(pred, Prediction):
        raise DataError(f"detector {detector!r} returned {type(pred).__name__}, expected a Prediction")
    if example is None:
        raise DataError(f"{where}: a prediction for an id that was not asked for")
    try:
        checked = parse_record(model_values(pred, exclude_none=True), Prediction)
        if checked.error is None:
            checked.check_against(example)
    except ValueError as err:
        raise DataError(f"{where}: {err}") from None
    return pred
