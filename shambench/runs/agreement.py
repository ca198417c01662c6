"""`agreement()`: the human agreement of a selection of examples, as `shambench agreement` reports it, and
`run_agreement()`: a run's detector against the same annotators, with the alternative annotator test."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Unpack

from shambench.errors import DataError
from shambench.runs.scoring import scorer_of
from shambench.runs.selection import corpus_to_score
from shambench.runs.spec import Scoring, Selection
from shambench.schema import Example
from shambench.scoring.agreement import AgreementGroup, AgreementReport
from shambench.scoring.scorer import Scorer
from shambench.selection_fields import SelectionOptions


def agreement(
    datasets: str | Sequence[str] | Selection | None = None,
    *,
    examples: Iterable[Example] | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
    **selection: Unpack[SelectionOptions],
) -> AgreementReport:
    """How well one annotator does against the others, per partition whose source releases its annotators
    (`shambench.scoring.agreement`); the other partitions are listed in `without_annotators`, with no figure.

    `datasets` names adapters (default: every SHAM-Bench source present; or a whole `Selection`), the other
    selection fields by name select as `evaluate` does (e.g. `examples_file` reads an EXAMPLES JSONL), or
    `examples` are given (e.g. loaded with adapter options such as
    `adapters.create("mushroom-multilingual", boundaries="raw")`); their `annotations` hold the annotators."""
    if examples is not None:
        return Scorer(examples, n_resamples, seed).agreement()
    chosen = (
        datasets if isinstance(datasets, Selection) else Selection.model_validate({"datasets": datasets, **selection})
    )
    scorer = Scorer(corpus_to_score(chosen), n_resamples, seed)
    return scorer.agreement()


def run_agreement(run_dir: str | Path, scoring: Scoring | None = None) -> AgreementGroup:
    """A run's `groups.agreement`: its detector and the annotators against the same leave-one-out golds, with the
    alternative annotator test at `scoring`'s epsilon; scored again from the run's journal and examples
    (re-created from its config), nothing written. DataError when none of its partitions has annotators."""
    from shambench.io import Journal
    from shambench.runs.files import JOURNAL
    from shambench.runs.rundir import load_config, run_examples

    run = Path(run_dir)
    examples = run_examples(load_config(run))
    predictions = list(Journal(run / JOURNAL).read().values())
    group = scorer_of(examples, scoring or Scoring()).score(predictions).groups.agreement
    if group is None:
        held = ", ".join(sorted({ex.partition for ex in examples}))
        raise DataError(f"{run}: none of the run's partitions has individual annotators ({held})")
    return group
