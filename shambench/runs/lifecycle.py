"""One lifecycle for every run: its directory opened new or resumed (`opened_run`), its pending examples predicted
through an executor (`InProcess`, `Batched`, or a sweep's workers: `shambench.runs.sweep.driver.Remote`), then its
journal scored and the results written (`finish`); `complete` runs the last two. `evaluate` and every sweep backend
go through it; a new API run whose requests start while its corpora load (`shambench.runs.streamed`) opens
differently and ends in the same `finish`.

A run directory is locked for the one process allowed to call a detector into it, and config.json is written before
any prediction is journaled. One rule decides whether a folder holds the run being asked for: the specs compared
(`shambench.runs.spec.spec_differences`), and the examples' hash.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager, nullcontext
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import shambench.fs as fs
from shambench.detection.detector import REPORTED_ONLY, Detector, Monitor, create_detector
from shambench.errors import RunDirError, UnknownPluginError
from shambench.io import Journal, write_json
from shambench.runs.files import CONFIG, JOURNAL
from shambench.runs.rundir import (
    RunConfig,
    check_new_run_dir,
    detector_config,
    load_config,
    new_run_dir,
    pending,
    recorded_spec,
    run_examples,
    run_lock,
)
from shambench.runs.runner import run_predictions
from shambench.runs.scoring import (
    ScorerAhead,
    score_predictions,
    scorer_meanwhile,
    with_sopo_compat,
    write_scores,
)
from shambench.runs.selection import select_examples
from shambench.runs.spec import CREDENTIAL_ROUTING, RunSpec, Scoring, Selection, spec_differences
from shambench.schema import Example, Prediction
from shambench.scoring.results import ExampleScores, Results


@dataclass
class Run:
    """A run directory opened for predicting: its detector, its examples and its config."""

    run_dir: Path
    """The run directory."""
    detector: Detector
    """The detector predicting into it (closed when the run is closed)."""
    examples: list[Example]
    """Every example of the run."""
    config: RunConfig | None
    """The run's config.json (None until written: a sweep's cell records it once its workers report the detector's
    parameters)."""
    root: Path | None = None
    """The folder its files are confined to (`shambench.fs.Root`): the run directory's parent unless given (a
    sweep's: the runs folder's parent)."""
    journal: Journal = field(init=False)
    """The prediction journal."""

    def __post_init__(self) -> None:
        self.root = self.root or fs.folder_root(self.run_dir)
        self.journal = Journal(self.run_dir / JOURNAL, root=self.root)

    def todo(self) -> list[Example]:
        """Examples without a successful prediction yet."""
        return pending(self.examples, self.journal)

    def record(self, config: RunConfig) -> None:
        """Write config.json, unless the run has one: before its first prediction is journaled (under the lock).
        RunDirError when another config.json appeared meanwhile."""
        if self.config is None:
            if (self.run_dir / CONFIG).exists():
                raise RunDirError(f"{self.run_dir} already holds a run: resume it, or choose another run directory")
            write_json(self.run_dir / CONFIG, config, root=self.root)
            self.config = config


@dataclass
class RunOutcome:
    """How a run's predicting and scoring ended: scored results, or a batch still running."""

    results: Results | None = None
    """The scored results (None while a batch is still running)."""
    predicted: int = 0
    """Predictions journaled by this call."""
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


class Executor:
    """How a run's pending examples are predicted into its journal, and its journal scored (in this process unless
    an executor scores elsewhere)."""

    scorer: ScorerAhead
    """The examples' scorer, when predicting built one ahead."""

    def __init__(self) -> None:
        self.scorer = ScorerAhead()

    def predict(
        self, run: Run, todo: list[Example], monitor: Monitor, on_prediction: Callable[[Any], None] | None
    ) -> RunOutcome:
        """Journal predictions for `todo`; the outcome counts them (and says when a batch is left running)."""
        raise NotImplementedError

    def score(
        self, run: Run, config: RunConfig, scoring: Scoring, outcome: RunOutcome
    ) -> tuple[Results, Sequence[ExampleScores]]:
        """The run's results and per-example scores, the journal read once into `outcome.predictions` (writes
        nothing)."""
        outcome.predictions = run.journal.read()
        values = list(outcome.predictions.values())
        return score_predictions(config, run.run_dir, run.examples, values, scoring, self.scorer.scorer)


