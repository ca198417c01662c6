"""Rank stability: does "A ranks above B" survive another published convention, and resampling?

Every run is ranked under each convention a board reports (the overall, a mean over the tasks, of: per-example
span F1 as the paper computes it, span F1 over the examples with a hallucination, pooled token F1, pooled character
F1, sentence F1, and Mu-SHROOM IoU and Cor where every run has soft-labelled examples), with Kendall's tau-b between
each pair of conventions. A paired bootstrap over examples (each task's examples resampled with the scorer's own
seeded draws, the same draws for every run) gives each run a 95% rank interval under the board's convention, and
for every pair of runs the share of resamples keeping their order. An order **holds** when every convention keeps
it and at least 95% of the resamples do; it is **convention-dependent** when a convention reverses (or ties) it;
**not resolved** otherwise.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np
from pydantic import ConfigDict, Field

from shambench.schema import Model, Name, Prediction
from shambench.scoring import metrics
from shambench.scoring.measures import MUSHROOM_METRIC

if TYPE_CHECKING:
    from shambench.scoring.scorer import Scorer

CONVENTIONS = {
    "paper": "per-example span (token) F1, mean over examples, then over tasks (the paper's; the board's rank)",
    "hallucinated": "per-example span F1 over the examples with a gold span only, mean over tasks",
    "pooled_token": "token F1 pooled over all tokens of each task, mean over tasks",
    "pooled_char": "character F1 pooled over all characters of each task (RAGTruth span level), mean over tasks",
    "sentence": "per-example sentence F1, mean over examples, then over tasks",
    "iou": "Mu-SHROOM IoU, mean over the soft-labelled examples of each task, then over those tasks",
    "cor": "Mu-SHROOM Cor, mean over the soft-labelled examples of each task, then over those tasks",
}
"""Each convention a board reports, in display order; `iou` and `cor` only where every run has soft labels."""
METRIC_OF = {
    "paper": ("token", "f1"),
    "hallucinated": ("token_with_gold", "f1"),
    "pooled_token": ("token_pooled", "f1"),
    "pooled_char": ("char_pooled", "f1"),
    "sentence": ("sentence", "f1"),
    "iou": (MUSHROOM_METRIC, "iou"),
    "cor": (MUSHROOM_METRIC, "cor"),
}
"""Each convention's registered metric (`shambench.scoring.measures`) and the field of its figure: the overall a
convention ranks by is that figure's mean over the tasks (computed here from the same per-example columns, so that
it can be resampled)."""
BOARD = "paper"
"""The board's own convention: its order, and the one the rank intervals and resample shares use."""
HOLDS_SHARE = 0.95
"""An order holds in resampling when at least this share of the resamples keeps it."""
DECIMALS = 12
"""Figures equal to this many decimals tie (sums taken in another order differ in the last bits)."""
VERDICTS = ("holds", "convention-dependent", "not resolved")
CONVENTION = (
    "ranks: 1 + the number of rows with a higher figure (ties share the better rank), among the rows compared; "
    "tau: Kendall's tau-b between the figures of two conventions; interval: 2.5th-97.5th percentile of a row's rank "
    "under the board's convention over a paired bootstrap (each task's examples resampled with the scorer's seeded "
    "draws, the same for every row); an order holds when every convention keeps it and at least 95% of the "
    "resamples do, is convention-dependent when some convention reverses or ties it, and is not resolved otherwise"
)
# Rows of the per-example matrix: each convention's per-task figure is a function of their weighted sums.
_ROWS = ("token_f1", "sentence_f1", "gold", "gold_f1", "tp", "pred", "gold_tokens", "ctp", "cpred", "cgold")
_SOFT_ROWS = ("soft", "iou", "cor")


@dataclass
class RunFigures:
    """One run's per-example figures, per task of its overall: what every convention is computed from."""

    ids: dict[str, list[str]]
    """Per task, its example ids in id order (the order of the scorer's resamples)."""
    values: dict[str, np.ndarray]
    """Per task, `_ROWS` and `_SOFT_ROWS` by example (float64, rows × examples)."""


def run_figures(scorer: Scorer, predictions: Iterable[Prediction]) -> RunFigures:
    """The per-example figures of a run's predictions, per task of the overall (step tasks left out)."""
    arrays = scorer.example_arrays(predictions)
    assert arrays.char_counts is not None  # example_arrays counts characters
    f1 = arrays.prf["token"][2]
    gold = (arrays.token_counts[2] > 0).astype(float)
    soft = ~np.isnan(arrays.iou)
    columns = np.stack(
        [
            f1,
            arrays.prf["sentence"][2],
            gold,
            f1 * gold,
            *arrays.token_counts,
            *arrays.char_counts,
            soft.astype(float),
            np.nan_to_num(arrays.iou),
            np.nan_to_num(arrays.cor),
        ]
    ).astype(np.float64)
    tasks = {t: idx for t, idx in scorer.groups["tasks"].items() if t not in scorer.step_tasks}
    ids = scorer.corpus.ids
    return RunFigures(
        ids={t: [ids[i] for i in idx.tolist()] for t, idx in tasks.items()},
        values={t: columns[:, idx] for t, idx in tasks.items()},
    )


