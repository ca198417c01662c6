"""`shambench list detectors|datasets`."""

from __future__ import annotations

from collections.abc import Sequence

import click
from rich.table import Table

from shambench.cli.options import data_dir_option
from shambench.report import make_console


@click.group("list")
def list_group() -> None:
    """List the registered detectors or datasets (built-in and installed plugins)."""


def _table(title: str, rows: Sequence[tuple[str, ...]], columns: tuple[str, ...]) -> None:
    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col)
    for row in rows:
        table.add_row(*row)
    make_console().print(table)


@list_group.command("detectors")
def list_detectors() -> None:
    """Detectors by name, with their origin (no model is loaded)."""
    from shambench.detector import detectors

    rows = [(e.name, e.description, e.origin) for e in detectors.entries()]
    _table("detectors", rows, ("name", "description", "module"))


@list_group.command("datasets")
@data_dir_option
def list_datasets(data_dir: str | None) -> None:
    """Datasets by name, their tasks, and whether their files are present in the data folder."""
    from shambench.adapter import adapters, resolve_data_dir

    root = resolve_data_dir(data_dir)
    rows = []
    for entry in adapters.entries():
        adapter = entry.factory()
        present = "yes" if adapter.available(root) else "no"
        rows.append((entry.name, ", ".join(adapter.tasks), present, entry.description))
    _table(f"datasets (data dir: {root})", rows, ("name", "tasks", "present", "description"))
