"""Evaluation runs: a run directory with its config, an append-only prediction journal and the results.

Layout of a run directory:
    config.json        what was run: detector, parameters, data selection and its hash, versions
    predictions.jsonl  one `Prediction` per line, appended and flushed as each arrives (last line per id wins)
    results.json       the scored `Results`, written atomically at the end (and by `shambench score RUN_DIR`)
    per_example.jsonl  one `ExampleScores` per example (written with results.json): what a score is made of
    .lock              held (flock) by the one process running the detector into it (`run_lock`)

Every line is flushed as soon as its prediction exists, so a run killed at any moment (even SIGKILL) loses only
the predictions not yet returned; `--resume` re-runs exactly the ids without a successful line.
"""

from __future__ import annotations

import hashlib
import json
import os
import re
from collections import Counter
from collections.abc import Callable, Collection, Iterable, Iterator, Sequence
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from pydantic_core import to_jsonable_python

from shambench.data.benchmark import Benchmark, load_benchmark
from shambench.detection.detector import Detector, Monitor
from shambench.errors import DataError
from shambench.io import Journal, iter_jsonl, open_regular, read_regular, write_json, write_jsonl
from shambench.provenance import git_commit, now_iso, package_versions, shambench_version
from shambench.records import check_detector_prediction, iter_records, read_examples
from shambench.runs.failures import FailureWatch
from shambench.runs.files import CONFIG, JOURNAL, LOCK, PER_EXAMPLE, RESULTS
from shambench.schema import Example, Prediction
from shambench.scoring.corpus import Corpus, file_corpus
from shambench.scoring.results import ExampleScores, Results, RunInfo
from shambench.scoring.scorer import UNSCORED_EXAMPLE_FIELDS, Scorer

MAX_CONFIG_BYTES = 64 * 1024 * 1024
"""Largest config.json read: far above any run's (selection, provenance, dropped-row counts)."""


class RunConfig(BaseModel):
    """What a run evaluated, so that it can be rescored or resumed exactly."""

    detector: str
    """Detector spec as given (`NAME` or `NAME:ARG`)."""
    family: str
    """Detector family."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Detector parameters that define its output (no secrets)."""
    datasets: list[str] | None = None
    """Dataset names, when the examples came from adapters (None with `examples_file`: not from adapters)."""
    split: str = "test"
    """Split of the adapters' data."""
    data_dir: str | None = None
    """Data directory the adapters read."""
    examples_file: str | None = None
    """EXAMPLES JSONL file, when the examples came from a file."""
    limit: int | None = None
    """At most this many examples per partition (the first ones), when set."""
    context: str | None = None
    """Context provider spec whose evidence replaced the examples' contexts (None: the source's own context)."""
    context_params: dict[str, Any] = Field(default_factory=dict)
    """Parameters given to the context provider (`--context-param`), part of which evidence it stores."""
    context_provenance: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per partition, which evidence that was: provider, parameters, counts and a content hash."""
    dropped_rows: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per dataset, the source rows its adapter dropped (reason -> count) before any --limit."""
    examples_hash: str
    """SHA-256 over the ids, responses and gold spans; resume and rescoring refuse a different hash."""
    n_examples: int
    """Number of examples in the run."""
    shambench_version: str
    """Version that created the run."""
    git_commit: str | None = None
    """Commit that created the run."""
    created_at: str
    """UTC creation time."""
    packages: dict[str, str] = Field(default_factory=dict)
    """Versions of score-relevant libraries."""
    origin: str = "run"
    """`run` (shambench eval) or `submission` (a predictions file given to `shambench leaderboard submit`)."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form facts about the system, e.g. a submission's authors, description and URL."""
    served_model: str | None = None
    """The model name the server reported answering with, once predictions recorded one (see `served_model`)."""


def examples_hash(examples: Sequence[Example]) -> str:
    """A content hash of the examples that matter for scoring (order-independent)."""
    h = hashlib.sha256()
    for ex in sorted(examples, key=lambda e: e.id):
        spans = [[s.start, s.end] for s in ex.hallu_spans]
        steps = [[s.start, s.end, s.label] for s in ex.steps or []]
        h.update(json.dumps([ex.id, ex.task, ex.dataset, ex.response, spans, steps]).encode())
    return h.hexdigest()


NO_EXAMPLES = "no examples selected (check --datasets, --examples and --data-dir)"


def limit_per_partition(examples: Iterable[Example], limit: int | None) -> list[Example]:
    """The first `limit` examples of each partition (all when limit is None)."""
    return list(first_per_partition(examples, limit))


def first_per_partition(examples: Iterable[Example], limit: int | None) -> Iterator[Example]:
    """The first `limit` examples of each partition (all when limit is None), as they are read."""
    seen: Counter[str] = Counter()
    for ex in examples:
        seen[ex.partition] += 1
        if limit is None or seen[ex.partition] <= limit:
            yield ex


