"""The SHAM-Bench scorer: hand-computed cases, aggregation, properties, and agreement with the plain reference
definition (`shambench.scoring.reference`)."""

from __future__ import annotations

import json
import math
import random
import statistics

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from shambench.errors import ScoringError
from shambench.schema import Example, Prediction, SoftSpan, Span, Step
from shambench.scoring.reference import reference_scores
from shambench.scoring.scorer import Scorer, score
from shambench.scoring.text import sentences, tokens
from shambench.sources import paper_counts
from tests.conftest import require_shared

# 8 tokens: The [0,3) cat [4,7) sat [8,11) . [11,12) It [13,15) was [16,19) red [20,23) . [23,24)
# 2 sentences: [0,12) and [13,24).
T1 = "The cat sat. It was red."


def ex(i: str, partition: str = "summ/x", gold=(), response: str = T1, **fields) -> Example:
    task, dataset = partition.split("/")
    return Example(id=i, task=task, dataset=dataset, response=response, hallu_spans=list(gold), **fields)


def pred(i: str, spans=(), **fields) -> Prediction:
    return Prediction(id=i, spans=list(spans), **fields)


def test_the_hand_text_segments_as_the_comments_say():
    assert tokens(T1) == [(0, 3), (4, 7), (8, 11), (11, 12), (13, 15), (16, 19), (20, 23), (23, 24)]
    assert sentences(T1) == [(0, 12), (13, 24)]


@pytest.fixture(scope="module")
def hand():
    """Six SHAM-Bench examples in three partitions of two tasks, plus one step-level example."""
    examples = [
        ex("e1", "summ/x", [[20, 23]]),  # gold "red"
        ex("e2", "summ/x"),  # nothing gold
        ex("e3", "summ/x", [[4, 7]]),  # gold "cat"; no prediction at all
        ex("e4", "summ/y", [[0, 12]]),  # gold: the whole first sentence (4 tokens)
        ex("e5", "qa/z"),  # nothing gold
        ex("e6", "qa/z", [[8, 11]]),  # gold "sat"; the prediction failed
        # Steps [0,9) "Step one." and [10,19) "Step two."; tokens Step one . Step two . (6)
        ex(
            "e7",
            "math/steps",
            [[10, 19]],
            response="Step one.\nStep two.",
            steps=[Step(start=0, end=9, label=1), Step(start=10, end=19, label=0)],
        ),
    ]
    predictions = [
        pred("e1", [[16, 24]]),  # "was red." -> tokens was, red, .
        pred("e2"),
        pred("e4", [[2, 5]]),  # "e c": overlaps The and cat by one character each
        pred("e5", [[13, 15]]),  # "It", but nothing is gold
        pred("e6", [[8, 11]], error="timeout"),  # its spans must be ignored
        pred("e7", [[10, 14]]),  # the second "Step"
    ]
    return Scorer(examples, n_resamples=200, seed=1).score(predictions)


def test_per_example_token_f1_averaged_within_partitions(hand):
    # Token P/R/F1 per example:
    #   e1: pred {was, red, .}, gold {red}: P 1/3, R 1, F1 2*(1/3)/(4/3) = 0.5
    #   e2: both empty: 1, 1, 1
    #   e3: gold {cat}, no prediction: 0, 0, 0
    #   e4: pred {The, cat}, gold {The, cat, sat, .}: P 1, R 0.5, F1 2*0.5/1.5 = 2/3
    #   e5: pred {It}, nothing gold: 0, 0, 0
    #   e6: failed, scored as empty against gold {sat}: 0, 0, 0
    summ_x, summ_y, qa_z = (hand.partitions[k].token for k in ("summ/x", "summ/y", "qa/z"))
    assert summ_x.f1 == pytest.approx((0.5 + 1 + 0) / 3)
    assert summ_x.precision == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert summ_x.recall == pytest.approx((1 + 1 + 0) / 3)
    assert summ_y.f1 == pytest.approx(2 / 3)
    assert (summ_y.precision, summ_y.recall) == pytest.approx((1.0, 0.5))
    assert qa_z.f1 == 0.0


