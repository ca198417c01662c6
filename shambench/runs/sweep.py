"""Sweeps: a grid of detectors (with parameters) × datasets, each cell an ordinary run directory.

The driver (the process running `shambench sweep`) plans the cells and sends the computing to a backend: worker
processes on this machine (`LocalBackend`) or a Dask distributed cluster (`DaskBackend`). The driver loads each
dataset once, has the workers segment its responses (each text once in the whole sweep) and shares the examples
with their segmentations, so workers need neither the data directory nor a second tokenisation. Worker tasks
return values only: the journal lines of a shard of a cell's examples, or a cell's scores from its journal text.
Every file (config.json, predictions.jsonl, results.json, sweep.json) is written by the driver alone, so two
workers never write the same file, and a worker that dies loses only the task it was running, which is sent
again (at most `retries` more times; after that the cell is reported as failed and its journal keeps what did
arrive).

A cell whose results.json exists and whose journal holds a successful prediction for every example is skipped;
any other cell resumes as `shambench eval --resume` does: only examples without a successful prediction run.
"""

from __future__ import annotations

import concurrent.futures as cf
import hashlib
import itertools
import json
import math
import pickle
import re
import threading
from collections import OrderedDict
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

import yaml
from pydantic import BaseModel, ConfigDict, Field, ValidationError, field_validator, model_validator

from shambench.data.adapter import adapters, resolve_data_dir
from shambench.data.benchmark import default_datasets, split_names
from shambench.detection.detector import Detector, Monitor, create_detector, detectors
from shambench.errors import CellError, DataError, ParameterError
from shambench.io import Journal, model_line, read_regular, write_json
from shambench.provenance import now_iso
from shambench.records import check_detector_prediction
from shambench.registry import checked_params, factory_parameters
from shambench.runs.evaluate import CREDENTIAL_ROUTING, run_differences
from shambench.runs.files import CONFIG, JOURNAL, RESULTS
from shambench.runs.rundir import RunConfig, detector_config, examples_hash, load_config, pending, run_lock
from shambench.runs.scoring import score_predictions, write_scores
from shambench.runs.selection import select_examples
from shambench.schema import Example
from shambench.scoring.results import ExampleScores, Results
from shambench.scoring.text import Segmentation, language_of, remember, segment_mixed

SUMMARY = "sweep.json"
MAX_CELLS = 10_000
"""Most cells one sweep plans: every cell is a run directory, so a grid past this is a mistake or several sweeps."""

# ---------------------------------------------------------------------------------------------- the sweep file


class DetectorGrid(BaseModel):
    """One detector entry of a sweep file: fixed parameters and parameters swept over (one cell per combination)."""

    model_config = ConfigDict(extra="forbid")

    detector: str
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


class SweepSpec(BaseModel):
    """A sweep file: which detectors run on which data, and where their run directories go."""

    model_config = ConfigDict(extra="forbid")

    detectors: list[DetectorGrid] = Field(min_length=1)
    """Detector entries: a name, or a mapping with `detector`, `params`, `grid` and `shard_size`."""
    datasets: list[str] | None = None
    """Dataset names, one cell per dataset; left out (with no `examples`): every available SHAM-Bench dataset."""
    examples: list[str] = Field(default_factory=list)
    """EXAMPLES JSONL files, one cell per file (relative paths start at the sweep file's folder)."""
    split: str = "test"
    """Split of the datasets."""
    data_dir: str | None = None
    """Folder holding the corpora (default: $SHAMBENCH_DATA_DIR, else the user cache directory)."""
    limit: int | None = Field(default=None, ge=1)
    """Use only the first N examples of each partition."""
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
    try:
        raw = yaml.safe_load(path.read_text(encoding="utf-8"))
    except OSError as err:
        raise DataError(f"{path}: cannot read ({err.strerror})") from None
    except yaml.YAMLError as err:
        raise DataError(f"{path}: not valid YAML ({err})") from None
    if not isinstance(raw, dict):
        raise DataError(f"{path}: expected a mapping with at least `detectors:`")
    try:
        return SweepSpec.model_validate(raw)
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "sweep"
        raise DataError(f"{path}: {where}: {first['msg'].removeprefix('Value error, ')}") from None


