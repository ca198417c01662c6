"""`shambench data download|verify|stats|dump|export|add-context`: fetch the corpora, describe them, write them out."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import click

from shambench.cli.context import add_context_command
from shambench.cli.options import (
    OutputFolder,
    data_dir_option,
    datasets_option,
    no_data_hint,
    split_option,
    suite_option,
)
from shambench.errors import DataError

if TYPE_CHECKING:
    from rich.console import Console, JustifyMethod
    from rich.progress import Progress
    from rich.table import Table

    from shambench.data.benchmark import Benchmark
    from shambench.data.download import ProgressHook
    from shambench.data.stats import BenchmarkStats


@click.group("data")
def data_group() -> None:
    """Fetch the corpora, describe them (SHAM-Bench Table 1), dump or export the unified examples.

    \b
    shambench data download                      every SHAM-Bench source into the data folder
    shambench data verify --data-dir DIR         check the files in a data folder against their checksums
    shambench data stats --data-dir ../shared/data
    shambench data dump --out test.jsonl --datasets ragtruth,mushroom
    shambench data export --out shambench-hf     parquet per split + a dataset card
    shambench data add-context --provider wikipedia --datasets mushroom

    `--split dev` is the validation set: 5 examples per task/dataset partition, drawn deterministically from a
    source's non-test labelled split where it has one (see `shambench.data.benchmark`).
    """


def _load(datasets: str | None, split: str, data_dir: str | None, console: Console) -> Benchmark:
    """The benchmark, after warning about every source that did not load; DataError when nothing did."""
    from shambench.data.benchmark import load_benchmark
    from shambench.reporting.console import warn

    bench = load_benchmark(datasets, split, data_dir)
    for name, message in bench.errors.items():
        # soft_wrap: a long path must stay on one line, to be copied.
        warn(console, f"dataset {name} not loaded: {message}")
    if not bench.examples:
        raise DataError(
            f"no examples for split {split!r} in {bench.data_dir} (check --datasets and --data-dir, "
            "or run `shambench data download`)"
        )
    return bench


@data_group.command("download")
@click.argument("names", nargs=-1, metavar="[NAMES]...")
@data_dir_option
@click.option(
    "--max-size",
    default="4GB",
    show_default=True,
    help="Refuse any file larger than this (bytes, or with KB/MB/GB/TB; KiB/MiB/GiB for powers of 1024).",
)
@click.option(
    "--timeout",
    type=click.FloatRange(min=0, min_open=True),
    default=60.0,
    show_default=True,
    metavar="SECONDS",
    help="Abandon a request this long after it starts, plus one second per 16 KiB received (retried twice).",
)
@click.option("--no-progress", is_flag=True, help="Do not show the progress bar.")
def download(names: tuple[str, ...], data_dir: str | None, max_size: str, timeout: float, no_progress: bool) -> None:
    """Fetch the released files of the named sources (default: every SHAM-Bench source) from their original
    public locations: GitHub files and Hugging Face datasets at pinned commits.

    Every file is verified before it is installed: GitHub files against the SHA-256 or git blob id the adapter
    declares, hub files against the size and digest the hub reports for the pinned commit. A file that fails is
    deleted; content that is not the file (an HTML page) is named with its URL. Files already installed are
    re-checked cheaply (size and recorded digest). No file may be larger than --max-size, and no hub file larger
    than the hub lists it. An interrupted download resumes (If-Range: it restarts when the upstream file changed),
    a GitHub one also when the command is run again; a hub download then restarts.

    Gated sets (SHARP) need their conditions accepted on the hub and a token ($HF_TOKEN, or `hf auth login`),
    which is sent to the hub only (not to where it redirects); $HF_ENDPOINT points the hub requests elsewhere, and
    $HF_HUB_OFFLINE=1 makes none.

    Every file is tried; each failure is listed, and the command then exits with status 2.
    """
    from shambench.data.adapter import adapters, resolve_data_dir
    from shambench.data.benchmark import DEFAULT_SUITE, split_names
    from shambench.data.download import Outcome, download_sources, make_client, parse_size
    from shambench.reporting.console import make_console

    try:
        max_bytes = parse_size(max_size)
    except ValueError as err:
        raise click.BadParameter(str(err), param_hint="--max-size") from None
    console = make_console(stderr=True)
    root = resolve_data_dir(data_dir)
    chosen = split_names(list(names))
    entries = [adapters.get(n) for n in chosen] if chosen else adapters.entries()
    sources = [e.factory() for e in entries]
    sources = [a for a in sources if chosen or a.suite == DEFAULT_SUITE]
    with make_client(timeout=timeout) as client, _transfer_progress(no_progress) as progress:

        def hook(label: str) -> ProgressHook:
            task = progress.add_task(label, total=None)
            return lambda done, total: progress.update(task, completed=done, total=total)

        def show(outcome: Outcome) -> None:
            if outcome.status != "failed":
                note = f" ({outcome.detail})" if outcome.detail else ""
                progress.console.print(f"{outcome.label}: {outcome.status}{note}", markup=False)

        outcomes = download_sources(sources, root, client, max_bytes, hook, show)
    console.print(f"data dir: {root}")
    failed = [o for o in outcomes if o.status == "failed"]
    for outcome in failed:
        console.print(f"failed: {outcome.label}: {outcome.detail}", soft_wrap=True, markup=False)
    if failed:
        fetched = sum(o.status in ("fetched", "present") for o in outcomes)
        raise DataError(f"{len(failed)} of {len(outcomes)} files failed ({fetched} installed); see above")


@data_group.command("verify")
@click.argument("names", nargs=-1, metavar="[NAMES]...")
@data_dir_option
def verify(names: tuple[str, ...], data_dir: str | None) -> None:
    """Check the released files in a data folder, offline: GitHub files against the checksums their adapters
    declare, Hugging Face files against the digests recorded when `data download` verified them.

    Default: every source whose folder is present. Each file is listed as ok, absent, unrecorded (placed by hand:
    nothing to check it against offline), mismatch or refused (not a regular file: a FIFO, a device); any
    mismatch or refused file makes the command exit with status 2.
    """
    from shambench.data.adapter import adapters, resolve_data_dir
    from shambench.data.benchmark import split_names
    from shambench.data.download import verify_source
    from shambench.reporting.console import make_console

    console = make_console()
    root = resolve_data_dir(data_dir)
    chosen = split_names(list(names))
    sources = [adapters.get(n).factory() for n in chosen] if chosen else [e.factory() for e in adapters.entries()]
    sources = [a for a in sources if chosen or a.root(root).is_dir()]
    if not sources:
        raise DataError(f"nothing to verify: {no_data_hint(root)}")
    outcomes = [o for adapter in sources for o in verify_source(adapter, root)]
    for o in outcomes:
        console.print(f"{o.status:>10}  {o.label}" + (f"  {o.detail}" if o.detail else ""), markup=False)
    for adapter in sources:
        if not adapter.remote_files:
            console.print(f"{adapter.name}: its adapter declares no released files, so nothing to check", markup=False)
        absent = sum(o.source == adapter.name and o.status == "absent" for o in outcomes)
        if absent and adapter.available(root):  # e.g. another release of the source, which the adapter also reads
            console.print(
                f"{adapter.name}: loads from the files present here (`shambench list datasets`), though {absent} of "
                f"those `data download` fetches {'is' if absent == 1 else 'are'} absent",
                markup=False,
            )
    problems = [
        f"{len(bad)} file(s) in {root} {says}: " + ", ".join(o.label for o in bad)
        for status, says in (("mismatch", "do not match their checksums"), ("refused", "are not regular files"))
        if (bad := [o for o in outcomes if o.status == status])
    ]
    if problems:
        raise DataError("; ".join(problems))
    counts = {s: sum(o.status == s for o in outcomes) for s in ("ok", "unrecorded", "absent")}
    console.print(f"data dir: {root}: " + ", ".join(f"{n} {s}" for s, n in counts.items()), markup=False)


def _transfer_progress(no_progress: bool) -> Progress:
    from rich.progress import BarColumn, DownloadColumn, TextColumn, TransferSpeedColumn

    from shambench.cli.progress import progress_display

    return progress_display(
        TextColumn("{task.description}", style="bold", markup=False),
        BarColumn(),
        DownloadColumn(),
        TransferSpeedColumn(),
        enabled=not no_progress,
    )


@data_group.command("stats")
@datasets_option
@suite_option("Datasets by suite instead of --datasets (extended: SHAM-Bench's sources present and the extended ones).")
@split_option
@data_dir_option
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON (with their conventions).")
def stats(datasets: str | None, suite: str | None, split: str, data_dir: str | None, as_json: bool) -> None:
    """Per task/dataset partition and in total: examples (beside the paper's count), mean response tokens, mean
    hallucinated tokens, mean per-example hallucinated-token rate, share of examples with a span, and the rows
    each source dropped, by reason (the layout of SHAM-Bench's Table 1).

    For the extended suite's partitions the count beside ours is the one their corpus's paper or release reports
    (listed under the table with its source). Sources whose gold spans are placed by their text also list their
    spans by outcome: how they were placed, and those that could not be, by reason.
    """
    from shambench.data.stats import benchmark_stats
    from shambench.reporting.console import make_console

    if suite:
        if datasets:
            raise click.UsageError("give --suite or --datasets, not both")
        from shambench.runs.selection import suite_datasets

        datasets = suite_datasets(suite, data_dir, split)
    bench = _load(datasets, split, data_dir, make_console(stderr=True))
    figures = benchmark_stats(bench)
    if as_json:
        click.echo(figures.model_dump_json(indent=2))
        return
    _print_stats(figures, make_console())


def _print_stats(figures: BenchmarkStats, console: Console) -> None:
    from rich import box
    from rich.table import Table

    from shambench.data.stats import PAPER_SOURCE

    table = Table(title=f"SHAM-Bench composition ({figures.split} split)", title_justify="left", box=box.SIMPLE_HEAD)
    justified: tuple[tuple[str, JustifyMethod], ...] = (
        ("task", "left"),
        ("dataset", "left"),
        ("n", "right"),
        ("paper n", "right"),
    )
    for col, justify in justified:
        table.add_column(col, justify=justify)
    for col in ("resp. tokens", "hallu. tokens", "hallu. rate", "with span"):
        table.add_column(col, justify="right")
    for i, row in enumerate([*figures.partitions, figures.total]):
        table.add_row(
            row.task,
            row.dataset,
            str(row.count),
            "" if row.paper_count is None else str(row.paper_count),
            f"{row.mean_response_tokens:.1f}",
            f"{row.mean_hallucinated_tokens:.1f}",
            f"{row.mean_hallucinated_rate:.3f}",
            f"{row.share_with_span:.3f}",
            end_section=i == len(figures.partitions) - 1,
        )
    console.print(table)
    sources = {r.count_source for r in figures.partitions if r.count_source and r.count_source != PAPER_SOURCE}
    for source in sorted(sources):
        names = ", ".join(f"{r.task}/{r.dataset}" for r in figures.partitions if r.count_source == source)
        console.print(f"paper n of {names}: {source}", soft_wrap=True)
    if figures.total.count_source not in (None, PAPER_SOURCE):
        console.print(f"paper n of the total: {figures.total.count_source}", soft_wrap=True)
    if figures.spans:
        console.print(_counts_table("gold spans placed by their text", figures.spans, ("outcome", "spans")))
    if any(figures.dropped.values()):
        console.print(_counts_table("rows dropped by the adapters", figures.dropped, ("reason", "rows")))
    else:
        console.print("no rows dropped")


def _counts_table(title: str, counts: dict[str, dict[str, int]], columns: tuple[str, str]) -> Table:
    """A table of per-dataset counts by key: dataset, the key (`columns[0]`), the count (`columns[1]`)."""
    from rich import box
    from rich.table import Table

    table = Table(title=title, title_justify="left", box=box.SIMPLE_HEAD)
    table.add_column("dataset")
    table.add_column(columns[0])
    table.add_column(columns[1], justify="right")
    for name, by_key in counts.items():
        for key, n in by_key.items():
            table.add_row(name, key, str(n))
    return table


@data_group.command("dump")
@click.option(
    "--out",
    required=True,
    type=click.Path(dir_okay=False, allow_dash=True),
    help="The EXAMPLES JSONL file to write; `-` is stdout.",
)
@datasets_option
@split_option
@data_dir_option
def dump(out: str, datasets: str | None, split: str, data_dir: str | None) -> None:
    """Write the unified examples as JSON lines: the EXAMPLES format of `shambench score --examples`.

    Ids come from the sources' own ids, so they are the same on every run and machine; steps (math sets) are
    written as a list of {start, end, label}. The file is written atomically.
    """
    from shambench.io import model_line, write_jsonl
    from shambench.reporting.console import make_console

    console = make_console(stderr=True)
    examples = _load(datasets, split, data_dir, console).examples
    if out == "-":  # as `--out -` of score and agreement: the lines on stdout, the count on stderr
        click.echo("".join(model_line(example) for example in examples), nl=False)
        console.print(f"{len(examples)} examples written to stdout")
    else:
        console.print(f"{write_jsonl(out, examples)} examples written to {out}")


@data_group.command("export")
@click.option("--out", required=True, type=OutputFolder(), help="Folder for the Hugging Face dataset.")
@datasets_option
@click.option(
    "--split",
    "splits",
    multiple=True,
    default=("test", "dev"),
    show_default=True,
    help="Splits to export (repeatable).",
)
@data_dir_option
def export(out: str, datasets: str | None, splits: tuple[str, ...], data_dir: str | None) -> None:
    """Write a Hugging Face dataset: `data/<split>.parquet` per split and a README.md dataset card naming every
    source, its licence and revision.

    \b
    Read it back offline with
      datasets.load_dataset("parquet", data_files={"test": "OUT/data/test.parquet"})
    or datasets.load_dataset("OUT"), which follows the card's configs. `meta` is a JSON string.
    """
    from shambench.data.benchmark import write_hf_dataset
    from shambench.reporting.console import make_console

    console = make_console(stderr=True)
    benches = [_load(datasets, split, data_dir, console) for split in splits]
    for path in write_hf_dataset(Path(out), benches):
        console.print(f"wrote {path}")


data_group.add_command(add_context_command)
