"""The terminal console: a table wider than the terminal is split by columns, never cut."""

from __future__ import annotations

import io

from click.testing import CliRunner
from rich.table import Table

from shambench.cli import main
from shambench.reporting.console import FittingConsole
from tests.run_helpers import eval_run, write_jsonl


def _wide_table() -> Table:
    table = Table(title="scores", caption="what the figures are")
    table.add_column("partition")
    table.add_column("run")
    for header in ("span F1", "95% CI", "P", "R", "sent F1", "95% CI", "missing"):
        table.add_column(header, justify="right", no_wrap=True)
    table.add_row("summ/zhou-long-partition-name", "overlap", "0.405", "0.395-0.415", "0.648", "0.357", "0.902",
                  "0.888-0.914", "")  # fmt: skip
    return table


def _printed(table: Table, width: int) -> str:
    out = io.StringIO()
    FittingConsole(file=out, width=width, markup=False, emoji=False).print(table)
    return out.getvalue()


def test_a_table_that_fits_is_printed_as_it_is():
    wide = _printed(_wide_table(), 200)
    assert wide.count("span F1") == 1 and "…" not in wide
    assert wide.splitlines()[0].strip() == "scores" and wide.splitlines()[-1].strip() == "what the figures are"


def test_a_wider_table_is_split_by_columns_each_part_led_by_the_naming_columns():
    narrow = _printed(_wide_table(), 70)
    lines = narrow.splitlines()
    assert all(len(line.rstrip()) <= 70 for line in lines)
    assert "…" not in narrow  # no name folded away, no figure cut
    for cell in ("0.405", "0.395-0.415", "0.648", "0.357", "0.902", "0.888-0.914"):
        assert narrow.count(cell) == 1
    # every part repeats the partition and the run; the title once at the top, the caption once at the end
    assert narrow.count("summ/zhou-long-partition-name") == narrow.count("overlap") >= 2
    assert narrow.count("scores") == 1 and lines[0].strip() == "scores"
    assert lines[-1].strip() == "what the figures are"
    # an interval stays beside its figure: "sent F1" and its "95% CI" in the same part
    sentence = next(line for line in lines if "sent F1" in line)
    assert "95% CI" in sentence


def test_the_results_table_keeps_its_partitions_and_figures_on_an_80_column_terminal(tmp_path):
    rows = [{"id": "a", "task": "summ", "dataset": "toy", "response": "Paris is in Italy.", "hallu_spans": [[12, 17]]}]
    eval_run(write_jsonl(tmp_path / "ex.jsonl", rows), "all", tmp_path / "run")
    res = CliRunner().invoke(main, ["score", str(tmp_path / "run"), "--bootstrap", "10"], env={"COLUMNS": "80"})
    assert res.exit_code == 0, res.output
    # rich squeezed the table to 80 columns before: the partition column vanished and figures ended in "…"
    assert "…" not in res.stdout and "summ/toy" in res.stdout and "overall (1 task)" in res.stdout
    _rescored, *table = res.stdout.splitlines()  # the first names the files whole, on one line
    assert all(len(line.rstrip()) <= 80 for line in table)