def loaded_benchmark(datasets: str | Sequence[str] | None, split: str, data_dir: str | Path | None) -> Benchmark:
    """The benchmark of the named datasets; DataError when one of them fails to load (never a partition silently
    left out)."""
    bench = load_benchmark(datasets, split, data_dir)
    if bench.errors:
        raise DataError("; ".join(f"dataset {name} not loaded: {message}" for name, message in bench.errors.items()))
    return bench


def examples_to_score(
    datasets: str | Sequence[str] | None,
    examples_file: str | Path | None,
    split: str,
    data_dir: str | Path | None,
    limit: int | None,
    kept_datasets: Collection[str] | None = None,
) -> Iterator[Example]:
    """The examples of a selection (as `select_examples`), for scoring only. An EXAMPLES file is read as the scorer
    consumes the examples (which it keeps as columns, see `shambench.scoring.corpus`), without their questions and
    contexts: its texts are never all in memory. `kept_datasets`: only the examples of these datasets (those a
    file of predictions in a released format covers)."""
    if examples_file and datasets:
        raise DataError("give --datasets or --examples, not both")
    read: Iterator[Example]
    if examples_file:
        read = (ex for _, ex in iter_records(examples_file, Example, UNSCORED_EXAMPLE_FIELDS))
    else:
        read = iter(loaded_benchmark(datasets, split, data_dir).examples)
    if kept_datasets is not None:
        read = (ex for ex in read if ex.dataset in kept_datasets)
    n = 0
    for ex in first_per_partition(read, limit):
        n += 1
        yield ex
    if not n:
        raise DataError(
            NO_EXAMPLES
            if kept_datasets is None
            else f"{NO_EXAMPLES}; the predictions are for {', '.join(sorted(kept_datasets)) or 'no dataset'}"
        )


def corpus_to_score(
    datasets: str | Sequence[str] | None,
    examples_file: str | Path | None,
    split: str,
    data_dir: str | Path | None,
    limit: int | None,
    kept_datasets: Collection[str] | None = None,
) -> Corpus:
    """The scorer's corpus of a selection (see `examples_to_score`). An EXAMPLES file scored before, byte for byte,
    is not read again: its corpus is kept on disk (`shambench.scoring.corpus.file_corpus`), unless only some of its
    datasets are kept."""
    read = examples_to_score(datasets, examples_file, split, data_dir, limit, kept_datasets)
    if examples_file and not datasets and kept_datasets is None:
        return file_corpus(examples_file, limit, lambda: read)
    return Corpus.of(read)


def select_examples(
    datasets: str | Sequence[str] | None,
    examples_file: str | Path | None,
    split: str,
    data_dir: str | Path | None,
    limit: int | None,
    context: str | None = None,
    fetch_context: bool = True,
    context_params: dict[str, Any] | None = None,
) -> tuple[list[Example], dict[str, Any]]:
    """Examples from an EXAMPLES file or from adapters (with a provider's evidence as context when `context`
    names one), and the selection fields of a `RunConfig`. With `fetch_context` false, only the evidence already
    stored is used: the provider is never called. A dataset that fails to load is a DataError, never a partition
    silently left out."""
    if examples_file and datasets:
        raise DataError("give --datasets or --examples, not both")
    if examples_file:
        examples = read_examples(examples_file)
        selection: dict[str, Any] = {"examples_file": str(Path(examples_file).resolve())}
    else:
        bench = loaded_benchmark(datasets, split, data_dir)
        examples = bench.examples
        selection = {
            "datasets": sorted(bench.loads),
            "split": split,
            "data_dir": str(bench.data_dir.resolve()),
            "dropped_rows": {name: load.dropped for name, load in bench.loads.items() if load.dropped},
        }
    examples = limit_per_partition(examples, limit)
    if not examples:
        raise DataError(NO_EXAMPLES)
    if context:
        from shambench.data.context import apply_context, stored_context

        examples, provenance = (apply_context if fetch_context else stored_context)(context, examples, context_params)
        selection |= {"context": context, "context_params": context_params or {}, "context_provenance": provenance}
    return examples, {**selection, "limit": limit}


