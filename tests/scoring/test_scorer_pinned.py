"""The scorer gives today's numbers on real data, bootstrap intervals included, to 1e-12.

`fixtures/scorer_pinned.json` holds the scores the scorer of commit 825424a (before the intervals were computed
block by block) gave for the seeded predictions below on the real Mu-SHROOM and FaithBench test sets. Two keys
were added to each group later (`failed_predictions`, `token_with_gold`); they hold the values first computed then.
"""

from __future__ import annotations

import json
import math
from pathlib import Path

import numpy as np

from shambench.schema import Example, Prediction, Span
from shambench.scoring import scorer
from shambench.scoring.results import Results
from tests.conftest import SHARED_DATA, require_shared

PINNED = Path(__file__).parent / "fixtures" / "scorer_pinned.json"


def seeded_predictions(examples: list[Example], seed: int = 7) -> list[Prediction]:
    """Random scored spans for most examples; a tenth get no prediction and a twentieth a failed one."""
    rng = np.random.default_rng(seed)
    out = []
    for ex in examples:
        roll = rng.random()
        if roll < 0.1 or not ex.response:
            continue
        if roll < 0.15:
            out.append(Prediction(id=ex.id, error="timeout"))
            continue
        spans = []
        for _ in range(int(rng.integers(0, 4))):
            start = int(rng.integers(0, len(ex.response)))
            end = min(len(ex.response), start + int(rng.integers(1, 80)))
            spans.append(Span(start=start, end=end, score=round(float(rng.random()), 3)))
        out.append(Prediction(id=ex.id, spans=spans))
    return out


def pinned_case() -> Results:
    """Scores of the seeded predictions on the Mu-SHROOM and FaithBench test sets, 1000 resamples, seed 3."""
    from shambench.data.benchmark import load_benchmark

    examples = load_benchmark(["mushroom", "faithbench"], "test", SHARED_DATA).examples
    return scorer.Scorer(examples, n_resamples=1000, seed=3).score(seeded_predictions(examples))


def summary(results: Results) -> dict:
    """Every score of the results, without provenance (version, commit, time)."""
    data = results.model_dump(mode="json")
    return {key: data[key] for key in ("n_examples", "partitions", "tasks", "overall")}


def close(a, b, path: str = "") -> list[str]:
    """Where two JSON trees differ (numbers by more than 1e-12)."""
    if isinstance(a, dict) and isinstance(b, dict):
        if a.keys() != b.keys():
            return [f"{path}: keys {sorted(a)} != {sorted(b)}"]
        return [d for k in a for d in close(a[k], b[k], f"{path}.{k}")]
    if isinstance(a, list) and isinstance(b, list) and len(a) == len(b):
        return [d for i, (x, y) in enumerate(zip(a, b)) for d in close(x, y, f"{path}[{i}]")]
    if isinstance(a, float | int) and isinstance(b, float | int) and not isinstance(a, bool):
        return [] if math.isclose(a, b, rel_tol=0, abs_tol=1e-12) else [f"{path}: {a!r} != {b!r}"]
    return [] if a == b else [f"{path}: {a!r} != {b!r}"]


def test_scores_and_intervals_equal_the_pinned_ones_on_real_data(monkeypatch):
    require_shared("mushroom")
    require_shared("faithbench")
    pinned = json.loads(PINNED.read_text(encoding="utf-8"))
    got = summary(pinned_case())
    # The case must exercise what it pins: intervals of both levels, Mu-SHROOM soft labels, threshold-free scores.
    assert got["tasks"]["open_qa"]["token"]["ci"][0] < got["tasks"]["open_qa"]["token"]["f1"]
    assert got["partitions"]["open_qa/mushroom"]["mushroom"] is not None
    assert got["partitions"]["summ/faithbench"]["threshold_free"]["auroc"] is not None
    assert close(got, pinned) == []
    # Past the memory budget the draws are made again block by block on every scoring: the same intervals.
    monkeypatch.setattr(scorer, "KEPT_RESAMPLES_BYTES", 0)
    assert close(summary(pinned_case()), pinned) == []


def test_examples_read_for_scoring_hold_no_context_and_score_the_same(tmp_path):
    from shambench.io import model_line
    from shambench.records import read_predictions
    from shambench.runs.selection import read_selection
    from shambench.runs.spec import Selection
    from shambench.scoring.scorer import UNSCORED_EXAMPLE_FIELDS

    full = [
        Example(
            id=f"e{i}",
            dataset="d",
            task="t",
            question="Q?" * 50,
            context="A long source document. " * 100,
            response=f"Answer {i} is here. It has two sentences.",
            hallu_spans=[[7, 8 + i % 3]],
            meta={"model": "m"},
        )
        for i in range(6)
    ]
    path = tmp_path / "examples.jsonl"
    path.write_text("".join(model_line(ex) for ex in full), encoding="utf-8")
    slim = list(read_selection(Selection(examples_file=path), UNSCORED_EXAMPLE_FIELDS)[0])
    assert [(ex.question, ex.context) for ex in slim] == [("", "")] * 6
    assert [ex.model_copy(update={"question": "", "context": ""}) for ex in full] == slim
    predictions = [Prediction(id="e1", spans=[[0, 6]], raw="x" * 1000, meta={"usage": 1})]
    pred_path = tmp_path / "predictions.jsonl"
    pred_path.write_text(model_line(predictions[0]), encoding="utf-8")
    ((_, kept),) = read_predictions(pred_path, scorer.UNSCORED_PREDICTION_FIELDS)
    assert kept.raw is None and kept.meta == {} and kept.spans == predictions[0].spans
    assert summary(scorer.Scorer(slim).score([kept])) == summary(scorer.Scorer(full).score(predictions))