# ---------------------------------------------------------------------------------------------------- the plan


class DataItem(BaseModel):
    """The data of a cell: one dataset or one EXAMPLES file."""

    model_config = ConfigDict(frozen=True)

    label: str
    """Folder name of the data in the runs folder."""
    dataset: str | None = None
    """Dataset name, when the examples come from an adapter."""
    examples_file: str | None = None
    """Absolute path of an EXAMPLES JSONL file, when they come from one."""


class Cell(BaseModel):
    """One detector configuration on one data item: one run directory."""

    detector: str
    """Detector spec (NAME or NAME:ARG)."""
    params: dict[str, Any]
    """Parameters from the sweep file (the run config records the detector's full parameters)."""
    data: DataItem
    """The examples the cell runs on."""
    run_dir: Path
    """The cell's run directory."""
    shard_size: int | None = None
    """Examples per worker task (None: the whole cell in one task)."""
    batch: bool = False
    """Run by OpenAI's Batch API on the driver instead of on workers."""
    endpoint: dict[str, str] = Field(default_factory=dict)
    """`base_url` / `api_key_env` from the command line, for a detector that takes them (never from the file)."""

    @property
    def detector_params(self) -> dict[str, Any]:
        """What the cell's detector is created with: the file's parameters and the command line's endpoint."""
        return {**self.params, **self.endpoint}

    @property
    def name(self) -> str:
        """`data/detector-label`, as reports show it."""
        return f"{self.data.label}/{self.run_dir.name}"


class SweepPlan(BaseModel):
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
    items = [DataItem(label=name, dataset=name) for name in names or []]
    for file in spec.examples:
        path = (base / file).resolve()
        items.append(DataItem(label=re.sub(r"[^A-Za-z0-9_.-]+", "-", path.stem), examples_file=str(path)))
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
            detector=entry.detector,
            params=params,
            data=item,
            run_dir=runs_dir / item.label / cell_label(entry.detector, params),
            shard_size=entry.shard_size,
            batch=entry.batch,
            endpoint=endpoint if endpoint and takes_endpoint(entry.detector) else {},
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


# ------------------------------------------------------------------------------------------ worker-side tasks


class ShardOutput(BaseModel):
    """What a worker returns for a shard: its journal lines and what the detector said about itself."""

    family: str
    """Detector family."""
    params: dict[str, Any]
    """The detector's full parameters (defaults included), for the run config."""
    ids: list[str]
    """The example id of each line."""
    lines: list[str]
    """One journal line (`model_line` of a `Prediction`) per example: serialised here, on the worker, so the
    driver only appends text (building hundreds of thousands of span objects there would make it the bottleneck)."""
    failed: int = 0
    """Predictions that carry a detector error."""
    counters: dict[str, float] = Field(default_factory=dict)
    """Counters the detector reported (retries, cache hits, tokens, ...)."""


