"""The fields that say which examples a run reads, declared once: the run's spec (`shambench.runs.spec.Selection`),
its config.json (`shambench.runs.rundir.RunConfig`) and its results.json (`shambench.scoring.results.RunInfo`)
inherit them from here, so each has one type, one default and one docstring. They live below scoring because
results.json's record of a run is scoring's; `Flag` and `Section` live here because these fields use them.

Each class is what one record holds: `Reading` (a sweep file's, for all its cells), `Recorded` (results.json's
`run`), `Resolved` (config.json: a selection as it was resolved, a suite expanded into its datasets); the run's
spec adds the suite asked for.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Annotated, Any, TypedDict

from pydantic import ConfigDict, Field

from shambench.documented import DOCUMENTED
from shambench.schema import Model, Name


@dataclass(frozen=True)
class Flag:
    """How a field is given on the command line, where its name with dashes (`--max-cost`) is not all."""

    name: str | None = None
    """The option's flag, when not the field's name with dashes (e.g. `--bootstrap` for `n_resamples`)."""
    short: str | None = None
    """A one-letter alias (e.g. `-d`)."""
    metavar: str | None = None
    """What the help shows for the value (e.g. `NAMES`)."""
    inverse: bool = False
    """A boolean whose flag turns it off (`--keep-going` for `fail_fast`): the docstring says what the flag does."""
    kind: str | None = None
    """How the value is read when not by its type: `dir`, `file`, `pairs` (repeatable KEY=VALUE), `duration`
    (90m, 26h, 3600s), `base_url` (refused with credentials) or `suite` (one the registered sources declare)."""
    help: str | None = None
    """The option's help, where the field's docstring describes the Python value (an inverse flag's)."""
    option: bool = True
    """False: no option of its own (`--resume RUN_DIR` sets `resume` and `run_dir`)."""


class Section(Model):
    """A part of a run's description; fields given explicitly are in `model_fields_set`. Its fields' docstrings
    are read when needed (`shambench.documented`): by its JSON Schema and by the options the CLI makes of it."""

    model_config = DOCUMENTED | ConfigDict(extra="forbid")


class Limited(Section):
    """How many examples of each partition a run takes."""

    limit: int | None = Field(default=None, ge=1)
    """Use only the first N examples of each partition."""


class Reading(Limited):
    """How the sources are read: which split, from where, and how many examples of each partition (a selection's,
    and a sweep file's for all its cells)."""

    split: Name = "test"
    """Split: test, or dev (the validation set)."""
    data_dir: Annotated[Path | None, Flag(kind="dir")] = None
    """Folder holding the corpora (default: $SHAMBENCH_DATA_DIR, else the user cache directory)."""


class Recorded(Limited):
    """What results.json records of a run's selection (beside its split, which a bare predictions file lacks)."""

    datasets: Annotated[list[Name] | None, Flag(short="-d", metavar="NAMES")] = None
    """Comma-separated dataset names (see `shambench list datasets`); default: every SHAM-Bench source present."""
    examples_file: Annotated[Path | None, Flag(name="--examples", kind="file")] = None
    """An EXAMPLES JSONL file instead of `datasets` (one unified example per line)."""
    context: Annotated[str | None, Flag(metavar="PROVIDER")] = None
    """Evidence for open-domain examples from a context provider, e.g. file:EVIDENCE.jsonl or wikipedia (default:
    each source's own context, empty for open-domain sets)."""


class Resolved(Recorded, Reading):
    """A selection as a run resolved it (a suite expanded into its datasets): what config.json records and a
    run's examples are re-created from."""

    context_params: Annotated[dict[str, Any], Flag(name="--context-param", kind="pairs")] = Field(default_factory=dict)
    """Context provider parameter (repeatable), e.g. preset=qwen3-4b for `context` llm."""


class SelectionOptions(TypedDict, total=False):
    """The selection's fields as keywords (see their docstrings above; `suite` in `shambench.runs.spec.Selection`),
    but `datasets`, which the functions taking them take first."""

    examples_file: str | Path
    split: str
    data_dir: str | Path
    limit: int
    context: str
    context_params: dict[str, Any]
    suite: str


class DatasetsOption(TypedDict, total=False):
    """`datasets` as a keyword, for the functions that do not take it first (`evaluate()`)."""

    datasets: str | Sequence[str]
