"""What a sweep's workers run: a shard of a cell's examples predicted into journal lines, and a cell scored from
its journal's text. Tasks return values only; the driver writes every file."""

from __future__ import annotations

import json
import pickle
import threading
from collections import OrderedDict
from pathlib import Path
from typing import Any

from pydantic import Field

from shambench.detection.detector import Detector, Monitor, create_detector
from shambench.io import Journal, model_line
from shambench.records import check_detector_prediction
from shambench.runs.files import JOURNAL
from shambench.runs.rundir import RunConfig
from shambench.runs.scoring import score_predictions
from shambench.runs.spec import Scoring
from shambench.schema import Example, Model, Name
from shambench.scoring.results import ExampleScores, Results
from shambench.scoring.text import remember
from shambench.secrets import redact


class ShardOutput(Model):
    """What a worker returns for a shard: its journal lines and what the detector said about itself."""

    family: Name
    """Detector family."""
    params: dict[str, Any]
    """The detector's full parameters (defaults included), for the run config."""
    ids: list[Name]
    """The example id of each line."""
    lines: list[str]
    """One journal line (`model_line` of a `Prediction`) per example: serialised here, on the worker, so the
    driver only appends text (building hundreds of thousands of span objects there would make it the bottleneck)."""
    failed: int = 0
    """Predictions that carry a detector error."""
    counters: dict[str, float] = Field(default_factory=dict)
    """Counters the detector reported (retries, cache hits, tokens, ...)."""


class Tally(Monitor):
    """Keeps a detector's counters on the worker, to send back with the predictions."""

    def __init__(self) -> None:
        self.counts: dict[str, float] = {}

    def count(self, key: str, n: float = 1) -> None:
        self.counts[key] = self.counts.get(key, 0) + n


# A worker keeps its last few detectors, so a local model is loaded once per worker, not once per shard.
_KEPT_DETECTORS = 4
_detectors: OrderedDict[str, Detector] = OrderedDict()
_detectors_lock = threading.Lock()


def kept_detector(spec: str, params: dict[str, Any]) -> Detector:
    """The worker's detector for `spec` with `params`, created on first use."""
    key = json.dumps([spec, params], sort_keys=True, default=str)
    with _detectors_lock:
        det = _detectors.pop(key, None) or create_detector(spec, **params)
        _detectors[key] = det
        while len(_detectors) > _KEPT_DETECTORS:
            _detectors.popitem(last=False)[1].close()
    return det


# A worker keeps the examples of its last few datasets, decoded, with their segmentations in the text cache.
_KEPT_DATA = 4
_data: OrderedDict[str, list[Example]] = OrderedDict()
_data_lock = threading.Lock()


def shared_examples(key: str, blob: bytes) -> list[Example]:
    """The examples a driver shared as `blob` (`SharedData.handle` in the driver), decoded once per worker."""
    with _data_lock:
        if key in _data:
            _data.move_to_end(key)
            return _data[key]
    examples, keys, segmentations = pickle.loads(blob)
    for lang in {lang for lang, _ in keys}:
        mine = [(t, seg) for (k, t), seg in zip(keys, segmentations) if k == lang]
        remember([t for t, _ in mine], [seg for _, seg in mine], lang)
    with _data_lock:
        _data[key] = examples
        while len(_data) > _KEPT_DATA:
            _data.popitem(last=False)
    return examples


def predict_shard(spec: str, params: dict[str, Any], key: str, blob: bytes, indices: list[int]) -> ShardOutput:
    """Worker task: the detector's predictions for the shared examples at `indices`."""
    examples = shared_examples(key, blob)
    det = kept_detector(spec, params)
    tally = Tally()
    asked: dict[str | None, Example] = {examples[i].id: examples[i] for i in indices}  # see run_predictions
    predictions = [
        check_detector_prediction(p, asked.get(getattr(p, "id", None)), spec)
        for p in det.predict(list(asked.values()), tally)
    ]
    return ShardOutput(
        family=det.family,
        params=det.params(),
        ids=[p.id for p in predictions],
        # Redacted here too: the key was read in this process, which may be a cluster's worker whose environment
        # alone holds it (the driver, which writes the lines, then cannot know it).
        lines=[redact(model_line(p)) for p in predictions],
        failed=sum(p.error is not None for p in predictions),
        counters=tally.counts,
    )


def score_shared(
    config: RunConfig, run_dir: Path, key: str, blob: bytes, journal: str, scoring: Scoring
) -> tuple[Results, list[ExampleScores]]:
    """Worker task: the results and per-example scores of a cell, from its journal's text and the shared examples."""
    predictions = list(Journal(run_dir / JOURNAL).parse(journal).values())
    results, rows = score_predictions(config, run_dir, shared_examples(key, blob), predictions, scoring)
    # Made into a list here: the rows are sent back to the driver, which must not receive the whole scorer.
    return results, list(rows)
