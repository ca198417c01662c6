"""The `shambench` command line. Subcommands live in small modules and are imported only when used."""

from __future__ import annotations

import atexit
import contextlib
import importlib
import os
import re
import sys
import threading
import warnings
from collections.abc import Callable, Iterator
from gettext import gettext
from typing import IO, TYPE_CHECKING, Any, NamedTuple, NoReturn, TypeGuard

import click

from shambench.cli.exits import INTERRUPTED, UserError
from shambench.controls import FOREIGN
from shambench.errors import ChangedDataError, DataError, RunDirError, SelectionError, UnknownPluginError, message_of
from shambench.secrets import redact

if TYPE_CHECKING:
    from pydantic import ValidationError


class LazyCommand(NamedTuple):
    """A subcommand imported when it is run or asked for its own help."""

    target: str
    """Where it is: "module:attribute"."""
    summary: str
    """The first paragraph of its help, from which its short help in the group's listing is made."""


# name -> where the command is ("module:attribute") and the first paragraph of its help. Each module imports its heavy
# dependencies inside the command body, and `shambench --help` lists the commands from these summaries without
# importing any: the options of eval, score... are made from RunSpec's fields, and importing every command module
# for its short help imported pydantic and the models (twice the instructions of dec8690's `--help`,
# benchmarks/RESULTS.md). tests/cli/test_entry.py checks each summary against its command's help.
COMMANDS = {
    "score": LazyCommand(
        "shambench.cli.score:score",
        "Score predictions, or rescore RUN_DIR from its journal (never calls the detector).",
    ),
    "agreement": LazyCommand(
        "shambench.cli.agreement:agreement_command",
        "Human agreement: each annotator scored against the gold the source builds from the other annotators.",
    ),
    "eval": LazyCommand(
        "shambench.cli.eval:eval_command", "Run a detector over examples, write a run directory and print the scores."
    ),
    "list": LazyCommand(
        "shambench.cli.listing:list_group",
        "List the registered detectors, datasets, prediction formats or context providers (built-in and installed plugins).",
    ),
    "data": LazyCommand(
        "shambench.cli.data:data_group",
        "Fetch the corpora, describe them (SHAM-Bench Table 1), dump or export the unified examples.",
    ),
    "leaderboard": LazyCommand(
        "shambench.cli.leaderboard:leaderboard_group",
        "Build the static leaderboard page, add submissions to it, export its JSON Schemas.",
    ),
    "compare": LazyCommand(
        "shambench.cli.compare:compare",
        "Compare two runs: F1 of A minus F1 of B, overall and per task, with a 95% interval and a p-value.",
    ),
    "cache": LazyCommand(
        "shambench.cli.cache:cache_group",
        "Inspect or empty the response cache of API-backed detectors and the segmentation cache.",
    ),
    "analyze": LazyCommand(
        "shambench.cli.analyze:analyze",
        "Explain a run's errors: which gold spans were found, how far boundaries are off, false alarms, and predicted against gold hallucination rates. Several RUN_DIRS are analysed side by side.",
    ),
    "show": LazyCommand(
        "shambench.cli.show:show",
        "Print one example of RUN_DIR with gold and predicted spans highlighted, or write them all as a page.",
    ),
    "sweep": LazyCommand(
        "shambench.cli.sweep:sweep",
        "Run every detector of SWEEP.yaml on every dataset, one run directory per cell, then build the leaderboard.",
    ),
    "optimize": LazyCommand(
        "shambench.cli.optimize:optimize",
        "Optimise the prompt of a prompted detector with DSPy's MIPROv2 and save the program.",
    ),
    "train": LazyCommand(
        "shambench.cli.train:train_group",
        "Fine-tune a detector on the benchmark's non-test data (needs `pip install 'shambench[models]'`).",
    ),
    "batch": LazyCommand("shambench.cli.batch:batch_group", "Batches of runs made with `shambench eval --batch`."),
}

# Errors whose message already says what is wrong (file, line, id): shown as one line, exit status 2.
USER_ERRORS = (DataError, UnknownPluginError, FileNotFoundError)
# The core's messages name no flag; by the class of the error, the command line adds which flags to look at.
FLAG_HINTS: dict[type[Exception], str] = {
    ChangedDataError: "score RUN_DIR --accept-changed-data rescores it anyway and records the change; eval makes a "
    "new run on the data as it is now",
    SelectionError: "check --datasets, --examples and --data-dir, or --suite of eval",
    RunDirError: "--resume RUN_DIR continues a run, with --base-url/--api-key-env as it was made; "
    "--run-dir DIR starts a new one",
}


def user_message(err: Exception) -> str:
    """The one line an error shows on the command line: its message, the run options it names in backquotes given
    as their flags, and the flags its class points at."""
    from shambench.cli.options import flags_in

    hint = next((text for kind, text in FLAG_HINTS.items() if isinstance(err, kind)), None)
    message = flags_in(message_of(err))
    return f"{message} ({hint})" if hint else message


