"""A sweep file and its grid expanded into cells: which detector configuration runs on which data, and where each
cell's run directory goes."""

from __future__ import annotations

import hashlib
import itertools
import json
import math
import re
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError, field_validator, model_validator

from shambench.data.adapter import adapters, resolve_data_dir
from shambench.data.benchmark import default_datasets, split_names
from shambench.detection.detector import detectors
from shambench.errors import DataError
from shambench.registry import checked_params, factory_parameters
from shambench.runs.files import JOURNAL, RESULTS
from shambench.runs.spec import CREDENTIAL_ROUTING, RunSpec, Selection
from shambench.schema import Model, Name
from shambench.selection_fields import Reading
from shambench.structured import yaml_file

SUMMARY = "sweep.json"
MAX_CELLS = 10_000
"""Most cells one sweep plans: every cell is a run directory, so a grid past this is a mistake or several sweeps."""


class DetectorGrid(Model):
    """One detector entry of a sweep file: fixed parameters and parameters swept over (one cell per combination)."""

    model_config = ConfigDict(extra="forbid")

    detector: Name
    """Detector name, or NAME:ARG (see `shambench list detectors`)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Parameters given to every cell of this detector."""
    grid: dict[str, list[Any]] = Field(default_factory=dict)
    """Parameters to sweep: one cell per combination of their values."""
    shard_size: int | None = Field(default=None, ge=1)
    """Examples per worker task; set it for local models so one cell spreads over many workers (None: one task)."""
    batch: bool = False
    """Send the cells' requests through OpenAI's Batch API (prompted detectors), as `shambench eval --batch`:
    the driver submits each cell's batch, waits for it and journals its answers (no worker involved)."""

    @model_validator(mode="before")
    @classmethod
    def _from_name(cls, value: Any) -> Any:
        return {"detector": value} if isinstance(value, str) else value

    @field_validator("params", "grid")
    @classmethod
    def _no_routing(cls, value: dict[str, Any]) -> dict[str, Any]:
        # A file never chooses where the API key goes, nor which environment variable's secret is sent.
        for key in CREDENTIAL_ROUTING:
            if key in value:
                flag = f"--{key.replace('_', '-')}"
                raise ValueError(
                    f"a sweep file may not set {key}: the API key goes only where the command line says; pass "
                    f"{flag} to `shambench sweep` (or use the preset's)"
                )
        return value

    def size(self) -> int:
        """How many cells the entry makes on one data item (counted, not expanded)."""
        return math.prod(len(values) for values in self.grid.values())

    def combinations(self) -> list[dict[str, Any]]:
        """The parameters of each cell: the fixed ones plus one combination of the grid's values."""
        keys = sorted(self.grid)
        return [
            {**self.params, **dict(zip(keys, values))} for values in itertools.product(*(self.grid[k] for k in keys))
        ]


class SweepSpec(Reading):
    """A sweep file: which detectors run on which data (its `split`, `data_dir` and `limit` are every cell's, the
    folder relative to the sweep file's), and where their run directories go."""

    detectors: list[DetectorGrid] = Field(min_length=1)
    """Detector entries: a name, or a mapping with `detector`, `params`, `grid` and `shard_size`."""
    datasets: list[Name] | None = None
    """Dataset names, one cell per dataset; left out (with no `examples`): every available SHAM-Bench dataset."""
    examples: list[str] = Field(default_factory=list)
    """EXAMPLES JSONL files, one cell per file (relative paths start at the sweep file's folder)."""
    runs: str | None = None
    """Folder of the cells' run directories (default: `runs/<sweep file name>` beside the sweep file)."""
    retries: int = Field(default=2, ge=0)
    """How many more times a failed worker task is sent before its cell is reported as failed."""
    bootstrap: int = Field(default=1000, ge=10)
    """Bootstrap resamples for the 95% confidence intervals."""
    seed: int = 0
    """Seed of the bootstrap."""
    leaderboard: bool = True
    """Build the leaderboard of the runs folder when the sweep ends."""

    @field_validator("datasets", mode="before")
    @classmethod
    def _names(cls, value: Any) -> list[str] | None:
        return split_names(value) if isinstance(value, str | list) else value

    @field_validator("examples", mode="before")
    @classmethod
    def _files(cls, value: Any) -> list[str]:
        return [value] if isinstance(value, str) else value


