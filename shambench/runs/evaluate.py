"""`evaluate()`: run a detector over examples into a run directory and score it. `shambench eval` is a thin layer
over it: it builds the `RunSpec` from its options, calls `run_evaluation` (what `evaluate` returns the results of)
and prints.

The run goes through the one lifecycle of `shambench.runs.lifecycle`: opened new or resumed, predicted through an
executor, scored and written. A new run of an API detector from adapters' datasets sends its requests while the
corpora load (`streamed_evaluation`), then ends in the same `finish`.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from contextlib import AbstractContextManager, ExitStack, closing, nullcontext, suppress
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, TypeGuard, Unpack

import shambench.fs as fs
from shambench.detection.detector import Detector, Monitor
from shambench.errors import DataError
from shambench.memory import long_lived_frozen
from shambench.runs.files import CONFIG, LOCK, RESULTS
from shambench.runs.lifecycle import (
    InProcess,
    Run,
    RunOutcome,
    check_runnable,
    complete,
    executor_for,
    finish,
    new_run_detector,
    opened_run,
)
from shambench.runs.rundir import detector_config, load_config, run_lock, write_new_config
from shambench.runs.runner import journal_predictions
from shambench.runs.scoring import scorer_meanwhile
from shambench.runs.spec import EvalOptions, RunSpec
from shambench.schema import Prediction
from shambench.scoring.results import Results

if TYPE_CHECKING:
    from shambench.llm.api import APIDetector
    from shambench.runs.batch import Estimate

Progress = Callable[[Run], AbstractContextManager[Monitor]]
"""Called once a run is open (its pending examples known) for the monitor to predict under, e.g. a progress bar
sized to `run.todo()`."""


@dataclass
class Evaluation:
    """What `run_evaluation` did: the run it opened and how the run ended."""

    run: Run
    """The run directory, its detector (closed by now), examples, config and journal."""
    outcome: RunOutcome | None = None
    """How predicting and scoring ended (None for a dry run)."""
    estimate: Estimate | None = None
    """What the run would send and cost (a dry run only: nothing was sent or written)."""

    @property
    def results(self) -> Results | None:
        """The scored results; None for a dry run and while a batch left running (`wait=False`) is unanswered."""
        return self.outcome.results if self.outcome else None


def run_evaluation(
    spec: RunSpec,
    detector: Detector | None = None,
    monitor: Monitor | None = None,
    progress: Progress | None = None,
    on_message: Callable[[str], None] = lambda line: None,
) -> Evaluation:
    """What `evaluate` does, returning the run with its outcome: the run `spec` asks for (of `detector` when given,
    else of the one the spec names). `progress`, when given, is called once the run is open for the monitor to
    predict under (else `monitor`); `on_message` receives the Batch API's status lines."""
    spec.check()
    # A Detector object is no name a resume could build again: its runs are never taken up by default.
    unfinished = None if detector is not None or spec.execution.new_run else unfinished_run(spec)
    if unfinished is not None:
        on_message(f"resuming the unfinished run of the same spec in {unfinished} (`new_run` starts a new one)")
        resumed = spec.execution.model_copy(update={"run_dir": unfinished, "resume": True})
        spec = spec.model_copy(update={"execution": resumed})
    exe = spec.execution
    if not (exe.resume or exe.dry_run or exe.batch or spec.selection.examples_file or spec.selection.context):
        # A new run from adapters' datasets: an API detector's requests start while the corpora load.
        run_dir, built = new_run_detector(spec, detector)
        if streams(built):
            try:
                check_runnable(built, spec.routed(), write=True)
            except BaseException:
                built.close()
                raise
            return streamed_evaluation(built, run_dir, spec, monitor, progress)
        spec = spec.model_copy(update={"execution": exe.model_copy(update={"run_dir": run_dir})})
        detector = built
    with opened_run(spec, detector, write=not exe.dry_run) as run:
        if exe.dry_run:
            return Evaluation(run, estimate=run_estimate(run))
        # The run's examples (and the scorer built ahead) are long-lived: full collections walking them would stall
        # the requests' event loop, and then the scoring, for nothing.
        with progress(run) if progress else nullcontext(monitor or Monitor()) as watching, long_lived_frozen():
            executor = executor_for(run, spec, on_message)
            outcome = complete(run, executor, spec.scoring, watching, watching.done)
    return Evaluation(run, outcome)


