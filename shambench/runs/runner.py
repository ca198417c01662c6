"""Running a detector into a run's journal: each prediction checked and appended as it arrives."""

from __future__ import annotations

from collections.abc import Callable, Sequence

from shambench.detection.detector import Detector, Monitor
from shambench.io import Journal
from shambench.records import check_detector_prediction
from shambench.runs.failures import FailureWatch
from shambench.schema import Example, Prediction


def run_predictions(
    detector: Detector,
    examples: Sequence[Example],
    journal: Journal,
    monitor: Monitor | None = None,
    on_prediction: Callable[[Prediction], None] | None = None,
    fail_fast: bool = True,
) -> int:
    """Run the detector over the examples, journaling each prediction; returns how many were written.

    Each prediction is checked as a PRED file line would be (and against its example's response) before it is
    journaled: DataError names the detector and the example. With `fail_fast`, raises SystematicFailure (after
    journaling) when failures are systematic (`FailureWatch`)."""
    wanted: dict[str | None, Example] = {ex.id: ex for ex in examples}  # a prediction without an id finds none
    watch = FailureWatch() if fail_fast else None
    n = 0
    with journal.appender() as append:
        for pred in detector.predict(examples, monitor or Monitor()):
            append(check_detector_prediction(pred, wanted.get(getattr(pred, "id", None)), detector.name))
            n += 1
            if on_prediction:
                on_prediction(pred)
            if watch is not None:
                watch.see(pred)
    return n
