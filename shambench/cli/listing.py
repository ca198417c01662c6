"""`shambench list detectors|datasets|formats|providers`."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

import click

from shambench.cli.options import data_dir_option, no_data_hint
from shambench.reporting.console import make_console

if TYPE_CHECKING:
    from shambench.registry import Registry


@click.group("list")
def list_group() -> None:
    """List the registered detectors, datasets, prediction formats or context providers (built-in and installed
    plugins)."""


def _table(title: str, rows: Sequence[tuple[str, ...]], columns: tuple[str, ...], registry: Registry[Any]) -> None:
    """The table of a registry's plugins, then one line on standard error for each installed plugin that failed
    to load (it is left out of the table; the rest of the command works)."""
    from rich.table import Table

    table = Table(title=title, title_justify="left")
    for col in columns:
        table.add_column(col, overflow="fold")
    for row in rows:
        table.add_row(*row)
    make_console().print(table)
    errors = make_console(stderr=True)
    for name, reason in registry.broken().items():
        errors.print(f"skipped: {registry.kind} {name!r} failed to load: {reason}", style="yellow", soft_wrap=True)


@list_group.command("detectors")
@click.argument("name", required=False)
def list_detectors(name: str | None) -> None:
    """Detectors by name, with their origin (no model is loaded); with NAME, that detector's parameters.

    \b
    shambench list detectors
    shambench list detectors random      its -p KEY=VALUE parameters: type, default, what each does

    NAME may carry its argument as --detector takes it (`token-classifier:models/rt`): the detector's parameters
    are shown, nothing is loaded.
    """
    from shambench.detection.detector import detectors

    if name is None:
        rows = [(e.name, e.description, e.origin) for e in detectors.entries()]
        _table("detectors", rows, ("name", "description", "module"), detectors)
        return
    from shambench.registry import factory_parameters

    entry = detectors.get(name.partition(":")[0])
    params, more = factory_parameters(entry.factory)
    console = make_console()
    console.print(f"{entry.name}: {entry.description}", soft_wrap=True)
    console.print(f"module: {entry.origin}", soft_wrap=True)
    if entry.info.get("family"):
        console.print(f"family: {entry.info['family']}", soft_wrap=True)
    if params:
        from rich.table import Table

        table = Table(title=f"parameters (shambench eval --detector {name} -p KEY=VALUE)", title_justify="left")
        for col in ("parameter", "type", "default", "description"):
            table.add_column(col, overflow="fold")
        # a preset's own values stand in for the factory's None ("take the preset's")
        defaults = entry.info.get("defaults", {})
        for p in params:
            table.add_row(p.name, p.type, str(defaults[p.name]) if p.name in defaults else p.default, p.help)
        console.print(table)
    else:
        console.print("parameters: none")
    if more:
        console.print("it also accepts further keyword parameters, handed on to the model or endpoint it wraps")


@list_group.command("datasets")
@data_dir_option
def list_datasets(data_dir: str | None) -> None:
    """Datasets by name, their tasks, and whether their files are present in the data folder."""
    from shambench.data.adapter import adapters, resolve_data_dir

    root = resolve_data_dir(data_dir)
    rows = []
    for entry in adapters.entries():
        adapter = entry.factory()
        present = "yes" if adapter.available(root) else "no"
        rows.append((entry.name, ", ".join(adapter.tasks), present, entry.description))
    _table(f"datasets (data dir: {root})", rows, ("name", "tasks", "present", "description"), adapters)
    if not any(present == "yes" for _, _, present, _ in rows):
        make_console().print(no_data_hint(root), style="yellow", soft_wrap=True)


@list_group.command("formats")
def list_formats() -> None:
    """Released prediction formats `shambench score --predictions-format` reads (beside shambench's own)."""
    from shambench.data.formats import NATIVE, formats

    rows = [(NATIVE, "shambench's own PRED lines (`shambench score --help`)", "shambench.records")]
    rows += [(e.name, e.description, e.origin) for e in formats.entries()]
    _table("prediction formats", rows, ("name", "description", "module"), formats)


@list_group.command("providers")
def list_providers() -> None:
    """Context providers `--context` and `data add-context --provider` take: NAME, or NAME:ARG (`file:PATH`)."""
    from shambench.data.context import providers

    rows = [(e.name, e.description, e.origin) for e in providers.entries()]
    _table("context providers", rows, ("name", "description", "module"), providers)
