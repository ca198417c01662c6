"""`RunSpec`: the one description of a run. `shambench eval` builds it from its options (generated from these
fields: `shambench.cli.options.spec_options`, through the table `python -m shambench.cli.options` writes), `evaluate()` takes it (or its fields as keywords, `EvalOptions`),
config.json embeds it, a resume compares the recorded run with the one asked for (`spec_differences`), and a sweep
expands its grid into specs.

Each field's docstring is its documentation everywhere: in the Python API and, with the names of other fields in
backquotes turned into their flags, in the command line's help. A field the command line shows differently from
its name with dashes says so in its `Flag`.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from pydantic import Field, field_validator

from shambench.errors import DataError, SelectionError
from shambench.schema import NAMES_A_KEY, Name
from shambench.selection_fields import DatasetsOption, Flag, Resolved, Section, SelectionOptions

if TYPE_CHECKING:
    from shambench.detection.detector import Monitor

BATCH_TIMEOUT = 26 * 3600.0
"""How long a run waits for a batch by default: OpenAI's 24 h window and some."""


def suite_names() -> list[str]:
    """The suites a selection may name: those the registered sources declare (`shambench.sources.selections`)."""
    from shambench.sources import selections

    return list(selections())


class Selection(Resolved):
    """Which examples a run takes: the fields config.json records (`shambench.selection_fields`), and the suite
    asked for."""

    suite: Annotated[str | None, Flag(kind="suite")] = None
    """Datasets by suite instead of `datasets`: a step-level math suite (prints its per-subset table: ProcessBench
    F1, Hard2Verify balanced accuracy/F1, Math-Shepherd character F1), mushroom (the 14 Mu-SHROOM languages) or
    extended (every SHAM-Bench source present plus HaluQuestQA, XSumFaith's Gold summaries and the 14 languages;
    prints the extended view, whose overall never enters the paper's)."""

    @field_validator("datasets", mode="before")
    @classmethod
    def _names(cls, value: Any) -> Any:
        from shambench.data.benchmark import split_names

        return split_names(value) if isinstance(value, str | list | tuple) else value


class Scoring(Section):
    """How a run's predictions are scored."""

    n_resamples: Annotated[int, Flag(name="--bootstrap")] = Field(default=1000, ge=10)
    """Bootstrap resamples for the 95% confidence intervals."""
    seed: int = 0
    """Seed of the bootstrap."""
    alt_epsilon: float = Field(default=0.2, ge=0.0, le=2.0)
    """Epsilon of the alternative annotator test in groups.agreement (H0: mean(W_f - W_h) <= -epsilon); the
    default is the paper's value for skilled annotators (`shambench.scoring.alternative.ALT_EPSILON`)."""
    sopo_compat: bool = False
    """With `suite` math-shepherd: also report the SOPO kit's label-dependent span rule (compatibility only)."""


class Execution(Section):
    """Where a run's directory goes and how its predictions are made; none of it changes what they are."""

    run_dir: Annotated[Path | None, Flag(kind="dir")] = None
    """Run directory to create, new or empty (default: one under `runs_root`), or, with `resume`, the one to finish."""
    runs_root: Annotated[Path, Flag(name="--runs", kind="dir")] = Path("runs")
    """Where new run directories go."""
    resume: Annotated[bool, Flag(option=False)] = False
    """Finish the run in `run_dir` where it stopped: only missing or failed examples are run."""
    new_run: bool = False
    """Start a new run directory even when `runs_root` holds an unfinished run of the same detector, parameters and
    selection (by default that run is resumed)."""
    max_concurrency: int | None = Field(default=None, ge=1)
    """Requests in flight at once."""
    timeout: float | None = Field(default=None, ge=0.1)
    """Per-request timeout in seconds."""
    batch: bool = False
    """Send the requests through OpenAI's Batch API (half price, answers within 24 h); prompted detectors only."""
    wait: Annotated[
        bool,
        Flag(
            name="--no-wait",
            inverse=True,
            help="With `batch`: submit the batch and exit with status 4 (submitted, not finished); "
            "`shambench eval --resume RUN_DIR` finishes the run later.",
        ),
    ] = True
    """With `batch`: wait for the batch's answers; off, submit it and return (a resume finishes the run)."""
    poll: float = Field(default=5.0, gt=0)
    """With `batch`: seconds between the first two status checks (each further wait is 1.5 times longer, at most
    5 min)."""
    batch_timeout: Annotated[float, Flag(kind="duration", metavar="DURATION")] = Field(default=BATCH_TIMEOUT, gt=0)
    """With `batch`: stop waiting for a batch after this long (e.g. 90m, 26h, 3600s); the batch stays recorded,
    the run is left unfinished and a resume waits again."""
    dry_run: bool = False
    """Print the requests the run would send (after the cache), their input tokens and estimated cost, with and
    without the batch discount; send and write nothing."""
    max_cost: Annotated[float | None, Flag(metavar="USD")] = Field(default=None, ge=0)
    """Stop sending requests once this invocation's accounted cost reaches USD (by batch: a batch holds only the
    requests its estimate fits); the rest are recorded as not run (failed predictions), which a resume runs."""
    fail_fast: Annotated[
        bool,
        Flag(
            name="--keep-going",
            inverse=True,
            help="Do not stop when predictions fail systematically (by default a run stops when its first 8, or 20 "
            "in a row, fail for the same reason).",
        ),
    ] = True
    """Stop (SystematicFailure) when predictions fail systematically: the first 8, or 20 in a row, for one reason."""


