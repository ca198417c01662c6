"""The metric registry: every figure of a scored group is one registered function of the scorer's columns.

A metric is a function `(columns, group) -> figure | None` registered with `@metric(NAME, convention=...)`: it reads
the per-example columns of one scoring pass (`Columns`) at the positions of the group's examples and returns a
pydantic model (its figure, with an interval where it has one), or None when the group has nothing to measure.
The scorer stores it in every partition's, task's and extended group's scores under NAME (`GroupScores`), its
convention goes into `results.json["conventions"]`, and a metric that names a `column` is a column of the results
table, one that names a `board` view a view of the leaderboard's span cells. Adding a metric is one registered
function; the built-in ones below are registered the same way, in the order their figures are written.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Protocol

import numpy as np
from pydantic import BaseModel

from shambench.scoring import metrics
from shambench.scoring.corpus import Units
from shambench.scoring.results import PRF, GroupScores, MushroomScores, ThresholdFree

AVERAGING = (
    "per-example precision/recall/F1 averaged over the examples of each task/dataset partition and of each task "
    "(datasets weigh by their size)"
)
"""How the headline levels (`token`, `sentence`) average, stated under `averaging` in the conventions."""


@dataclass(frozen=True)
class Group:
    """The examples one figure is computed over."""

    name: str
    """The group's key (`summ/ragtruth`, `summ`, `extended:summ`): it seeds the group's bootstrap resamples."""
    idx: np.ndarray
    """The positions of its examples in the scorer's columns, in id order."""


class Columns(Protocol):
    """The per-example columns of one scoring pass, in example order (what `shambench.scoring.scorer` computes)."""

    prf: dict[str, np.ndarray]
    """Per level (`token`, `sentence`): per-example precision, recall and F1, shape 3 x examples."""
    counts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    """Per unit (`token`, `sentence`, `char`): per-example true positives, predicted and gold positives."""
    token_scores: np.ndarray | None
    """Per token of the corpus, the highest detector score over the ranges it overlaps; None without scores."""

    @property
    def tokens(self) -> Units:
        """The corpus's tokens (owner example, gold label) in the order of `token_scores`."""
        ...

    @property
    def soft(self) -> np.ndarray:
        """Per example, whether it carries gold soft labels."""
        ...

    @property
    def soft_scores(self) -> tuple[np.ndarray, np.ndarray]:
        """Per example, Mu-SHROOM IoU and Cor (NaN without soft labels)."""
        ...

    def replicates(self, group: Group) -> np.ndarray:
        """The group's bootstrap replicates of (token F1, sentence F1), shape 2 x resamples."""
        ...


@dataclass(frozen=True)
class BoardView:
    """How the leaderboard shows a metric's figure beside the span F1."""

    key: str
    """Its key in a span cell (`Cell`) and in `none_scores`."""
    title: str
    """Column header."""
    sub: str
    """Line under the header."""
    help: str
    """The header's tooltip."""
    task_note: str
    """How a task cell's tooltip names it."""


@dataclass(frozen=True)
class Metric:
    """One registered metric."""

    name: str
    """Its key in a group's scores and in results.json."""
    compute: Callable[[Columns, Group], Any]
    """The figure of a group (a pydantic model of type `model`), or None."""
    model: type[BaseModel]
    """The figure's type (a figure read back from results.json is validated into it)."""
    convention: str
    """How it is computed, as results.json's conventions state it."""
    convention_key: str
    """The conventions' key the text is stated under (its name, unless it shares one)."""
    column: str = ""
    """Header of its figure's column in the results table; empty: not in the table."""
    board: BoardView | None = None
    """Its view on the leaderboard; None: not there."""
    figure: Callable[[Any], float | None] = lambda value: value.f1
    """The one number a table or board shows of its figure."""


_METRICS: dict[str, Metric] = {}


def metric(
    name: str,
    *,
    model: type[BaseModel],
    convention: str,
    convention_key: str = "",
    column: str = "",
    board: BoardView | None = None,
    figure: Callable[[Any], float | None] | None = None,
) -> Callable[[Callable[[Columns, Group], Any]], Callable[[Columns, Group], Any]]:
    """Decorator: register a metric function under `name` (a later registration of a name replaces it)."""

    def decorate(compute: Callable[[Columns, Group], Any]) -> Callable[[Columns, Group], Any]:
        shown = {"figure": figure} if figure is not None else {}
        _METRICS[name] = Metric(name, compute, model, convention, convention_key or name, column, board, **shown)
        return compute

    return decorate


def registered() -> list[Metric]:
    """Every registered metric, in the order of registration."""
    return list(_METRICS.values())


def named(name: str) -> Metric:
    """The metric registered under `name` (KeyError when none is)."""
    return _METRICS[name]


def unregister(name: str) -> None:
    """Remove a registered metric (a plugin's or a test's)."""
    del _METRICS[name]


def figures(columns: Columns, group: Group) -> dict[str, Any]:
    """Every registered metric's figure of a group, by name."""
    return {m.name: m.compute(columns, group) for m in registered()}


def metric_conventions() -> dict[str, str]:
    """What every registered metric states in results.json's conventions, by key."""
    return {m.convention_key: m.convention for m in registered()}