def test_task_score_is_the_mean_over_its_examples(hand):
    # summ = (0.5 + 1 + 0 + 2/3) / 4 = 0.541666..., which is the count-weighted mean of its partitions
    # (0.5 * 3 + 2/3 * 1) / 4, not their plain mean (0.5 + 2/3) / 2 = 0.583.
    summ = hand.tasks["summ"]
    assert summ.token.f1 == pytest.approx((0.5 + 1 + 0 + 2 / 3) / 4)
    assert summ.token.precision == pytest.approx((1 / 3 + 1 + 0 + 1) / 4)
    assert summ.token.recall == pytest.approx((1 + 1 + 0 + 0.5) / 4)
    assert summ.n == 4
    assert summ.n_with_gold == 3


def test_sentence_level(hand):
    # Sentences: e1 pred {s2} gold {s2}: 1; e2 empty/empty: 1; e3 gold {s1} no pred: 0; e4 pred {s1} gold {s1}: 1;
    # e5 pred {s2} no gold: 0; e6 failed: 0. summ = 3/4, qa = 0.
    assert hand.partitions["summ/x"].sentence.f1 == pytest.approx(2 / 3)
    assert hand.tasks["summ"].sentence.f1 == pytest.approx(0.75)
    assert hand.tasks["qa"].sentence.f1 == 0.0


def test_pooled_token_and_character_scores(hand):
    # summ token counts (tp, pred, gold): e1 (1, 3, 1), e2 (0, 0, 0), e3 (0, 0, 1), e4 (2, 2, 4)
    #   -> (3, 5, 6): P 0.6, R 0.5, F1 2*0.3/1.1 = 6/11.
    assert (hand.tasks["summ"].token_pooled.precision, hand.tasks["summ"].token_pooled.recall) == pytest.approx(
        (0.6, 0.5)
    )
    assert hand.tasks["summ"].token_pooled.f1 == pytest.approx(6 / 11)
    # summ characters: e1 pred [16,24) = 8, gold [20,23) = 3, tp 3; e3 gold 3; e4 pred [2,5) = 3, gold [0,12) = 12,
    # tp 3 -> (6, 11, 18): P 6/11, R 1/3, F1 2*(6/11)*(1/3) / (6/11 + 1/3) = 12/29.
    char = hand.tasks["summ"].char_pooled
    assert (char.precision, char.recall, char.f1) == pytest.approx((6 / 11, 1 / 3, 12 / 29))
    assert char.ci is None


def test_overall_is_the_unweighted_mean_over_tasks_with_population_std(hand):
    # Tasks summ (0.541667) and qa (0.0); math has steps, so it stays out of the overall.
    summ = (0.5 + 1 + 0 + 2 / 3) / 4
    assert hand.overall.tasks == ["qa", "summ"]
    assert hand.overall.token.f1 == pytest.approx(summ / 2)
    assert hand.overall.token.std == pytest.approx(summ / 2)  # ddof=0: |summ - mean| = summ / 2
    assert hand.overall.sentence.f1 == pytest.approx(0.375)
    assert hand.overall.sentence.std == pytest.approx(0.375)


def test_step_level_tasks_use_steps_as_units_and_are_kept_apart(hand):
    # e7 tokens: Step one . | Step two . ; gold {Step, two, .} (3), pred {Step} (1): P 1, R 1/3, F1 0.5.
    # Units are the two steps: gold {step 2}, pred {step 2}: sentence F1 1.
    math_task = hand.tasks["math"]
    assert math_task.token.f1 == pytest.approx(0.5)
    assert math_task.sentence.f1 == 1.0
    assert "math" not in hand.overall.tasks


def test_missing_and_failed_predictions_are_counted(hand):
    # e3 has no prediction, e6 failed: both scored as empty.
    assert hand.missing_predictions == 2
    assert hand.failed_predictions == 1
    assert hand.partitions["summ/x"].missing_predictions == 1
    assert hand.partitions["qa/z"].missing_predictions == 1
    assert hand.n_examples == 7


def test_confidence_intervals_and_conventions_are_recorded(hand):
    # summ/y has one example: every resample is that example, so the interval collapses onto 2/3.
    assert hand.partitions["summ/y"].token.ci == pytest.approx((2 / 3, 2 / 3))
    lo, hi = hand.tasks["summ"].token.ci
    assert 0.0 <= lo < hand.tasks["summ"].token.f1 < hi <= 1.0
    for key in ("averaging", "overall", "tokenizer", "empty_example", "ci", "token_pooled", "char_pooled"):
        assert hand.conventions[key]
    assert "ddof=0" in hand.conventions["overall"]
    assert "200 resamples" in hand.conventions["ci"]
    dumped = json.loads(hand.model_dump_json())
    assert dumped["overall"]["token"]["std"] == pytest.approx(hand.overall.token.std)
    assert dumped["conventions"]["empty_example"].startswith("no gold and no prediction: P=R=F1=1")