def _task_figures(sums: np.ndarray, n: int) -> dict[str, np.ndarray]:
    """Each convention's figure of one task from the weighted sums of its rows (rows × resamples, or rows)."""
    row = dict(zip(_ROWS + _SOFT_ROWS, sums))
    with np.errstate(divide="ignore", invalid="ignore"):
        return {
            "paper": row["token_f1"] / n,
            "hallucinated": np.where(row["gold"] > 0, row["gold_f1"] / row["gold"], np.nan),
            "pooled_token": metrics.per_example_prf(row["tp"], row["pred"], row["gold_tokens"])[2],
            "pooled_char": metrics.per_example_prf(row["ctp"], row["cpred"], row["cgold"])[2],
            "sentence": row["sentence_f1"] / n,
            "iou": np.where(row["soft"] > 0, row["iou"] / row["soft"], np.nan),
            "cor": np.where(row["soft"] > 0, row["cor"] / row["soft"], np.nan),
        }


def _overall(per_task: list[dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
    """Per convention, the mean over tasks; for IoU and Cor over the tasks with soft labels (NaN without any)."""
    out = {}
    for name in CONVENTIONS:
        stacked = np.stack([np.asarray(t[name], np.float64) for t in per_task])
        if name in ("iou", "cor"):
            present = (~np.isnan(stacked)).sum(axis=0)
            with np.errstate(divide="ignore", invalid="ignore"):
                out[name] = np.where(present > 0, np.nansum(stacked, axis=0) / present, np.nan)
        else:
            out[name] = stacked.mean(axis=0)
    return out


def point_figures(run: RunFigures) -> dict[str, float]:
    """Each convention's overall figure of a run (exact sums, as the scorer's means are)."""
    per_task = []
    for values in run.values.values():
        sums = np.array([math.fsum(r) for r in values.tolist()])
        per_task.append(_task_figures(sums, values.shape[1]))
    return {name: float(v) for name, v in _overall(per_task).items()}


def replicate_figures(runs: Sequence[RunFigures], n_resamples: int, seed: int) -> list[dict[str, np.ndarray]]:
    """Per run, each convention's overall figure in every resample (the scorer's seeded draws per task, named by
    the task as its intervals are, the same for every run)."""
    tasks = list(runs[0].values)
    per_run: list[list[dict[str, np.ndarray]]] = [[] for _ in runs]
    for task in tasks:
        n = runs[0].values[task].shape[1]
        blocks = list(metrics.Resamples(n, task, n_resamples, seed, keep=False))
        for k, run in enumerate(runs):
            sums = np.concatenate([np.einsum("kn,rn->kr", run.values[task], b.astype(np.float64)) for b in blocks], 1)
            per_run[k].append(_task_figures(sums, n))
    return [_overall(t) for t in per_run]


def min_ranks(values: np.ndarray) -> np.ndarray:
    """Ranks of the rows of `values` (rows first, any further axes kept): 1 + how many rows are higher, ties
    sharing the better rank; figures are compared to `DECIMALS` decimals."""
    v = np.round(values, DECIMALS)
    return 1 + (v[None, :] > v[:, None]).sum(axis=1)


def kendall_tau_b(x: Sequence[float] | np.ndarray, y: Sequence[float] | np.ndarray) -> float | None:
    """Kendall's tau-b of two equally long sequences; None when either is constant (or shorter than 2)."""
    a, b = np.round(np.asarray(x, float), DECIMALS), np.round(np.asarray(y, float), DECIMALS)
    upper = np.triu_indices(len(a), k=1)
    sa = np.sign(a[:, None] - a[None, :])[upper]
    sb = np.sign(b[:, None] - b[None, :])[upper]
    pairs_a, pairs_b = np.count_nonzero(sa), np.count_nonzero(sb)
    if not pairs_a or not pairs_b:
        return None
    return float((sa * sb).sum() / math.sqrt(pairs_a * pairs_b))


class RowRanks(Model):
    """One row under every convention."""

    model_config = ConfigDict(allow_inf_nan=False)

    id: Name
    """The row's id (a board's anchor, or `A`/`B` in a comparison)."""
    name: Name
    """The row's name."""
    figures: dict[str, float]
    """Per convention, the row's overall figure."""
    ranks: dict[str, int]
    """Per convention, its rank among the rows compared (1 = best; ties share the better rank)."""
    interval: tuple[int, int]
    """95% rank interval under the board's convention, over the paired bootstrap."""
    intervals: dict[str, tuple[int, int]]
    """The same interval under every convention."""


class Tau(Model):
    """Kendall's tau-b between the figures of two conventions."""

    a: str
    """A convention."""
    b: str
    """Another."""
    tau: float | None
    """tau-b over the rows; None when either convention gives every row the same figure."""


class PairOrder(Model):
    """Whether a row stays above another."""

    above: str
    """The id of the row ranked higher by the board."""
    below: str
    """The id of the row below it."""
    adjacent: bool
    """Whether the two are next to each other on the board."""
    reversed_under: list[str]
    """The conventions that put `below` level with or above `above`."""
    share: float
    """The share of resamples in which `above` stays strictly above `below` under the board's convention."""
    verdict: str
    """`holds`, `convention-dependent` or `not resolved`."""


class RankStability(Model):
    """The rows' ranks under each convention, their agreement, rank intervals and which orders hold."""

    conventions: dict[str, str]
    """The conventions compared (those every row has), each with how it is computed."""
    board: str = BOARD
    """The board's convention: the rows' order, the rank interval and the resample shares."""
    rows: list[RowRanks]
    """The rows, in the board's order."""
    tau: list[Tau]
    """Kendall's tau-b of every pair of conventions."""
    pairs: list[PairOrder]
    """Every pair of rows, the higher first, in the board's order."""
    n_resamples: int
    """Bootstrap resamples."""
    seed: int
    """Bootstrap seed."""
    left_out: dict[str, str] = Field(default_factory=dict)
    """Rows that could not be compared (by id), with the reason."""
    convention: str = CONVENTION
    """How ranks, tau, intervals and verdicts are computed."""

    def verdict_below(self, row_id: str) -> PairOrder | None:
        """The order of a row and the one just below it, or None for the last row."""
        return next((p for p in self.pairs if p.above == row_id and p.adjacent), None)


def check_same_examples(runs: Sequence[RunFigures]) -> None:
    """ValueError unless every run holds the same tasks with the same example ids (a paired bootstrap needs them)."""
    first = runs[0].ids
    for run in runs[1:]:
        if run.ids != first:
            raise ValueError("the runs ranked together must cover the same examples, task by task")


def _interval(ranks: np.ndarray) -> tuple[int, int]:
    return int(np.percentile(ranks, 2.5, method="lower")), int(np.percentile(ranks, 97.5, method="higher"))


def stability(
    ids: Sequence[str], names: Sequence[str], runs: Sequence[RunFigures], n_resamples: int = 1000, seed: int = 0
) -> RankStability:
    """The rank stability of runs over the same examples, given in the board's order (`ids`, `names` per run)."""
    check_same_examples(runs)
    points = [point_figures(r) for r in runs]
    names_kept = [c for c in CONVENTIONS if all(not math.isnan(p[c]) for p in points)]
    reps = replicate_figures(runs, n_resamples, seed)
    figures = {c: np.array([p[c] for p in points]) for c in names_kept}
    ranks = {c: min_ranks(figures[c]) for c in names_kept}
    rep_ranks = {c: min_ranks(np.stack([r[c] for r in reps])) for c in names_kept}
    rows = [
        RowRanks(
            id=ids[k],
            name=names[k],
            figures={c: float(figures[c][k]) for c in names_kept},
            ranks={c: int(ranks[c][k]) for c in names_kept},
            interval=_interval(rep_ranks[BOARD][k]),
            intervals={c: _interval(rep_ranks[c][k]) for c in names_kept},
        )
        for k in range(len(runs))
    ]
    taus = [
        Tau(a=a, b=b, tau=kendall_tau_b(figures[a], figures[b]))
        for i, a in enumerate(names_kept)
        for b in names_kept[i + 1 :]
    ]
    board = np.round(np.stack([r[BOARD] for r in reps]), DECIMALS)
    pairs = []
    for i in range(len(runs)):
        for j in range(i + 1, len(runs)):
            reversed_under = [
                c for c in names_kept if not round(figures[c][i], DECIMALS) > round(figures[c][j], DECIMALS)
            ]
            share = float(np.mean(board[i] > board[j])) if board.shape[1] else 0.0
            verdict = VERDICTS[1] if reversed_under else VERDICTS[0] if share >= HOLDS_SHARE else VERDICTS[2]
            pairs.append(
                PairOrder(
                    above=ids[i],
                    below=ids[j],
                    adjacent=j == i + 1,
                    reversed_under=reversed_under,
                    share=share,
                    verdict=verdict,
                )
            )
    return RankStability(
        conventions={c: CONVENTIONS[c] for c in names_kept},
        rows=rows,
        tau=taus,
        pairs=pairs,
        n_resamples=n_resamples,
        seed=seed,
    )


def pair_stability(
    scorer: Scorer, predictions: tuple[Sequence[Prediction], Sequence[Prediction]], names: tuple[str, str]
) -> RankStability:
    """The rank stability of two prediction sets of the same examples (`shambench compare`): rows `A` and `B`,
    the one higher under the paper's convention first (A on a tie)."""
    runs = [run_figures(scorer, p) for p in predictions]
    rows = [("A", names[0], runs[0]), ("B", names[1], runs[1])]
    if point_figures(runs[1])[BOARD] > point_figures(runs[0])[BOARD]:
        rows.reverse()
    ids, labels, figures = zip(*rows)
    return stability(ids, labels, figures, scorer.n_resamples, scorer.seed)