def read_spec(path: str | Path) -> SweepSpec:
    """The sweep file at `path`; DataError names the file and the field that is wrong."""
    path = Path(path)
    raw = yaml_file(path, "a sweep file: a YAML mapping with at least `detectors:`", named=True)
    if not isinstance(raw, dict):
        raise DataError(f"{path}: expected a mapping with at least `detectors:`")
    try:
        return SweepSpec.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "sweep"
        raise DataError(f"{path}: {where}: {first['msg'].removeprefix('Value error, ')}") from None


# ---------------------------------------------------------------------------------------------------- the plan


class DataItem(Model):
    """The data of a cell: one dataset or one EXAMPLES file, read as the sweep file says."""

    label: str
    """Folder name of the data in the runs folder (what tells two data items apart)."""
    selection: Selection
    """Its examples: one dataset (its split, data directory and limit the sweep file's), or one EXAMPLES file (its
    absolute path, and the limit)."""

    @property
    def dataset(self) -> str | None:
        """The dataset's name, when the examples come from an adapter."""
        return self.selection.datasets[0] if self.selection.datasets else None


class Cell(Model):
    """One detector configuration on one data item: one run directory, and the run it holds."""

    spec: RunSpec
    """The cell's run: its detector, the sweep file's parameters, the command line's endpoint (for a detector that
    takes one, never from the file), its data, scoring and run directory."""
    data: DataItem
    """The examples the cell runs on."""
    shard_size: int | None = None
    """Examples per worker task (None: the whole cell in one task)."""

    @property
    def detector(self) -> str:
        """Detector spec (NAME or NAME:ARG)."""
        return self.spec.detector or ""

    @property
    def params(self) -> dict[str, Any]:
        """Parameters from the sweep file (the run config records the detector's full parameters)."""
        return self.spec.params

    @property
    def run_dir(self) -> Path:
        """The cell's run directory."""
        assert self.spec.execution.run_dir is not None  # every cell's spec names its directory
        return self.spec.execution.run_dir

    @property
    def name(self) -> str:
        """`data/detector-label`, as reports show it."""
        return f"{self.data.label}/{self.run_dir.name}"


class SweepPlan(Model):
    """A sweep file resolved: every cell with its run directory, and the settings the driver uses."""

    spec: SweepSpec
    """The sweep file as read."""
    runs: Path
    """Folder of the run directories and of sweep.json."""
    data_dir: Path
    """Folder holding the corpora."""
    cells: list[Cell]
    """Data items outer, detectors inner, in the sweep file's order."""

    def state_of(self, cell: Cell) -> str:
        """`complete` (results written), `partial` (a journal exists) or `new`, from the files alone."""
        if (cell.run_dir / RESULTS).is_file():
            return "complete"
        return "partial" if (cell.run_dir / JOURNAL).is_file() else "new"


def cell_label(detector: str, params: dict[str, Any]) -> str:
    """A readable folder name for a detector and its sweep parameters (hashed when long)."""
    text = detector + "".join(f"_{k}={json.dumps(v, sort_keys=True)}" for k, v in sorted(params.items()))
    slug = re.sub(r"[^A-Za-z0-9_.=-]+", "-", text).strip("-") or "detector"
    if len(slug) > 80:
        slug = f"{slug[:71]}-{hashlib.sha256(text.encode()).hexdigest()[:8]}"
    return slug


