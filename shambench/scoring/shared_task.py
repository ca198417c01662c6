"""The Mu-SHROOM shared task's view of a scored run: per language, the official IoU and Cor beside span F1.

The shared task ranked systems per language on character IoU and Cor; SHAM-Bench reports token and sentence F1.
For partitions named `<task>/mushroom-<lang>` (the `mushroom-multilingual` source) the view lists all four per
language, and its overall is the unweighted mean over languages (not over examples), as a per-language ranking
implies. It is stored in `Results.groups["mushroom"]`, apart from the SHAM-Bench overall.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel

from shambench.scoring.results import GroupScores

if TYPE_CHECKING:
    from rich.table import Table

DATASET_PREFIX = "mushroom-"
CONVENTION = (
    "per language: Mu-SHROOM official IoU and Cor (mean over items, official scorer rules) and per-example token "
    "and sentence F1 (SHAM-Bench convention); overall: unweighted mean over languages"
)


class LanguageScores(BaseModel):
    """The shared task's figures and the span F1s of one language."""

    n: int
    """Items scored."""
    iou: float
    """Official character IoU, mean over items."""
    cor: float
    """Official Cor (Spearman of soft labels, constant-vector rule), mean over items."""
    token_f1: float
    """Per-example token F1, mean over items."""
    sentence_f1: float
    """Per-example sentence F1, mean over items."""


class SharedTaskView(BaseModel):
    """Per language scores and their mean over languages."""

    convention: str = CONVENTION
    """How the figures are computed."""
    languages: dict[str, LanguageScores]
    """Per language code, in alphabetical order."""
    overall: LanguageScores
    """Unweighted mean over languages (`n` is the total item count)."""


def language_scores(datasets: dict[str, GroupScores]) -> dict[str, LanguageScores]:
    """The per-language figures of the `mushroom-<lang>` partitions that carry soft labels."""
    out = {}
    for key, gs in sorted(datasets.items()):
        dataset = key.split("/", 1)[-1]
        if not dataset.startswith(DATASET_PREFIX) or gs.mushroom is None:
            continue
        out[dataset[len(DATASET_PREFIX) :]] = LanguageScores(
            n=gs.n, iou=gs.mushroom.iou, cor=gs.mushroom.cor, token_f1=gs.token.f1, sentence_f1=gs.sentence.f1
        )
    return out


def shared_task_group(datasets: dict[str, GroupScores]) -> dict[str, Any]:
    """`{"mushroom": view}` when any Mu-SHROOM language partition was scored, else `{}`."""
    languages = language_scores(datasets)
    if not languages:
        return {}
    rows = list(languages.values())

    def mean(field: str) -> float:
        return sum(getattr(r, field) for r in rows) / len(rows)

    overall = LanguageScores(
        n=sum(r.n for r in rows), **{f: mean(f) for f in ("iou", "cor", "token_f1", "sentence_f1")}
    )
    return {"mushroom": SharedTaskView(languages=languages, overall=overall).model_dump(mode="json")}


def shared_task_table(results: Any) -> Table | None:
    """A rich table of `results.groups["mushroom"]` (None when the run has no Mu-SHROOM language partition)."""
    from rich.table import Table

    group = results.groups.get("mushroom")
    if not group:
        return None
    view = SharedTaskView.model_validate(group)
    table = Table(title="Mu-SHROOM shared-task view (official IoU/Cor; overall = mean over languages)")
    for col in ("language", "n", "IoU", "Cor", "token F1", "sentence F1"):
        table.add_column(col, justify="left" if col == "language" else "right")
    for lang, r in [*view.languages.items(), ("overall", view.overall)]:
        table.add_row(lang, str(r.n), *(f"{v:.4f}" for v in (r.iou, r.cor, r.token_f1, r.sentence_f1)))
    return table
