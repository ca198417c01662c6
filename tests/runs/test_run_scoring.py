"""Scoring a run: the scorer built while a prompted detector's requests are in flight (`scorer_meanwhile`: the
responses segmented in a child process, the scorer in a thread), with the same segmentations and the same results
as building it after the last answer."""

from __future__ import annotations

import json
import multiprocessing
import uuid

import numpy as np
import pytest
from click.testing import CliRunner

import shambench.runs.scoring as run_scoring
from shambench.cli import main
from shambench.runs.spec import Scoring
from shambench.scoring import metrics, text
from shambench.scoring.text import Segmentation, packed, process_context
from tests.run_helpers import unless_hung, write_jsonl


def invented_responses(n: int) -> list[str]:
    """n responses of a few sentences no other test segments (so no cache holds them)."""
    tag = uuid.uuid4().hex[:8]
    return [f"The river Ilsa{tag}{i} rises in the Varn hills. It is {100 + i} km long! Is it? Yes." for i in range(n)]


def examples_of(responses: list[str]) -> list:
    from shambench.schema import Example

    return [Example(id=f"x/{i}", dataset="x", task="qa", response=r) for i, r in enumerate(responses)]


def cached(texts: list[str]) -> list[Segmentation | None]:
    known = text._cache.get("en", {})
    return [known.get(t) for t in texts]


def same(a: Segmentation, b: Segmentation) -> bool:
    return all(np.array_equal(getattr(a, f), getattr(b, f)) for f in a.__dataclass_fields__)


def test_packed_segmentations_split_back_into_the_same_ones():
    segs = [
        Segmentation(np.array([0, 4]), np.array([3, 7]), np.array([0]), np.array([7])),
        Segmentation(np.array([], np.int64), np.array([], np.int64), np.array([], np.int64), np.array([], np.int64)),
        Segmentation(np.array([1]), np.array([2]), np.array([1]), np.array([2])),
    ]
    flat = packed(segs)
    assert flat.token_counts.tolist() == [2, 0, 1] and flat.sentence_counts.tolist() == [1, 0, 1]
    back = flat.split()
    assert len(back) == 3 and all(same(a, b) for a, b in zip(segs, back))
    assert packed([]).split() == []


def test_the_scorer_ahead_has_the_segmentations_and_scores_of_one_built_after(monkeypatch):
    from shambench.schema import Prediction, Span
    from shambench.scoring.scorer import Scorer

    monkeypatch.setattr(run_scoring, "PARALLEL_MIN_CHARS", 0)
    responses = invented_responses(40)
    examples = examples_of(responses)
    with run_scoring.scorer_meanwhile(examples, Scoring(n_resamples=30, seed=3)) as ahead:
        pass
    assert isinstance(ahead.scorer, Scorer) and multiprocessing.active_children() == []
    got = cached(responses)
    fresh = text._tokenised_flat(responses).split()
    assert all(seg is not None and same(seg, f) for seg, f in zip(got, fresh))
    predictions = [Prediction(id=ex.id, spans=[Span(start=4, end=9)]) for ex in examples[::3]]
    text._cache.get("en", {}).clear()
    after = Scorer(examples, n_resamples=30, seed=3).score(predictions).model_dump(exclude={"created_at"})
    drawn = []
    draw = metrics._drawn_counts
    monkeypatch.setattr(metrics, "_drawn_counts", lambda *args: drawn.append(args[1]) or draw(*args))
    assert ahead.scorer.score(predictions).model_dump(exclude={"created_at"}) == after
    assert drawn == []  # every group's resamples were drawn ahead


def test_small_runs_start_no_child():
    responses = invented_responses(3)  # far below PARALLEL_MIN_CHARS
    with run_scoring.scorer_meanwhile(examples_of(responses)) as ahead:
        assert multiprocessing.active_children() == []
    assert cached(responses) == [None] * 3 and ahead.scorer is None


def test_a_block_that_raises_stops_the_child(monkeypatch):
    monkeypatch.setattr(run_scoring, "PARALLEL_MIN_CHARS", 0)
    responses = invented_responses(20)
    with pytest.raises(KeyboardInterrupt), run_scoring.scorer_meanwhile(examples_of(responses)) as ahead:
        raise KeyboardInterrupt
    assert multiprocessing.active_children() == [] and ahead.scorer is None


def test_a_child_that_dies_without_sending_is_not_waited_for():
    context = process_context()
    receive, send = context.Pipe(duplex=False)
    child = context.Process(target=id, args=(send,), daemon=True)  # takes the pipe's end and exits
    child.start()
    send.close()
    responses = invented_responses(2)
    remembered = unless_hung(
        lambda: run_scoring._remember_sent(receive, child, [("en", r) for r in responses]), "waiting for the dead child"
    )
    assert not remembered
    child.join()
    assert cached(responses) == [None, None]


def test_a_prompted_run_scores_the_same_with_the_segmentation_made_meanwhile(openai_server, tmp_path, monkeypatch):
    openai_server.script = lambda req: '{"incorrect_spans": ["Varn hills"]}'
    responses = invented_responses(30)
    rows = [
        {"id": f"x/{i}", "task": "qa", "dataset": "x", "response": r, "hallu_spans": []}
        for i, r in enumerate(responses)
    ]
    rows[0]["hallu_spans"] = [[responses[0].index("Varn"), responses[0].index("Varn") + 4]]
    path = write_jsonl(tmp_path / "ex.jsonl", rows)
    children: list[bool] = []
    remember_sent = run_scoring._remember_sent
    monkeypatch.setattr(run_scoring, "_remember_sent", lambda *a: children.append(True) or remember_sent(*a))

    def run(name: str, threshold: int) -> dict:
        monkeypatch.setattr(run_scoring, "PARALLEL_MIN_CHARS", threshold)
        args = ["eval", "--detector", "openai", "--model", "m", "--base-url", openai_server.base_url]
        args += ["--examples", str(path), "--run-dir", str(tmp_path / name), "--no-progress", "--bootstrap", "20"]
        res = CliRunner().invoke(main, args, env={"OPENAI_API_KEY": "test-key"})
        assert res.exit_code == 0, res.output
        return json.loads((tmp_path / name / "results.json").read_text())

    meanwhile = run("meanwhile", 0)
    assert children == [True]
    text._cache.get("en", {}).clear()  # the second run segments after its requests, as before
    after = run("after", 10**12)
    assert children == [True]
    keys = ("partitions", "tasks", "overall", "n_examples", "failed_predictions")
    assert {k: meanwhile[k] for k in keys} == {k: after[k] for k in keys}
    assert meanwhile["overall"]["token"]["f1"] > 0
