"""A shared task's view of a scored run: per language, the official IoU and Cor beside span F1.

Mu-SHROOM ranked systems per language on character IoU and Cor; SHAM-Bench reports token and sentence F1. For the
partitions of a source that declares a shared task (`Adapter.shared_task`: the view's key in `Results.groups` and
the prefix cut from a dataset name to leave its language) the view lists all four per language, and its overall
is the unweighted mean over languages (not over examples), as a per-language ranking implies. It is stored apart
from the SHAM-Bench overall.

The organisers' scorer read both files with `pandas.read_json`, whose default float parser is not correctly rounded:
`organisers_float` reads a number the same way, so that a submission's probabilities (and the hard labels derived
from them) are the values the official leaderboard was computed from (`ORGANISERS_READING`).
"""

from __future__ import annotations

import math
import re
from collections.abc import Mapping
from typing import TYPE_CHECKING

from shambench.scoring.measures import named, value_of
from shambench.scoring.results import GroupScores, LanguageScores, Results, SharedTaskView
from shambench.sources import Source, sources

if TYPE_CHECKING:
    from rich.table import Table

ORGANISERS_READING = (
    "a Mu-SHROOM submission's numbers are read as the organisers' scorer read them (pandas.read_json, default "
    "precise_float=False: pandas' ujson decoder keeps at most 15 fraction digits, dropping the rest, and computes "
    "(integer part + fraction digits * 10^-k) * 10^exponent in double arithmetic, without fused multiply-add as on "
    "x86-64), so probabilities that differ past the 15th fraction digit are equal, as on the official leaderboard; "
    "gold probabilities are read exactly (their 10 decimals keep the same order and ties either way)"
)
EXACT_READING = (
    "a Mu-SHROOM submission's numbers are read correctly rounded (--exact-floats), not as the organisers' "
    "scorer read them: figures may differ from the official leaderboard where probabilities differ past the 15th "
    "fraction digit"
)
# What the JSON grammar lets through as a number with a fraction or an exponent (`json`'s `parse_float` input).
_JSON_FLOAT = re.compile(r"(-?)(\d+)(?:\.(\d+))?(?:[eE]([-+]?)(\d+))?")
# pandas' vendored ujson: JSON_DOUBLE_MAX_DECIMALS fraction digits are kept, scaled by this table of literals.
_MAX_DECIMALS = 15
_POW10 = tuple(float(f"1e-{k}") for k in range(_MAX_DECIMALS + 1))
# The integer part is gathered in an unsigned 64-bit integer; ujson refuses larger ones ("Value is too big!").
_INT_LIMIT = 2**64


def organisers_float(text: str) -> float:
    """A JSON number (with a fraction or an exponent) as `pandas.read_json` reads it by default.

    pandas' ujson decoder (`decode_numeric`, `precise_float=False`) sums the first 15 fraction digits as a whole
    number `f`, returns `(integer part + f * 10^-k) * sign` (`k` the digits kept), then multiplies by
    `pow(10, exponent)`: each step rounds, and digits past the 15th are dropped, so `0.30` reads 0.3 but `0.3`
    reads 0.30000000000000004, and `0.10000000000000001` and `0.10000000000000002` read the same. ValueError for
    text that is not such a number or whose integer part ujson refuses.
    """
    match = _JSON_FLOAT.fullmatch(text)
    if match is None:
        raise ValueError(f"{text!r} is not a JSON number")
    sign, whole, fraction, exp_sign, exponent = match.groups()
    if int(whole) >= _INT_LIMIT:
        raise ValueError(f"{text}: integer part too large for the organisers' reader")
    kept = (fraction or "")[:_MAX_DECIMALS]
    digits = 0.0
    for ch in kept:
        digits = digits * 10.0 + (ord(ch) - 48)
    value = (float(int(whole)) + digits * _POW10[len(kept)]) * (-1.0 if sign else 1.0)
    if exponent is None:
        return value
    power = 0.0
    for ch in exponent:
        power = power * 10.0 + (ord(ch) - 48)
    try:
        scale = 10.0 ** (-power if exp_sign == "-" else power)
    except OverflowError:  # C's pow gives infinity where Python raises
        scale = math.inf
    return value * scale


def row_of(dataset: str, source: Source | None) -> tuple[str, str] | None:
    """The shared-task view and row a dataset is shown in (`(group, row)`), when its source declares a shared task."""
    task = source.shared_task if source else None
    if task is None or not dataset.startswith(task.row_prefix):
        return None
    return task.group, dataset[len(task.row_prefix) :]


def language_scores(
    datasets: dict[str, GroupScores], sources: Mapping[str, Source | None]
) -> dict[str, dict[str, LanguageScores]]:
    """Per shared-task view, the figures of each row (a language) from the partitions that carry soft labels."""
    out: dict[str, dict[str, LanguageScores]] = {}
    for key, gs in sorted(datasets.items()):
        source = sources.get(key)
        placed = row_of(key.split("/", 1)[-1], source)
        if placed is None or source is None or source.shared_task is None:
            continue
        official = value_of(gs, named(source.shared_task.metric))
        if official is None:
            continue
        group, row = placed
        out.setdefault(group, {})[row] = LanguageScores(
            n=gs.n, iou=official.iou, cor=official.cor, token_f1=gs.token.f1, sentence_f1=gs.sentence.f1
        )
    return out


def shared_task_groups(
    datasets: dict[str, GroupScores], sources: Mapping[str, Source | None]
) -> dict[str, SharedTaskView]:
    """Per shared task declared by the source of a scored partition (`Source.shared_task`), its view."""
    views = {}
    for group, languages in language_scores(datasets, sources).items():
        rows = list(languages.values())

        def mean(field: str, rows: list[LanguageScores] = rows) -> float:
            return sum(getattr(r, field) for r in rows) / len(rows)

        overall = LanguageScores(
            n=sum(r.n for r in rows), **{f: mean(f) for f in ("iou", "cor", "token_f1", "sentence_f1")}
        )
        views[group] = SharedTaskView(languages=languages, overall=overall)
    return views


def shared_task_views(results: Results) -> dict[str, SharedTaskView]:
    """Every shared-task view of the results, by its key in `Results.groups` (one read back from results.json is
    validated into a view)."""
    groups = results.groups
    present = {name: getattr(groups, name) for name in type(groups).model_fields} | (groups.model_extra or {})
    declared = {s.shared_task.group for s in sources() if s.shared_task}
    return {key: SharedTaskView.model_validate(view) for key, view in present.items() if key in declared and view}


def shared_task_tables(results: Results) -> list[Table]:
    """A rich table per shared-task view of the results, titled as its source declares it."""
    from rich.table import Table

    titles = {s.shared_task.group: s.shared_task.title for s in sources() if s.shared_task}
    tables = []
    for key, view in shared_task_views(results).items():
        table = Table(title=f"{titles[key]} shared-task view (official IoU/Cor; overall = mean over languages)")
        for col in ("language", "n", "IoU", "Cor", "token F1", "sentence F1"):
            table.add_column(col, justify="left" if col == "language" else "right")
        for lang, r in [*view.languages.items(), ("overall", view.overall)]:
            # IoU and Cor to 6 significant digits, as the official rankings print them.
            official = (f"{v:.6g}" for v in (r.iou, r.cor))
            table.add_row(lang, str(r.n), *official, *(f"{v:.4f}" for v in (r.token_f1, r.sentence_f1)))
        tables.append(table)
    return tables
