"""Prediction files in formats others released (a shared task's submissions), read into `Prediction`s.

`shambench score --predictions FILE` reads shambench's own PRED lines unless the file is in a registered format:
named with `--predictions-format NAME`, or recognised by the keys of its first line. A format lives with the source
whose files it reads (the Mu-SHROOM submission format beside the Mu-SHROOM adapter) and registers itself with
`@predictions_format(NAME)`; the core reaches it only through this registry.
"""

from __future__ import annotations

import os
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from shambench.io import iter_lines, parse_json_line
from shambench.registry import Registry
from shambench.schema import Model, Name, Prediction


class PredictionsRead(Model):
    """What a format reader made of a file: the predictions, and what it left out and why."""

    model_config = ConfigDict(arbitrary_types_allowed=True)

    predictions: list[tuple[int, Prediction]]
    """Each prediction (ids already those of shambench's examples) with the file line it came from."""
    skipped: dict[str, int] = Field(default_factory=dict)
    """Ranges left out, by reason, as the format's own scorer leaves them out (e.g. empty ranges)."""
    datasets: list[Name] = Field(default_factory=list)
    """The datasets the file's ids belong to: only their examples are scored."""
    conventions: dict[str, str] = Field(default_factory=dict)
    """How the file was read, recorded in results.json `conventions`."""


class PredictionsFormat:
    """Base class of released prediction formats: subclasses set `name` and implement `recognises` and `read`."""

    name: str = ""
    """The value of `--predictions-format`."""
    source: str = ""
    """The dataset (adapter name) whose examples the file's ids name: scored when no data is selected."""

    def recognises(self, first: dict[str, Any]) -> bool:
        """Whether a file whose first line is this object is in this format."""
        raise NotImplementedError

    def read(self, path: Path, exact_floats: bool = False) -> PredictionsRead:
        """The predictions of a file; DataError `FILE:LINE: what was expected` at the first bad line.
        `exact_floats`: read numbers correctly rounded even where the format's own scorer did not."""
        raise NotImplementedError


formats: Registry[PredictionsFormat] = Registry("format", "shambench.formats", "shambench.adapters")
predictions_format = formats.register
NATIVE = "shambench"
"""`--predictions-format` of shambench's own PRED lines (the default when no registered format recognises a file)."""


def first_object(path: str | Path) -> dict[str, Any] | None:
    """The first non-blank line of a JSONL file as an object, or None when it is not one (the file's own reader
    then reports it). A pipe (`--predictions <(cmd)`) is not looked into: it can be read only once, by the reader
    of shambench's own format or of the one named."""
    if not os.path.isfile(path):
        return None
    for _, line in iter_lines(path):
        try:
            obj = parse_json_line(line)
        except ValueError:
            return None
        return obj if isinstance(obj, dict) else None
    return None


def format_of(path: str | Path, name: str | None) -> PredictionsFormat | None:
    """The registered format named `name`, else the one that recognises the file's first line, else None
    (shambench's own PRED format)."""
    if name == NATIVE:
        return None
    if name:
        return formats.create(name)
    first = first_object(path)
    if first is None:
        return None
    for entry in formats.entries():
        fmt = entry.factory()
        if fmt.recognises(first):
            return fmt
    return None