def examples_of(config: RunConfig, same_evidence: bool = False) -> list[Example]:
    """Re-create a run's examples from its config, with the evidence already stored for its context provider
    (rescoring, showing or comparing a run never calls a provider); DataError when they no longer hash the same.

    `same_evidence` (for resuming, where the detector reads the evidence): DataError too when that evidence is
    no longer what the run recorded in its `context_provenance` (e.g. a failed fetch has succeeded since).
    """
    examples, selection = select_examples(
        config.datasets,
        config.examples_file,
        config.split,
        config.data_dir,
        config.limit,
        context=config.context,
        fetch_context=False,
        context_params=config.context_params,
    )
    if examples_hash(examples) != config.examples_hash:
        raise DataError(
            "the examples no longer match the run's examples_hash (the data or its selection changed); "
            "start a new run instead"
        )
    if same_evidence and to_jsonable_python(selection.get("context_provenance", {})) != config.context_provenance:
        raise DataError(
            f"the evidence stored for --context {config.context} is no longer what the run used (see its "
            "context_provenance); start a new run instead"
        )
    return examples


def new_run_dir(base: str | Path, detector: str) -> Path:
    """A fresh, unique run directory name under `base`."""
    stamp = datetime.now(UTC).strftime("%Y%m%dT%H%M%S")
    slug = re.sub(r"[^A-Za-z0-9_.-]+", "-", detector).strip("-")[:60] or "run"
    path = Path(base) / f"{stamp}_{slug}"
    n = 1
    while path.exists():
        n += 1
        path = Path(base) / f"{stamp}_{slug}_{n}"
    return path


def make_config(detector: Detector, examples: Sequence[Example], selection: dict[str, Any]) -> RunConfig:
    """The config of a new run."""
    return new_config(detector.name, detector.family, detector.params(), examples, **selection)


