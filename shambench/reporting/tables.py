"""The results table printed by `shambench score` and `shambench eval`."""

from __future__ import annotations

from rich import box
from rich.console import Console
from rich.table import Table

from shambench.reporting.console import make_console
from shambench.reporting.ranks import RankStability
from shambench.scoring.agreement import AgreementGroup, AgreementReport
from shambench.scoring.alternative import CONVENTION as ALTERNATIVE_CONVENTION
from shambench.scoring.alternative import AlternativeTest
from shambench.scoring.measures import Metric, figure_of, registered
from shambench.scoring.metrics import EMPTY_RULE_SENTENCE
from shambench.scoring.results import PRF, GroupScores, Overall, Results
from shambench.scoring.text import convention


def _ci(prf: PRF) -> str:
    return f"{prf.ci[0]:.3f}-{prf.ci[1]:.3f}" if prf.ci else ""


def _f1(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def _columns() -> list[Metric]:
    """The registered metrics with a column of their own, between the span and the sentence figures."""
    return [m for m in registered() if m.column]


def _row(name: str, g: GroupScores) -> list[str]:
    missing = str(g.missing_predictions) if g.missing_predictions else ""
    return [
        name,
        str(g.n),
        f"{g.token.f1:.3f}",
        _ci(g.token),
        f"{g.token.precision:.3f}",
        f"{g.token.recall:.3f}",
        *(_f1(figure_of(g, m)) for m in _columns()),
        f"{g.sentence.f1:.3f}",
        _ci(g.sentence),
        missing,
    ]


def _mean_over(groups: dict[str, GroupScores], names: list[str], m: Metric) -> float | None:
    """The unweighted mean over `names` of a metric's figure (None when a group lacks it), as an overall is."""
    values = [figure_of(groups[t], m) for t in names]
    return sum(v for v in values if v is not None) / len(values) if values and None not in values else None


def _plural(n: int, word: str) -> str:
    return f"{n} {word}" if n == 1 else f"{n} {word}s"


def _scores_table(title: str, caption: str, first_column: str) -> Table:
    table = Table(title=title, title_justify="left", caption=caption, caption_justify="left", box=box.SIMPLE_HEAD)
    table.add_column(first_column, overflow="fold", min_width=12)
    for col in ("n", "span F1", "95% CI", "P", "R", *(m.column for m in _columns()), "sent F1", "95% CI", "missing"):
        table.add_column(col, justify="right", no_wrap=True)
    return table


def _add_overall(table: Table, o: Overall, groups: dict[str, GroupScores], label: str, missing: int) -> None:
    """The overall row: the mean over the groups it names, ± the population std over them."""
    table.add_section()
    table.add_row(
        f"{label} ({_plural(len(o.tasks), 'task')})",
        str(sum(groups[t].n for t in o.tasks)),
        f"{o.token.f1:.3f}",
        f"std {o.token.std:.2f}",
        f"{o.token.precision:.3f}",
        f"{o.token.recall:.3f}",
        *(_f1(_mean_over(groups, o.tasks, m)) for m in _columns()),
        f"{o.sentence.f1:.3f}",
        f"std {o.sentence.std:.2f}",
        str(missing) if missing else "",
        style="bold green",
    )


def results_table(results: Results, title: str = "SHAM-Bench scores") -> Table:
    """Partitions, then tasks, then the overall mean (± population std over tasks)."""
    table = _scores_table(title, _caption(results), "partition / task")
    for name, g in results.partitions.items():
        table.add_row(*_row(name, g))
    table.add_section()
    for name, g in results.tasks.items():
        table.add_row(*_row(name, g), style="bold")
    if results.overall:
        _add_overall(table, results.overall, results.tasks, "overall", results.missing_predictions)
    return table


def extended_table(results: Results) -> Table | None:
    """The extended suite's groups and its own overall (None when the run scored none of its added partitions)."""
    view = results.groups.extended
    if view is None:
        return None
    caption = (
        "groups: each task with every partition of the run (the added ones included), the Mu-SHROOM languages "
        "apart; extended overall: mean over these groups, never part of the paper's overall above"
    )
    table = _scores_table("extended suite", caption, "group")
    for name, g in view.groups.items():
        table.add_row(*_row(f"{name} ({_plural(len(view.partitions[name]), 'partition')})", g), style="bold")
    missing = sum(g.missing_predictions for g in view.groups.values())
    _add_overall(table, view.overall, view.groups, "extended overall", missing)
    return table


def _caption(results: Results) -> str:
    parts = [
        "F1/P/R: per-example, averaged within each row (P/R: span level); overall: mean over tasks, with the "
        "population std over tasks",
        "F1 hallu: the same span F1 over the examples with a gold span only; pooled F1: token F1 pooled over all "
        "tokens of the row (LettuceDetect's convention)",
        EMPTY_RULE_SENTENCE + " F1 hallu and pooled F1 give it none.",
        f"tokenizer: {results.conventions.get('tokenizer', '?')}",
    ]
    own = [p for p, c in results.segmentation.items() if c != convention()]
    if own:
        parts.append(f"{len(own)} partition(s) tokenised in their own language (results.json: segmentation)")
    if results.missing_predictions:
        parts.append(
            f"{results.missing_predictions} example(s) without a usable prediction were scored as empty "
            f"({results.failed_predictions} failed)"
        )
    return "\n".join(parts)


def print_results(results: Results, console: Console | None = None, title: str = "SHAM-Bench scores") -> None:
    """Print the results table, then the views the run has: Mu-SHROOM's shared task (its language partitions),
    the extended suite (one of its added partitions), like for like (partitions with annotators)."""
    from shambench.scoring.shared_task import shared_task_tables

    console = console or make_console()
    console.print(results_table(results, title))
    for view in (*shared_task_tables(results), extended_table(results), like_for_like_table(results.groups.agreement)):
        if view is not None:
            console.print(view)


def _figure(value: float | None) -> str:
    return "" if value is None else f"{value:.3f}"


def like_for_like_table(view: AgreementGroup | None) -> Table | None:
    """One line per partition with annotators: the detector and one annotator, each against the others' gold
    (`groups.agreement` of the results), the gap and the alternative annotator test's verdict; None when no
    partition has annotators."""
    if view is None:
        return None
    table = Table(
        title="Like for like: the detector and one annotator, each scored against the other annotators",
        title_justify="left",
        caption=view.convention,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("partition", overflow="fold", min_width=12)
    for col in ("items", "detector F1", "human F1", "gap", "detector IoU", "human IoU", "alt. test"):
        table.add_column(col, justify="right", no_wrap=True)
    for name, p in view.partitions.items():
        table.add_row(
            name,
            str(p.items),
            f"{p.detector.token.f1:.3f}",
            f"{p.human.token.f1:.3f}",
            f"{p.gap['token_f1']:+.3f}",
            _figure(p.detector.iou),
            _figure(p.human.iou),
            verdict_text(p.alternative),
        )
    return table


def verdict_text(test: AlternativeTest | None) -> str:
    """`pass` or `fail` of an alternative annotator test with its winning rate, or `-` when nobody was tested."""
    if test is None or test.omega is None:
        return "-"
    return f"{'pass' if test.passed else 'fail'} (omega {test.omega:.2f})"


def alternative_table(group: AgreementGroup) -> Table:
    """Per partition and tested annotator, the alternative annotator test of the detector (`shambench agreement
    --run`)."""
    first = next((p.alternative for p in group.partitions.values() if p.alternative is not None), None)
    eps = f"epsilon {first.epsilon:g}, q {first.q:g}; " if first is not None else ""
    table = Table(
        title="The alternative annotator test: can the detector replace one annotator?",
        title_justify="left",
        caption=f"{eps}{ALTERNATIVE_CONVENTION}",
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("partition", overflow="fold", min_width=12)
    for col in ("S", "annotator", "n", "rho_f", "rho_h", "t", "p", "adj. p", "rejected", "omega", "verdict"):
        table.add_column(col, justify="left" if col in ("S", "annotator", "verdict") else "right", no_wrap=True)
    for name, p in group.partitions.items():
        test = p.alternative
        if test is None:
            continue
        verdict = (_figure(test.omega), verdict_text(test).split(" ")[0])
        if not test.annotators:
            table.add_row(name, test.metric, f"none of {len(test.untested)} has 30 items", *[""] * 7, *verdict)
        for a in test.annotators:
            t = "" if a.t is None else f"{a.t:.3f}"
            cells = (f"{a.n}", f"{a.rho_f:.3f}", f"{a.rho_h:.3f}", t, f"{a.p:.4g}", f"{a.p_adjusted:.4g}")
            table.add_row(name, test.metric, a.annotator, *cells, "yes" if a.rejected else "no", *verdict)
    return table


def agreement_table(report: AgreementReport) -> Table:
    """What `shambench agreement` prints: per partition, one annotator against the others."""
    table = Table(
        title="Human agreement: one annotator against the others (leave one out)",
        title_justify="left",
        caption="span F1: per-example token F1, mean over an item's annotators, then over items; pooled: micro "
        "over (item, annotator) pairs; reproduces: items whose full aggregation gives the released gold"
        + (f"\nno annotators released: {', '.join(report.without_annotators)}" if report.without_annotators else ""),
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("partition", overflow="fold", min_width=12)
    for col in ("items", "annotators", "span F1", "95% CI", "sent F1", "pooled F1", "IoU", "Cor", "reproduces"):
        table.add_column(col, justify="right", no_wrap=True)
    for name, p in report.partitions.items():
        reproduced = p.reproduces_gold
        table.add_row(
            name,
            str(p.items),
            f"{p.annotators.min}-{p.annotators.max}" if p.annotators.min != p.annotators.max else str(p.annotators.min),
            f"{p.token.f1:.3f}",
            f"{p.token.ci[0]:.3f}-{p.token.ci[1]:.3f}",
            f"{p.sentence.f1:.3f}",
            f"{p.pooled_token.f1:.3f}",
            _figure(p.iou),
            _figure(p.cor),
            f"{reproduced.reproduced}/{reproduced.checked}" if reproduced else "",
        )
    return table


def ranks_table(ranks: RankStability) -> Table:
    """Rows under every convention: figure and rank, rank interval, and the order with the next row."""
    orders = {p.above: p for p in ranks.pairs if p.adjacent}
    table = Table(
        title=f"Ranks under every convention (rank interval: {ranks.n_resamples} paired resamples, paper's convention)",
        title_justify="left",
        caption=ranks.convention,
        caption_justify="left",
        box=box.SIMPLE_HEAD,
    )
    table.add_column("run", overflow="fold")
    for name in ranks.conventions:
        table.add_column(name, justify="right", no_wrap=True)
    table.add_column("interval", justify="right", no_wrap=True)
    table.add_column("order with the next", overflow="fold")
    for row in ranks.rows:
        order = orders.get(row.id)
        said = ""
        if order is not None:
            said = f"{order.verdict} ({100 * order.share:.1f}% of resamples"
            said += f"; reversed under {', '.join(order.reversed_under)})" if order.reversed_under else ")"
        cells = [f"{row.figures[c]:.3f} ({row.ranks[c]})" for c in ranks.conventions]
        table.add_row(f"{row.id} {row.name}", *cells, f"{row.interval[0]}-{row.interval[1]}", said)
    return table