class LazyGroup(click.Group):
    """A click group whose subcommands are imported on demand, and which turns user errors into one line."""

    def __init__(self, *args: Any, lazy: dict[str, LazyCommand] | None = None, **kwargs: Any):
        super().__init__(*args, **kwargs)
        self.lazy = lazy or {}

    def list_commands(self, ctx: click.Context) -> list[str]:
        return sorted(set(super().list_commands(ctx)) | set(self.lazy))

    def get_command(self, ctx: click.Context, name: str) -> click.Command | None:
        if name in self.lazy:
            module, attr = self.lazy[name].target.split(":")
            return getattr(importlib.import_module(module), attr)
        return super().get_command(ctx, name)

    def format_commands(self, ctx: click.Context, formatter: click.HelpFormatter) -> None:
        """The commands and their short help as click lists them, a lazy one's made from its summary without
        importing it."""
        listed = [
            (
                name,
                click.Command(name, help=self.lazy[name].summary) if name in self.lazy else self.get_command(ctx, name),
            )
            for name in self.list_commands(ctx)
        ]
        rows = [(name, cmd) for name, cmd in listed if cmd is not None and not cmd.hidden]
        if rows:
            limit = formatter.width - 6 - max(len(name) for name, _ in rows)
            with formatter.section(gettext("Commands")):
                formatter.write_dl([(name, cmd.get_short_help_str(limit)) for name, cmd in rows])

    def resolve_command(
        self, ctx: click.Context, args: list[str]
    ) -> tuple[str | None, click.Command | None, list[str]]:
        try:
            return super().resolve_command(ctx, args)
        except click.UsageError as err:
            # click suggests a name from the commands it holds, which the lazy ones are not until imported
            import difflib

            named = args[0] if args and not args[0].startswith("-") else None
            close = difflib.get_close_matches(named, self.list_commands(ctx)) if named else []
            if not close or getattr(err, "possibilities", None):
                raise
            raise click.UsageError(f"{err.message} Did you mean {close[0]!r}?", ctx) from None

    def main(self, *args: Any, **kwargs: Any) -> Any:
        stdout, stderr = sys.stdout, sys.stderr
        if not isinstance(stdout, RedactingStream):
            # Whatever the command line prints (tables, progress, warnings, a server's words, and the error line and
            # usage errors click shows once the command has ended) passes the redactor and the terminal's filter.
            sys.stdout, sys.stderr = RedactingStream(ReaderGoneStdout(stdout)), RedactingStream(stderr)
        try:
            return super().main(*args, **kwargs)
        finally:
            sys.stdout, sys.stderr = stdout, stderr

    def invoke(self, ctx: click.Context) -> Any:
        from shambench.errors import EndpointError, EndpointStopped

        formatted = warnings.formatwarning
        warnings.formatwarning = warning_line
        try:
            with _loading_shown():
                return super().invoke(ctx)
        except (*USER_ERRORS, EndpointError, EndpointStopped) as err:
            raise UserError(user_message(err)) from None
        except Exception as err:
            if not _refused_by_a_model(err):
                raise
            from shambench.cli.options import flags_in, refused_values

            # a value given that a model refuses (a name with a control character)
            raise UserError(flags_in(refused_values(err))) from None
        except KeyboardInterrupt:
            # click would print "Aborted!" and exit 1; 130 is what the documented statuses promise for Ctrl-C.
            click.echo("interrupted", err=True)
            raise click.exceptions.Exit(INTERRUPTED) from None
        finally:
            warnings.formatwarning = formatted


def _refused_by_a_model(err: Exception) -> TypeGuard[ValidationError]:
    """Whether `err` is pydantic's refusal of a value. Only a command that has imported pydantic can raise one:
    one that has not (a subcommand's `--help`, which the run options no longer make from the models) does not import
    it to find out."""
    pydantic = sys.modules.get("pydantic")
    return pydantic is not None and isinstance(err, pydantic.ValidationError)


@contextlib.contextmanager
def _loading_shown() -> Iterator[None]:
    """Every command that loads sources says which one it is reading (a status line on the terminal)."""
    from shambench.data.loading import watched_by

    status: list[Callable[[str | None], None]] = []

    def shown(what: str | None) -> None:
        # The status line's module (with rich and the detectors' registry) is imported when a first source is read:
        # a command that reads none, such as a subcommand's --help, does not pay for it.
        if not status:
            if what is None:
                return
            from shambench.cli.progress import LoadStatus

            status.append(LoadStatus())
        status[0](what)

    with watched_by(shown):
        yield


def warning_line(message: Warning | str, *args: Any, **kwargs: Any) -> str:
    """A Python warning as the commands print theirs, `warning: MESSAGE`, without its source file and line (set
    as `warnings.formatwarning`, so that warnings recorded rather than printed, as tests do, are untouched)."""
    return f"warning: {message}\n"


# The control sequences the tool itself writes: SGR colours and styles (click.secho, rich), anywhere; and where the
# stream is a terminal, those of rich's live displays (progress bars, the loading line): the cursor hidden and
# shown, moved up a line, the line erased, a return to its start.
_COLOURS = r"\x1b\[[0-9;]*m"
_LIVE = r"\x1b\[\?25[hl]|\x1b\[[0-9]*[AK]|\r"
_ANY_CONTROL = re.compile(f"[{FOREIGN}]")
_SEQUENCES = re.compile(f"(?P<colours>{_COLOURS})|(?P<live>{_LIVE})|[{FOREIGN}]")


