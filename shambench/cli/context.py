"""`shambench data add-context`: fetch and store evidence for open-domain examples."""

from __future__ import annotations

from typing import TYPE_CHECKING

import click

from shambench.cli.exits import allow_failures_option
from shambench.cli.options import data_selection, parse_params

if TYPE_CHECKING:
    from shambench.runs.spec import Selection


@click.command("add-context")
@click.option("--provider", "spec", required=True, metavar="NAME", help="Context provider: file:PATH, wikipedia, llm.")
@click.option("--param", "-p", "params", multiple=True, metavar="KEY=VALUE", help="Provider parameter (repeatable).")
@data_selection
@allow_failures_option
def add_context_command(
    spec: str,
    params: tuple[str, ...],
    selection: Selection,
    allow_failures: bool,
) -> None:
    """Fetch evidence for the selected open-domain examples and store it in the shambench cache.

    \b
    shambench data add-context --provider file:evidence.jsonl --datasets mushroom
    shambench data add-context --provider wikipedia --datasets mushroom,halluentity

    Each record keeps its provenance (provider, parameters, source URLs, retrieval time, content hash). Examples
    that already have evidence are skipped, so a re-run fetches only what is missing or failed. Use the evidence
    with `shambench eval --context SPEC` (with the same provider parameters).

    Exit status: 0 when every selected example has evidence; 3 when some fetches failed (a summary is printed;
    --allow-failures makes this 0); 2 for usage or input errors.
    """
    from shambench.cli.exits import continued_by, finish, print_failures
    from shambench.cli.progress import ProgressMonitor
    from shambench.data.context import ContextStore, add_context, create_provider
    from shambench.reporting.console import make_console
    from shambench.runs.selection import select_examples

    console = make_console()
    provider = create_provider(spec, **parse_params(params))
    examples, _ = select_examples(selection)
    open_domain = [ex for ex in examples if not ex.context]
    try:
        kept = "the evidence fetched is stored: run the same command again to fetch the rest"
        with continued_by(kept), ProgressMonitor(len(open_domain), f"context: {spec}") as monitor:
            counts = add_context(provider, open_domain, monitor)
    finally:
        provider.close()
    console.print(
        f"{len(open_domain)} open-domain examples ({len(examples) - len(open_domain)} have their own context): "
        f"{counts['fetched']} fetched, {counts['failed']} failed, {counts['cached']} already stored"
    )
    stored = ContextStore(provider).read()
    failed = [(ex.id, rec.error) for ex in open_domain if (rec := stored.get(ex.id)) is not None and rec.error]
    console.print(f"store: {ContextStore(provider).path}", soft_wrap=True)
    print_failures(console, failed, what="fetches", retry="retry them: run the same command again")
    finish(len(failed), allow_failures)
