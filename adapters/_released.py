"""Reading released source files into validated row models, with errors that name the file and the row."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

from shambench.errors import SourceError
from shambench.io import validation_message
from shambench.schema import Example

M = TypeVar("M", bound=BaseModel)


def source_file(root: Path, name: str, dataset: str, expected: str) -> Path:
    """The path of a released file; SourceError naming it and its expected content when it is missing."""
    path = root / name
    if not path.is_file():
        raise SourceError(
            f"{path}: file not found (expected {expected}; run `shambench data download {dataset}` or pass --data-dir)"
        )
    return path


def validated(model: type[M], obj: Any, where: str, expected: str) -> M:
    try:
        return model.model_validate(obj)
    except ValidationError as err:
        raise SourceError(f"{where}: {validation_message(err)} (expected {expected})") from None


def jsonl_rows(path: Path, model: type[M], expected: str) -> list[tuple[str, M]]:
    """`(where, row)` for each non-blank line of a JSON-lines file, `where` being `file:line`."""
    rows = []
    with path.open(encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            try:
                obj = json.loads(line)
            except json.JSONDecodeError as err:
                raise SourceError(f"{where}: not valid JSON ({err.msg}); expected {expected}") from None
            rows.append((where, validated(model, obj, where, expected)))
    return rows


def json_array_rows(path: Path, model: type[M], expected: str) -> list[tuple[str, M]]:
    """`(where, row)` for each record of a file holding one JSON array, `where` being `file record N` (0-based)."""
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except json.JSONDecodeError as err:
        raise SourceError(f"{path}: not valid JSON ({err.msg} at line {err.lineno}); expected {expected}") from None
    if not isinstance(data, list):
        raise SourceError(f"{path}: expected a JSON array of records ({expected}), got {type(data).__name__}")
    return [(f"{path} record {i}", validated(model, obj, f"{path} record {i}", expected)) for i, obj in enumerate(data)]


def example_at(where: str, **fields: Any) -> Example:
    """An `Example`, or SourceError naming the source row when its offsets do not fit the response."""
    try:
        return Example(**fields)
    except ValidationError as err:
        raise SourceError(f"{where}: {validation_message(err)}") from None


def parquet_rows(path: Path, model: type[M], expected: str) -> list[tuple[str, M]]:
    """`(where, row)` for each row of a Parquet file (a Hugging Face hub split), `where` being `file row N`."""
    import pyarrow.parquet as pq

    try:
        records = pq.read_table(path).to_pylist()
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise SourceError(f"{path}: not a readable Parquet file ({err}); expected {expected}") from None
    return [(f"{path} row {i}", validated(model, obj, f"{path} row {i}", expected)) for i, obj in enumerate(records)]
