"""Keeping long-lived objects out of Python's cyclic garbage collector.

Reading a corpus makes hundreds of thousands of objects (its examples, the annotators' readings above all) that
outlive the reading and form no reference cycles, and a run keeps them (with the scorer built ahead) until it is
scored. Every full collection walks them all again for nothing: while reading, several times over; while requests
are in flight, a pass stops the process's event loop (0.1-0.6 s each in a 6k eval, several per run) and every
request in flight waits for it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_blocks = 0  # `long_lived_frozen` blocks open in this process: the last one to end unfreezes


@contextmanager
def collector_paused(aged: bool = False) -> Iterator[None]:
    """The cyclic collector paused, then left as it was (errors included): for reading a corpus, whose objects
    outlive the reading and form no cycles, so that the full collections it would trigger (several while loading
    the 6k benchmark, 0.3 s of CPU) walk them for nothing. What the block drops is still freed at once by
    reference counting. With `aged`, for a block that ends its process's work (a command), the collector restarts
    with what the block made in its oldest generation, as if it had aged there (unless objects are frozen: those
    stay frozen): all of it young, its next passes would walk it all at once (0.09 s at the end of a cold 6k
    score)."""
    enabled = gc.isenabled()
    gc.disable()
    try:
        yield
    finally:
        if enabled:
            with _lock:
                if aged and not _blocks and not gc.get_freeze_count():
                    gc.freeze()
                    gc.unfreeze()  # every tracked object joins the oldest generation
            gc.enable()


@contextmanager
def long_lived_frozen() -> Iterator[None]:
    """The objects alive on entering (and those `freeze_long_lived` adds) are left out of the cyclic collector
    until the block ends; then they are collected as before (`gc.unfreeze`, once the last open block ends). What
    the block drops is still freed at once by reference counting; cyclic garbage among frozen objects waits for
    the end."""
    global _blocks
    with _lock:
        _blocks += 1
        gc.freeze()
    try:
        yield
    finally:
        with _lock:
            _blocks -= 1
            if not _blocks:
                gc.unfreeze()


def freeze_long_lived() -> None:
    """Inside a `long_lived_frozen` block: also leave the objects made since out of the collector (e.g. a scorer
    just built) until it ends. Outside one, nothing: a freeze nobody ends would keep cyclic garbage forever."""
    with _lock:
        if _blocks:
            gc.freeze()
