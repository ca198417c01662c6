"""Scoring a run directory: its journal against its examples, into `results.json` and `per_example.jsonl`, with the
run's provenance (`Results.run`). Never calls the detector."""

from __future__ import annotations

import os
import signal
import threading
import warnings
from collections import Counter
from collections.abc import Iterable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from multiprocessing.connection import Connection, wait
from multiprocessing.process import BaseProcess
from pathlib import Path
from typing import Any

import shambench.fs as fs
from shambench.io import Journal, iter_jsonl, write_json, write_jsonl
from shambench.memory import freeze_long_lived
from shambench.runs.files import JOURNAL, PER_EXAMPLE, RESULTS
from shambench.runs.rundir import RunConfig, load_config, run_examples
from shambench.runs.spec import Scoring
from shambench.schema import Example, Prediction
from shambench.scoring.corpus import Corpus
from shambench.scoring.results import ExampleScores, Results, RunInfo
from shambench.scoring.scorer import Scorer
from shambench.scoring.steps import math_group
from shambench.scoring.text import (
    PARALLEL_MIN_CHARS,
    PROCESS_CACHE_TEXTS,
    language_of,
    packed,
    process_context,
    remember,
    segment_mixed,
)


def scorer_of(examples: Iterable[Example] | Corpus, scoring: Scoring) -> Scorer:
    """The scorer of `examples` with `scoring`'s resamples, seed and alternative-annotator epsilon."""
    return Scorer(examples, n_resamples=scoring.n_resamples, seed=scoring.seed, alt_epsilon=scoring.alt_epsilon)


def run_results(run_dir: Path, examples: Sequence[Example] | None = None, scoring: Scoring | None = None) -> Results:
    """The results of a run directory's journal, scored (the detector is never called) and written to its
    `results.json` and `per_example.jsonl`."""
    return run_results_and_scores(run_dir, examples, scoring)[0]


def run_results_and_scores(
    run_dir: Path,
    examples: Sequence[Example] | None = None,
    scoring: Scoring | None = None,
    predictions: Mapping[str, Prediction] | None = None,
    scorer: Scorer | None = None,
    data_changed: list[str] | None = None,
) -> tuple[Results, Sequence[ExampleScores]]:
    """The results of a run directory (as `run_results`) and the per-example scores written beside them.
    `predictions`, when given, are the journal already read (by id), and `scorer` the examples' scorer already
    built (with `scoring`); `data_changed`: what of the examples changed since the run was made, when they are
    scored anyway (recorded in the results)."""
    config = load_config(run_dir)
    if examples is None:
        examples = run_examples(config)
    if predictions is None:
        predictions = Journal(run_dir / JOURNAL).read()
    results, per_example = score_predictions(config, run_dir, examples, list(predictions.values()), scoring, scorer)
    results.run.data_changed = data_changed
    write_scores(run_dir, results, per_example)
    return results, per_example


BACKGROUND_NICENESS = 10
"""How much lower the priority of the child segmenting during the requests is (`os.nice`)."""


@dataclass
class ScorerAhead:
    """The scorer of a run's examples, built while the run's predictions are made (`scorer_meanwhile`)."""

    scorer: Scorer | None = None
    """The scorer, its human agreement and resamples made, once the block has ended (None: none was built ahead)."""


@contextmanager
def scorer_meanwhile(examples: Sequence[Example], scoring: Scoring | None = None) -> Iterator[ScorerAhead]:
    """While the block runs (making predictions, which the scorer does not depend on), segment the examples'
    responses in a child process, then build their `Scorer`, its human agreement and its groups' bootstrap resamples
    in a thread of this process, so that scoring the run after its last prediction does not wait for them; the
    scorer is in the yielded `ScorerAhead` when the block ends.

    Only for runs large enough to pay for a process (`PARALLEL_MIN_CHARS`) and small enough for the text cache to
    keep (`PROCESS_CACHE_TEXTS`). When the block raises, the child is stopped and nothing is waited for; when the
    child or the build fails, no scorer is left and scoring builds its own, as it would have (the same
    segmentations and scores either way)."""
    ahead = ScorerAhead()
    keys = list(dict.fromkeys((language_of(ex.meta), ex.response) for ex in examples))
    if sum(len(text) for _, text in keys) < PARALLEL_MIN_CHARS or len(keys) > PROCESS_CACHE_TEXTS:
        yield ahead
        return
    context = process_context()
    mine, theirs = context.Pipe()
    child = context.Process(target=_send_segmentations, args=(theirs,), daemon=True)
    child.start()
    theirs.close()
    built: list[Scorer] = []

    def build() -> None:
        try:
            # Sent from this thread, not with the child's arguments: the first request then need not wait for
            # the child to start and read them.
            mine.send(([text for _, text in keys], [lang for lang, _ in keys]))
            if _remember_sent(mine, child, keys):
                scorer = scorer_of(examples, scoring or Scoring())
                # A scoring of no predictions computes the human agreement and draws (and keeps) every group's
                # bootstrap resamples, none of which depends on a prediction: the run's scoring then reuses them.
                scorer.score([])
                freeze_long_lived()  # kept until the run is scored: no collection need walk it meanwhile
                built.append(scorer)
        except Exception:  # scoring builds its own scorer, and meets (and reports) the same failure
            pass
        finally:
            mine.close()

    builder = threading.Thread(target=build, name="shambench-scorer-ahead", daemon=True)
    builder.start()
    finished = False
    try:
        yield ahead
        finished = True
    finally:
        if not finished and child.is_alive():
            child.terminate()  # the builder then finds nothing sent and ends
        if finished:
            builder.join()
            ahead.scorer = built[0] if built else None
        child.join()