class Tally(Monitor):
    """Keeps a detector's counters on the worker, to send back with the predictions."""

    def __init__(self) -> None:
        self.counts: dict[str, float] = {}

    def count(self, key: str, n: float = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n


# A worker keeps its last few detectors, so a local model is loaded once per worker, not once per shard.
_KEPT_DETECTORS = 4
_detectors: OrderedDict[str, Detector] = OrderedDict()
_detectors_lock = threading.Lock()


def kept_detector(spec: str, params: dict[str, Any]) -> Detector:
    """The worker's detector for `spec` with `params`, created on first use."""
    key = json.dumps([spec, params], sort_keys=True, default=str)
    with _detectors_lock:
        det = _detectors.pop(key, None) or create_detector(spec, **params)
        _detectors[key] = det
        while len(_detectors) > _KEPT_DETECTORS:
            _detectors.popitem(last=False)[1].close()
    return det


# A worker keeps the examples of its last few datasets, decoded, with their segmentations in the text cache.
_KEPT_DATA = 4
_data: OrderedDict[str, list[Example]] = OrderedDict()
_data_lock = threading.Lock()


def shared_examples(key: str, blob: bytes) -> list[Example]:
    """The examples a driver shared as `blob` (see `share_data`), decoded once per worker."""
    with _data_lock:
        if key in _data:
            _data.move_to_end(key)
            return _data[key]
    examples, keys, segmentations = pickle.loads(blob)
    for lang in {lang for lang, _ in keys}:
        mine = [(t, seg) for (k, t), seg in zip(keys, segmentations) if k == lang]
        remember([t for t, _ in mine], [seg for _, seg in mine], lang)
    with _data_lock:
        _data[key] = examples
        while len(_data) > _KEPT_DATA:
            _data.popitem(last=False)
    return examples


def predict_shard(spec: str, params: dict[str, Any], key: str, blob: bytes, indices: list[int]) -> ShardOutput:
    """Worker task: the detector's predictions for the shared examples at `indices`."""
    examples = shared_examples(key, blob)
    det = kept_detector(spec, params)
    tally = Tally()
    asked: dict[str | None, Example] = {examples[i].id: examples[i] for i in indices}  # see run_predictions
    predictions = [
        check_detector_prediction(p, asked.get(getattr(p, "id", None)), spec)
        for p in det.predict(list(asked.values()), tally)
    ]
    return ShardOutput(
        family=det.family,
        params=det.params(),
        ids=[p.id for p in predictions],
        lines=[model_line(p) for p in predictions],
        failed=sum(p.error is not None for p in predictions),
        counters=tally.counts,
    )


def score_shared(
    config: RunConfig, run_dir: Path, key: str, blob: bytes, journal: str, n_resamples: int, seed: int
) -> tuple[Results, list[ExampleScores]]:
    """Worker task: the results and per-example scores of a cell, from its journal's text and the shared examples."""
    predictions = list(Journal(run_dir / JOURNAL).parse(journal).values())
    results, rows = score_predictions(config, run_dir, shared_examples(key, blob), predictions, n_resamples, seed)
    # Made into a list here: the rows are sent back to the driver, which must not receive the whole scorer.
    return results, list(rows)


# ---------------------------------------------------------------------------------------------------- backends


class Backend:
    """Where worker tasks run: `submit` returns a `concurrent.futures.Future`."""

    name = "backend"

    def slots(self) -> int:
        """How many tasks run at once."""
        raise NotImplementedError

    def submit(self, fn: Callable, *args: Any) -> cf.Future:
        """Start `fn(*args)` on a worker."""
        raise NotImplementedError

    def share(self, blob: bytes) -> Any:
        """A handle that tasks take in place of `blob` (the bytes themselves, unless the backend can do better)."""
        return blob

    def first_done(self, futures: Sequence[cf.Future]) -> set[cf.Future]:
        """The finished futures among `futures` (at least one; blocks until then)."""
        return cf.wait(futures, return_when=cf.FIRST_COMPLETED).done

    def close(self) -> None:
        """Stop the workers this backend started."""

    def __enter__(self) -> Backend:
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


class LocalBackend(Backend):
    """Worker processes on this machine; a pool broken by a dying worker is replaced on the next submit."""

    name = "local"

    def __init__(self, workers: int):
        import multiprocessing

        self.workers = max(1, workers)
        # spawn, not fork: the driver runs threads (one per cell in flight), which fork would copy half-locked.
        self._context = multiprocessing.get_context("spawn")
        self._lock = threading.Lock()
        self._pool = self._new_pool()

    def _new_pool(self) -> cf.ProcessPoolExecutor:
        return cf.ProcessPoolExecutor(max_workers=self.workers, mp_context=self._context)

    def slots(self) -> int:
        return self.workers

    def submit(self, fn: Callable, *args: Any) -> cf.Future:
        with self._lock:
            try:
                return self._pool.submit(fn, *args)
            except cf.process.BrokenProcessPool:
                self._pool.shutdown(wait=False, cancel_futures=True)
                self._pool = self._new_pool()
                return self._pool.submit(fn, *args)

    def close(self) -> None:
        with self._lock:
            self._pool.shutdown(wait=True, cancel_futures=True)


class DaskBackend(Backend):
    """A Dask distributed cluster: the scheduler at `scheduler`, else a local cluster of `workers` processes."""

    name = "dask"

    def __init__(self, scheduler: str | None = None, workers: int = 2):
        try:
            from distributed import Client, LocalCluster
        except ImportError:
            raise DataError("--backend dask needs Dask: pip install 'shambench[dask]'") from None
        self.cluster = None
        if scheduler is None:
            # Loopback only and no dashboard: a local cluster opens no outside connection.
            self.cluster = LocalCluster(
                n_workers=max(1, workers), threads_per_worker=1, host="127.0.0.1", dashboard_address=None
            )
            scheduler = self.cluster.scheduler_address
        try:
            self.client = Client(scheduler, set_as_default=False, timeout=30)
            # pure=False: a task sent again after a failure is a new task, not the failed one looked up again.
            self.executor = self.client.get_executor(pure=False)
        except OSError as err:
            self.close()
            raise DataError(f"cannot reach the Dask scheduler at {scheduler} ({err})") from None

    def slots(self) -> int:
        return max(1, sum(self.client.nthreads().values()))

    def submit(self, fn: Callable, *args: Any) -> cf.Future:
        return self.executor.submit(fn, *args)

    def share(self, blob: bytes) -> Any:
        # On every worker, so that the loss of one worker leaves copies; tasks then receive the bytes themselves.
        return self.client.scatter(blob, broadcast=True, hash=False)

    def close(self) -> None:
        if getattr(self, "client", None) is not None:
            self.client.close()
        if self.cluster is not None:
            self.cluster.close()


def make_backend(name: str, workers: int, scheduler: str | None = None) -> Backend:
    """The backend called `name` (`local` or `dask`)."""
    if name == "local":
        if scheduler:
            raise DataError("--scheduler is for --backend dask")
        return LocalBackend(workers)
    if name == "dask":
        return DaskBackend(scheduler, workers)
    raise DataError(f"unknown backend {name!r} (expected local or dask)")


class TaskFailure(BaseModel):
    """A task that failed on every attempt."""

    index: int
    """Position of the call in the list given to `run_tasks`."""
    attempts: int
    """How many times it was sent."""
    error: str
    """The last error, as `Type: message`."""
    usage: bool = False
    """The detector refused its parameters (`ParameterError`): a usage error, never sent again."""


def run_tasks(
    backend: Backend, calls: Sequence[tuple[Callable, tuple]], retries: int
) -> Iterator[tuple[int, Any, TaskFailure | None]]:
    """`(index, result, None)` for each call as it finishes, or `(index, None, failure)` once it has failed
    `retries + 1` times; a failed call (an exception, a dead worker) is sent again in the meantime."""
    attempts = dict.fromkeys(range(len(calls)), 1)
    futures = {backend.submit(fn, *args): i for i, (fn, args) in enumerate(calls)}
    while futures:
        for fut in backend.first_done(list(futures)):
            i = futures.pop(fut)
            try:
                result = fut.result()
            except Exception as err:  # a task's own error, or the backend's news of a lost worker
                # Bad input or parameters fail the same way every time: sending them again only wastes time.
                if attempts[i] <= retries and not isinstance(err, DataError):
                    attempts[i] += 1
                    fn, args = calls[i]
                    futures[backend.submit(fn, *args)] = i
                else:
                    error = f"{type(err).__name__}: {err}"
                    usage = isinstance(err, ParameterError)
                    yield i, None, TaskFailure(index=i, attempts=attempts[i], error=error, usage=usage)
                continue
            yield i, result, None


# ------------------------------------------------------------------------------------------------ the driver


class RemoteDetector(Detector):
    """A cell's detector as the driver sees it: shards go to the backend and journal lines come back."""

    def __init__(self, cell: Cell, data: SharedData, backend: Backend, retries: int):
        self.cell, self.data, self.backend, self.retries = cell, data, backend, retries
        self.name = cell.detector
        self.reported: dict[str, Any] | None = None

    def params(self) -> dict[str, Any]:
        return self.reported if self.reported is not None else dict(self.cell.params)

    def outputs(self, examples: Sequence[Example]) -> Iterator[ShardOutput]:
        """The output of each shard of `examples` as it arrives; CellError at the end if some shards failed."""
        size = self.cell.shard_size or max(1, len(examples))
        positions = [self.data.position[ex.id] for ex in examples]
        shards = [positions[i : i + size] for i in range(0, len(positions), size)]
        head = (
            self.cell.detector,
            self.cell.detector_params,
            self.data.hash,
            self.data.handle(self.backend, self.retries),
        )
        failures = []
        for i, out, failure in run_tasks(self.backend, [(predict_shard, (*head, s)) for s in shards], self.retries):
            if failure:
                failures.append((len(shards[i]), failure))
                continue
            if self.reported is None:
                self.family, self.reported = out.family, out.params
            yield out
        refused = next((f for _, f in failures if f.usage), None)
        if refused is not None:
            raise ParameterError(refused.error.removeprefix("ParameterError: "))
        if failures:
            lost = sum(n for n, _ in failures)
            f = failures[0][1]
            raise CellError(f"{lost} examples failed after {f.attempts} attempts: {f.error}")


def journal_outputs(
    remote: RemoteDetector,
    todo: Sequence[Example],
    journal: Journal,
    on_first: Callable[[], None],
    monitor: Monitor | None = None,
    on_predictions: Callable[[int, int], None] | None = None,
) -> int:
    """Append the lines of the cell's shards to its journal as they arrive; returns how many were written.

    `on_first` runs before the first line (it writes the run config); `on_predictions(n, failed)` after each shard.
    """
    wanted = {ex.id for ex in todo}
    n = 0
    with journal.appender() as append:
        for out in remote.outputs(todo):
            unknown = next((i for i in out.ids if i not in wanted), None)
            if unknown is not None:
                raise DataError(f"detector {remote.name!r} returned a prediction for unknown id {unknown!r}")
            if n == 0:
                on_first()
            for line in out.lines:
                append(line)
            n += len(out.lines)
            for key, value in out.counters.items():
                (monitor or Monitor()).count(key, value)
            if on_predictions:
                on_predictions(len(out.lines), out.failed)
    return n


class CellReport(BaseModel):
    """What became of one cell in a sweep."""

    cell: str
    """`data/detector-label`."""
    detector: str
    """Detector spec."""
    params: dict[str, Any]
    """Parameters from the sweep file."""
    run_dir: str
    """The cell's run directory."""
    status: Literal["done", "skipped", "failed"]
    """`done` (ran and scored now), `skipped` (complete before the sweep) or `failed` (see `error`)."""
    predicted: int = 0
    """Predictions journaled during this sweep."""
    failed_predictions: int = 0
    """Examples whose prediction carries a detector error (scored as empty; a rerun retries them)."""
    token_f1: float | None = None
    """Overall token F1 (per-example F1 averaged within tasks, then unweighted over tasks), when there is one."""
    error: str | None = None
    """Why the cell failed."""
    usage_error: bool = False
    """It failed because its detector refused its parameters (a usage error: running again cannot help)."""


class SweepReport(BaseModel):
    """The outcome of a sweep, written to `sweep.json` in the runs folder."""

    started_at: str
    """UTC start, ISO 8601."""
    finished_at: str | None = None
    """UTC end."""
    backend: str
    """`local` or `dask`."""
    cells: list[CellReport] = Field(default_factory=list)
    """One report per cell, in plan order."""
    leaderboard: str | None = None
    """Where the leaderboard was written, when it was built."""
    leaderboard_error: str | None = None
    """Why the leaderboard could not be built (the cells' results are unaffected)."""

    @property
    def failed(self) -> list[CellReport]:
        """The cells that failed."""
        return [c for c in self.cells if c.status == "failed"]


class SharedData:
    """A data item's examples on the driver, and the handle workers read them from once a cell needs workers."""

    def __init__(self, examples: list[Example], selection: dict[str, Any]):
        self.examples, self.selection = examples, selection
        # The key of the workers' data caches, and what a resumed run's config must match.
        self.hash = examples_hash(examples)
        self.position = {ex.id: i for i, ex in enumerate(examples)}
        self._handle: Any = None
        self._lock = threading.Lock()

    def handle(self, backend: Backend, retries: int) -> Any:
        """The examples, segmented on the workers, packed and shared on the backend (done once)."""
        with self._lock:
            if self._handle is None:
                self._handle = backend.share(pack_examples(self.examples, backend, retries))
            return self._handle


def pack_examples(examples: list[Example], backend: Backend, retries: int) -> bytes:
    """The examples with the segmentation of every response, split over the workers so each text is segmented once
    in the whole sweep (otherwise every worker would segment every dataset again for its own cache)."""
    keys = list(dict.fromkeys((language_of(ex.meta), ex.response) for ex in examples))
    size = max(1, -(-len(keys) // backend.slots()))
    chunks = [keys[i : i + size] for i in range(0, len(keys), size)]
    tasks = [(segment_mixed, ([t for _, t in chunk], [lang for lang, _ in chunk])) for chunk in chunks]
    parts: list[list[Segmentation]] = [[] for _ in chunks]
    for i, segmentations, failure in run_tasks(backend, tasks, retries):
        if failure:
            raise CellError(f"segmenting the responses failed after {failure.attempts} attempts: {failure.error}")
        parts[i] = segmentations
    return pickle.dumps((examples, keys, [seg for part in parts for seg in part]), protocol=pickle.HIGHEST_PROTOCOL)


class DataCache:
    """Each data item's examples, loaded once by the driver (in the first cell thread that needs them)."""

    def __init__(self, plan: SweepPlan):
        self.plan = plan
        self._locks: dict[DataItem, threading.Lock] = {c.data: threading.Lock() for c in plan.cells}
        self._loaded: dict[DataItem, SharedData | DataError] = {}

    def get(self, item: DataItem) -> SharedData:
        """The examples of `item`; DataError when they cannot be loaded."""
        with self._locks[item]:
            if item not in self._loaded:
                self._loaded[item] = self._load(item)
        loaded = self._loaded[item]
        if isinstance(loaded, DataError):
            raise loaded
        return loaded

    def _load(self, item: DataItem) -> SharedData | DataError:
        spec = self.plan.spec
        try:
            examples, selection = select_examples(
                [item.dataset] if item.dataset else None,
                item.examples_file,
                spec.split,
                self.plan.data_dir,
                spec.limit,
            )
        except DataError as err:
            return err
        return SharedData(examples, selection)


def check_existing(cell: Cell, data: SharedData) -> RunConfig | None:
    """The cell's run config when it already has one; CellError when it holds a different run."""
    if not (cell.run_dir / CONFIG).is_file():
        return None
    config = load_config(cell.run_dir)
    differences = run_differences(config, cell.detector, cell.detector_params, data.hash, all_params=False)
    if differences == ["examples"]:
        raise CellError(f"{cell.run_dir}: the examples changed since the run began; delete the folder to rerun it")
    if differences:
        raise CellError(f"{cell.run_dir} holds a run of {config.detector} {config.params}, not of this cell")
    return config


def run_cell(
    cell: Cell,
    data: DataCache,
    backend: Backend,
    monitor: Monitor | None = None,
    on_predictions: Callable[[int, int], None] | None = None,
) -> CellReport:
    """Run one cell to completion (or resume it) and score it; every file is written here, on the driver."""
    report = CellReport(
        cell=cell.name, detector=cell.detector, params=cell.params, run_dir=str(cell.run_dir), status="done"
    )
    spec = data.plan.spec
    try:
        shared = data.get(cell.data)
        # One writer per run directory: another sweep (or an eval --resume) on this cell fails it at once.
        with run_lock(cell.run_dir):
            config = check_existing(cell, shared)
            journal = Journal(cell.run_dir / JOURNAL)
            todo = pending(shared.examples, journal)
            if (cell.run_dir / RESULTS).is_file() and not todo:
                report.status = "skipped"
                results = Results.model_validate_json(read_regular(cell.run_dir / RESULTS) or b"")
            else:
                remote = RemoteDetector(cell, shared, backend, spec.retries)

                def write_config() -> None:
                    if not (cell.run_dir / CONFIG).is_file():
                        write_json(
                            cell.run_dir / CONFIG,
                            detector_config(remote, shared.examples, shared.selection),
                            follow=False,
                        )

                if todo and cell.batch:
                    report.predicted = run_batch_cell(cell, shared, journal, todo, monitor, on_predictions)
                elif todo:
                    report.predicted = journal_outputs(remote, todo, journal, write_config, monitor, on_predictions)
                config = config or load_config(cell.run_dir)
                results, per_example = score_remotely(cell, config, shared, journal, backend, spec)
                write_scores(cell.run_dir, results, per_example)
    except (CellError, DataError) as err:
        report.status, report.error = "failed", str(err)
        report.usage_error = isinstance(err, ParameterError)
        return report
    except Exception as err:  # one cell's unforeseen trouble must not stop the others or lose the report
        report.status, report.error = "failed", f"{type(err).__name__}: {err}"
        return report
    report.failed_predictions = results.failed_predictions
    report.token_f1 = results.overall.token.f1 if results.overall else None
    return report


def run_batch_cell(
    cell: Cell,
    data: SharedData,
    journal: Journal,
    todo: Sequence[Example],
    monitor: Monitor | None,
    on_predictions: Callable[[int, int], None] | None,
) -> int:
    """Journal a cell's predictions by batch (see `shambench.llm.batch`), on the driver; returns how many arrived."""
    from shambench.runs.batch import BatchRun, BatchSettings

    det = create_detector(cell.detector, **cell.detector_params)
    arrived = 0

    def count(pred: Any) -> None:
        nonlocal arrived
        arrived += 1
        if on_predictions:
            on_predictions(1, int(pred.error is not None))

    try:
        if not (cell.run_dir / CONFIG).is_file():
            write_json(cell.run_dir / CONFIG, detector_config(det, data.examples, data.selection), follow=False)
        # Items an expired or cancelled batch left unanswered are failed predictions, counted in the cell's report.
        outcome = BatchRun(det, cell.run_dir, journal, BatchSettings(), lambda line: None).run(
            todo, monitor or Monitor(), count
        )
        if outcome.detached:  # waited past the timeout: the batch stays recorded, a rerun collects it
            raise CellError(f"batch {outcome.detached} has not finished; run the sweep again to collect it")
    finally:
        det.close()
    return arrived


def score_remotely(
    cell: Cell, config: RunConfig, data: SharedData, journal: Journal, backend: Backend, spec: SweepSpec
) -> tuple[Results, list[ExampleScores]]:
    """The cell's results and per-example scores, computed on a worker from the journal the driver holds."""
    text = journal.text()
    blob = data.handle(backend, spec.retries)
    call = (score_shared, (config, cell.run_dir, data.hash, blob, text, spec.bootstrap, spec.seed))
    _, results, failure = next(run_tasks(backend, [call], spec.retries))
    if failure:
        raise CellError(f"scoring failed after {failure.attempts} attempts: {failure.error}")
    return results


def run_sweep(
    plan: SweepPlan,
    backend: Backend,
    monitor: Monitor | None = None,
    on_predictions: Callable[[int, int], None] | None = None,
    on_cell: Callable[[CellReport], None] | None = None,
    board: Callable[[Path], Path] | None = None,
) -> SweepReport:
    """Run every cell of the plan on the backend, build the leaderboard and write `sweep.json`.

    Failed cells are reported, not raised. `board` builds the leaderboard of the runs folder when the spec asks
    for one (the CLI passes `shambench.leaderboard.build.runs_site`: the leaderboard sits above runs).
    """
    report = SweepReport(started_at=now_iso(), backend=backend.name)
    data = DataCache(plan)
    # Twice the backend's slots of cells in flight: while one cell is scored or journaled, another computes.
    with cf.ThreadPoolExecutor(max_workers=2 * backend.slots(), thread_name_prefix="cell") as threads:
        futures = [threads.submit(run_cell, cell, data, backend, monitor, on_predictions) for cell in plan.cells]
        for fut in cf.as_completed(futures):
            if on_cell:
                on_cell(fut.result())
        report.cells = [f.result() for f in futures]
    if plan.spec.leaderboard and board is not None:
        try:
            report.leaderboard = str(board(plan.runs))
        except Exception as err:  # the sweep's runs stand without it; `shambench leaderboard build` can redo it
            report.leaderboard_error = f"{type(err).__name__}: {err}"
    report.finished_at = now_iso()
    write_json(plan.runs / SUMMARY, report, follow=False)
    return report
