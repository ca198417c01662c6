"""`evaluate()`: run a detector over examples into a run directory and score it, as `shambench eval` does.

A run directory is opened new or resumed (`open_run`), locked for the one process allowed to call a detector into
it, its predictions journaled as they arrive (`run_open`), and its results written. One rule decides whether a
folder holds the run being asked for (`run_differences`): a resume refuses a detector whose output-defining
parameters would change, and a sweep skips, resumes or refuses its cells by it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from pydantic_core import to_jsonable_python

from shambench.detection.detector import Detector, Monitor, create_detector
from shambench.errors import DataError
from shambench.io import write_json
from shambench.runs.files import CONFIG, JOURNAL
from shambench.runs.runner import (
    Journal,
    RunConfig,
    examples_of,
    load_config,
    make_config,
    new_run_dir,
    pending,
    run_lock,
    run_predictions,
    score_run,
    select_examples,
    served_model,
)
from shambench.schema import Example

if TYPE_CHECKING:
    from shambench.runs.batch import BatchSettings
from shambench.scoring.results import Results

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
        self.journal = Journal(self.run_dir / JOURNAL)

    def todo(self) -> list[Example]:
        """Examples without a successful prediction yet."""
        return pending(self.examples, self.journal)


@dataclass
class RunOutcome:
    """How a call to `run_open` ended: scored results, or a batch still running."""

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


def check_new_run_dir(run_dir: Path) -> None:
    """DataError when `run_dir` already holds a run, or a journal whose run config is missing."""
    if (run_dir / CONFIG).exists():
        raise DataError(f"{run_dir} already holds a run; use --resume {run_dir} or another --run-dir")
    if (run_dir / JOURNAL).exists():
        raise DataError(
            f"{run_dir} holds {JOURNAL} but no {CONFIG}: where its predictions came from is unknown; "
            "use another --run-dir (or delete the folder)"
        )


def resumed_detector(config: RunConfig, given: dict[str, Any]) -> Detector:
    """The detector of a run being resumed: its recorded parameters, except those that route the API key, which
    come from `given` or the preset; DataError when anything recorded would change."""
    recorded = {k: v for k, v in config.params.items() if k not in CREDENTIAL_ROUTING}
    detector = create_detector(config.detector, **{**recorded, **given})
    changed = run_differences(config, config.detector, detector.params())
    if not changed:
        return detector
    detector.close()
    routing = [k for k in changed if k in CREDENTIAL_ROUTING]
    if routing:
        flags = " ".join(f"--{k.replace('_', '-')} {config.params.get(k)}" for k in routing)
        raise DataError(
            f"the run was made with {flags}; the API key is sent only where the command line says, so pass "
            f"{'it' if len(routing) == 1 else 'them'} again to resume against that server (or start a new run)"
        )
    raise DataError(
        f"--resume would change {', '.join(changed)}, which define the detector's output "
        "(its predictions would no longer match config.json); start a new run instead"
    )


@contextmanager
def open_run(
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
    **params: Any,
) -> Iterator[OpenRun]:
    """A new run directory (`detector` and the data selection), or the run in `resume_dir`, opened for predicting.

    The lock is taken before config.json is read or written, so no other process can adopt or change the run;
    it is held, and the detector open, until the block ends. With `write` false nothing is locked or written
    (a dry run); the detector is still built and the examples selected.
    """
    if resume_dir is not None:
        path = Path(resume_dir)
        with run_lock(path) if write else _unlocked():
            config = load_config(path)
            examples = examples_of(config, same_evidence=True)
            opened = OpenRun(path, resumed_detector(config, params), examples, config)
            try:
                yield opened
            finally:
                opened.detector.close()
        return
    if detector is None:
        raise DataError("a detector is required (or resume a run directory)")
    spec = detector if isinstance(detector, str) else detector.name
    path = Path(run_dir) if run_dir else new_run_dir(runs_root, spec)
    check_new_run_dir(path)
    det = create_detector(detector, **params) if isinstance(detector, str) else detector
    try:
        examples, selection = select_examples(
            datasets, examples_file, split, data_dir, limit, context=context, context_params=context_params or {}
        )
        with run_lock(path) if write else _unlocked():
            config = make_config(det, examples, selection)
            if write:
                check_new_run_dir(path)
                write_json(path / CONFIG, config, follow=False)
            yield OpenRun(path, det, examples, config)
    finally:
        det.close()


@contextmanager
def _unlocked() -> Iterator[None]:
    yield


def run_open(
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
    from shambench.llm.batch import require_routes
    from shambench.llm.client import Budget
    from shambench.runs.batch import BatchRun, BatchSettings, has_batches

    todo = run.todo()
    outcome = RunOutcome()
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
        if max_cost is not None:
            require_routes(run.detector, "a cost budget")
            run.detector.budget = Budget(max_cost)  # type: ignore[attr-defined]
        run_predictions(run.detector, todo, run.journal, monitor, on_prediction, fail_fast=fail_fast)
    served = served_model(list(run.journal.read().values()))
    if served != run.config.served_model:
        run.config.served_model = served
        write_json(run.run_dir / CONFIG, run.config, follow=False)
    outcome.results = score_run(run.run_dir, run.examples, n_resamples=n_resamples, seed=seed)
    return outcome


def evaluate(
    detector: str | Detector,
    *,
    datasets: str | Sequence[str] | None = None,
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
    monitor: Monitor | None = None,
    **params: Any,
) -> Results:
    """Run `detector` (a registered name, `NAME:ARG`, or a Detector) over the selected examples into a run
    directory, and return its scored results: what `shambench eval` does, without printing.

    `datasets` names adapters (default: every SHAM-Bench source present in `data_dir`, else `$SHAMBENCH_DATA_DIR`,
    else the user cache); `examples_file` reads an EXAMPLES JSONL instead. `params` go to the detector's factory.
    With `resume=True`, `run_dir` is an existing run finished where it stopped (its config decides the detector
    and the data). Failed predictions are scored as empty and counted in `results.failed_predictions`.
    """
    if resume and run_dir is None:
        raise DataError("resume=True needs the run_dir of the run to finish")
    opened = (
        open_run(resume_dir=run_dir, **params)
        if resume
        else open_run(
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
            **params,
        )
    )
    with opened as run:
        outcome = run_open(run, monitor, fail_fast=fail_fast, n_resamples=n_resamples, seed=seed)
    assert outcome.results is not None  # only a batch left running has none, and none was asked for
    return outcome.results
