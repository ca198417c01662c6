"""Reading released source files into validated row models, with errors that name the file and the row."""

from __future__ import annotations

import csv
import io
import re
from collections.abc import Iterator, Sequence
from functools import lru_cache
from pathlib import Path
from typing import Any, TypeVar

from pydantic import BaseModel, ValidationError

import shambench.fs as fs
from shambench.detection.locate import Placement
from shambench.errors import SourceError
from shambench.io import validation_message
from shambench.schema import Example, Span
from shambench.structured import MAX_DATA_BYTES, MAX_FIELD_CHARS, json_file, json_value, yaml_value

M = TypeVar("M", bound=BaseModel)
TOKEN = re.compile(r"\S+")
"""A whitespace token, the unit of token-labelled releases (Zhou et al., XSumFaith's majority)."""


def source_file(root: Path, name: str, dataset: str, expected: str) -> Path:
    """The path of a released file; SourceError naming it and its expected content when it is missing or not a
    file the filesystem gate reads (`fs.irregularity`: a FIFO is said to be one, not missing)."""
    path = root / name
    try:
        problem = fs.irregularity(path)
    except FileNotFoundError:
        problem = "file not found"
    if problem:
        raise SourceError(
            f"{path}: {problem} (expected {expected}; run `shambench data download {dataset}` or pass --data-dir)"
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
    with io.TextIOWrapper(fs.open_input(path), encoding="utf-8") as fh:
        for lineno, line in enumerate(fh, start=1):
            if not line.strip():
                continue
            where = f"{path}:{lineno}"
            # pandas writes NaN for a missing value in some released files (FELM's responses): the adapter counts them
            obj = json_value(line, str(path), expected, error=SourceError, first_line=lineno, allow_nan=True)
            rows.append((where, validated(model, obj, where, expected)))
    return rows


def json_array_rows(path: Path, model: type[M], expected: str) -> list[tuple[str, M]]:
    """`(where, row)` for each record of a file holding one JSON array, `where` being `file record N` (0-based)."""
    data = json_file(path, expected, limit=MAX_DATA_BYTES, error=SourceError)
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
        with fs.open_input(path) as fh:
            records = pq.read_table(fh).to_pylist()
    except (OSError, ValueError) as err:  # pyarrow's ArrowInvalid is a ValueError
        raise SourceError(f"{path}: not a readable Parquet file ({err}); expected {expected}") from None
    return [(f"{path} row {i}", validated(model, obj, f"{path} row {i}", expected)) for i, obj in enumerate(records)]


DATA_SUFFIXES = (".parquet", ".json", ".jsonl")


def data_rows(path: Path, model: type[M], expected: str) -> list[tuple[str, M]]:
    """The rows of a released data file in the format the hub holds it in: Parquet, a JSON array, or JSON lines
    (which the hub also names `.json`)."""
    if path.suffix == ".parquet":
        return parquet_rows(path, model, expected)
    with fs.open_input(path) as fh:
        array = fh.read(4096).lstrip().startswith(b"[")
    return json_array_rows(path, model, expected) if array else jsonl_rows(path, model, expected)


def card_configs(root: Path) -> list[dict[str, Any]]:
    """The `configs` of a hub dataset card (`README.md` front matter) in a source folder; empty without one."""

    card = root / "README.md"
    if not card.is_file():
        return []
    text = fs.read_input(card).decode("utf-8")
    if not text.startswith("---"):
        return []
    head = text[3:].split("\n---", 1)[0]
    meta = yaml_value(head, str(card), "the dataset card's front matter as YAML", first_line=2, error=SourceError) or {}
    configs = meta.get("configs") if isinstance(meta, dict) else None
    return [c for c in configs if isinstance(c, dict)] if isinstance(configs, list) else []


def _card_patterns(config: dict[str, Any], split: str) -> list[str] | None:
    files = config.get("data_files")
    if isinstance(files, str | list) and not (isinstance(files, list) and files and isinstance(files[0], dict)):
        return None  # one unnamed split: not a way to tell test from train
    for entry in files if isinstance(files, list) else []:
        if entry.get("split") == split:
            path = entry.get("path")
            return [path] if isinstance(path, str) else [p for p in path or [] if isinstance(p, str)]
    return None


def split_files(root: Path, split: str, config: str | None = None) -> list[Path]:
    """The data files of one split (of one config) of a hub dataset downloaded into `root`: as the card's
    `configs` name them (`data_files` patterns), else by the hub's naming convention, files under `<config>/` (or
    anywhere, without a config) whose name starts with the split (`test-00000-of-00001.parquet`, `test.json`)."""
    for entry in card_configs(root):
        if config is None or entry.get("config_name") == config:
            patterns = _card_patterns(entry, split)
            if patterns is not None:
                return sorted({p for pattern in patterns for p in root.glob(pattern) if p.suffix in DATA_SUFFIXES})
            if config is not None:
                break
    base = root / config if config else root
    return sorted(
        p
        for p in base.glob("**/*")
        if p.is_file() and p.suffix in DATA_SUFFIXES and re.match(rf"{re.escape(split)}[-._]", p.name)
    )


def csv_rows(
    path: Path, columns: Sequence[str], expected: str, delimiter: str = ","
) -> Iterator[tuple[str, dict[str, str]]]:
    """`(file:line, row)` for each record of a delimited file with a header naming at least `columns`; SourceError
    naming the file (and the line) for a header that lacks one or a record with too few or too many fields."""
    # Released responses and label lists can exceed csv's default 128 KiB field limit; a field is still bounded.
    csv.field_size_limit(MAX_FIELD_CHARS)
    name = {"\t": "tab", ",": "comma"}.get(delimiter, repr(delimiter))
    with io.TextIOWrapper(fs.open_input(path), encoding="utf-8", newline="") as fh:
        reader = csv.DictReader(fh, delimiter=delimiter)
        missing = [c for c in columns if c not in (reader.fieldnames or [])]
        if missing:
            raise SourceError(f"{path}: header lacks column(s) {', '.join(missing)}; expected {expected}")
        for row in reader:
            where = f"{path}:{reader.line_num}"
            # DictReader fills a short row with None and files a long row's surplus under the key None.
            if None in row or None in row.values():
                raise SourceError(f"{where}: expected {len(reader.fieldnames or [])} {name}-separated fields")
            yield where, row


def text_lines(root: Path, name: str, dataset: str) -> list[str]:
    """The lines of a released UTF-8 text file (one example per line) without their newlines."""
    path = source_file(root, name, dataset, "a UTF-8 text file with one example per line")
    try:
        text = fs.read_input(path).decode("utf-8")
    except UnicodeDecodeError as err:
        raise SourceError(f"{path}: not UTF-8 text ({err.reason} at byte {err.start})") from None
    # Split on "\n" only: str.splitlines would also break at form feeds and Unicode separators inside a line.
    lines = text.split("\n")
    return lines[:-1] if lines[-1] == "" else lines


@lru_cache(maxsize=64)
def token_bounds(text: str) -> tuple[tuple[int, ...], tuple[int, ...]]:
    """The starts and the ends of the whitespace tokens of `text`. Kept for the last few texts: a summary's tokens
    are asked for again for each of its annotators' readings (Zhou's and XSumFaith's majority of the others)."""
    bounds = [m.span() for m in TOKEN.finditer(text)]
    return tuple(start for start, _ in bounds), tuple(end for _, end in bounds)


def spans_of_labels(target: str, labels: list[str]) -> list[Span]:
    """Character spans of `target` covering each run of consecutive whitespace tokens labelled `1` (the spaces
    inside a run belong to it)."""
    spans: list[Span] = []
    run_start: int | None = None
    run_end = 0
    for start, end, label in zip(*token_bounds(target), labels):
        if label == "1":
            if run_start is None:
                run_start = start
            run_end = end
        elif run_start is not None:
            spans.append(Span(start=run_start, end=run_end))
            run_start = None
    if run_start is not None:
        spans.append(Span(start=run_start, end=run_end))
    return spans


def placement_outcomes(text: str, placements: Sequence[Placement], not_found: str, ambiguous: str) -> list[str]:
    """One `LoadResult.spans` key per placement of a quoted gold span on `text`: `placed: <method>`,
    `ambiguous: <ambiguous>` (its text occurs more than once, ignoring case and whitespace, so the cursor chose
    the occurrence) or `unplaced: <not_found>`."""
    folded = _folded(text)
    out = []
    for p in placements:
        if not p.placed:
            out.append(f"unplaced: {not_found}")
        elif p.method != "fuzzy" and folded.count(_folded(text[p.start : p.end])) > 1:
            out.append(f"ambiguous: {ambiguous}")
        else:
            out.append(f"placed: {p.method}")
    return out


def _folded(text: str) -> str:
    """Lower-cased with whitespace runs collapsed: what the `normalized` placement compares."""
    return " ".join(text.lower().split())