class InProcess(Executor):
    """The detector called in this process; an API detector's run builds its scorer while requests are in flight,
    not after the last answer."""

    def __init__(self, scoring: Scoring, fail_fast: bool = True, max_cost: float | None = None):
        super().__init__()
        self.scoring, self.fail_fast, self.max_cost = scoring, fail_fast, max_cost

    def predict(
        self, run: Run, todo: list[Example], monitor: Monitor, on_prediction: Callable[[Any], None] | None
    ) -> RunOutcome:
        from shambench.llm.api import APIDetector
        from shambench.llm.route import Budget

        if self.max_cost is not None:  # the detector takes a budget: `opened_run` checked it routes requests
            run.detector.budget = Budget(self.max_cost)  # type: ignore[attr-defined]
        waits = isinstance(run.detector, APIDetector) and bool(todo)
        scoring = self.scoring
        with scorer_meanwhile(run.examples, scoring) if waits else nullcontext() as ahead:
            n = run_predictions(run.detector, todo, run.journal, monitor, on_prediction, fail_fast=self.fail_fast)
        self.scorer = ahead or ScorerAhead()
        return RunOutcome(predicted=n)


class Batched(Executor):
    """The requests sent through the Batch API (a run with `batch`, or one that already has batches)."""

    def __init__(self, settings: Any, on_message: Callable[[str], None] = lambda line: None):
        super().__init__()
        self.settings, self.on_message = settings, on_message

    def predict(
        self, run: Run, todo: list[Example], monitor: Monitor, on_prediction: Callable[[Any], None] | None
    ) -> RunOutcome:
        from shambench.runs.batch import BatchRun

        outcome = RunOutcome()

        def counted(pred: Any) -> None:
            outcome.predicted += 1
            if on_prediction:
                on_prediction(pred)

        done = BatchRun(run.detector, run.run_dir, run.journal, self.settings, self.on_message).run(
            todo, monitor, counted
        )
        outcome.unfinished_batches = list(done.unfinished)
        outcome.unused_batch_lines = list(done.unused_lines)
        outcome.detached_batch, outcome.timed_out = done.detached, done.timed_out
        return outcome


def executor_for(run: Run, spec: RunSpec, on_message: Callable[[str], None] = lambda line: None) -> Executor:
    """The executor of an opened run: by batch when asked for or when the run already has batches."""
    from shambench.runs.batch import BatchSettings, has_batches

    exe = spec.execution
    if exe.batch or has_batches(run.run_dir):
        settings = BatchSettings(wait=exe.wait, poll=exe.poll, max_cost=exe.max_cost, timeout=exe.batch_timeout)
        return Batched(settings, on_message)
    return InProcess(spec.scoring, exe.fail_fast, exe.max_cost)


def complete(
    run: Run,
    executor: Executor,
    scoring: Scoring,
    monitor: Monitor | None = None,
    on_prediction: Callable[[Any], None] | None = None,
) -> RunOutcome:
    """Predict the run's pending examples through `executor`, then score and write it (`finish`), unless a batch
    is left running. Raises SystematicFailure (fail fast) or AuthenticationStopped after journaling what arrived;
    KeyboardInterrupt loses only what was in flight."""
    outcome = executor.predict(run, run.todo(), monitor or Monitor(), on_prediction)
    if outcome.detached_batch:
        return outcome
    return finish(run, outcome, executor, scoring)


def finish(run: Run, outcome: RunOutcome, executor: Executor, scoring: Scoring) -> RunOutcome:
    """`outcome` with the run's journal scored into results.json and per_example.jsonl (with the SOPO kit's rule
    too when `scoring.sopo_compat`); config.json records the served model and the structured-output mode the
    predictions name."""
    config = run.config
    if config is None:
        raise RunDirError(f"{run.run_dir}: nothing was predicted, so no config.json was written")
    results, per_example = executor.score(run, config, scoring, outcome)
    said = {key: getattr(results.run, key, None) for key in ("served_model", "structured_mode")}
    if said != config.model_dump(include=set(said)):
        for key, value in said.items():
            setattr(config, key, value)
        write_json(run.run_dir / CONFIG, config, root=run.root)
    if scoring.sopo_compat:
        with_sopo_compat(results, run.examples, outcome.predictions, scoring.seed)
    write_scores(run.run_dir, results, per_example, run.root)
    outcome.results = results
    return outcome


