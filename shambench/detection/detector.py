"""The detector plugin interface and its registry.

Writing a detector takes a class with a `detect` method and a registered factory:

    from shambench import Detector, Span, detector

    class Shouty(Detector):
        def detect(self, example):
            return [Span(start=m.start(), end=m.end()) for m in re.finditer(r"\\b[A-Z]{2,}\\b", example.response)]

    @detector("shouty")
    def shouty() -> Detector:
        \"\"\"Flags words in capitals.\"\"\"
        return Shouty()

Third-party packages expose the factory under the `shambench.detectors` entry-point group instead.
`@detector("name", reference=True)` declares a reference baseline (like `none`, `all`, `random`): the leaderboard
shows its rows as labelled reference lines and never ranks them.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from types import ModuleType
from typing import Any

from shambench.errors import DataError, ParameterError, message_of
from shambench.registry import Registry, checked_params
from shambench.schema import Example, Prediction, Span

detectors: Registry[Detector] = Registry("detector", "shambench.detectors", "shambench.detectors")
detector = detectors.register
# A detector family can also offer the procedure that makes its detectors (`shambench optimize`, `shambench
# train`): a factory returning the module that holds it, imported only when the command runs.
optimizers: Registry[ModuleType] = Registry("optimizer", "shambench.optimizers", "shambench.detectors")
optimizer = optimizers.register
trainers: Registry[ModuleType] = Registry("trainer", "shambench.trainers", "shambench.detectors")
trainer = trainers.register


class Monitor:
    """Receives progress counters from a detector (retries, cache hits, tokens, ...); the CLI shows them."""

    def count(self, key: str, n: float = 1) -> None:
        """Add `n` to the counter `key`."""

    def done(self, item: Any) -> None:
        """One item (a prediction, a context record) is finished; `item.error` says whether it failed."""

    def note(self, message: str) -> None:
        """Something the user should know once, e.g. that the server rejected a structured-output mode."""


REPORTED_ONLY = ("prompt_hash",)
"""Parameters a detector reports (`Detector.params`) that no factory takes: what its output depends on (the hash of
the prompt this code sends), not a choice. A resume never hands them to the factory; it compares them with the
rebuilt detector's, as every recorded parameter, and refuses a run whose prompt has changed since."""


class Detector:
    """Base class of detectors: override `detect` (one example) or `predict` (batched or asynchronous)."""

    name: str = "custom"
    """Registered name, set by `create_detector`."""
    family: str = "custom"
    """Detector family (`baseline`, `prompted`, `token-classifier`, ...), recorded in results."""

    def params(self) -> dict[str, Any]:
        """Parameters that define the detector's output, recorded in the run config (never secrets)."""
        return {}

    def detect(self, example: Example) -> Prediction | list[Span]:
        """Spans (or a full Prediction) for one example."""
        raise NotImplementedError(f"{type(self).__name__} must implement detect() or predict()")

    def predict(self, examples: Sequence[Example], monitor: Monitor | None = None) -> Iterator[Prediction]:
        """Predictions for the examples, yielded as they are ready (in any order)."""
        for example in examples:
            out = self.detect(example)
            yield out if isinstance(out, Prediction) else Prediction(id=example.id, spans=out)

    def check_can_run(self) -> None:
        """Raise (a DataError saying what is missing) when this detector cannot run at all, e.g. no API key: called
        before a new run directory is written. Nothing to check by default."""

    def close(self) -> None:
        """Release clients, servers or models."""


def create_detector(spec: str, **params: Any) -> Detector:
    """A detector from `NAME` or `NAME:ARG` (the argument, e.g. a program file, goes first to the factory); a
    parameter the factory does not take, or a value it refuses (a ValueError), is a ParameterError."""
    name, _, arg = spec.partition(":")
    entry = detectors.get(name)
    params = checked_params("detector", name, entry.factory, params)
    try:
        det = entry.factory(arg, **params) if arg else entry.factory(**params)
    except DataError:
        raise
    except TypeError as err:
        # A factory that hands `**params` on finds an unknown one only here.
        if "unexpected keyword argument" not in message_of(err):
            raise
        raise ParameterError(f"detector {name!r}: {message_of(err)} (see `shambench list detectors {name}`)") from None
    except ValueError as err:
        # A factory refusing a value (`rate=2`) is bad input, not a crash.
        raise ParameterError(f"detector {name!r}: {message_of(err)}") from None
    det.name = spec
    return det
