"""The step-level (math) suites on the terminal: a table per suite and the SOPO compatibility figures."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from shambench.scoring.steps import MathGroup, SuiteScores
from shambench.sources import char_level_suites

if TYPE_CHECKING:
    from rich.table import Table

    from shambench.scoring.results import Results


def _pct(value: float | None) -> str:
    return "n/a" if value is None else f"{value:.1f}"


def suite_table(group: MathGroup, suite: str, sopo_compat: bool = False) -> Table:
    """A rich table of one suite: a row per subset, then the mean F1 (ProcessBench's headline)."""
    from rich import box
    from rich.table import Table

    summary = group.suites.get(suite)
    if summary is None:
        raise KeyError(f"no step-level results for suite {suite!r} (scored suites: {', '.join(group.suites)})")
    char = suite in char_level_suites()
    table = Table(title=f"{suite}: step-level verification (%)", title_justify="left", box=box.SIMPLE_HEAD)
    columns = ["subset", "n", "erroneous", "acc_err", "acc_cor", "F1", "step BA", "step BF1", "resp BA", "resp BF1"]
    columns += ["char F1", "case F1"] if char else []
    columns += ["SOPO char F1 (compat)"] if char and sopo_compat else []
    columns += ["missing"]
    for i, col in enumerate(columns):
        table.add_column(col, justify="left" if i == 0 else "right", no_wrap=True)
    for name in summary.datasets:
        s = group.datasets[name]
        row = [name, str(s.n), str(s.n_erroneous), _pct(s.first_error.tnr), _pct(s.first_error.tpr)]
        row += [_pct(s.first_error.balanced_f1), _pct(s.step.balanced_accuracy), _pct(s.step.balanced_f1)]
        row += [_pct(s.response.balanced_accuracy), _pct(s.response.balanced_f1)]
        row += [_pct(s.char.f1), _pct(s.char.case_f1)] if char and s.char else []
        row += [_pct(s.char_sopo_compat.f1)] if char and sopo_compat and s.char_sopo_compat else []
        row += [str(s.missing_predictions) if s.missing_predictions else ""]
        table.add_row(*row)
    table.add_section()
    mean_row = [f"mean F1 ({len(summary.datasets)} subsets)", "", "", "", "", _pct(summary.mean_f1)]
    table.add_row(*mean_row, *[""] * (len(columns) - len(mean_row)), style="bold green")
    undefined = any(cell == "n/a" for row in table.columns for cell in row.cells)
    table.caption = _caption(summary) + (f"\n{UNDEFINED}" if undefined else "")
    table.caption_justify = "left"
    return table


UNDEFINED = (
    "n/a: not defined on the examples scored: acc_cor and F1 need a correct solution, acc_err an erroneous one, the "
    "balanced figures both kinds (the first N examples of a subset, under a limit, may all be of one kind)"
)


def _caption(summary: SuiteScores) -> str:
    lines = [
        "F1 = ProcessBench's 2·acc_err·acc_cor/(acc_err+acc_cor) on first-error indices; BA/BF1 = Hard2Verify's "
        "balanced accuracy / F1 (positive = correct step)"
    ]
    if summary.threshold:
        t = summary.threshold
        lines.append(
            f"PRM threshold {t.threshold:.2f}, tuned on {len(t.tuning_ids)} responses (seed {t.seed}; "
            f"harmonic mean of the three balanced F1s {t.objective:.1f})"
        )
    return "\n".join(lines)


def print_suite(results: Results, suite: str, console: Any, sopo_compat: bool = False) -> None:
    """Print a suite's table from `results.groups.math` (a note when the suite has no scored examples)."""
    group = results.groups.math
    if group is None or suite not in group.suites:
        console.print(f"no step-level examples of suite {suite} were scored", style="yellow")
        return
    console.print(suite_table(group, suite, sopo_compat))
