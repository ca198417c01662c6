"""Process-wide settings the library would make for speed, and who may make them.

Reading a corpus makes hundreds of thousands of objects (its examples, the annotators' readings above all) that
outlive the reading and form no reference cycles, and a run keeps them (with the scorer built ahead) until it is
scored. Every full collection walks them all again for nothing: while reading, several times over; while requests
are in flight, a pass stops the process's event loop (0.1-0.6 s each in a 6k eval, several per run) and every
request in flight waits for it. And a CPU-bound thread holds the interpreter lock for up to the switch interval
(5 ms) each time the requests' event loop wakes up (`shambench.llm.loop`).

Both settings belong to the whole process: in a user's notebook or service they are the user's. So the library
only asks for them, through the functions below, and what they do is the installed `ProcessSettings`': by default
nothing. The command line's entry (`shambench.cli.run`), a process of its own, installs
`shambench.cli.process.CommandLineSettings`, which makes them (benchmarks/RESULTS.md measures what they save).
"""

from __future__ import annotations

from contextlib import AbstractContextManager, nullcontext


class ProcessSettings:
    """What the library asks of the process while it works; this one changes nothing (the process is its user's)."""

    def collector_paused(self, aged: bool) -> AbstractContextManager[None]:
        """A block during which the cyclic collector may be paused (see `collector_paused`)."""
        return nullcontext()

    def long_lived_frozen(self) -> AbstractContextManager[None]:
        """A block during which the objects alive may be left out of the collector (see `long_lived_frozen`)."""
        return nullcontext()

    def freeze_long_lived(self) -> None:
        """Inside a `long_lived_frozen` block: leave the objects made since out of the collector too."""

    def switch_interval(self, seconds: float) -> None:
        """Set the interpreter's thread switch interval (see `shambench.llm.loop`)."""


_settings = ProcessSettings()


def use_process_settings(settings: ProcessSettings) -> ProcessSettings:
    """Make `settings` what the library's requests do from now on; returns those it replaces."""
    global _settings
    previous, _settings = _settings, settings
    return previous


def collector_paused(aged: bool = False) -> AbstractContextManager[None]:
    """The cyclic collector paused while the block runs, then left as it was: for reading a corpus, whose objects
    outlive the reading and form no cycles. With `aged`, for a block that ends its process's work (a command), the
    collector restarts with what the block made in its oldest generation."""
    return _settings.collector_paused(aged)


def long_lived_frozen() -> AbstractContextManager[None]:
    """The objects alive on entering (and those `freeze_long_lived` adds) left out of the cyclic collector until the
    block ends: a run's examples and scorer while its requests are in flight."""
    return _settings.long_lived_frozen()


def freeze_long_lived() -> None:
    """Inside a `long_lived_frozen` block: also leave the objects made since out of the collector (e.g. a scorer
    just built) until it ends. Outside one, nothing."""
    _settings.freeze_long_lived()


def switch_interval(seconds: float) -> None:
    """The interpreter's thread switch interval set to `seconds`, where the process allows it."""
    _settings.switch_interval(seconds)
