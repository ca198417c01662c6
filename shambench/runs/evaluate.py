"""`evaluate()`: run a detector over examples into a run directory and score it. `shambench eval` is a thin layer
over it: it parses its options into `run_evaluation` (what `evaluate` returns the results of) and prints.

A run directory is opened new or resumed (`opened_run`), locked for the one process allowed to call a detector
into it, its predictions journaled as they arrive and its results written (`run_outcome`). One rule decides
whether a folder holds the run being asked for (`run_differences`): a resume refuses a detector whose
output-defining parameters would change, and a sweep skips, resumes or refuses its cells by it. A new run of an
API detector from adapters' datasets sends its requests while the corpora load (`streamed_evaluation`).
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import AbstractContextManager, ExitStack, closing, contextmanager, nullcontext, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any, Literal, TypeGuard, overload

from pydantic_core import to_jsonable_python

import shambench.fs as fs
from shambench.detection.detector import Detector, Monitor, create_detector
from shambench.errors import DataError, RunDirError, SelectionError, UnknownPluginError
from shambench.io import Journal, write_json
from shambench.memory import long_lived_frozen
from shambench.runs.files import CONFIG, JOURNAL, LOCK, RESULTS
from shambench.runs.rundir import (
    RunConfig,
    check_new_run_dir,
    detector_config,
    load_config,
    new_run_dir,
    pending,
    run_examples,
    run_lock,
    write_new_config,
)
from shambench.runs.runner import journal_predictions, run_predictions
from shambench.runs.scoring import (
    ScorerAhead,
    run_results_and_scores,
    scorer_meanwhile,
    served_model,
    with_sopo_compat,
)
from shambench.runs.selection import select_examples, suite_datasets
from shambench.schema import Example, Prediction
from shambench.scoring.results import Results

if TYPE_CHECKING:
    from shambench.llm.api import APIDetector
    from shambench.runs.batch import BatchSettings, Estimate

# Recorded parameters that route the API key: on resume they come from the caller (or the preset), never from
# config.json, so that a doctored file cannot send the key to another server or read another variable.
CREDENTIAL_ROUTING = ("base_url", "api_key_env")


@dataclass
class OpenRun:
    """A run directory opened for predicting: its detector, its examples and its config."""

    run_dir: Path
    """The run directory."""
    detector: Detector
    """The detector predicting into it (closed when the run is closed)."""
    examples: list[Example]
    """Every example of the run."""
    config: RunConfig
    """The run's config.json."""
    journal: Journal = field(init=False)
    """The prediction journal."""

    def __post_init__(self) -> None:
        self.journal = Journal(self.run_dir / JOURNAL, root=self.run_dir.parent)

    def todo(self) -> list[Example]:
        """Examples without a successful prediction yet."""
        return pending(self.examples, self.journal)


@dataclass
class RunOutcome:
    """How a call to `run_outcome` ended: scored results, or a batch still running."""

    results: Results | None = None
    """The scored results (None while a batch is still running)."""
    detached_batch: str | None = None
    """The id of a batch left running (`wait=False`, or its timeout passed); the run is finished by resuming it."""
    timed_out: bool = False
    """The batch was left running because the wait's timeout passed (not because no wait was asked for)."""
    unused_batch_lines: list[str] = field(default_factory=list)
    """Batches whose output lines answered no request of theirs, with the counts (see `BatchAnswers.unused`)."""
    unfinished_batches: list[str] = field(default_factory=list)
    """Batches that expired or were cancelled with requests unanswered (those are failed predictions)."""
    predictions: dict[str, Prediction] = field(default_factory=dict)
    """The journal's predictions by id, read once after predicting (empty while a batch is still running)."""


