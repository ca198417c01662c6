"""Every error shambench raises on purpose, in one hierarchy: catch `ShambenchError` for all of them.

    ShambenchError
    ├── DataError (also a ValueError)        input that cannot be read; the message names file, line, expectation
    │   ├── SourceError                      a corpus file missing or not in its released format
    │   ├── DownloadError                    a file not fetched, or not matching its checksum
    │   ├── ParameterError                   a plugin parameter the factory does not take, or of the wrong type
    │   ├── ScoringError                     predictions that cannot be scored against the examples
    │   ├── SelectionError                   a data selection that selects nothing, or two sources at once
    │   ├── RunDirError                      a run directory that cannot be used as asked (taken, or would change)
    │   ├── ChangedDataError                 a run's examples changed since it was made (its fingerprint differs)
    │   ├── FolderError (also an OSError)    a write under the tool's folders refused: a link, a path leaving its
    │   │                                    folder, or a folder the disk will not write (read-only, full)
    │   ├── MissingExtra                     a feature whose optional dependencies (an extra) are not installed
    │   └── SubmissionError                  a rejected leaderboard submission, with every reason
    ├── UnknownPluginError (also a KeyError) no plugin of that kind has that name
    ├── NameClashError                       two built-in plugins of one kind registered under one name
    ├── EndpointError                        a base URL refused (not http(s), or carrying credentials)
    ├── EndpointStopped                      the server cannot serve the run: it stopped, nothing more sent
    │   ├── AuthenticationStopped            too many 401/403 replies in a row
    │   └── ServerUnreachable                no connection to a server that never answered
    ├── MalformedReply (also a ValueError)   an HTTP-200 body that is not a well-formed completion
    ├── LLMError (shambench.llm.client)      a request that failed for good, with what it consumed
    ├── SystematicFailure (shambench.runs.failures)  predictions failing for one reason: the run stopped
    ├── DetectorError                        a detector's own code raised while predicting: the run stopped
    └── CellError                            a sweep cell that could not finish

The command line turns DataError, UnknownPluginError, EndpointError and EndpointStopped into one line and
exit status 2 (see `shambench.cli.exits`). Messages name no command-line flag (they name the Python parameters
where they name one): the command line adds its flags by the class of the error (`shambench.cli.FLAG_HINTS`).
"""

from __future__ import annotations

import traceback
from collections.abc import Callable, Sequence


def described(err: BaseException) -> str:
    """`Type: message` (`Type` alone for an empty message) for any exception, never raising: a plugin's or a
    detector's exception may have a `__str__` that raises or returns no string, which gives way to its `__repr__`
    and then to its type's name alone."""
    kind = _shown(lambda: type(err).__name__) or "an exception"
    message = message_of(err)
    return f"{kind}: {message}" if message else kind


def message_of(err: BaseException) -> str:
    """An exception's message, `str(err)`, never raising: where that raises (or gives no string), its repr said
    as such, and where that raises too, that both did."""
    message = _shown(lambda: str(err))
    if message is not None:
        return message
    shown = _shown(lambda: repr(err))
    return f"(its str() raised; repr: {shown})" if shown is not None else "(its str() and repr() raised)"


def _shown(text: Callable[[], object]) -> str | None:
    """What `text` returns when it is a string; None when it is not or when it raises anything short of Ctrl-C
    (foreign code: even SystemExit)."""
    try:
        value = text()
    except KeyboardInterrupt:
        raise
    except BaseException:  # noqa: BLE001  (whatever the foreign code raises, the line must still be made)
        return None
    return value if isinstance(value, str) else None


class ShambenchError(Exception):
    """Base of every error shambench raises on purpose."""


class DataError(ShambenchError, ValueError):
    """Input that cannot be read: the message names the file, the line and what was expected."""


class SourceError(DataError):
    """A source file is missing or not in the released format; the message names the file and the expectation."""


class DownloadError(DataError):
    """A file could not be fetched or did not match its checksum; the message names the URL and the file."""


class ParameterError(DataError):
    """A plugin parameter that the factory does not take, or a value of the wrong type (a user error, never
    worth retrying)."""


class ScoringError(DataError):
    """Predictions that cannot be scored against the examples (unknown id, range past the response, ...)."""

    def __init__(self, message: str, prediction_id: str | None = None):
        super().__init__(message)
        # The offending prediction's id, so that a caller that read the predictions from a file can name the line.
        self.prediction_id = prediction_id


class SelectionError(DataError):
    """A data selection that selects no example, or names both datasets and an examples file."""


class RunDirError(DataError):
    """A run directory that cannot be used as asked: it already holds a run (or an orphan journal), or resuming
    it would change what the run recorded."""


class ChangedDataError(DataError):
    """A run's examples differ from what it was made on (its fingerprint): its numbers would silently change."""


class FolderError(DataError, OSError):
    """A create, write, rename or delete under the tool's folders that was refused (a symbolic link on the way, a
    path leaving its folder) or that the disk refused (read-only, full); the message names the path. Also an
    OSError, so that a cache that skips a folder it cannot write skips this one too."""


class MissingExtra(DataError):
    """A feature whose optional dependencies are not installed; the message names the extra and how to install
    it (`shambench.extras.import_extra`)."""

    def __init__(self, message: str, extra: str):
        super().__init__(message)
        # The extra to install, for callers that offer to install it or list what is missing.
        self.extra = extra


class SubmissionError(DataError):
    """A rejected submission; `problems` lists every reason, and nothing was written."""

    def __init__(self, source: str, problems: Sequence[str]):
        self.problems = list(problems)
        listing = "\n".join(f"  - {p}" for p in self.problems)
        super().__init__(
            f"{source}: submission rejected ({len(self.problems)} problem(s)); nothing was added:\n{listing}"
        )


class UnknownPluginError(ShambenchError, KeyError):
    """No plugin of that kind has that name."""

    def __str__(self) -> str:
        return str(self.args[0])


class NameClashError(ShambenchError):
    """Two built-in plugins of one kind registered under one name: the second would silently replace the first."""


class EndpointError(ShambenchError):
    """A base URL shambench refuses: not http(s), or carrying credentials. Not a ValueError, so that pydantic
    passes it through unchanged and the command line shows it as one line."""


class EndpointStopped(ShambenchError):
    """Raised out of `LLMClient.map` when the server cannot serve the run at all: every further request would fail
    the same way, so none is sent. What was journaled is kept, and a resume continues."""


class AuthenticationStopped(EndpointStopped):
    """After too many consecutive 401/403 replies: the key or the server is wrong."""


class ServerUnreachable(EndpointStopped):
    """No connection could be made to a server that has not answered once: nothing listens at the base URL."""


class MalformedReply(ShambenchError, ValueError):
    """An HTTP-200 body that is not a well-formed completion; the message is a one-line reason."""


class DetectorError(ShambenchError):
    """A detector's own code raised while predicting (an exception of its own, not one of these): the run stopped,
    and the predictions made before it are journaled. The message names the exception and the line that raised it;
    the exception itself is the `__cause__`, with its traceback."""

    def __init__(self, detector: str, error: Exception):
        where = traceback.extract_tb(error.__traceback__)[-1:]
        at = f" ({where[0].filename}:{where[0].lineno}, in {where[0].name})" if where else ""
        super().__init__(f"detector {detector!r} raised {described(error)}{at}")


class CellError(ShambenchError):
    """A cell could not finish; its journal keeps every prediction that did arrive."""