class RunSpec(Section):
    """A run: its detector, which examples (`selection`), how they are scored (`scoring`) and how the run is made
    (`execution`)."""

    detector: Annotated[Name | None, Flag(metavar="NAME")] = None
    """Detector name, or NAME:ARG (see `shambench list detectors`)."""
    params: Annotated[dict[str, Any], Flag(name="--param", short="-p", kind="pairs")] = Field(default_factory=dict)
    """Detector parameter (repeatable)."""
    model: str | None = None
    """Model name, for API-backed detectors."""
    base_url: Annotated[str | None, Flag(kind="base_url")] = None
    """OpenAI-compatible endpoint, e.g. http://127.0.0.1:8000/v1 (no user:password@: name the key's variable
    with `api_key_env`)."""
    api_key_env: Annotated[str | None, Flag(metavar="VAR"), NAMES_A_KEY] = None
    """Environment variable holding the API key (default OPENAI_API_KEY)."""
    selection: Selection = Field(default_factory=Selection)
    """Which examples the run takes."""
    scoring: Scoring = Field(default_factory=Scoring)
    """How its predictions are scored."""
    execution: Execution = Field(default_factory=Execution)
    """Where its directory goes and how its predictions are made."""

    @classmethod
    def sections(cls) -> dict[str, type[Section]]:
        """The spec's sections by field name (`selection`, `scoring`, `execution`)."""
        return {
            name: info.annotation
            for name, info in cls.model_fields.items()
            if isinstance(info.annotation, type) and issubclass(info.annotation, Section)
        }

    @classmethod
    def of(cls, **options: Any) -> RunSpec:
        """The spec of `options` named by field (a section's fields by their own names, as `EvalOptions` lists
        them); only those given count as set. TypeError names an option no field has."""
        sections = cls.sections()
        where = {name: section for section, model in sections.items() for name in model.model_fields}
        given: dict[str, dict[str, Any]] = {name: {} for name in sections}
        top: dict[str, Any] = {}
        for key, value in options.items():
            if key in where:
                given[where[key]][key] = value
            elif key in cls.model_fields and key not in sections:
                top[key] = value
            else:
                raise TypeError(f"unknown option {key!r} (a detector's own parameters go in params={{...}})")
        made = {name: sections[name].model_validate(values) for name, values in given.items() if values}
        return cls.model_validate({**top, **made})

    def detector_params(self) -> dict[str, Any]:
        """What the detector factory is given: `params`, and the endpoint and execution options that were set."""
        given = {k: getattr(self, k) for k in ENDPOINT if k in self.model_fields_set}
        given |= {k: getattr(self.execution, k) for k in DETECTOR_EXECUTION if getattr(self.execution, k) is not None}
        return {**self.params, **given}

    def check(self) -> None:
        """SpecError for options that do not go together (each message names the fields in backquotes)."""
        sel, exe = self.selection, self.execution
        if exe.resume and exe.run_dir is None:
            raise SpecError("`resume` needs the `run_dir` of the run to finish")
        if exe.resume and "runs_root" in exe.model_fields_set:
            raise SpecError("`runs_root` is where new runs go: a resume finishes the run in `run_dir`")
        if not exe.resume and not self.detector:
            raise SpecError("a `detector` is required (or `resume` a run directory)")
        if self.scoring.sopo_compat and sel.suite != "math-shepherd":
            raise SpecError("`sopo_compat` needs `suite` math-shepherd (the SOPO kit's rule is for Math-Shepherd only)")
        if sel.suite and (sel.datasets or sel.examples_file):
            raise SelectionError("a suite selects its own datasets: give a suite, or datasets or an examples file")
        if sel.suite and sel.suite not in suite_names():
            raise SelectionError(f"unknown suite {sel.suite!r} (known: {', '.join(suite_names())})")
        if not exe.wait and not exe.batch and not exe.resume:
            raise SpecError("`wait` off goes with `batch` (or the `resume` of a run by batch)")

    def same_run(self, other: RunSpec) -> bool:
        """Whether `other` asks for the same run: its detector, parameters, endpoint and selection, every field
        compared (given or not), paths resolved."""
        fields = {"detector", "params", "model", "base_url", "api_key_env"}
        mine, theirs = (spec.model_dump(include=fields) for spec in (self, other))
        selections = (
            {name: _compared("selection", name, getattr(spec.selection, name)) for name in Selection.model_fields}
            for spec in (self, other)
        )
        return mine == theirs and next(selections) == next(selections)

    def routed(self) -> str | None:
        """What of this run needs a detector whose chat requests can be routed, as a refusal names it."""
        exe = self.execution
        needing = ((exe.dry_run, "a dry run"), (exe.batch, "--batch"), (exe.max_cost is not None, "a cost budget"))
        return next((what for given, what in needing if given), None)