def refuse_changes(config: RunConfig, asked: RunSpec) -> None:
    """RunDirError when resuming the run `config` records as `asked` would change what defines its output."""
    changed = spec_differences(recorded_spec(config), asked)
    if changed:
        # The run's options in backquotes (the command line shows their flags), the detector's parameters bare.
        options = {"detector", *Selection.model_fields}
        named = ", ".join(f"`{name}`" if name in options else name for name in changed)
        raise RunDirError(
            f"resuming would change {named}, which define the run's output (its predictions would no longer match "
            "config.json); leave them out, or start a new run"
        )


def resumed_detector(config: RunConfig, given: dict[str, Any]) -> Detector:
    """The detector of a run being resumed: its recorded parameters, except those that route the API key, which
    come from `given` or the preset; RunDirError when anything recorded would change."""
    recorded = {k: v for k, v in config.params.items() if k not in (*CREDENTIAL_ROUTING, *REPORTED_ONLY)}
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
    # Every recorded parameter is compared (one the detector no longer reports counts as changed), and one it
    # reports now that the run did not record is a change too.
    made = RunSpec(detector=config.detector, params=dict.fromkeys(config.params) | detector.params())
    changed = spec_differences(recorded_spec(config), made) + sorted(made.params.keys() - config.params.keys())
    routing = sorted(k for k in CREDENTIAL_ROUTING if config.params.get(k) != made.params.get(k))
    if not changed and not routing:
        return detector
    detector.close()
    if routing:
        was = ", ".join(f"{k}={config.params.get(k)}" for k in routing)
        raise RunDirError(
            f"the run was made with {was}; the API key is sent only where the caller says, so give "
            f"{'it' if len(routing) == 1 else 'them'} again to resume against that server (or start a new run)"
        )
    raise RunDirError(
        f"resuming would change {', '.join(changed)}, which define the detector's output "
        "(its predictions would no longer match config.json); start a new run instead"
    )


@contextmanager
def opened_run(spec: RunSpec, detector: Detector | None = None, write: bool = True) -> Iterator[Run]:
    """The run `spec` asks for opened for predicting: a new run directory (of `detector` when given, else of
    `spec.detector`) or, with `execution.resume`, the run in `execution.run_dir`.

    The lock is taken before config.json is read or written, so no other process can adopt or change the run; it
    is held, and the detector open, until the block ends. With `write` false nothing is locked or written (a dry
    run); the detector is still built and the examples selected. A detector whose chat requests cannot be routed
    is refused as soon as it is built when the spec needs that (`RunSpec.routed`), before anything is written."""
    from shambench.llm.batch import require_routes

    routed = spec.routed()
    if spec.execution.resume:
        path = Path(spec.execution.run_dir or "")
        with run_lock(path) if write else nullcontext():
            config = load_config(path)
            refuse_changes(config, spec)
            examples = run_examples(config, same_evidence=True)
            run = Run(path, resumed_detector(config, spec.detector_params()), examples, config)
            try:
                if routed:
                    require_routes(run.detector, routed)
                yield run
            finally:
                run.detector.close()
        return
    path, det = new_run_detector(spec, detector)
    try:
        check_runnable(det, routed, write)
        examples, selection = select_examples(spec.selection)
        with run_lock(path) if write else nullcontext():
            run = Run(path, det, examples, None)
            config = detector_config(det, examples, selection, spec)
            if write:
                check_new_run_dir(path)  # again, under the lock
                run.record(config)
            run.config = config
            yield run
    finally:
        det.close()


def new_run_detector(spec: RunSpec, detector: Detector | None = None) -> tuple[Path, Detector]:
    """The directory of a new run (checked to hold no run yet) and its detector: `detector`, or the one `spec`
    names, built with its parameters."""
    name = detector.name if detector is not None else spec.detector
    if not name:
        raise RunDirError("a detector is required (or resume a run directory)")
    exe = spec.execution
    path = Path(exe.run_dir) if exe.run_dir else new_run_dir(exe.runs_root, name)
    check_new_run_dir(path)
    return path, detector if detector is not None else create_detector(name, **spec.detector_params())


def check_runnable(detector: Detector, routed: str | None, write: bool) -> None:
    """Refuse a detector whose requests cannot be routed when `routed` names what needs it, and, when the run
    writes (sends), one that cannot run (e.g. a missing API key)."""
    from shambench.llm.batch import require_routes

    if routed:
        require_routes(detector, routed)
    if write:
        detector.check_can_run()