def unfinished_run(spec: RunSpec) -> Path | None:
    """The newest run directory under `spec`'s runs root that holds an unfinished run (a config.json, no
    results.json) of the same spec (`RunSpec.same_run`), for a new run that names no directory of its own and is no
    dry run; None otherwise. A run made before config.json embedded its spec is never taken for it."""
    exe = spec.execution
    if exe.resume or exe.run_dir is not None or exe.dry_run or not Path(exe.runs_root).is_dir():
        return None
    for folder in sorted(Path(exe.runs_root).iterdir(), reverse=True):  # names begin with their UTC time
        if folder.is_symlink() or not (folder / CONFIG).is_file() or (folder / RESULTS).exists():
            continue
        try:
            recorded = load_config(folder).spec
        except DataError:
            continue
        if recorded is not None and recorded.same_run(spec):
            return folder
    return None


def streams(detector: Detector) -> TypeGuard[APIDetector]:
    """Whether a new run of `detector` from adapters' datasets sends its requests while the corpora load
    (`streamed_evaluation`): an `APIDetector` that predicts one request per example, its requests waiting on a
    server."""
    from shambench.llm.api import APIDetector

    return isinstance(detector, APIDetector) and detector.predicts_fed()


def streamed_evaluation(
    detector: APIDetector,
    run_dir: Path,
    spec: RunSpec,
    monitor: Monitor | None = None,
    progress: Progress | None = None,
) -> Evaluation:
    """A new run of an API detector (`streams`) from adapters' datasets into `run_dir`, its requests sent while
    the corpora load (`shambench.runs.streamed`): what `opened_run` then `complete` do, with the same config.json,
    journal and results.

    The lock is taken first; each dataset's examples go to the requests as soon as it is loaded. Predictions that
    finish before every example is known are held in memory: once loading ends, config.json is written, then
    they are journaled, the scorer is built meanwhile (`scorer_meanwhile`) and `progress` is called with the
    open run (its monitor receives what was held). A dataset that fails to load, a selection error or an
    interruption while loading stops the requests and journals nothing: no config.json is written and a run
    directory this call created is removed, with the parent folders it created for it. Any other error before
    loading ends (e.g. SystematicFailure) waits for loading, writes config.json and journals what arrived, as an
    unstreamed run would have. A crash before config.json loses the held predictions from the run but not their
    answers, which the response cache keeps (unless the detector's cache is off): a rerun does not pay for them
    again."""
    from shambench.llm.route import Budget
    from shambench.runs.streamed import HeldJournal, HeldMonitor, Loading

    made = _missing_dirs(run_dir)
    scoring, exe = spec.scoring, spec.execution
    if exe.max_cost is not None:
        detector.budget = Budget(exe.max_cost)
    executor = InProcess(scoring, exe.fail_fast, exe.max_cost)
    held_monitor = HeldMonitor()
    opened: list[Run] = []
    try:
        with run_lock(run_dir), ExitStack() as watching, ExitStack() as predicting:
            loading = Loading(spec.selection)

            def open_journal() -> Callable[[Prediction], None]:
                examples, selection = loading.result()
                config = detector_config(detector, examples, selection, spec)
                write_new_config(run_dir, config)
                run = Run(run_dir, detector, examples, config)
                opened.append(run)
                held_monitor.release(
                    watching.enter_context(progress(run) if progress else nullcontext(monitor or Monitor()))
                )
                # Long-lived from now on, as in an unstreamed run (see `run_evaluation`).
                watching.enter_context(long_lived_frozen())
                executor.scorer = predicting.enter_context(scorer_meanwhile(examples, scoring))
                return predicting.enter_context(run.journal.appender())

            journal = HeldJournal(loading.done, open_journal)
            try:
                try:
                    # Closed on an error here, so that no request is still sent while loading ends.
                    with closing(detector.predict_fed(loading.feed, held_monitor)) as predictions:
                        n = journal_predictions(
                            predictions, loading.wanted, journal.append, detector.name, held_monitor.done, exe.fail_fast
                        )
                except Exception:
                    journal.open()  # the loading's own error when it failed (then nothing is written)
                    raise
                journal.open()
            except BaseException:
                loading.stop()
                if made and not opened:
                    _remove_lonely_lock(run_dir, made[1:])
                raise
            predicting.close()
            outcome = finish(opened[0], RunOutcome(predicted=n), executor, scoring)
    finally:
        detector.close()
    return Evaluation(opened[0], outcome)