def data_items(spec: SweepSpec, base: Path, root: Path) -> list[DataItem]:
    """The data axis of the grid: each named (or available) dataset, then each EXAMPLES file."""
    names = spec.datasets if spec.datasets is not None or spec.examples else default_datasets(root, spec.split)
    for name in names or []:
        adapters.get(name)  # an unknown name fails here, with a suggestion, before anything runs
    read = {"split": spec.split, "data_dir": root, "limit": spec.limit}
    items = [
        DataItem(label=name, selection=Selection.model_validate({"datasets": [name], **read})) for name in names or []
    ]
    for file in spec.examples:
        path = (base / file).resolve()
        label = re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem)
        items.append(
            DataItem(label=label, selection=Selection.model_validate({"examples_file": path, "limit": spec.limit}))
        )
    if not items:
        raise DataError(f"no datasets found under {root} and no `examples:` given (pass --data-dir)")
    return items


def check_parameters(entry: DetectorGrid) -> None:
    """ParameterError (a usage error) when the entry's detector takes no parameter named in the file, or not of a
    value's type; each value is checked once, however many cells it appears in."""
    name = entry.detector.partition(":")[0]
    factory = detectors.get(name).factory
    checked_params("detector", name, factory, entry.params)
    for key, values in entry.grid.items():
        for value in values:
            checked_params("detector", name, factory, {key: value})


def takes_endpoint(spec: str) -> bool:
    """Whether a detector's factory takes `base_url` (declared, or handed on with its other parameters)."""
    declared, more = factory_parameters(detectors.get(spec.partition(":")[0]).factory)
    return more or any(p.name == "base_url" for p in declared)


def cell_spec(
    sweep: SweepSpec,
    entry: DetectorGrid,
    params: dict[str, Any],
    item: DataItem,
    runs_dir: Path,
    endpoint: dict[str, str],
) -> RunSpec:
    """The run of one cell of the grid: `entry`'s detector with `params` on `item`, in its folder of `runs_dir`."""
    spec = RunSpec.of(
        detector=entry.detector,
        params=params,
        **(endpoint if takes_endpoint(entry.detector) else {}),
        n_resamples=sweep.bootstrap,
        seed=sweep.seed,
        run_dir=runs_dir / item.label / cell_label(entry.detector, params),
        batch=entry.batch,
    )
    return spec.model_copy(update={"selection": item.selection})


def plan_sweep(
    path: str | Path,
    runs: str | Path | None = None,
    data_dir: str | Path | None = None,
    retries: int | None = None,
    endpoint: dict[str, str] | None = None,
) -> SweepPlan:
    """The cells of a sweep file; `runs`, `data_dir` and `retries` override the file's values, and `endpoint`
    (`base_url`, `api_key_env`: the command line's) goes to every detector that takes them."""
    path = Path(path)
    spec = read_spec(path)
    if retries is not None:
        spec.retries = retries
    base = path.resolve().parent
    root = Path(data_dir) if data_dir else resolve_data_dir((base / spec.data_dir) if spec.data_dir else None)
    runs_dir = Path(runs) if runs else base / (spec.runs or f"runs/{path.stem}")
    for entry in spec.detectors:
        detectors.get(entry.detector.partition(":")[0])  # a typo fails now, with a suggestion
    items = data_items(spec, base, root)
    n_cells = len(items) * sum(entry.size() for entry in spec.detectors)
    if n_cells > MAX_CELLS:
        raise DataError(
            f"{path}: the grid makes {n_cells:,} cells, more than the {MAX_CELLS:,} one sweep runs; split it into "
            "several sweep files (or sweep fewer values)"
        )
    for entry in spec.detectors:
        check_parameters(entry)  # a parameter the detector does not take, or of the wrong type: a usage error
    cells = [
        Cell(
            spec=cell_spec(spec, entry, params, item, runs_dir, endpoint or {}),
            data=item,
            shard_size=entry.shard_size,
        )
        for item in items
        for entry in spec.detectors
        for params in entry.combinations()
    ]
    seen: dict[Path, Cell] = {}
    for cell in cells:
        if cell.run_dir in seen:
            raise DataError(f"{path}: two cells would share the run directory {cell.run_dir}")
        seen[cell.run_dir] = cell
    return SweepPlan(spec=spec, runs=runs_dir, data_dir=root, cells=cells)
