"""`shambench cache stats|clear`: inspect or empty the model-response cache and the segmentation cache."""

from __future__ import annotations

import click


@click.group("cache")
def cache_group() -> None:
    """Inspect or empty the response cache of API-backed detectors and the segmentation cache.

    Answers of prompted detectors are cached by model, generation parameters and prompt, so re-running an
    evaluation (or resuming one) asks the server only for what it has not answered yet. The tokens and sentence
    units of every response text scored are cached by text and segmentation convention (tokenizer, spaCy version,
    language), so a later score, eval, compare, leaderboard build or sweep worker does not tokenise it again; and an
    EXAMPLES file scored with `shambench score --examples` is kept as the scorer's columns (up to 256 MB each),
    so scoring the same file again does not even read it. The caches live under $SHAMBENCH_CACHE_DIR (default: the
    user cache directory): a SQLite file each, and a `corpora` folder.
    """


@cache_group.command("stats")
def stats() -> None:
    """Where the caches are, how big, how many answers they hold per model and segmentations per convention."""
    from rich.table import Table

    from shambench.llm.cache import cache_stats
    from shambench.reporting.console import make_console
    from shambench.scoring.kept import corpora_dir, corpora_stats
    from shambench.scoring.segcache import SegmentationStore
    from shambench.scoring.text import wait_for_writes

    wait_for_writes()  # what this process segmented, when the command is called from Python
    s = cache_stats()  # only read: works on a read-only cache folder, makes no cache where there is none
    table = Table(title="response cache", title_justify="left")
    table.add_column("model", overflow="fold")
    table.add_column("answers", justify="right")
    for model, n in s.by_model.items():
        table.add_row(model, str(n))
    table.add_row("total", str(s.entries), style="bold")
    console = make_console()
    # The path on a line of its own, never wrapped (a table title would cut it mid-word), so it can be copied.
    console.print(f"cache: {s.path}", soft_wrap=True)
    console.print(table)
    console.print(f"size on disk: {s.size_bytes / 1e6:.2f} MB")
    seg = SegmentationStore().stats()
    console.print(f"segmentation cache: {seg.path}", soft_wrap=True)
    table = Table(title="segmentation cache", title_justify="left")
    table.add_column("convention")
    table.add_column("texts", justify="right")
    for convention, n in seg.by_convention.items():
        table.add_row(convention, str(n))
    table.add_row("total", str(seg.entries), style="bold")
    console.print(table)
    console.print(f"size on disk: {seg.size_bytes / 1e6:.2f} MB")
    n_corpora, corpora_bytes = corpora_stats()
    console.print(
        f"scored EXAMPLES files kept as corpora: {n_corpora} ({corpora_bytes / 1e6:.2f} MB) in {corpora_dir()}",
        soft_wrap=True,
    )


@cache_group.command("clear")
@click.option("--model", help="Delete only this model's answers (the segmentations stay).")
@click.option(
    "--segmentation",
    "only_segmentation",
    is_flag=True,
    help="Delete only the segmentations and kept corpora (the answers stay).",
)
@click.option("--yes", "-y", is_flag=True, help="Do not ask for confirmation.")
def clear(model: str | None, only_segmentation: bool, yes: bool) -> None:
    """Delete the cached answers (all, or one model's) and the cached segmentations; the next run asks the
    server again and tokenises again."""
    from shambench.cli.exits import confirmed
    from shambench.llm.cache import ResponseCache
    from shambench.scoring.kept import clear_corpora, corpora_dir
    from shambench.scoring.segcache import SegmentationStore
    from shambench.scoring.text import wait_for_writes

    if model and only_segmentation:
        raise click.UsageError("give --model or --segmentation, not both")
    answers = not only_segmentation
    segmentations = not model
    what = [f"the cached answers of {model}" if model else "every cached answer"] if answers else []
    what += ["every cached segmentation"] if segmentations else []
    if not yes and not confirmed(f"Delete {' and '.join(what)}?"):
        click.echo("nothing removed")
        return
    if answers:
        cache = ResponseCache()
        try:
            n = cache.clear(model)
        finally:
            cache.close()
        click.echo(f"deleted {n} cached answers from {cache.path}")
    if segmentations:
        wait_for_writes()  # else rows this process is still writing would outlive the clearing
        store = SegmentationStore()
        click.echo(f"deleted {store.clear()} cached segmentations from {store.path}")
        click.echo(f"deleted {clear_corpora()} kept corpora of EXAMPLES files from {corpora_dir()}")