def _send_segmentations(conn: Connection) -> None:
    """The child of `scorer_meanwhile`: receives texts and their languages, and sends their segmentations, packed,
    or None when segmenting failed (scoring then meets the same failure, and reports it, in the parent)."""
    signal.signal(signal.SIGINT, signal.SIG_IGN)  # the parent decides: an interrupt there stops this child
    # Work done ahead, not awaited: on a busy machine the requests' event loop and the server come first.
    if hasattr(os, "nice"):
        os.nice(BACKGROUND_NICENESS)
    texts, langs = conn.recv()
    try:
        made = packed(segment_mixed(texts, langs))
    except Exception:
        made = None
    conn.send(made)
    conn.close()


def _remember_sent(receive: Connection, child: BaseProcess, keys: list[tuple[str, str]]) -> bool:
    """Put the child's segmentations of `keys` (language, text) in this process's text cache; False (and nothing
    cached) when it died without sending them or failed to make them."""
    # Waiting on the child's sentinel too: a child that dies before sending may leave the pipe open (a spawned
    # child's end is handed over by a thread of this process), and a bare recv would then wait forever.
    ready = wait([receive, child.sentinel])
    if receive not in ready and not receive.poll():
        return False
    try:
        made = receive.recv()
    except (EOFError, OSError):
        return False
    if made is None:
        return False
    segmentations = made.split()
    for lang in dict.fromkeys(lang for lang, _ in keys):
        mine = [(text, seg) for (k, text), seg in zip(keys, segmentations) if k == lang]
        remember([text for text, _ in mine], [seg for _, seg in mine], lang)
    return True


def example_scores(run_dir: Path) -> dict[str, ExampleScores]:
    """A run's per-example scores by id, from its `per_example.jsonl` (rescored, which writes the file, when the
    run predates it)."""
    path = Path(run_dir) / PER_EXAMPLE
    if not path.is_file():
        return {row.id: row for row in run_results_and_scores(run_dir)[1]}
    return {row.id: row for row in (ExampleScores.model_validate(obj) for _, obj in iter_jsonl(path))}


def write_scores(
    run_dir: Path, results: Results, per_example: Sequence[ExampleScores], root: Path | None = None
) -> None:
    """Write a run's `per_example.jsonl`, then its `results.json` (each atomically)."""
    write_jsonl(run_dir / PER_EXAMPLE, per_example, root=root or fs.folder_root(run_dir))
    write_json(run_dir / RESULTS, results, root=root or fs.folder_root(run_dir))


def score_predictions(
    config: RunConfig,
    run_dir: Path,
    examples: Sequence[Example],
    predictions: Sequence[Prediction],
    scoring: Scoring | None = None,
    scorer: Scorer | None = None,
) -> tuple[Results, Sequence[ExampleScores]]:
    """The `Results` of a run's predictions and its per-example scores (by `scorer` when given: the examples'
    scorer, made with `scoring`, the default `Scoring` when None); reads and writes no file, so a sweep can score
    on a remote worker."""
    scorer = scorer or scorer_of(examples, scoring or Scoring())
    results, per_example = scorer.score_with_examples(predictions)
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
        structured_mode=structured_mode(predictions),
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


def recorded(predictions: Sequence[Prediction], key: str) -> str | None:
    """What the successful predictions' `meta[key]` says (the distinct values sorted and joined by `, ` when they
    differ); None when none recorded one."""
    values = sorted({str(p.meta[key]) for p in predictions if p.error is None and p.meta.get(key)})
    return ", ".join(values) or None


def served_model(predictions: Sequence[Prediction]) -> str | None:
    """The model name the server reported answering with (`meta.served_model`); None when none was recorded."""
    return recorded(predictions, "served_model")


def structured_mode(predictions: Sequence[Prediction]) -> str | None:
    """The structured-output mode the requests were answered in (`meta.structured`: the negotiated one, or the one
    forced); None when no request asked for an output format."""
    return recorded(predictions, "structured")


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


def with_sopo_compat(
    results: Results, examples: Sequence[Example], predictions: Mapping[str, Prediction], seed: int
) -> None:
    """Recompute `results.groups.math` with the SOPO kit's compatibility figures (`--sopo-compat`; the
    command line prints `shambench.scoring.steps.SOPO_WARNING` beside them)."""
    usable = {pid: p for pid, p in predictions.items() if p.error is None}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        group = math_group([ex for ex in examples if ex.steps], usable, seed=seed, sopo_compat=True)
    results.groups.math = group