def test_sentence_labels_override_projection():
    examples = [ex("a", gold=[[20, 23]])]
    # Spans in sentence 1 only ("The"), but the detector labels sentence 2 directly.
    projected = score(examples, [pred("a", [[0, 3]])], n_resamples=10)
    labelled = score(examples, [pred("a", [[0, 3]], sentence_labels=[0, 1])], n_resamples=10)
    assert projected.tasks["summ"].sentence.f1 == 0.0  # pred {s1} vs gold {s2}
    assert labelled.tasks["summ"].sentence.f1 == 1.0  # labels {s2} vs gold {s2}
    assert labelled.tasks["summ"].token.f1 == 0.0  # token level still reads the spans: "The" vs "red"


def test_mushroom_iou_and_cor_with_soft_labels():
    soft = [SoftSpan(start=0, end=2, prob=1.0), SoftSpan(start=2, end=3, prob=0.5)]
    examples = [
        ex("m1", "open_qa/mushroom", [[0, 2]], response="abcd", soft_spans=soft),
        ex("m2", "open_qa/mushroom", response="abcd", soft_spans=[]),
        ex("m3", "open_qa/mushroom", response="abcd", soft_spans=[]),
        ex("m4", "open_qa/mushroom", response="abcd"),  # no soft labels: not an IoU/Cor item
    ]
    predictions = [
        pred("m1", [Span(start=1, end=3, score=0.9)]),
        pred("m3", [[0, 1]]),
    ]
    got = score(examples, predictions, n_resamples=10).partitions["open_qa/mushroom"].mushroom
    # m1: ref chars {0,1}, pred {1,2}: IoU 1/3. Vectors ref [1, 1, .5, 0], pred [0, .9, .9, 0]:
    #     Spearman 1/sqrt(18) (worked in test_metrics.test_cor_spearman_with_ties).
    # m2: both empty: IoU 1; both constant with one level: Cor 1.
    # m3: ref empty, pred {0}: IoU 0; ref constant, pred [1, 0, 0, 0] has two levels: Cor 0.
    assert got.n == 3
    assert got.iou == pytest.approx((1 / 3 + 1 + 0) / 3)
    assert got.cor == pytest.approx((1 / math.sqrt(18) + 1 + 0) / 3)


def test_threshold_free_auprc_and_auroc_from_scores():
    # Tokens a [0,1) b [2,3) c [4,5) d [6,7); gold b, c.
    examples = [ex("s", "qa/z", [[2, 5]], response="a b c d")]
    ranges = [
        {"start": 0, "end": 1, "score": 0.1},
        {"start": 2, "end": 3, "score": 0.8},
        {"start": 4, "end": 5, "score": 0.4},
        {"start": 6, "end": 7, "score": 0.6},
        {"start": 0, "end": 3, "score": 0.5},  # raises a to max(0.1, 0.5); b keeps max(0.8, 0.5)
    ]
    got = score(examples, [pred("s", scores=ranges)], n_resamples=10).tasks["qa"].threshold_free
    # Token scores: a .5 (neg), b .8 (pos), c .4 (pos), d .6 (neg).
    # AUROC: pairs (b>d) (b>a) (c<d) (c<a) -> 2/4 = 0.5.
    # AP: ranked b(+) d(-) a(-) c(+): recall 0.5 at precision 1, recall 1 at precision 2/4 -> 0.5*1 + 0.5*0.5 = 0.75.
    assert got.auroc == pytest.approx(0.5)
    assert got.auprc == pytest.approx(0.75)
    assert got.n_tokens == 4
    one_class = score([ex("s", "qa/z", response="a b c d")], [pred("s", scores=ranges)], n_resamples=10)
    assert one_class.tasks["qa"].threshold_free.auroc is None
    assert score(examples, [pred("s", [[2, 3]])], n_resamples=10).tasks["qa"].threshold_free is None