def run_differences(
    config: RunConfig,
    detector: str,
    params: dict[str, Any],
    examples_hash: str | None = None,
    *,
    all_params: bool = True,
) -> list[str]:
    """What differs between a recorded run and the run asked for: `detector`, the names of output-defining
    parameters whose values differ (only those in `params` when not `all_params`, as a sweep file names some),
    and `examples` when the examples no longer hash the same (unchecked when `examples_hash` is None). Empty: it
    is the same run."""
    current = to_jsonable_python(params)
    names = config.params.keys() | current.keys() if all_params else current.keys()
    out = ["detector"] if config.detector != detector else []
    out += sorted(k for k in names if config.params.get(k) != current.get(k))
    if examples_hash is not None and examples_hash != config.examples_hash:
        out.append("examples")
    return out


def resumed_detector(config: RunConfig, given: dict[str, Any]) -> Detector:
    """The detector of a run being resumed: its recorded parameters, except those that route the API key, which
    come from `given` or the preset; DataError when anything recorded would change."""
    recorded = {k: v for k, v in config.params.items() if k not in CREDENTIAL_ROUTING}
    try:
        detector = create_detector(config.detector, **{**recorded, **given})
    except UnknownPluginError as err:
        if not str(err).startswith("unknown "):
            raise  # installed but broken: that message says why
        # A recorded name this installation lacks is most likely a plugin's: a "did you mean" would mislead.
        raise UnknownPluginError(
            f"the run was made with detector {config.detector!r}, which is not registered here (see `shambench "
            "list detectors`): if a plugin package provided it, install that package to resume"
        ) from None
    changed = run_differences(config, config.detector, detector.params())
    if not changed:
        return detector
    detector.close()
    routing = [k for k in changed if k in CREDENTIAL_ROUTING]
    if routing:
        made = ", ".join(f"{k}={config.params.get(k)}" for k in routing)
        raise RunDirError(
            f"the run was made with {made}; the API key is sent only where the caller says, so give "
            f"{'it' if len(routing) == 1 else 'them'} again to resume against that server (or start a new run)"
        )
    raise RunDirError(
        f"resuming would change {', '.join(changed)}, which define the detector's output "
        "(its predictions would no longer match config.json); start a new run instead"
    )


@contextmanager
def opened_run(
    detector: str | Detector | None = None,
    *,
    resume_dir: str | Path | None = None,
    datasets: str | Sequence[str] | None = None,
    examples_file: str | Path | None = None,
    split: str = "test",
    data_dir: str | Path | None = None,
    limit: int | None = None,
    context: str | None = None,
    context_params: dict[str, Any] | None = None,
    run_dir: str | Path | None = None,
    runs_root: str | Path = "runs",
    write: bool = True,
    routed: str | None = None,
    **params: Any,
) -> Iterator[OpenRun]:
    """A new run directory (`detector` and the data selection), or the run in `resume_dir`, opened for predicting.

    The lock is taken before config.json is read or written, so no other process can adopt or change the run;
    it is held, and the detector open, until the block ends. With `write` false nothing is locked or written
    (a dry run); the detector is still built and the examples selected. `routed` names what needs a detector
    whose chat requests can be routed (a dry run, a run by batch, a cost budget): any other detector is refused
    as soon as it is built, before examples are selected or anything is written.
    """
    from shambench.llm.batch import require_routes

    if resume_dir is not None:
        path = Path(resume_dir)
        with run_lock(path) if write else _unlocked():
            config = load_config(path)
            examples = run_examples(config, same_evidence=True)
            opened = OpenRun(path, resumed_detector(config, params), examples, config)
            if routed:
                require_routes(opened.detector, routed)
            try:
                yield opened
            finally:
                opened.detector.close()
        return
    path, det = new_run_detector(detector, run_dir, runs_root, params)
    try:
        check_runnable(det, routed, write)
        examples, selection = select_examples(
            datasets, examples_file, split, data_dir, limit, context=context, context_params=context_params or {}
        )
        with run_lock(path) if write else _unlocked():
            config = detector_config(det, examples, selection)
            if write:
                write_new_config(path, config)
            yield OpenRun(path, det, examples, config)
    finally:
        det.close()


@contextmanager
def _unlocked() -> Iterator[None]:
    yield


