"""The sweep's driver: each cell's run directory opened, predicted through the backend's workers, scored and
written, by this process alone; `run_sweep` runs every cell of a plan and writes `sweep.json`."""

from __future__ import annotations

import concurrent.futures as cf
import pickle
import threading
from collections.abc import Callable, Iterator, Sequence
from pathlib import Path
from typing import Any, Literal

from pydantic import Field

import shambench.fs as fs
from shambench.detection.detector import Detector, Monitor, create_detector
from shambench.errors import CellError, DataError, DownloadError, FolderError, ParameterError, described, message_of
from shambench.io import Journal, read_regular, write_json
from shambench.provenance import now_iso
from shambench.runs.files import CONFIG, JOURNAL, RESULTS
from shambench.runs.lifecycle import Batched, Executor, Run, RunOutcome, complete
from shambench.runs.rundir import (
    FINGERPRINT,
    RunConfig,
    detector_config,
    examples_hash,
    load_config,
    pending,
    recorded_spec,
    run_lock,
)
from shambench.runs.selection import select_examples
from shambench.runs.spec import Scoring, Selection, spec_differences
from shambench.runs.sweep.backends import Backend, run_tasks
from shambench.runs.sweep.grid import SUMMARY, Cell, SweepPlan
from shambench.runs.sweep.tasks import ShardOutput, predict_shard, score_shared
from shambench.schema import Example, Model, Name
from shambench.scoring.results import ExampleScores, Results
from shambench.scoring.text import Segmentation, language_of, segment_mixed


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
            self.cell.spec.detector_params(),
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


class CellReport(Model):
    """What became of one cell in a sweep."""

    cell: str
    """`data/detector-label`."""
    detector: Name
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
    """It failed because its detector refused its parameters, its examples cannot be used (a line that is not an
    example, a language no tokenizer reads, a selection of nothing), or its folder cannot be written (a link on the
    way, a read-only disk): a usage error, which running again cannot help."""


class SweepReport(Model):
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
        # By label: two data items with one label would share run directories, which planning refuses.
        self._locks: dict[str, threading.Lock] = {c.data.label: threading.Lock() for c in plan.cells}
        self._loaded: dict[str, SharedData | DataError] = {}

    def get(self, cell: Cell) -> SharedData:
        """The examples of the cell's data item; DataError when they cannot be loaded."""
        item = cell.data.label
        with self._locks[item]:
            if item not in self._loaded:
                try:
                    self._loaded[item] = SharedData(*select_examples(cell.spec.selection))
                except DataError as err:
                    self._loaded[item] = err
        loaded = self._loaded[item]
        if isinstance(loaded, DataError):
            raise loaded
        return loaded


def runs_root(plan: SweepPlan) -> Path:
    """The folder every file of a sweep is confined to: the runs folder's parent, so the runs folder (which the
    sweep makes) is itself never a link that writes would follow (`shambench.fs`)."""
    return Path(plan.runs).absolute().parent


def existing_config(cell: Cell, data: SharedData) -> RunConfig | None:
    """The cell's run config when it already has one; CellError when it holds a different run. A cell is compared
    by its detector, the sweep file's parameters and the command line's endpoint, and its data by the examples'
    hash alone (so a sweep folder moved with its EXAMPLES files still matches)."""
    if not (cell.run_dir / CONFIG).is_file():
        return None
    config = load_config(cell.run_dir)
    differences = spec_differences(recorded_spec(config), cell.spec.model_copy(update={"selection": Selection()}))
    if differences:
        raise CellError(f"{cell.run_dir} holds a run of {config.detector} {config.params}, not of this cell")
    # A run made before the fingerprint covered every field is compared as it was hashed then.
    now = data.hash if config.fingerprint == FINGERPRINT else examples_hash(data.examples, config.fingerprint)
    if config.examples_hash != now:
        raise CellError(f"{cell.run_dir}: the examples changed since the run began; delete the folder to rerun it")
    return config


class RemotelyScored(Executor):
    """An executor whose runs are scored on one of the backend's workers, from the journal's text (the driver never
    parses it: building every prediction's spans there would make it the bottleneck)."""

    def __init__(self, data: SharedData, backend: Backend, retries: int):
        Executor.__init__(self)  # not the next class's in a batch cell's order: that one takes its settings
        self.data, self.backend, self.retries = data, backend, retries

    def score(
        self, run: Run, config: RunConfig, scoring: Scoring, outcome: RunOutcome
    ) -> tuple[Results, Sequence[ExampleScores]]:
        text = run.journal.text()
        blob = self.data.handle(self.backend, self.retries)
        call = (score_shared, (config, run.run_dir, self.data.hash, blob, text, scoring))
        _, results, failure = next(run_tasks(self.backend, [call], self.retries))
        if failure:
            raise CellError(f"scoring failed after {failure.attempts} attempts: {failure.error}")
        return results