@pytest.mark.parametrize(
    "predictions,message",
    [
        ([pred("nope")], "prediction for unknown example id 'nope'"),
        ([pred("a", [[20, 25]])], r"example 'a': predicted span \[20, 25\) ends past the response \(length 24\)"),
        ([pred("a", sentence_labels=[1])], "prediction 'a': 1 sentence_labels for 2 sentence units"),
        ([pred("a"), pred("a", [[0, 3]])], "two predictions for example id 'a'"),
    ],
)
def test_unscorable_predictions_raise_naming_the_id(predictions, message):
    with pytest.raises(ScoringError, match=message):
        score([ex("a")], predictions, n_resamples=10)


def test_duplicate_or_no_examples_are_errors():
    with pytest.raises(ScoringError, match="duplicate example id 'a'"):
        Scorer([ex("a"), ex("b"), ex("a")])
    with pytest.raises(ScoringError, match="no examples"):
        Scorer([])


# --- aggregation against the paper -----------------------------------------------------------------------------


def test_paper_worked_example():
    # METRICS.md: a task's score is the mean over all its examples, so its partitions weigh by their size:
    # GPT-5-mini (reasoning) summarisation = (0.387*745 + 0.541*900 + 0.514*1995) / 3640 = 0.495. Here each example
    # of a partition scores 1 (its gold token found) or 0 (missed): 288/745, 487/900 and 1025/1995 are the paper's
    # partition figures to 3 decimals, and the task is 1800/3640, not the mean of the three partitions (0.481).
    hits = {"faithbench": (288, 745), "ragtruth": (487, 900), "zhou": (1025, 1995)}
    examples, predictions = [], []
    for dataset, (n_hit, n) in hits.items():
        for k in range(n):
            examples.append(ex(f"{dataset}{k}", f"summ/{dataset}", [[0, 3]], response="The cat sat."))
            predictions.append(pred(f"{dataset}{k}", [[0, 3]] if k < n_hit else []))
    # One example in each of the other five tasks, scored by hand: found; predicted without gold (0); both empty
    # (1); missed (0); and open_qa with one found and one missed (0.5).
    others = [
        ("context_qa/r", [[0, 3]], [[0, 3]]),
        ("data2txt/r", [], [[0, 3]]),
        ("mt/z", [], []),
        ("open_bio/h", [[0, 3]], []),
    ]
    others += [("open_qa/m", [[0, 3]], [[0, 3]]), ("open_qa/m", [[0, 3]], [])]
    for k, (partition, gold, spans) in enumerate(others):
        examples.append(ex(f"o{k}", partition, gold, response="The cat sat."))
        predictions.append(pred(f"o{k}", spans))
    results = score(examples, predictions, n_resamples=10)
    got = {name: round(group.token.f1, 3) for name, group in results.partitions.items() if name.startswith("summ/")}
    assert got == {"summ/faithbench": 0.387, "summ/ragtruth": 0.541, "summ/zhou": 0.514}
    assert results.tasks["summ"].token.f1 == 1800 / 3640 and round(1800 / 3640, 3) == 0.495
    tasks = [1800 / 3640, 1.0, 0.0, 1.0, 0.0, 0.5]
    assert [results.tasks[t].token.f1 for t in ("summ", "context_qa", "data2txt", "mt", "open_bio", "open_qa")] == tasks
    # Overall: the unweighted mean over the six tasks, with the population std (ddof = 0).
    assert results.overall.token.f1 == pytest.approx(sum(tasks) / 6, abs=1e-15)
    mean = sum(tasks) / 6
    assert results.overall.token.std == pytest.approx(math.sqrt(sum((t - mean) ** 2 for t in tasks) / 6), abs=1e-15)


