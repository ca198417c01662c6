"""Exit statuses of the `shambench` commands and the failure summary printed before a non-zero one.

    0  every item succeeded (or `--allow-failures` was given and the run finished)
    2  usage or input error: bad options, unreadable data, a requested dataset that failed to load, refused
       credentials, a run directory in use, repeated authentication errors
    3  the command finished and wrote its results, but some items (predictions, evidence, judgements) failed
    4  submitted, not finished: a run by batch left its batch running (`--no-wait`, or `--batch-timeout` passed);
       no results yet, `shambench eval --resume RUN_DIR` finishes it
  130  interrupted (Ctrl-C), in any command; where work is kept, the message says how to go on

Scripts can rely on these: a run that went wrong never exits 0 unless `--allow-failures` asks for it.
"""

from __future__ import annotations

import shlex
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any, TypeVar

import click

from shambench.runs.failures import failure_lines
from shambench.secrets import redact

OK = 0
USAGE = 2
FAILURES = 3
NOT_FINISHED = 4
INTERRUPTED = 130

F = TypeVar("F", bound=Callable[..., Any])

# An error line quotes what it refuses (a value, a line of a file); a hostile input can make that megabytes long.
ERROR_LINE_CHARS = 2000


class UserError(click.ClickException):
    """A one-line error for bad input; exit status 2."""

    exit_code = USAGE

    def show(self, file: IO[Any] | None = None) -> None:
        click.secho(f"error: {shortened(self.format_message())}", fg="red", err=True)


def shortened(message: str) -> str:
    """`message` cut to ERROR_LINE_CHARS characters, saying how many were left out; redacted before it is cut, so
    a key is never left half-shown where the cut falls inside it."""
    message = redact(message)
    if len(message) <= ERROR_LINE_CHARS:
        return message
    return f"{message[:ERROR_LINE_CHARS]}... ({len(message) - ERROR_LINE_CHARS:,} more characters)"


ALLOW_FAILURES_HELP = "Exit 0 even when some items failed (the default is 3, so scripts notice)."


def allow_failures_option(func: F) -> F:
    """--allow-failures: make exit status 3 (finished with failures) into 0."""
    return click.option("--allow-failures", is_flag=True, help=ALLOW_FAILURES_HELP)(func)


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


def resume_args(run_dir: str | Path, base_url: str | None = None, api_key_env: str | None = None) -> list[str]:
    """`shambench eval --resume RUN_DIR` with the endpoint options given now, which a resume must repeat (it
    never takes them from config.json)."""
    out = ["shambench", "eval", "--resume", str(run_dir)]
    out += ["--base-url", base_url] if base_url else []
    return out + (["--api-key-env", api_key_env] if api_key_env else [])


def finish(n_failed: int, allow_failures: bool) -> None:
    """End the command: exit status 3 when items failed (0 with `--allow-failures`), else return normally."""
    if n_failed and not allow_failures:
        raise click.exceptions.Exit(FAILURES)


@contextmanager
def continued_by(how: str) -> Iterator[None]:
    """Ctrl-C inside the block ends the command with `interrupted; HOW` (what is kept and how to go on) and exit
    status 130. Elsewhere the command line says only `interrupted`, with the same status."""
    try:
        yield
    except KeyboardInterrupt:
        click.echo(f"interrupted; {how}", err=True)
        raise click.exceptions.Exit(INTERRUPTED) from None


def confirmed(question: str) -> bool:
    """The user's yes or no to `question` (default no), the one way a command asks before it deletes. Declining
    is no error: the command does nothing and exits 0. A closed input is no answer: an error (exit 2) saying that
    nothing was done and how not to be asked; Ctrl-C is an interruption (130), as anywhere."""
    try:
        return click.confirm(question, default=False)
    except click.Abort as err:
        # click turns both into Abort ("Aborted!", exit 1), a status the commands never document
        if isinstance(err.__context__, KeyboardInterrupt):
            raise KeyboardInterrupt from None
        raise UserError(
            f"no answer to {question!r} (input closed): nothing done; --yes does it without asking"
        ) from None