class SpecError(DataError):
    """Options of a run that do not go together; the message names the fields in backquotes."""


ENDPOINT = ("model", "base_url", "api_key_env")
"""RunSpec's fields that go to the detector factory when set."""
DETECTOR_EXECUTION = ("max_concurrency", "timeout")
"""Execution's fields that go to the detector factory when set."""
CREDENTIAL_ROUTING = ("base_url", "api_key_env")
"""Recorded parameters that route the API key: on resume they come from the caller (or the preset), never from
config.json, so that a doctored file cannot send the key to another server or read another variable."""


class EvalOptions(SelectionOptions, DatasetsOption, total=False):
    """`evaluate()`'s keywords: RunSpec's fields by name (see their docstrings; `Selection`'s are declared with
    them in `shambench.selection_fields`), and a monitor."""

    params: dict[str, Any]
    model: str
    base_url: str
    api_key_env: str
    n_resamples: int
    seed: int
    alt_epsilon: float
    sopo_compat: bool
    run_dir: str | Path
    runs_root: str | Path
    resume: bool
    new_run: bool
    max_concurrency: int
    timeout: float
    batch: bool
    wait: bool
    poll: float
    batch_timeout: float
    dry_run: bool
    max_cost: float
    fail_fast: bool
    monitor: Monitor
    """Receives the detector's counters and each finished prediction."""


def _compared(section: str, name: str, value: Any) -> Any:
    """A value as two specs are compared: paths resolved, dataset names as a set."""
    if isinstance(value, Path):
        return str(value.resolve())
    if name == "datasets" and value is not None:
        return sorted(value)
    return value


def _set_fields(spec: RunSpec) -> Iterator[tuple[str, str, Any]]:
    """(section, field, value) of each output-defining field `spec` sets: its detector, each detector parameter
    (`params`, and the endpoint's fields by their names) and its selection."""
    if "detector" in spec.model_fields_set:
        yield "", "detector", spec.detector
    endpoint = {name: getattr(spec, name) for name in ENDPOINT if name in spec.model_fields_set}
    for key, value in {**spec.params, **endpoint}.items():
        yield "params", key, value
    for name in spec.selection.model_fields_set:
        yield "selection", name, getattr(spec.selection, name)


def spec_differences(recorded: RunSpec, asked: RunSpec) -> list[str]:
    """The output-defining fields `asked` sets (its detector, its detector parameters that the recorded run's
    detector reported as defining its output, those that route the API key included, and its selection) whose
    values differ from `recorded`'s, sorted: empty when `asked` is the recorded run. What a resume refuses to change and what a sweep checks a cell's folder against; `asked` leaves
    unset what the recorded run decides."""
    from pydantic_core import to_jsonable_python

    out = []
    for section, name, value in _set_fields(asked):
        if section == "params":
            if name not in recorded.params:
                continue  # not one that defines the detector's output, by the detector's own account
            theirs = recorded.params[name]
            value = to_jsonable_python(value)
        else:
            theirs = getattr(recorded.selection if section else recorded, name)
        if _compared(section, name, value) != _compared(section, name, theirs):
            out.append(name)
    return sorted(out)