def _missing_dirs(path: Path) -> list[Path]:
    """`path` and those of its ancestors that do not exist, deepest first: what creating it creates."""
    missing = []
    while not path.exists() and path.parent != path:
        missing.append(path)
        path = path.parent
    return missing


def _remove_lonely_lock(run_dir: Path, parents: Sequence[Path] = ()) -> None:
    """Remove `run_dir` when it holds nothing but its lock (this process is still holding it), then those of
    `parents` (its ancestors this process created, deepest first) that are left empty."""
    if fs.entries(run_dir, fs.folder_root(run_dir)) == [LOCK]:
        with suppress(OSError, DataError):
            fs.unlink(run_dir / LOCK, fs.folder_root(run_dir))
        # Only an empty folder goes (another process that wrote into it meanwhile keeps it).
        for folder in (run_dir, *parents):
            if not fs.remove_empty_dir(folder, folder.parent):
                break


def run_estimate(run: Run) -> Estimate:
    """What the open run would send (after the cache) and what it should cost, with and without batching (a
    detector whose requests can be routed: `opened_run` checks it)."""
    from shambench.runs.batch import estimate_run

    return estimate_run(run.detector, run.todo(), run.journal, run.run_dir)


def evaluate(
    detector: str | Detector | RunSpec | None = None, **options: Unpack[EvalOptions]
) -> Results | Estimate | None:
    """Run a detector over the selected examples into a run directory, and return its scored results: what
    `shambench eval` does, without printing.

    `detector` is a `RunSpec` (then give no other option), a registered name, `NAME:ARG`, or a Detector; the
    options are the spec's fields by name (`EvalOptions`; see `RunSpec`, `Selection`, `Scoring` and `Execution`
    for each), e.g. `evaluate("overlap", datasets="mushroom", limit=50, n_resamples=200)`. The detector factory's
    own parameters go in `params` (with `model`, `base_url` and `api_key_env` as options of their own). A dry run
    returns the `Estimate` of what it would send and cost; a batch left running (`wait=False`) returns None, and
    a resume (`resume=True, run_dir=...`) finishes it. `monitor` receives the detector's counters and each
    finished prediction. Failed predictions are scored as empty and counted in `results.failed_predictions`.
    """
    monitor = options.pop("monitor", None)
    if isinstance(detector, RunSpec):
        if options:
            raise TypeError(f"a RunSpec holds every option: give {', '.join(sorted(options))} in it instead")
        spec, obj = detector, None
    elif isinstance(detector, Detector):
        spec, obj = RunSpec.of(detector=detector.name, **options), detector
    else:
        spec, obj = RunSpec.of(**({"detector": detector} if detector is not None else {}), **options), None
    evaluation = run_evaluation(spec, obj, monitor)
    return evaluation.estimate if evaluation.estimate is not None else evaluation.results
