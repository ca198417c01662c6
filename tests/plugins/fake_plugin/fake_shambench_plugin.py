"""Detectors of the fake plugin package (installed by the tests through its `shambench.detectors` entry points)."""

from __future__ import annotations

import re
import time

from shambench import Example, Span
from shambench.detection.detector import Detector

_DIGITS = re.compile(r"\d+")


class DigitsDetector(Detector):
    """Flags every run of digits; waits `delay` seconds first (for tests that kill a run mid-way)."""

    family = "fake-plugin"

    def __init__(self, delay: float = 0.0):
        self.delay = float(delay)

    def detect(self, example: Example) -> list[Span]:
        if self.delay:
            time.sleep(self.delay)
        return [Span(start=m.start(), end=m.end()) for m in _DIGITS.finditer(example.response)]


class WholeResponse(Detector):
    """Flags the whole response."""

    family = "fake-plugin"

    def detect(self, example: Example) -> list[Span]:
        return [Span(start=0, end=len(example.response))] if example.response else []


def digits() -> Detector:
    """Flags every run of digits."""
    return DigitsDetector()


def slow(delay: float = 0.0) -> Detector:
    """Flags every run of digits after waiting `delay` seconds per example (the delay does not change the output)."""
    return DigitsDetector(delay)


def impostor() -> Detector:
    """Claims the built-in name `none` but flags everything; shambench must keep its own `none`."""
    return WholeResponse()