def new_run_detector(
    detector: str | Detector | None, run_dir: str | Path | None, runs_root: str | Path, params: dict[str, Any]
) -> tuple[Path, Detector]:
    """The directory of a new run (checked to hold no run yet) and its detector, built from `params` when named."""
    if detector is None:
        raise DataError("a detector is required (or resume a run directory)")
    spec = detector if isinstance(detector, str) else detector.name
    path = Path(run_dir) if run_dir else new_run_dir(runs_root, spec)
    check_new_run_dir(path)
    return path, create_detector(detector, **params) if isinstance(detector, str) else detector


def check_runnable(detector: Detector, routed: str | None, write: bool) -> None:
    """Refuse a detector whose requests cannot be routed when `routed` names what needs it, and, when the run
    writes (sends), one that cannot run (e.g. a missing API key)."""
    from shambench.llm.batch import require_routes

    if routed:
        require_routes(detector, routed)
    if write:
        detector.check_can_run()


def run_outcome(
    run: OpenRun,
    monitor: Monitor | None = None,
    on_prediction: Callable[[Any], None] | None = None,
    *,
    fail_fast: bool = True,
    batch: bool = False,
    batch_settings: BatchSettings | None = None,
    max_cost: float | None = None,
    on_message: Callable[[str], None] = lambda line: None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> RunOutcome:
    """Predict the open run's pending examples, directly or through the Batch API (with `batch`, or when the run
    already has batches; `batch_settings` say how to wait and spend), then score it and write results.json.

    A `max_cost` budget stops direct requests once the accounted cost reaches it; what it leaves unanswered are
    failed predictions, which a resume runs. Raises SystematicFailure (fail fast) or AuthenticationStopped after
    journaling what arrived; KeyboardInterrupt loses only what was in flight.
    """
    from shambench.llm.api import APIDetector
    from shambench.llm.route import Budget
    from shambench.runs.batch import BatchRun, BatchSettings, has_batches

    todo = run.todo()
    outcome = RunOutcome()
    ahead = ScorerAhead()
    if batch or has_batches(run.run_dir):
        settings = batch_settings or BatchSettings(max_cost=max_cost)
        runner = BatchRun(run.detector, run.run_dir, run.journal, settings, on_message)
        done = runner.run(todo, monitor or Monitor(), on_prediction)
        outcome.unfinished_batches = list(done.unfinished)
        outcome.unused_batch_lines = list(done.unused_lines)
        if done.detached:
            outcome.detached_batch, outcome.timed_out = done.detached, done.timed_out
            return outcome
    else:
        if max_cost is not None:  # the detector takes a budget: `opened_run(routed=...)` checked it
            run.detector.budget = Budget(max_cost)  # type: ignore[attr-defined]
        # While requests are in flight the scorer is built beside them, not after the last answer.
        waits = isinstance(run.detector, APIDetector) and bool(todo)
        with scorer_meanwhile(run.examples, n_resamples, seed) if waits else nullcontext(ahead) as ahead:
            run_predictions(run.detector, todo, run.journal, monitor, on_prediction, fail_fast=fail_fast)
    return scored_outcome(run, outcome, ahead, n_resamples, seed)


def scored_outcome(run: OpenRun, outcome: RunOutcome, ahead: ScorerAhead, n_resamples: int, seed: int) -> RunOutcome:
    """`outcome` with the run's journal read and scored (with the scorer built ahead, if any) into results.json;
    config.json records the served model the predictions name."""
    # Read once: the served model, the scores and the caller's failure summary all come from this reading.
    outcome.predictions = run.journal.read()
    served = served_model(list(outcome.predictions.values()))
    if served != run.config.served_model:
        run.config.served_model = served
        write_json(run.run_dir / CONFIG, run.config, root=run.run_dir.parent)
    scored = run_results_and_scores(run.run_dir, run.examples, n_resamples, seed, outcome.predictions, ahead.scorer)
    outcome.results = scored[0]
    return outcome


def streams(detector: Detector) -> TypeGuard[APIDetector]:
    """Whether a new run of `detector` from adapters' datasets sends its requests while the corpora load
    (`streamed_evaluation`): an `APIDetector` that predicts one request per example, its requests waiting on a
    server."""
    from shambench.llm.api import APIDetector

    return isinstance(detector, APIDetector) and detector.predicts_fed()


def streamed_evaluation(
    detector: APIDetector,
    run_dir: Path,
    *,
    datasets: str | Sequence[str] | None,
    split: str,
    data_dir: str | Path | None,
    limit: int | None,
    monitor: Monitor | None = None,
    progress: Callable[[OpenRun], AbstractContextManager[Monitor]] | None = None,
    fail_fast: bool = True,
    max_cost: float | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Evaluation:
    """A new run of an API detector (`streams`) from adapters' datasets into `run_dir`, its requests sent while
    the corpora load (`shambench.runs.streamed`): what `opened_run` then `run_outcome` do, with the same
    config.json, journal and results.

    The lock is taken first; each dataset's examples go to the requests as soon as it is loaded. Predictions that
    finish before every example is known are held in memory: once loading ends, config.json is written, then
    they are journaled, the scorer is built meanwhile (`scorer_meanwhile`) and `progress` is called with the
    open run (its monitor receives what was held). A dataset that fails to load, a selection error or an
    interruption while loading stops the requests and journals nothing: no config.json is written and a run
    directory this call created is removed, with the parent folders it created for it. Any other error before loading ends (e.g. SystematicFailure) waits
    for loading, writes config.json and journals what arrived, as an unstreamed run would have. A crash before
    config.json loses the held predictions from the run but not their answers, which the response cache keeps
    (unless the detector's cache is off): a rerun does not pay for them again."""
    from shambench.llm.route import Budget
    from shambench.runs.streamed import HeldJournal, HeldMonitor, Loading

    made = _missing_dirs(run_dir)
    if max_cost is not None:
        detector.budget = Budget(max_cost)
    held_monitor = HeldMonitor()
    opened: list[OpenRun] = []
    ahead = ScorerAhead()
    try:
        with run_lock(run_dir), ExitStack() as watching, ExitStack() as predicting:
            loading = Loading(datasets, split, data_dir, limit)

            def open_journal() -> Callable[[Prediction], None]:
                nonlocal ahead
                examples, selection = loading.result()
                config = detector_config(detector, examples, selection)
                write_new_config(run_dir, config)
                run = OpenRun(run_dir, detector, examples, config)
                opened.append(run)
                held_monitor.release(
                    watching.enter_context(progress(run) if progress else nullcontext(monitor or Monitor()))
                )
                # Long-lived from now on, as in an unstreamed run (see `run_evaluation`).
                watching.enter_context(long_lived_frozen())
                ahead = predicting.enter_context(scorer_meanwhile(examples, n_resamples, seed))
                return predicting.enter_context(run.journal.appender())

            journal = HeldJournal(loading.done, open_journal)
            try:
                try:
                    # Closed on an error here, so that no request is still sent while loading ends.
                    with closing(detector.predict_fed(loading.feed, held_monitor)) as predictions:
                        journal_predictions(
                            predictions, loading.wanted, journal.append, detector.name, held_monitor.done, fail_fast
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
            outcome = scored_outcome(opened[0], RunOutcome(), ahead, n_resamples, seed)
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
    if fs.entries(run_dir, run_dir.parent) == [LOCK]:
        with suppress(OSError, DataError):
            fs.unlink(run_dir / LOCK, run_dir.parent)
        # Only an empty folder goes (another process that wrote into it meanwhile keeps it).
        for folder in (run_dir, *parents):
            if not fs.remove_empty_dir(folder, folder.parent):
                break


@dataclass
class Evaluation:
    """What `run_evaluation` did: the run it opened and how the run ended."""

    run: OpenRun
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
    detector: str | Detector | None = None,
    *,
    datasets: str | Sequence[str] | None = None,
    suite: str | None = None,
    split: str = "test",
    limit: int | None = None,
    run_dir: str | Path | None = None,
    context: str | None = None,
    resume: bool = False,
    examples_file: str | Path | None = None,
    data_dir: str | Path | None = None,
    context_params: dict[str, Any] | None = None,
    runs_root: str | Path = "runs",
    n_resamples: int = 1000,
    seed: int = 0,
    fail_fast: bool = True,
    batch: bool = False,
    wait: bool = True,
    poll: float = 5.0,
    batch_timeout: float | None = None,
    max_cost: float | None = None,
    sopo_compat: bool = False,
    dry_run: bool = False,
    monitor: Monitor | None = None,
    progress: Callable[[OpenRun], AbstractContextManager[Monitor]] | None = None,
    on_message: Callable[[str], None] = lambda line: None,
    detector_params: dict[str, Any] | None = None,
    **params: Any,
) -> Evaluation:
    """What `evaluate` does, returning the run with its outcome: see `evaluate` for the options.

    `progress`, when given, is called once the run is open (its pending examples known) for the monitor to predict
    under, e.g. a progress bar sized to `run.todo()`; `on_message` receives the Batch API's status lines."""
    if resume and run_dir is None:
        raise DataError("resume=True needs the run_dir of the run to finish")
    params |= detector_params or {}
    if sopo_compat and suite != "math-shepherd":
        raise DataError("sopo_compat needs suite='math-shepherd' (the SOPO kit's rule is for Math-Shepherd only)")
    if suite and (datasets or examples_file):
        raise SelectionError("a suite selects its own datasets: give a suite, or datasets or an examples file")
    if not wait and not batch and not resume:
        raise DataError("wait=False goes with batch=True (or the resume of a run by batch)")
    # What of this run needs a detector whose chat requests can be routed, as the refusal names it.
    needing = ((dry_run, "a dry run"), (batch, "--batch"), (max_cost is not None, "a cost budget"))
    routed = next((what for given, what in needing if given), None)
    if suite and not resume:
        datasets = suite_datasets(suite, data_dir, split)
    if not (resume or dry_run or batch or examples_file or context):
        # A new run from adapters' datasets: an API detector's requests start while the corpora load.
        run_dir, detector = new_run_detector(detector, run_dir, runs_root, params)
        if streams(detector):
            try:
                check_runnable(detector, routed, write=True)
            except BaseException:
                detector.close()
                raise
            streamed = streamed_evaluation(
                detector,
                run_dir,
                datasets=datasets,
                split=split,
                data_dir=data_dir,
                limit=limit,
                monitor=monitor,
                progress=progress,
                fail_fast=fail_fast,
                max_cost=max_cost,
                n_resamples=n_resamples,
                seed=seed,
            )
            return with_sopo(streamed, sopo_compat, seed)
    opened = (
        opened_run(resume_dir=run_dir, write=not dry_run, routed=routed, **params)
        if resume
        else opened_run(
            detector,
            datasets=datasets,
            examples_file=examples_file,
            split=split,
            data_dir=data_dir,
            limit=limit,
            context=context,
            context_params=context_params,
            run_dir=run_dir,
            runs_root=runs_root,
            write=not dry_run,
            routed=routed,
            **params,
        )
    )
    with opened as run:
        if dry_run:
            return Evaluation(run, estimate=run_estimate(run))
        from shambench.runs.batch import BatchSettings

        timeout = {} if batch_timeout is None else {"timeout": batch_timeout}
        settings = BatchSettings(wait=wait, poll=poll, max_cost=max_cost, **timeout)
        # The run's examples (and the scorer built ahead) are long-lived: full collections walking them would stall
        # the requests' event loop, and then the scoring, for nothing.
        with progress(run) if progress else nullcontext(monitor or Monitor()) as watching, long_lived_frozen():
            outcome = run_outcome(
                run,
                watching,
                watching.done,
                fail_fast=fail_fast,
                batch=batch,
                batch_settings=settings,
                max_cost=max_cost,
                on_message=on_message,
                n_resamples=n_resamples,
                seed=seed,
            )
    return with_sopo(Evaluation(run, outcome), sopo_compat, seed)


def with_sopo(evaluation: Evaluation, sopo_compat: bool, seed: int) -> Evaluation:
    """The evaluation, its results.json given the SOPO kit's compatibility rule too when `sopo_compat`."""
    outcome = evaluation.outcome
    if sopo_compat and outcome is not None and outcome.results is not None:
        with_sopo_compat(outcome.results, evaluation.run.examples, outcome.predictions, seed)
        write_json(evaluation.run.run_dir / RESULTS, outcome.results, root=evaluation.run.run_dir.parent)
    return evaluation


def run_estimate(run: OpenRun) -> Estimate:
    """What the open run would send (after the cache) and what it should cost, with and without batching (a
    detector whose requests can be routed: `opened_run(routed=...)` checks it)."""
    from shambench.runs.batch import estimate_run

    return estimate_run(run.detector, run.todo(), run.journal, run.run_dir)


@overload
def evaluate(detector: str | Detector | None = ..., *, dry_run: Literal[True], **options: Any) -> Estimate: ...
@overload
def evaluate(
    detector: str | Detector | None = ..., *, dry_run: Literal[False] = ..., wait: Literal[True] = ..., **options: Any
) -> Results: ...
@overload
def evaluate(detector: str | Detector | None = ..., **options: Any) -> Results | Estimate | None: ...
def evaluate(detector: str | Detector | None = None, **options: Any) -> Results | Estimate | None:
    """Run `detector` (a registered name, `NAME:ARG`, or a Detector) over the selected examples into a run
    directory, and return its scored results: what `shambench eval` does, without printing.

    Args:
        detector: A registered name, `NAME:ARG`, or a Detector (ignored with `resume`: the run's config decides).
        datasets: Adapter names (default: every SHAM-Bench source present in `data_dir`, else
            `$SHAMBENCH_DATA_DIR`, else the user cache).
        suite: A suite instead of `datasets`: `processbench`, `hard2verify`, `math-shepherd` (step-level math) or
            `mushroom` (the 14 Mu-SHROOM languages).
        examples_file: An EXAMPLES JSONL file instead of adapters.
        split: The adapters' split.
        data_dir: Where the adapters read the corpora.
        limit: At most this many examples per partition (the first ones).
        context: A context provider whose evidence replaces the examples' contexts (`file:PATH`, `wikipedia`, ...).
        context_params: Parameters of the context provider.
        run_dir: The run directory to create (default: a new folder under `runs_root`), or the one to resume.
        runs_root: Where new run directories go.
        resume: Finish the run in `run_dir` where it stopped: only missing or failed examples are run.
        batch: Send the requests through OpenAI's Batch API (prompted detectors only).
        wait: With `batch`: wait for the batch; False submits it and returns None (a resume finishes the run).
        poll: With `batch`: seconds between the first two status checks.
        batch_timeout: With `batch`: seconds to wait for a batch before leaving it running (default 26 h), as
            `wait=False` does; a resume waits again.
        max_cost: Stop sending requests once the accounted cost reaches this many USD; what is left unanswered
            is a failed prediction, which a resume runs.
        sopo_compat: With `suite="math-shepherd"`: also the SOPO kit's label-dependent span rule in
            `results.groups.math` (compatibility only).
        dry_run: Send and write nothing; return the `Estimate` of what the run would send and cost.
        fail_fast: Stop (SystematicFailure) when predictions fail systematically.
        n_resamples: Bootstrap resamples of the confidence intervals.
        seed: Seed of the bootstrap.
        monitor: Receives the detector's counters and each finished prediction.
        detector_params: The detector factory's parameters, for those whose name is an option's (e.g. `seed`).
        **params: The detector factory's parameters (`model`, `base_url`, ...).

    Failed predictions are scored as empty and counted in `results.failed_predictions`.
    """
    evaluation = run_evaluation(detector, **options)
    return evaluation.estimate if evaluation.estimate is not None else evaluation.results