def _escaped(text: str) -> str:
    """`text` with its control characters written as escapes (`\\x1b`, `\\u202e`)."""
    return _ANY_CONTROL.sub(lambda m: f"\\x{ord(m[0]):02x}" if ord(m[0]) < 0x100 else f"\\u{ord(m[0]):04x}", text)


def terminal_text(text: str, terminal: bool) -> str:
    """`text` as it may reach a terminal: the control sequences the tool writes kept (those of its live displays
    only when `terminal`), every other control character shown escaped, so that a name or a text read from a file
    or sent by a server cannot clear the screen, set the window title, move the cursor or reorder a line."""
    if _ANY_CONTROL.search(text) is None:
        return text

    def shown(match: re.Match[str]) -> str:
        kept = match["colours"] is not None or (terminal and match["live"] is not None)
        return match[0] if kept else _escaped(match[0])

    return _SEQUENCES.sub(shown, text)


class RedactingStream:
    """A terminal stream whose every write passes `shambench.secrets.redact` first (rich writes a whole rendered
    table or line at once, so a key is not split between two writes), then `terminal_text`."""

    def __init__(self, stream: IO[str] | ReaderGoneStdout):
        self.stream = stream

    def write(self, text: str) -> int:
        self.stream.write(terminal_text(redact(text), self._terminal()))
        return len(text)

    def _terminal(self) -> bool:
        """Whether the stream takes a terminal's control sequences: the environment says so as rich reads it
        (TTY_COMPATIBLE, FORCE_COLOR: rich then draws its live displays there), else the stream is a terminal."""
        declared = os.environ.get("TTY_COMPATIBLE", "")
        if declared in ("0", "1"):
            return declared == "1"
        if os.environ.get("FORCE_COLOR"):
            return True
        try:
            return bool(self.stream.isatty())
        except (AttributeError, ValueError, OSError):
            return False

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


class ReaderGoneStdout:
    """sys.stdout that, once its reader has gone (`shambench score ... | head`), drops what is written instead of
    raising BrokenPipeError: the command still writes its files (`--out`, the run directory) and exits with its
    own status, rather than dying at its first print after the pipe closed."""

    def __init__(self, stream: IO[str]):
        self.stream = stream
        self.gone = False

    def write(self, text: str) -> int:
        if not self.gone:
            try:
                return self.stream.write(text)
            except BrokenPipeError:
                self._reader_gone()
        return len(text)

    def flush(self) -> None:
        if not self.gone:
            try:
                self.stream.flush()
            except BrokenPipeError:
                self._reader_gone()

    def _reader_gone(self) -> None:
        self.gone = True
        # What is still buffered would raise again when the interpreter flushes its stdout at exit.
        try:
            devnull = os.open(os.devnull, os.O_WRONLY)
            os.dup2(devnull, self.stream.fileno())
            os.close(devnull)
        except (OSError, ValueError):
            pass

    def __getattr__(self, name: str) -> Any:
        return getattr(self.stream, name)


@click.group(cls=LazyGroup, lazy=COMMANDS, context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(package_name="shambench")
def main() -> None:
    """shambench: measure how well hallucination detectors localise errors.

    \b
    Typical use:
      shambench list datasets                      what data is available
      shambench eval --detector overlap            run a detector, score it, keep a run directory
      shambench score --examples E.jsonl --predictions P.jsonl --out results.json
      shambench score runs/RUN_DIR                 rescore a run without calling the detector

    Data is read from --data-dir, else $SHAMBENCH_DATA_DIR, else the user cache directory.
    """


def run() -> NoReturn:
    """The installed `shambench` command (and `python -m shambench`): `main` in a process whose collector and
    thread switching the library may set (`shambench.cli.process`), then an exit that skips the interpreter's
    teardown once nothing is left to finish."""
    from shambench.cli.process import CommandLineSettings
    from shambench.memory import use_process_settings

    # This process is the command's own: the library may make the process-wide settings it asks for.
    use_process_settings(CommandLineSettings())
    status = 0
    try:
        main(prog_name="shambench")
    except SystemExit as done:
        if not isinstance(done.code, int | None) or _threads_still_working():
            raise
        status = done.code or 0
    # The teardown frees every object one by one (a scored corpus is millions of them): about 0.25 s of a cold
    # 6k `score`, which the operating system does at once when the process ends. What must finish still does:
    # the exit handlers (logging's flush, multiprocessing's joins) and the buffered output; a command that left
    # a non-daemon thread running has taken the ordinary exit above.
    atexit._run_exitfuncs()
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):
            status = status or 120  # what Python exits with when flushing its output fails
    os._exit(status)


def _threads_still_working() -> bool:
    """Whether a thread the interpreter would wait for before exiting is still running."""
    return any(t.is_alive() and not t.daemon for t in threading.enumerate() if t is not threading.main_thread())
