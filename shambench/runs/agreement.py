"""`agreement()`: the human agreement of a selection of examples, as `shambench agreement` reports it."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path

from shambench.runs.selection import corpus_to_score
from shambench.schema import Example
from shambench.scoring.agreement import AgreementReport
from shambench.scoring.scorer import Scorer


def agreement(
    datasets: str | Sequence[str] | None = None,
    *,
    examples: Iterable[Example] | None = None,
    examples_file: str | Path | None = None,
    split: str = "test",
    data_dir: str | Path | None = None,
    limit: int | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> AgreementReport:
    """How well one annotator does against the others, per partition whose source releases its annotators
    (`shambench.scoring.agreement`); the other partitions are listed in `without_annotators`, with no figure.

    `datasets` names adapters (default: every SHAM-Bench source present), `examples_file` reads an EXAMPLES
    JSONL, or `examples` are given (e.g. loaded with adapter options such as
    `adapters.create("mushroom-multilingual", boundaries="raw")`); their `annotations` hold the annotators."""
    if examples is not None:
        return Scorer(examples, n_resamples, seed).agreement()
    scorer = Scorer(corpus_to_score(datasets, examples_file, split, data_dir, limit), n_resamples, seed)
    return scorer.agreement()