def new_config(name: str, family: str, params: dict[str, Any], examples: Sequence[Example], **fields: Any) -> RunConfig:
    """A run config stamped with the examples' hash, versions and time (`fields`: selection, origin, meta)."""
    return RunConfig(
        detector=name,
        family=family,
        params=params,
        examples_hash=examples_hash(examples),
        n_examples=len(examples),
        shambench_version=shambench_version(),
        git_commit=git_commit(),
        created_at=now_iso(),
        packages=package_versions(),
        **fields,
    )


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold the run directory's lock while the body runs: one process at a time may call a detector into a run
    directory. DataError at once, naming the holder's pid, when another process holds it."""
    import fcntl

    run_dir = Path(run_dir)
    run_dir.mkdir(parents=True, exist_ok=True)
    # Never through a planted link: the pid written below would truncate whatever file it points to.
    with os.fdopen(open_regular(run_dir / LOCK, os.O_RDWR | os.O_CREAT), "r+", encoding="utf-8") as fh:
        try:
            fcntl.flock(fh, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except BlockingIOError:
            fh.seek(0)
            holder = fh.read().strip()
            raise DataError(
                f"{run_dir} is in use by another shambench process{f' (pid {holder})' if holder else ''}; "
                "wait for it to finish (or stop it) before resuming"
            ) from None
        fh.truncate(0)
        fh.write(f"{os.getpid()}\n")
        fh.flush()
        try:
            yield
        finally:
            fcntl.flock(fh, fcntl.LOCK_UN)


def pending(examples: Sequence[Example], journal: Journal) -> list[Example]:
    """Examples without a successful prediction in the journal."""
    done = {pid for pid, p in journal.read().items() if p.error is None}
    return [ex for ex in examples if ex.id not in done]


def run_predictions(
    detector: Detector,
    examples: Sequence[Example],
    journal: Journal,
    monitor: Monitor | None = None,
    on_prediction: Callable[[Prediction], None] | None = None,
    fail_fast: bool = True,
) -> int:
    """Run the detector over the examples, journaling each prediction; returns how many were written.

    Each prediction is checked as a PRED file line would be (and against its example's response) before it is
    journaled: DataError names the detector and the example. With `fail_fast`, raises SystematicFailure (after
    journaling) when failures are systematic (`FailureWatch`)."""
    wanted: dict[str | None, Example] = {ex.id: ex for ex in examples}  # a prediction without an id finds none
    watch = FailureWatch() if fail_fast else None
    n = 0
    with journal.appender() as append:
        for pred in detector.predict(examples, monitor or Monitor()):
            append(check_detector_prediction(pred, wanted.get(getattr(pred, "id", None)), detector.name))
            n += 1
            if on_prediction:
                on_prediction(pred)
            if watch is not None:
                watch.see(pred)
    return n


def score_run(
    run_dir: Path, examples: Sequence[Example] | None = None, n_resamples: int = 1000, seed: int = 0
) -> Results:
    """Score a run directory's journal (never calls the detector) and write its `results.json`."""
    return rescore_run(run_dir, examples, n_resamples, seed)[0]


def example_scores(run_dir: Path) -> dict[str, ExampleScores]:
    """A run's per-example scores by id, from its `per_example.jsonl` (rescored, which writes the file, when the
    run predates it)."""
    path = Path(run_dir) / PER_EXAMPLE
    if not path.is_file():
        return {row.id: row for row in rescore_run(run_dir)[1]}
    return {row.id: row for row in (ExampleScores.model_validate(obj) for _, obj in iter_jsonl(path))}


def rescore_run(
    run_dir: Path, examples: Sequence[Example] | None = None, n_resamples: int = 1000, seed: int = 0
) -> tuple[Results, Sequence[ExampleScores]]:
    """`score_run`, also returning the per-example scores it wrote to `per_example.jsonl`."""
    config = load_config(run_dir)
    if examples is None:
        examples = examples_of(config)
    predictions = Journal(run_dir / JOURNAL).read()
    results, per_example = score_predictions(config, run_dir, examples, list(predictions.values()), n_resamples, seed)
    write_scores(run_dir, results, per_example)
    return results, per_example


def write_scores(run_dir: Path, results: Results, per_example: Sequence[ExampleScores]) -> None:
    """Write a run's `per_example.jsonl`, then its `results.json` (each atomically)."""
    write_jsonl(run_dir / PER_EXAMPLE, per_example, follow=False)
    write_json(run_dir / RESULTS, results, follow=False)


def score_predictions(
    config: RunConfig,
    run_dir: Path,
    examples: Sequence[Example],
    predictions: Sequence[Prediction],
    n_resamples: int = 1000,
    seed: int = 0,
) -> tuple[Results, Sequence[ExampleScores]]:
    """The `Results` of a run's predictions and its per-example scores; reads and writes no file, so a sweep can
    score on a remote worker."""
    results, per_example = Scorer(examples, n_resamples=n_resamples, seed=seed).score_with_examples(predictions)
    results.run = run_info(config, run_dir, examples, predictions)
    results.run.finished_at = results.created_at
    return results, per_example


def run_info(
    config: RunConfig, run_dir: Path, examples: Sequence[Example], predictions: Sequence[Prediction]
) -> RunInfo:
    """The `Results.run` record of a run: its config, data provenance and usage totals."""
    usage = usage_totals(predictions)
    return RunInfo(
        detector=config.detector,
        family=config.family,
        params=config.params,
        prompt_hash=prompt_hash(config.params, predictions),
        served_model=served_model(predictions),
        datasets=config.datasets,
        split=config.split,
        examples_file=config.examples_file,
        limit=config.limit,
        context=config.context,
        context_provenance=config.context_provenance,
        dropped_rows=config.dropped_rows,
        examples_hash=config.examples_hash,
        dataset_revisions=dataset_revisions(config.datasets or []),
        dataset_counts=dict(Counter(ex.dataset for ex in examples)),
        run_dir=str(run_dir),
        started_at=config.created_at,
        packages=config.packages,
        origin=config.origin,
        meta=config.meta,
        usage=usage,
        cost_usd=usage.get("cost_usd", usage.get("cost")),
    )


def prompt_hash(params: dict[str, Any], predictions: Sequence[Prediction]) -> str | None:
    """The detector's prompt hash: from its params, else the one every prediction's meta agrees on."""
    if params.get("prompt_hash"):
        return str(params["prompt_hash"])
    hashes = {p.meta.get("prompt_hash") for p in predictions if p.error is None}
    return str(hashes.pop()) if len(hashes) == 1 and None not in hashes else None


def served_model(predictions: Sequence[Prediction]) -> str | None:
    """The model name the server reported in the successful predictions' `meta.served_model` (sorted and joined by
    `, ` when there were several); None when none was recorded."""
    names = sorted({str(p.meta["served_model"]) for p in predictions if p.error is None and p.meta.get("served_model")})
    return ", ".join(names) or None


def dataset_revisions(names: Sequence[str]) -> dict[str, str]:
    """The released revision each named dataset's adapter reads (adapters without one are left out)."""
    from shambench.data.adapter import adapters

    revisions = {name: adapters.get(name).factory().revision for name in names}
    return {name: rev for name, rev in revisions.items() if rev}


def usage_totals(predictions: Iterable[Prediction]) -> dict[str, float]:
    """Token and cost totals summed over the predictions' `meta.usage` records."""
    totals: dict[str, float] = {}
    for pred in predictions:
        for key, value in (pred.meta.get("usage") or {}).items():
            if isinstance(value, int | float):
                totals[key] = totals.get(key, 0) + value
    return totals


def load_config(run_dir: Path) -> RunConfig:
    """The config of a run directory; DataError when it is not one."""
    path = Path(run_dir) / CONFIG
    data = read_regular(path, MAX_CONFIG_BYTES)
    if data is None:
        raise DataError(f"{path}: not found (is {run_dir} a run directory?)")
    try:
        return RunConfig.model_validate_json(data)
    except ValidationError as err:
        raise DataError(f"{path}: not a run config ({err.errors()[0]['msg']})") from None
