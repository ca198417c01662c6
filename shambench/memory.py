"""Keeping long-lived objects out of Python's cyclic garbage collector while latency matters.

A run holds hundreds of thousands of long-lived objects (its examples with their annotators' readings, the scorer
built ahead) that form no reference cycles. Every full collection walks them all again for nothing: while requests
are in flight such a pass stops the process's event loop (measured at 0.1-0.6 s each in a 6k eval, several per
run), and every request in flight waits for it.
"""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

_lock = threading.Lock()
_blocks = 0  # `long_lived_frozen` blocks open in this process: the last one to end unfreezes


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