class Remote(RemotelyScored):
    """A cell's shards predicted on the backend's workers, their journal lines appended here as they arrive; the
    run's config.json is written before the first, with the parameters the workers report."""

    def __init__(self, cell: Cell, data: SharedData, backend: Backend, retries: int, on_predictions: Counted):
        super().__init__(data, backend, retries)
        self.cell, self.on_predictions = cell, on_predictions
        self.remote = RemoteDetector(cell, data, backend, retries)
        """The cell's detector as the driver sees it (the run's)."""

    def predict(
        self, run: Run, todo: list[Example], monitor: Monitor, on_prediction: Callable[[Any], None] | None
    ) -> RunOutcome:
        remote = self.remote

        def first() -> None:
            run.record(detector_config(remote, self.data.examples, self.data.selection, self.cell.spec))

        return RunOutcome(predicted=journal_outputs(remote, todo, run.journal, first, monitor, self.on_predictions))


class RemotelyScoredBatch(RemotelyScored, Batched):
    """A cell run by the Batch API on the driver (no worker predicts), scored on a worker."""

    def __init__(self, data: SharedData, backend: Backend, retries: int):
        from shambench.runs.batch import BatchSettings

        RemotelyScored.__init__(self, data, backend, retries)
        self.settings, self.on_message = BatchSettings(), lambda line: None


Counted = Callable[[int, int], None] | None
"""Told `(predictions, failed)` as each shard (or batch answer) of a cell is journaled."""


def cell_outcome(
    cell: Cell,
    shared: SharedData,
    backend: Backend,
    retries: int,
    monitor: Monitor | None,
    on: Counted,
    root: Path | None = None,
) -> tuple[RunOutcome, bool]:
    """Predict, score and write one cell under its lock, through the one run lifecycle: its predictions made on the
    workers, or by batch on the driver. True with the results already written when the cell was complete. `root`:
    the folder its files are confined to (`runs_root`)."""
    with run_lock(cell.run_dir, root):
        config = existing_config(cell, shared)
        journal = Journal(cell.run_dir / JOURNAL, root=root or fs.folder_root(cell.run_dir))
        if config is not None and (cell.run_dir / RESULTS).is_file() and not pending(shared.examples, journal):
            return RunOutcome(results=Results.model_validate_json(read_regular(cell.run_dir / RESULTS) or b"")), True
        if not cell.spec.execution.batch:
            remote = Remote(cell, shared, backend, retries, on)
            run = Run(cell.run_dir, remote.remote, shared.examples, config, root)
            return complete(run, remote, cell.spec.scoring, monitor), False

        def count(pred: Any) -> None:
            if on:
                on(1, int(pred.error is not None))

        detector = create_detector(cell.detector, **cell.spec.detector_params())
        try:
            run = Run(cell.run_dir, detector, shared.examples, config, root)
            run.record(detector_config(detector, shared.examples, shared.selection, cell.spec))
            # Items an expired or cancelled batch left unanswered are failed predictions, counted in the report.
            outcome = complete(run, RemotelyScoredBatch(shared, backend, retries), cell.spec.scoring, monitor, count)
        finally:
            detector.close()
        if outcome.detached_batch:  # waited past the timeout: the batch stays recorded, a rerun collects it
            raise CellError(f"batch {outcome.detached_batch} has not finished; run the sweep again to collect it")
        return outcome, False


def run_cell(
    cell: Cell,
    data: DataCache,
    backend: Backend,
    monitor: Monitor | None = None,
    on_predictions: Counted = None,
) -> CellReport:
    """Run one cell to completion (or resume it) and score it; every file is written here, on the driver. A cell
    whose results.json exists and whose journal holds a successful prediction for every example is skipped."""
    report = CellReport(
        cell=cell.name, detector=cell.detector, params=cell.params, run_dir=str(cell.run_dir), status="done"
    )
    try:
        shared = data.get(cell)
    except DataError as err:  # its examples as given; a fetch that failed (context evidence) may work next time
        return failed_cell(report, err, usage=not isinstance(err, DownloadError))
    try:
        # One writer per run directory: another sweep (or an eval --resume) on this cell fails it at once.
        outcome, skipped = cell_outcome(
            cell, shared, backend, data.plan.spec.retries, monitor, on_predictions, runs_root(data.plan)
        )
    except (CellError, DataError) as err:
        return failed_cell(report, err, usage=isinstance(err, ParameterError | FolderError))
    except Exception as err:  # one cell's unforeseen trouble must not stop the others or lose the report
        report.status, report.error = "failed", described(err)
        return report
    results = outcome.results
    assert results is not None  # a batch left running failed the cell above
    report.status = "skipped" if skipped else "done"
    report.predicted = outcome.predicted
    report.failed_predictions = results.failed_predictions
    report.token_f1 = results.overall.token.f1 if results.overall else None
    return report


def failed_cell(report: CellReport, err: Exception, usage: bool) -> CellReport:
    """The report of a cell that failed with `err`; `usage`: running it again cannot help (see `usage_error`)."""
    report.status, report.error, report.usage_error = "failed", message_of(err), usage
    return report


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
    write_json(plan.runs / SUMMARY, report, root=runs_root(plan))
    return report
