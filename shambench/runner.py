"""Evaluation runs: a run directory with its config, an append-only prediction journal and the results.

Layout of a run directory:
    config.json        what was run: detector, parameters, data selection and its hash, versions
    predictions.jsonl  one `Prediction` per line, appended and flushed as each arrives (last line per id wins)
    results.json       the scored `Results`, written atomically at the end (and by `shambench score RUN_DIR`)

Every line is flushed as soon as its prediction exists, so a run killed at any moment (even SIGKILL) loses only
the predictions not yet returned; `--resume` re-runs exactly the ids without a successful line.
"""

from __future__ import annotations

import hashlib
import json
import re
from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

from pydantic import BaseModel, Field, ValidationError
from pydantic_core import to_jsonable_python

from shambench.benchmark import load_benchmark
from shambench.detector import Detector, Monitor
from shambench.io import DataError, Journal, read_models, write_json
from shambench.provenance import git_commit, now_iso, package_versions, shambench_version
from shambench.results import Results, RunInfo
from shambench.schema import Example, Prediction
from shambench.scorer import Scorer

CONFIG = "config.json"
JOURNAL = "predictions.jsonl"
RESULTS = "results.json"


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


def examples_hash(examples: Sequence[Example]) -> str:
    """A content hash of the examples that matter for scoring (order-independent)."""
    h = hashlib.sha256()
    for ex in sorted(examples, key=lambda e: e.id):
        spans = [[s.start, s.end] for s in ex.hallu_spans]
        steps = [[s.start, s.end, s.label] for s in ex.steps or []]
        h.update(json.dumps([ex.id, ex.task, ex.dataset, ex.response, spans, steps]).encode())
    return h.hexdigest()


def limit_per_partition(examples: Sequence[Example], limit: int | None) -> list[Example]:
    """The first `limit` examples of each partition (all when limit is None)."""
    if limit is None:
        return list(examples)
    seen: dict[str, int] = {}
    out = []
    for ex in examples:
        seen[ex.partition] = seen.get(ex.partition, 0) + 1
        if seen[ex.partition] <= limit:
            out.append(ex)
    return out


def select_examples(
    datasets: str | list[str] | None,
    examples_file: str | Path | None,
    split: str,
    data_dir: str | Path | None,
    limit: int | None,
    on_source_error: Callable[[str, str], None] | None = None,
    context: str | None = None,
    fetch_context: bool = True,
    context_params: dict[str, Any] | None = None,
) -> tuple[list[Example], dict[str, Any]]:
    """Examples from an EXAMPLES file or from adapters (with a provider's evidence as context when `context`
    names one), and the selection fields of a `RunConfig`. With `fetch_context` false, only the evidence already
    stored is used: the provider is never called."""
    if examples_file and datasets:
        raise DataError("give --datasets or --examples, not both")
    if examples_file:
        examples = read_models(examples_file, Example)
        selection: dict[str, Any] = {"examples_file": str(Path(examples_file).resolve())}
    else:
        bench = load_benchmark(datasets, split, data_dir)
        for name, message in bench.errors.items():
            if on_source_error:
                on_source_error(name, message)
        examples = bench.examples
        selection = {
            "datasets": sorted(bench.loads),
            "split": split,
            "data_dir": str(bench.data_dir.resolve()),
        }
    examples = limit_per_partition(examples, limit)
    if not examples:
        raise DataError("no examples selected (check --datasets, --examples and --data-dir)")
    if context:
        from shambench.context import apply_context, stored_context

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
) -> int:
    """Run the detector over the examples, journaling each prediction; returns how many were written."""
    wanted = {ex.id for ex in examples}
    n = 0
    with journal.appender() as append:
        for pred in detector.predict(examples, monitor or Monitor()):
            if pred.id not in wanted:
                raise DataError(f"detector {detector.name!r} returned a prediction for unknown id {pred.id!r}")
            append(pred)
            n += 1
            if on_prediction:
                on_prediction(pred)
    return n


def score_run(
    run_dir: Path, examples: Sequence[Example] | None = None, n_resamples: int = 1000, seed: int = 0
) -> Results:
    """Score a run directory's journal (never calls the detector) and write its `results.json`."""
    config = load_config(run_dir)
    if examples is None:
        examples = examples_of(config)
    predictions = Journal(run_dir / JOURNAL).read()
    results = score_predictions(config, run_dir, examples, list(predictions.values()), n_resamples, seed)
    write_json(run_dir / RESULTS, results)
    return results


def score_predictions(
    config: RunConfig,
    run_dir: Path,
    examples: Sequence[Example],
    predictions: Sequence[Prediction],
    n_resamples: int = 1000,
    seed: int = 0,
) -> Results:
    """The `Results` of a run's predictions; reads and writes no file, so a sweep can score on a remote worker."""
    results = Scorer(examples, n_resamples=n_resamples, seed=seed).score(predictions)
    results.run = run_info(config, run_dir, examples, predictions)
    results.run.finished_at = results.created_at
    return results


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
        datasets=config.datasets,
        split=config.split,
        examples_file=config.examples_file,
        limit=config.limit,
        context=config.context,
        context_provenance=config.context_provenance,
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


def dataset_revisions(names: Sequence[str]) -> dict[str, str]:
    """The released revision each named dataset's adapter reads (adapters without one are left out)."""
    from shambench.adapter import adapters

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
    if not path.is_file():
        raise DataError(f"{path}: not found (is {run_dir} a run directory?)")
    try:
        return RunConfig.model_validate_json(path.read_text(encoding="utf-8"))
    except ValidationError as err:
        raise DataError(f"{path}: not a run config ({err.errors()[0]['msg']})") from None