def value_of(scores: GroupScores, m: Metric) -> Any:
    """A metric's figure in a group's scores, typed (a figure read from results.json is a plain dict), or None."""
    value = getattr(scores, m.name, None)
    if value is None and scores.model_extra:
        value = scores.model_extra.get(m.name)
    return m.model.model_validate(value) if isinstance(value, dict) else value


def figure_of(scores: GroupScores, m: Metric) -> float | None:
    """The one number a table shows of a metric in a group's scores; None when the group has none."""
    value = value_of(scores, m)
    return None if value is None else m.figure(value)


def _prf(p: float, r: float, f: float, ci: tuple[float, float] | None = None) -> PRF:
    return PRF(precision=p, recall=r, f1=f, ci=ci)


def _per_example(level: int, name: str) -> Callable[[Columns, Group], PRF]:
    """A headline level's metric: per-example P/R/F1 averaged over the group, with the bootstrap interval of F1."""

    def compute(columns: Columns, group: Group) -> PRF:
        p, r, f = (metrics.exact_mean(a[group.idx]) for a in columns.prf[name])
        return _prf(p, r, f, metrics.percentile_ci(columns.replicates(group)[level]))

    return compute


for _level, _name in enumerate(("token", "sentence")):
    metric(_name, model=PRF, convention=AVERAGING, convention_key="averaging")(_per_example(_level, _name))


@metric(
    "token_with_gold",
    model=PRF,
    convention="per-example token precision/recall/F1 averaged over the examples of the group that have at least "
    "one gold span (examples without gold, where an empty prediction scores 1, are left out)",
    column="F1 hallu",
    board=BoardView(
        key="f1_with_gold",
        title="span F1",
        sub="hallucinated examples",
        help="per-example span F1 over the examples with a gold span only, mean over tasks",
        task_note="hallucinated examples",
    ),
)
def token_with_gold(columns: Columns, group: Group) -> PRF | None:
    """Per-example token P/R/F1 averaged over the group's examples that have gold spans."""
    gold = group.idx[columns.counts["token"][2][group.idx] > 0]
    if not len(gold):
        return None
    p, r, f = (float(a[gold].mean()) for a in columns.prf["token"])
    return _prf(p, r, f)


def _pooled(unit: str) -> Callable[[Columns, Group], PRF]:
    """Micro P/R/F1 over every `unit` of the group."""

    def compute(columns: Columns, group: Group) -> PRF:
        return _prf(*metrics.pooled_prf(*(c[group.idx].sum() for c in columns.counts[unit])))

    return compute


metric(
    "token_pooled",
    model=PRF,
    convention="micro precision/recall/F1 over all tokens of the group",
    column="pooled F1",
    board=BoardView(
        key="f1_pooled",
        title="span F1",
        sub="pooled tokens",
        help="token F1 pooled over all tokens of each task, mean over tasks",
        task_note="pooled",
    ),
)(_pooled("token"))
metric("char_pooled", model=PRF, convention="micro precision/recall/F1 over all characters of the group")(
    _pooled("char")
)


MUSHROOM_METRIC = "mushroom"
"""The name of the official Mu-SHROOM IoU/Cor metric (schema 2.0's results key `GroupScores.mushroom`)."""


@metric(
    MUSHROOM_METRIC,
    model=MushroomScores,
    convention="Mu-SHROOM official IoU and Cor per item, mean over items with soft labels; predicted soft labels are "
    "the prediction's soft_spans, else its scored ranges, else its spans with their score (1.0 when unset), written "
    "into a per-character vector in the order the prediction lists them (a later range overwrites an earlier one, "
    "as in the official scorer); a constant or empty vector scores 1.0 when both vectors have the same number of "
    "distinct values, else 0.0",
    figure=lambda value: value.iou,
)
def soft_label_scores(columns: Columns, group: Group) -> MushroomScores | None:
    """Mean IoU and Cor over the group's examples with soft labels."""
    soft = group.idx[columns.soft[group.idx]]
    if not len(soft):
        return None
    iou, cor = (a[soft] for a in columns.soft_scores)
    return MushroomScores(iou=metrics.exact_mean(iou), cor=metrics.exact_mean(cor), n=len(soft))


@metric(
    "threshold_free",
    model=ThresholdFree,
    convention="AUPRC (average precision) and AUROC over all tokens of the group; a token's score is the max over "
    "the scored ranges it overlaps (predicted spans when no scores are given), else 0",
    figure=lambda value: value.auprc,
)
def threshold_free(columns: Columns, group: Group) -> ThresholdFree | None:
    """AUPRC and AUROC over the group's tokens, when predictions carry scores."""
    if columns.token_scores is None:
        return None
    mask = np.isin(columns.tokens.owner, group.idx)
    y, s = columns.tokens.gold[mask], columns.token_scores[mask]
    both = 0 < y.sum() < len(y)
    return ThresholdFree(
        auprc=metrics.average_precision(y, s) if both else None,
        auroc=metrics.roc_auc(y, s) if both else None,
        n_tokens=int(mask.sum()),
    )
