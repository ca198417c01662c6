"""The process-wide settings the command line makes (`CommandLineSettings`), installed by its entry
(`shambench.cli.run`): the `shambench` process is the command's own, so it may keep long-lived objects out of the
cyclic collector and hand the interpreter lock over sooner; in a user's process the library asks for neither
(`shambench.memory`).
"""

from __future__ import annotations

import gc
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager

from shambench.memory import ProcessSettings


class CommandLineSettings(ProcessSettings):
    """Collector and thread-switch settings for a process that runs one command (benchmarks/RESULTS.md)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._blocks = 0  # `long_lived_frozen` blocks open in this process: the last one to end unfreezes

    @contextmanager
    def collector_paused(self, aged: bool) -> Iterator[None]:
        """The cyclic collector paused, then left as it was (errors included): the full collections reading a
        corpus would trigger (several while loading the 6k benchmark, 0.3 s of CPU) would walk its objects for
        nothing. What the block drops is still freed at once by reference counting. With `aged`, the collector
        restarts with what the block made in its oldest generation, as if it had aged there (unless objects are
        frozen: those stay frozen): all of it young, its next passes would walk it all at once (0.09 s at the end
        of a cold 6k score)."""
        enabled = gc.isenabled()
        gc.disable()
        try:
            yield
        finally:
            if enabled:
                with self._lock:
                    if aged and not self._blocks and not gc.get_freeze_count():
                        gc.freeze()
                        gc.unfreeze()  # every tracked object joins the oldest generation
                gc.enable()

    @contextmanager
    def long_lived_frozen(self) -> Iterator[None]:
        """The objects alive on entering (and those `freeze_long_lived` adds) are left out of the cyclic collector
        until the block ends; then they are collected as before (`gc.unfreeze`, once the last open block ends).
        Cyclic garbage among frozen objects waits for the end."""
        with self._lock:
            self._blocks += 1
            gc.freeze()
        try:
            yield
        finally:
            with self._lock:
                self._blocks -= 1
                if not self._blocks:
                    gc.unfreeze()

    def freeze_long_lived(self) -> None:
        """Outside a `long_lived_frozen` block, nothing: a freeze nobody ends would keep cyclic garbage forever."""
        with self._lock:
            if self._blocks:
                gc.freeze()

    def switch_interval(self, seconds: float) -> None:
        sys.setswitchinterval(seconds)
