"""Exit statuses of the `shambench` commands and the failure summary printed before a non-zero one.

    0  every item succeeded (or `--allow-failures` was given and the run finished)
    2  usage or input error: bad options, unreadable data, a requested dataset that failed to load, refused
       credentials, a run directory in use, repeated authentication errors
    3  the command finished and wrote its results, but some items (predictions, evidence, judgements) failed
  130  interrupted (Ctrl-C); the message says how to resume

Scripts can rely on these: a run that went wrong never exits 0 unless `--allow-failures` asks for it.
"""

from __future__ import annotations

import shlex
from collections import Counter
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import click

OK = 0
USAGE = 2
FAILURES = 3
INTERRUPTED = 130
# Reasons shown in full under the per-class counts.
FIRST_REASONS = 5

F = TypeVar("F", bound=Callable[..., Any])

ALLOW_FAILURES_HELP = "Exit 0 even when some items failed (the default is 3, so scripts notice)."


def allow_failures_option(func: F) -> F:
    """--allow-failures: make exit status 3 (finished with failures) into 0."""
    return click.option("--allow-failures", is_flag=True, help=ALLOW_FAILURES_HELP)(func)


def reason_class(reason: str) -> str:
    """The kind of a failure reason, for counting: its text before the first colon (`HTTP 500`, `timeout`,
    `malformed reply`), without the attempt count."""
    head = reason.split(":", 1)[0].split(" after ", 1)[0].strip()
    return head[:60] or "unknown"


def failure_lines(failures: Sequence[tuple[str, str]], what: str = "predictions") -> list[str]:
    """The failure summary of `(id, reason)` pairs: counts by reason class, then the first few reasons."""
    if not failures:
        return []
    counts = Counter(reason_class(reason) for _, reason in failures)
    lines = [f"{len(failures)} {what} failed:"]
    lines += [f"  {n:>6}  {kind}" for kind, n in counts.most_common()]
    lines.append("first reasons:")
    lines += [f"  {item_id}: {' '.join(reason.split())[:300]}" for item_id, reason in failures[:FIRST_REASONS]]
    return lines


def print_failures(
    console: Any, failures: Sequence[tuple[str, str]], what: str = "predictions", retry: str = ""
) -> None:
    """Print the failure summary and, when given, how to retry the failed items (e.g. the --resume command)."""
    for line in failure_lines(failures, what):
        console.print(line, style="yellow", markup=False, highlight=False, soft_wrap=True)
    if failures and retry:
        console.print(retry, markup=False, highlight=False, soft_wrap=True)


def command_line(args: Sequence[str]) -> str:
    """A shell-quoted command line."""
    return " ".join(shlex.quote(str(a)) for a in args)


def finish(n_failed: int, allow_failures: bool) -> None:
    """End the command: exit status 3 when items failed (0 with `--allow-failures`), else return normally."""
    if n_failed and not allow_failures:
        raise click.exceptions.Exit(FAILURES)
