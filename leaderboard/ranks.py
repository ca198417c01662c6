"""The board's rank stability (`shambench.reporting.ranks`): its ranked and reference rows under every convention,
with rank intervals from a paired bootstrap over their examples."""

from __future__ import annotations

from collections.abc import Callable

from shambench.leaderboard.schema import Entry, Leaderboard
from shambench.reporting.ranks import RunFigures, run_figures, stability
from shambench.schema import Example, Prediction

COMPARED = ("ranked", "reference")
"""The rows whose ranks are compared: complete, over the board's partitions with their full counts."""


def with_stability(
    board: Leaderboard,
    data_of: Callable[[Entry], tuple[list[Example], list[Prediction]]],
    n_resamples: int = 1000,
    seed: int = 0,
) -> Leaderboard:
    """The board with `stability` set over its compared rows (`data_of`: a row's examples and predictions), when
    there are two or more of them; rows over other example ids than the first's are left out, with the reason."""
    from shambench.scoring.scorer import Scorer

    rows = [e for e in board.entries if e.standing in COMPARED]
    if len(rows) < 2:
        return board
    kept: list[tuple[Entry, RunFigures]] = []
    left_out = {}
    for entry in rows:
        examples, predictions = data_of(entry)
        figures = run_figures(Scorer(examples, n_resamples, seed), predictions)
        if kept and figures.ids != kept[0][1].ids:
            left_out[entry.id] = f"its examples differ from those of {kept[0][0].name} (another data revision?)"
            continue
        kept.append((entry, figures))
    if len(kept) < 2:
        return board
    ranks = stability([e.id for e, _ in kept], [e.name for e, _ in kept], [f for _, f in kept], n_resamples, seed)
    return board.model_copy(update={"stability": ranks.model_copy(update={"left_out": left_out})})
