"""Running a detector into a run's journal: each prediction checked and appended as it arrives."""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from typing import Any

from shambench.detection.detector import Detector, Monitor
from shambench.errors import DetectorError, ShambenchError
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
    """Run the detector over the examples, journaling each prediction; returns how many were written (see
    `journal_predictions`)."""
    wanted: dict[str | None, Example] = {ex.id: ex for ex in examples}  # a prediction without an id finds none
    with journal.appender() as append:
        predictions = detector.predict(examples, monitor or Monitor())
        return journal_predictions(predictions, wanted, append, detector.name, on_prediction, fail_fast)


def journal_predictions(
    predictions: Iterable[Prediction],
    wanted: Mapping[str | None, Example],
    append: Callable[[Prediction], None],
    detector: str,
    on_prediction: Callable[[Prediction], None] | None = None,
    fail_fast: bool = True,
) -> int:
    """Append each of the detector's predictions as it arrives; returns how many were appended.

    Each prediction is checked as a PRED file line would be (and against its example in `wanted`, by id) before
    it is appended: DataError names the `detector` and the example. With `fail_fast`, raises SystematicFailure
    (after appending) when failures are systematic (`FailureWatch`)."""
    watch = FailureWatch() if fail_fast else None
    n = 0
    made = iter(predictions)
    while (made_one := next_prediction(made, detector)) is not END:
        pred = check_detector_prediction(made_one, wanted.get(getattr(made_one, "id", None)), detector)
        append(pred)
        n += 1
        if on_prediction:
            on_prediction(pred)
        if watch is not None:
            watch.see(pred)
    return n


END = object()
"""What `next_prediction` returns when the detector has no more predictions."""


def next_prediction(predictions: Iterator[Prediction], detector: str) -> Any:
    """The detector's next output (checked by the caller), or END; an exception its own code raises becomes DetectorError, which names
    it and the line that raised it (a ShambenchError says what is wrong already and passes unchanged)."""
    try:
        return next(predictions, END)
    except ShambenchError:
        raise
    except Exception as err:
        raise DetectorError(detector, err) from err
