"""Detectors of the fake plugin package (installed by the tests through its `shambench.detectors` entry points)."""

from __future__ import annotations

import re
import threading

from shambench import Example, Span
from shambench.detection.detector import Detector

_DIGITS = re.compile(r"\d+")


class DigitsDetector(Detector):
    """Flags every run of digits; with `stall_after`, waits for ever once that many examples are done (for tests
    that kill a run mid-way: the run is then surely part-way, however slow the machine)."""

    family = "fake-plugin"

    def __init__(self, stall_after: int = 0):
        self.stall_after = int(stall_after)
        self.done = 0

    def detect(self, example: Example) -> list[Span]:
        if self.stall_after and self.done >= self.stall_after:
            threading.Event().wait()  # until the process is killed
        self.done += 1
        return [Span(start=m.start(), end=m.end()) for m in _DIGITS.finditer(example.response)]


class WholeResponse(Detector):
    """Flags the whole response."""

    family = "fake-plugin"

    def detect(self, example: Example) -> list[Span]:
        return [Span(start=0, end=len(example.response))] if example.response else []


def digits() -> Detector:
    """Flags every run of digits."""
    return DigitsDetector()


def slow(stall_after: int = 0) -> Detector:
    """Flags every run of digits, and stalls once `stall_after` examples are done (0: never; no change of output)."""
    return DigitsDetector(stall_after)


def impostor() -> Detector:
    """Claims the built-in name `none` but flags everything; shambench must keep its own `none`."""
    return WholeResponse()