def test_reported_rows_obey_the_aggregation():
    path = require_shared("sham_bench_reported", "reported_f1.json")
    reported = json.loads(path.read_text(encoding="utf-8"))
    checked = 0
    for level in ("span_level", "sentence_level"):
        for method, row in reported[level].items():
            parts = row.get("datasets", {})
            for task, value in row["tasks"].items():
                counts = paper_counts()
                names = [p for p in counts if p.startswith(task + "/")]
                if not all(p in parts for p in names):
                    continue  # a table that omits a partition cannot be recomputed
                weighted = sum(parts[p] * counts[p] for p in names) / sum(counts[p] for p in names)
                # Each printed value is rounded to 3 decimals (±0.0005): the task and its weighted mean differ
                # by at most 0.001.
                assert abs(weighted - value) <= 0.001 + 1e-9, (level, method, task, value, weighted)
                checked += 1
            tasks = list(row["tasks"].values())
            assert len(tasks) == 6
            assert abs(statistics.mean(tasks) - row["overall"]) <= 0.001 + 1e-9, (level, method)
            # The std is printed to 2 decimals (±0.005), and computing it from tasks rounded to ±0.0005 moves it
            # by at most 0.0005 more (e.g. Qwen3-4B: pstdev of the printed tasks 0.06496, printed as 0.07).
            assert abs(statistics.pstdev(tasks) - row["overall_std"]) <= 0.0055 + 1e-9, (level, method)
    assert checked >= 100
    # Only the population std reproduces LettuceDetect's 0.482 (0.21): the sample std would give 0.23.
    lettuce = list(reported["span_level"]["lettucedetect-large"]["tasks"].values())
    assert round(statistics.pstdev(lettuce), 2) == 0.21
    assert round(statistics.stdev(lettuce), 2) != 0.21
    assert reported["span_level"]["prompt-gpt-5-mini-reasoning"]["tasks"]["summ"] == 0.495


# --- the vectorised scorer against the plain reference definition (shambench.scoring.reference) -------------------------------------------

WORDS = ["the", "cat", "Paris", "3.5", "km", "isn't", "U.S.", "e-mail", "!", ",", "(", ")", "42", "Dr.", "ok"]
SEPARATORS = [" ", " ", " ", "  ", "\n", ". ", "? ", "\n\n", ""]


def random_text(rnd: random.Random) -> str:
    parts = [rnd.choice(WORDS) + rnd.choice(SEPARATORS) for _ in range(rnd.randint(0, 30))]
    return rnd.choice(["", " ", "\n"]) + "".join(parts)


def random_spans(rnd: random.Random, n: int) -> list[list[int]]:
    if n == 0:
        return []
    out = []
    for _ in range(rnd.choice([0, 0, 1, 1, 2, 3])):
        start = rnd.randrange(n)
        out.append([start, rnd.randint(start + 1, min(n, start + 25))])
    return out


def random_case(seed: int) -> tuple[list[Example], list[Prediction]]:
    """Random examples in random partitions, with random, missing, failed and sentence-labelled predictions."""
    rnd = random.Random(seed)
    examples, predictions = [], []
    for i in range(rnd.randint(1, 25)):
        text = random_text(rnd)
        partition = rnd.choice(["summ/a", "summ/b", "qa/c", "mt/d"])
        examples.append(ex(f"r{i}", partition, random_spans(rnd, len(text)), response=text))
        kind = rnd.random()
        if kind < 0.1:
            continue
        p = pred(f"r{i}", random_spans(rnd, len(text)))
        if kind < 0.2:
            p = pred(f"r{i}", random_spans(rnd, len(text)), error="boom")
        elif kind < 0.3:
            p = pred(
                f"r{i}", random_spans(rnd, len(text)), sentence_labels=[rnd.randint(0, 1) for _ in sentences(text)]
            )
        predictions.append(p)
    rnd.shuffle(predictions)
    return examples, predictions


def as_lists(group) -> dict:
    """A group's figures, from the scorer's `GroupScores` or the reference's `GroupReference` alike."""
    return {
        level: [getattr(group, level).precision, getattr(group, level).recall, getattr(group, level).f1]
        for level in ("token", "sentence", "token_pooled", "char_pooled")
    }


@settings(max_examples=40, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_scorer_agrees_with_the_reference_definition(seed):
    examples, predictions = random_case(seed)
    results = score(examples, predictions, n_resamples=20)
    reference = reference_scores(examples, predictions)
    assert list(results.partitions) == list(reference.partitions) and list(results.tasks) == list(reference.tasks)
    pairs = [
        *zip(results.partitions.values(), reference.partitions.values()),
        *zip(results.tasks.values(), reference.tasks.values()),
    ]
    for got, want in pairs:
        assert got.n == want.n
        for level, values in as_lists(want).items():
            np.testing.assert_allclose(as_lists(got)[level], values, rtol=0, atol=1e-12, err_msg=level)
    assert results.overall.token.f1 == pytest.approx(reference.overall_token_f1, abs=1e-12)
    assert results.overall.token.std == pytest.approx(reference.overall_token_std, abs=1e-12)
    assert results.overall.sentence.f1 == pytest.approx(reference.overall_sentence_f1, abs=1e-12)
    assert results.overall.sentence.std == pytest.approx(reference.overall_sentence_std, abs=1e-12)
    absent = {e.id for e in examples} - {p.id for p in predictions if p.error is None}
    assert results.missing_predictions == len(absent)


# --- properties -------------------------------------------------------------------------------------------------

SCORE_FIELDS = {"partitions", "tasks", "overall", "missing_predictions", "failed_predictions", "n_examples"}


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_a_perfect_prediction_scores_one(seed):
    examples, _ = random_case(seed)
    results = score(examples, [pred(e.id, e.hallu_spans) for e in examples], n_resamples=20)
    for group in [*results.partitions.values(), *results.tasks.values()]:
        for prf_ in (group.token, group.sentence, group.token_pooled, group.char_pooled):
            assert (prf_.precision, prf_.recall, prf_.f1) == (1.0, 1.0, 1.0)
    assert (results.overall.token.f1, results.overall.token.std) == (1.0, 0.0)


@settings(max_examples=25, deadline=None)
@given(st.integers(0, 2**32 - 1), st.randoms(use_true_random=False))
def test_scores_do_not_depend_on_example_or_prediction_order(seed, rnd):
    examples, predictions = random_case(seed)
    shuffled_examples, shuffled_predictions = list(examples), list(predictions)
    rnd.shuffle(shuffled_examples)
    rnd.shuffle(shuffled_predictions)
    a = score(examples, predictions, n_resamples=50).model_dump(include=SCORE_FIELDS)
    b = score(shuffled_examples, shuffled_predictions, n_resamples=50).model_dump(include=SCORE_FIELDS)
    assert json.dumps(a, sort_keys=True) == json.dumps(b, sort_keys=True)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.integers(0, 2**32 - 1), st.data())
def test_token_and_character_conventions_agree_on_single_token_spans(seed, data):
    text = random_text(random.Random(seed))
    toks = tokens(text)
    choice = st.one_of(st.none(), st.sampled_from(toks)) if toks else st.none()
    gold, predicted = data.draw(choice), data.draw(choice)
    results = score(
        [ex("one", "qa/z", [gold] if gold else [], response=text)],
        [pred("one", [predicted] if predicted else [])],
        n_resamples=10,
    )
    g = results.tasks["qa"]
    # One token on each side (or none): both conventions see the same hit or miss, so P, R and F1 agree.
    assert (g.token.precision, g.token.recall, g.token.f1) == (
        g.char_pooled.precision,
        g.char_pooled.recall,
        g.char_pooled.f1,
    )


@settings(max_examples=25, deadline=None)
@given(st.lists(st.integers(0, 11), max_size=6), st.lists(st.integers(0, 11), max_size=6))
def test_token_and_character_pooling_agree_when_every_token_is_one_character(gold_tokens, pred_tokens):
    # "a b c ... l": token k is the single character at 2k, so covering tokens = covering characters.
    text = " ".join("abcdefghijkl")
    results = score(
        [ex("one", "qa/z", [[2 * k, 2 * k + 1] for k in gold_tokens], response=text)],
        [pred("one", [[2 * k, 2 * k + 1] for k in pred_tokens])],
        n_resamples=10,
    )
    assert results.tasks["qa"].token_pooled == results.tasks["qa"].char_pooled


@settings(max_examples=20, deadline=None)
@given(st.integers(0, 2**32 - 1))
def test_task_score_is_the_count_weighted_mean_of_its_partitions(seed):
    examples, predictions = random_case(seed)
    results = score(examples, predictions, n_resamples=20)
    for task, group in results.tasks.items():
        parts = {k: v for k, v in results.partitions.items() if k.split("/")[0] == task}
        assert sum(p.n for p in parts.values()) == group.n
        for level in ("token", "sentence"):
            for field in ("precision", "recall", "f1"):
                weighted = sum(getattr(getattr(p, level), field) * p.n for p in parts.values()) / group.n
                assert getattr(getattr(group, level), field) == pytest.approx(weighted, abs=1e-12)


def test_rescoring_with_the_same_scorer_equals_a_fresh_one():
    examples, predictions = random_case(7)
    scorer = Scorer(examples, n_resamples=100)
    scorer.score([])  # draws and keeps the bootstrap weights
    again = scorer.score(predictions).model_dump(include=SCORE_FIELDS)
    fresh = Scorer(examples, n_resamples=100).score(predictions).model_dump(include=SCORE_FIELDS)
    assert again == fresh
