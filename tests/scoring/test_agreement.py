"""Human agreement (leave one annotator out): hand-computed figures on small items, and properties of the rules."""

from __future__ import annotations

import functools
import json
import math

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from shambench import Example, Prediction, Span, score
from shambench.schema import Annotations, covered_shares, marked_by_more_than, merge_spans
from shambench.scoring.scorer import Scorer

# Tokens: The(0,3) cat(4,7) sat(8,11) .(11,12) | The(13,16) dog(17,20) ran(21,24) .(24,25); sentences [0,12) [13,25).
TEXT = "The cat sat. The dog ran."
CAT, SAT, CAT_SAT, DOG = Span(start=4, end=7), Span(start=8, end=11), Span(start=4, end=11), Span(start=17, end=20)
# Spearman of two 0/1 vectors is their phi coefficient: over the 25 characters, 3 marked by one annotator, 7 by the
# other, those 3 shared.
PHI_3_IN_7 = (3 * 18 - 0 * 4) / math.sqrt(3 * 22 * 7 * 18)


def majority(span_lists):
    return marked_by_more_than(span_lists, 0.5)


def item(item_id: str, marked: dict[str, list[Span]], soft: bool = False, dataset: str = "toy") -> Example:
    annotations = Annotations.leave_one_out(marked, majority, "majority of the others", soft=soft)
    gold = majority(list(marked.values()))
    return Example(
        id=item_id,
        task="qa",
        dataset=dataset,
        response=TEXT,
        hallu_spans=gold,
        soft_spans=[{"start": s, "end": e, "prob": p} for s, e, p in covered_shares(list(marked.values()))]
        if soft
        else None,
        annotations=annotations,
    )


def agreement_of(examples):
    return Scorer(examples, n_resamples=50).agreement()


def test_two_annotators_each_the_others_gold():
    # a marks "cat", b "cat sat": a against b P=1 R=1/2, b against a P=1/2 R=1; both F1 = 2/3.
    report = agreement_of([item("x", {"a": [CAT], "b": [CAT_SAT]}, soft=True)])
    got = report.partitions["qa/toy"]
    assert got.items == 1 and (got.annotators.min, got.annotators.max) == (2, 2)
    assert (got.token.p, got.token.r, got.token.f1) == pytest.approx((0.75, 0.75, 2 / 3))
    assert got.sentence.f1 == 1.0  # both mark the first sentence
    # pooled over the two rows: tp 1 + 1, predicted 1 + 2, gold 2 + 1.
    assert (got.pooled_token.p, got.pooled_token.r, got.pooled_token.f1) == pytest.approx((2 / 3, 2 / 3, 2 / 3))
    # IoU: 3 shared characters of 7 either way; Cor: the phi coefficient of the two 0/1 vectors.
    assert got.iou == pytest.approx(3 / 7)
    assert got.cor == pytest.approx(PHI_3_IN_7)
    assert got.reproduces_gold is None and got.silent_readings == 0 and got.identical_readings == 0


def test_three_annotators_a_tie_at_exactly_half_of_the_others_is_not_gold():
    # Left out a (or b): the others are one "cat sat" and one "cat": "sat" is marked by exactly half, not more.
    report = agreement_of([item("x", {"a": [CAT_SAT], "b": [CAT_SAT], "c": [CAT]}, soft=True)])
    got = report.partitions["qa/toy"]
    # a, b: P=1/2 R=1 F1=2/3 against "cat"; c: P=1 R=1/2 F1=2/3 against "cat sat".
    assert (got.token.p, got.token.r, got.token.f1) == pytest.approx((2 / 3, 5 / 6, 2 / 3))
    assert (got.pooled_token.p, got.pooled_token.r) == pytest.approx((3 / 5, 3 / 4))
    assert got.pooled_token.f1 == pytest.approx(2 / 3)
    # IoU: a and b 3/7 against "cat", c 3/7 against "cat sat".
    assert got.iou == pytest.approx(3 / 7)
    # Cor of a: the others' shares are 1 on "cat", 1/2 on " sat", 0 elsewhere, against a's 0/1 vector.
    ref = [1.0 if 4 <= i < 7 else 0.5 if 7 <= i < 11 else 0.0 for i in range(len(TEXT))]
    pred_ab = [1.0 if 4 <= i < 11 else 0.0 for i in range(len(TEXT))]
    cor_ab = _spearman(ref, pred_ab)
    assert got.cor == pytest.approx((2 * cor_ab + PHI_3_IN_7) / 3)


def test_an_annotator_who_marked_nothing_and_the_empty_example_rule():
    # x: a marks "cat", b nothing: gold without prediction, and prediction without gold: both 0.
    # y: three annotators marked nothing: no gold, no prediction, 1 each. The partition is the mean over items
    # (0 and 1: 0.5), not over the five rows (0.6).
    report = agreement_of([item("x", {"a": [CAT], "b": []}), item("y", {"a": [], "b": [], "c": []})])
    got = report.partitions["qa/toy"]
    assert got.items == 2 and (got.annotators.min, got.annotators.max) == (2, 3)
    assert got.token.f1 == pytest.approx(0.5) and got.sentence.f1 == pytest.approx(0.5)
    assert got.silent_readings == 4 and got.identical_readings == 1
    assert got.items_by_annotators == {"2": 1, "3": 1}
    # Pooled: only x has tokens marked, tp 0 of 1 predicted and 1 gold.
    assert got.pooled_token.f1 == 0.0
    assert got.iou is None and got.cor is None  # no soft labels: not Mu-SHROOM


def test_one_annotator_items_are_counted_not_scored_and_other_partitions_get_no_figure():
    lone = item("z", {"a": [CAT]})
    plain = Example(id="p", task="qa", dataset="plain", response=TEXT, hallu_spans=[CAT])
    report = agreement_of([item("x", {"a": [CAT], "b": [CAT]}), lone, plain])
    got = report.partitions["qa/toy"]
    assert got.items == 1 and got.items_by_annotators == {"1": 1, "2": 1}
    assert got.token.f1 == 1.0 and got.identical_readings == 1
    assert report.without_annotators == ["qa/plain"]
    assert set(report.partitions) == {"qa/toy"}


def test_no_annotators_anywhere_gives_no_figure():
    report = agreement_of([Example(id="p", task="qa", dataset="plain", response=TEXT, hallu_spans=[CAT])])
    assert report.partitions == {} and report.without_annotators == ["qa/plain"]
    assert "leave_one_out" in report.conventions


def test_like_for_like_scores_the_detector_against_the_same_golds():
    examples = [item("x", {"a": [CAT], "b": [CAT_SAT]}, soft=True), item("y", {"a": [DOG], "b": [DOG]})]
    # On x the detector marks "sat": against b's "cat sat" (a left out) P=1 R=1/2, against a's "cat" 0.
    # On y it predicts nothing: 0 against each "dog". Its figure: (1/3 + 0) / 2; the annotators': (2/3 + 1) / 2.
    results = score(examples, [Prediction(id="x", spans=[SAT])], n_resamples=50)
    assert results.groups.agreement is not None
    group = results.groups.agreement.partitions["qa/toy"]
    assert group.items == 2
    assert group.detector.token.f1 == pytest.approx(1 / 6)
    assert group.human.token.f1 == pytest.approx(5 / 6)
    assert group.gap["token_f1"] == pytest.approx(1 / 6 - 5 / 6)
    # Mu-SHROOM figures need every item of the partition to carry soft labels (y has none).
    assert group.detector.iou is None and "iou" not in group.gap
    # Against the full gold the same prediction scores otherwise: the like-for-like view is its own figure.
    assert results.partitions["qa/toy"].token.f1 != pytest.approx(1 / 6)


def test_like_for_like_is_absent_without_annotators():
    plain = Example(id="p", task="qa", dataset="plain", response=TEXT, hallu_spans=[CAT])
    assert "agreement" not in score([plain], [Prediction(id="p", spans=[CAT])], n_resamples=10).groups


def test_intervals_resample_items_and_contain_the_figure():
    examples = [item(f"i{k}", {"a": [CAT], "b": [CAT_SAT] if k % 2 else [CAT]}) for k in range(20)]
    got = agreement_of(examples).partitions["qa/toy"]
    assert got.token.f1 == pytest.approx((10 * 2 / 3 + 10 * 1.0) / 20)
    for level in (got.token, got.sentence, got.pooled_token):
        assert level.ci[0] <= level.f1 <= level.ci[1]
    assert got.token.ci[0] < got.token.ci[1]


def _spearman(a, b):
    import numpy as np
    from scipy.stats import spearmanr

    return float(spearmanr(np.array(a), np.array(b)).correlation)


spans = st.lists(
    st.tuples(st.integers(0, 20), st.integers(1, 5)).map(lambda t: Span(start=t[0], end=t[0] + t[1])), max_size=4
)


def _chars(span_list):
    return {i for s in span_list for i in range(s.start, s.end)}


@given(st.lists(spans, min_size=1, max_size=5), st.sampled_from([0.0, 0.5, 0.7]))
def test_more_than_a_share_is_a_count_of_lists_per_character(lists, share):
    got = _chars(marked_by_more_than(lists, share))
    counts = {i: sum(i in _chars(lst) for lst in lists) for i in range(40)}
    assert got == {i for i, c in counts.items() if c > share * len(lists)}
    assert merge_spans(marked_by_more_than(lists, share)) == marked_by_more_than(lists, share)


@given(st.lists(spans, min_size=1, max_size=5))
def test_shares_cover_the_union_with_each_list_counted_once(lists):
    runs = covered_shares(lists)
    assert {i for s, e, _ in runs for i in range(s, e)} == _chars([sp for lst in lists for sp in lst])
    for s, _, p in runs:
        assert 0 < p <= 1
        assert p * len(lists) == pytest.approx(sum(s in _chars(lst) for lst in lists))
    assert all(a[1] <= b[0] for a, b in zip(runs, runs[1:]))


@settings(max_examples=25)  # each example builds a scorer
@given(spans, st.integers(2, 5))
def test_annotators_who_agree_score_one(marked, n):
    report = agreement_of([item("x", {f"a{k}": marked for k in range(n)})])
    got = report.partitions["qa/toy"]
    assert (got.token.f1, got.sentence.f1) == (1.0, 1.0)
    assert got.identical_readings == 1


@settings(max_examples=25)
@given(spans, spans)
def test_two_annotators_score_the_same_either_way_round(first, second):
    # With two annotators each is the other's gold, and F1 is symmetric in prediction and gold.
    swapped = agreement_of([item("x", {"a": second, "b": first})]).partitions["qa/toy"]
    straight = agreement_of([item("x", {"a": first, "b": second})]).partitions["qa/toy"]
    assert straight.token.f1 == pytest.approx(swapped.token.f1)


def _one_by_one(examples, predictions):
    """The like-for-like token F1s computed the plain way: every (item, left-out annotator) row made an example of
    its own (the others' gold, soft labels included) and its prediction scored by a scorer of that example alone;
    a row's F1, then the mean over an item's rows, then over items."""
    detector, human = [], []
    for ex in examples:
        rows_d, rows_h = [], []
        for r in ex.annotations.readings:
            row = Example(
                id="row", task=ex.task, dataset=ex.dataset, response=ex.response, hallu_spans=r.others,
                soft_spans=r.others_soft if ex.soft_spans is not None else None,
            )  # fmt: skip
            pred = predictions.get(ex.id)
            usable = pred is not None and pred.error is None
            mine = pred.model_copy(update={"id": "row"}) if usable else Prediction(id="row")
            rows_d.append(score([row], [mine], n_resamples=10).partitions[ex.partition].token.f1)
            rows_h.append(
                score([row], [Prediction(id="row", spans=r.spans)], n_resamples=10).partitions[ex.partition].token.f1
            )
        detector.append(sum(rows_d) / len(rows_d))
        human.append(sum(rows_h) / len(rows_h))
    return sum(detector) / len(detector), sum(human) / len(human)


predictions_strategy = st.lists(
    st.one_of(
        st.none(),  # missing
        st.just("failed"),
        st.tuples(spans, st.booleans()),  # spans, with scores or not
    ),
    min_size=3,
    max_size=3,
)


@settings(max_examples=20, deadline=None)  # each example builds a scorer per row
@given(st.lists(st.tuples(spans, spans, spans), min_size=3, max_size=3), predictions_strategy, st.booleans())
def test_like_for_like_equals_every_row_scored_on_its_own(marked, predicted, soft):
    examples = [item(f"i{k}", {"a": a, "b": b, "c": c}, soft=soft) for k, (a, b, c) in enumerate(marked)]
    predictions = {}
    for ex, p in zip(examples, predicted):
        if p == "failed":
            predictions[ex.id] = Prediction(id=ex.id, error="the detector failed")
        elif p is not None:
            listed, scored = p
            given_spans = [
                s.model_copy(update={"score": 0.25 + 0.5 * (k % 2)}) if scored else s for k, s in enumerate(listed)
            ]
            predictions[ex.id] = Prediction(id=ex.id, spans=given_spans)
    group = score(examples, list(predictions.values()), n_resamples=10).groups.agreement.partitions["qa/toy"]
    detector, human = _one_by_one(examples, predictions)
    assert group.detector.token.f1 == pytest.approx(detector, abs=1e-12)
    assert group.human.token.f1 == pytest.approx(human, abs=1e-12)


# --- the human report kept beside a kept corpus ------------------------------------------------------------------


def kept_file(tmp_path, examples, name="examples.jsonl"):
    """An EXAMPLES file of the examples and a reader of its corpus as `shambench score` reads it (kept on disk)."""
    from shambench.runs.selection import corpus_to_score
    from shambench.runs.spec import Selection

    path = tmp_path / name
    path.write_text("".join(e.model_dump_json(exclude_none=True) + "\n" for e in examples), encoding="utf-8")
    return lambda: corpus_to_score(Selection(examples_file=path))


def annotated():
    """Two items of two annotators (the hand-computed ones above) and one of three, with a plain partition."""
    return [
        item("x", {"a": [CAT], "b": [CAT_SAT]}, soft=True),
        item("y", {"a": [DOG], "b": [DOG]}),
        item("w", {"a": [CAT_SAT], "b": [CAT_SAT], "c": [CAT]}, dataset="trio"),
        Example(id="p", task="qa", dataset="plain", response=TEXT, hallu_spans=[CAT]),
    ]


@pytest.fixture
def computed(monkeypatch):
    """Counts the reports, the leave-one-out rows and the annotators' alignments computed (not read from beside a
    kept corpus)."""
    from shambench.scoring import agreement

    calls = {"report": 0, "rows": 0, "alignment": 0}

    def counting(name, real):
        def wrapper(*args, **kwargs):
            calls[name] += 1
            return real(*args, **kwargs)

        return wrapper

    monkeypatch.setattr(agreement, "report", counting("report", agreement.report))
    monkeypatch.setattr(agreement, "rows_of", counting("rows", agreement.rows_of))
    monkeypatch.setattr(agreement, "human_alignment", counting("alignment", agreement.human_alignment))
    return calls


def test_a_kept_report_and_rows_are_read_back_equal_and_no_reading_is_read(tmp_path, computed):
    corpus_of = kept_file(tmp_path, annotated())
    corpus_of()  # the file read and its corpus kept, with nothing beside it
    first = Scorer(corpus_of(), n_resamples=50).agreement()
    assert computed == {"report": 1, "rows": 1, "alignment": 0}
    scorer = Scorer(corpus_of(), n_resamples=50)
    again = scorer.agreement()
    assert computed == {"report": 1, "rows": 1, "alignment": 0}  # read from beside the kept corpus, no row made
    assert again == first
    # The hand-computed figures of x and y (2/3 and 1: see above), and w's 2/3.
    assert again.partitions["qa/toy"].token.f1 == pytest.approx((2 / 3 + 1) / 2)
    assert again.partitions["qa/trio"].token.f1 == pytest.approx(2 / 3)
    assert again.without_annotators == ["qa/plain"]
    # Predictions get their like-for-like figures from the kept rows, against the kept human figures.
    predictions = [Prediction(id="x", spans=[SAT]), Prediction(id="y", spans=[]), Prediction(id="w", spans=[CAT])]
    results = scorer.score(predictions)
    assert computed == {"report": 1, "rows": 1, "alignment": 1}
    expected = score(annotated(), predictions, n_resamples=50)
    assert results.groups.agreement == expected.groups.agreement
    # The annotators' alignments (for the alternative annotator test) were kept too: another scorer reads them.
    assert Scorer(corpus_of(), n_resamples=50).score(predictions).groups.agreement == expected.groups.agreement
    # One more of each: `expected`'s scorer, of the examples themselves (nothing kept); none by the kept corpus's.
    assert computed == {"report": 2, "rows": 2, "alignment": 2}
    assert results.groups.agreement.partitions["qa/toy"].detector.token.f1 == pytest.approx(1 / 6)
    assert again == agreement_of(annotated())  # what a scorer of the examples themselves computes


def test_other_resamples_or_seed_do_not_reuse_a_kept_report(tmp_path, computed, recwarn):
    corpus_of = kept_file(tmp_path, annotated())
    reports = {(n, seed): Scorer(corpus_of(), n_resamples=n, seed=seed).agreement() for n, seed in CHOICES}
    assert computed["report"] == 3
    for (n, seed), got in reports.items():
        assert got == Scorer(annotated(), n_resamples=n, seed=seed).agreement()
        assert Scorer(corpus_of(), n_resamples=n, seed=seed).agreement() == got
        assert f"over {n} resamples" in got.conventions["ci"] and f"seed {seed}" in got.conventions["ci"]
    assert computed["report"] == 3 + 3  # the three computed above for comparison; the kept ones were read
    folder = corpus_of().kept
    assert sorted(p.name for p in folder.glob("agreement-*")) == [
        "agreement-50-0.json",
        "agreement-50-1.json",
        "agreement-60-0.json",
    ]
    assert not [w for w in recwarn if issubclass(w.category, RuntimeWarning)]


CHOICES = ((50, 0), (60, 0), (50, 1))


def _doctor(path):
    """Change the first digit of the file's first number after a `:` (a figure, or a row's item)."""
    data = bytearray(path.read_bytes())
    at = next(k for k in range(1, len(data)) if data[k - 1 : k] in (b":", b"[") and chr(data[k]).isdigit())
    data[at] = ord("9") if data[at] != ord("9") else ord("8")
    path.write_bytes(bytes(data))


@pytest.mark.parametrize(
    "damage",
    [
        pytest.param(lambda path, other: _doctor(path), id="a figure edited"),
        pytest.param(lambda path, other: path.write_bytes(path.read_bytes()[:-7]), id="truncated"),
        pytest.param(lambda path, other: path.write_bytes(b""), id="empty"),
        pytest.param(lambda path, other: path.write_bytes(other.read_bytes()), id="moved from another corpus"),
    ],
)
@pytest.mark.parametrize("name", ["agreement-50-0.json", "leave-one-out.json", "human-alignment.json"])
def test_a_damaged_or_moved_kept_file_is_a_miss_computed_again_with_one_warning(tmp_path, computed, damage, name):
    corpus_of = kept_file(tmp_path, annotated())
    # Another file: the same items but x's annotators swapped and y without soft labels, so its rows and report
    # are other ones.
    other_of = kept_file(tmp_path, [annotated()[1], item("x", {"b": [CAT_SAT], "a": [CAT]})], name="other.jsonl")
    prediction = [Prediction(id="x", spans=[SAT])]
    expected = Scorer(corpus_of(), n_resamples=50).score(prediction).groups.agreement
    assert Scorer(other_of(), n_resamples=50).score(prediction).groups.agreement != expected
    assert computed["report"] == computed["rows"] == computed["alignment"] == 2
    path, other = (c().kept / name for c in (corpus_of, other_of))
    damage(path, other)
    with pytest.warns(RuntimeWarning, match=f"{name} not used, computed again") as caught:
        got = Scorer(corpus_of(), n_resamples=50).score(prediction).groups.agreement
    assert len([w for w in caught if issubclass(w.category, RuntimeWarning)]) == 1
    assert got == expected and sum(computed.values()) == 7
    # Computed again and kept again: the next scorer reads it, silently.
    assert Scorer(corpus_of(), n_resamples=50).score(prediction).groups.agreement == expected
    assert sum(computed.values()) == 7


def test_a_report_of_another_version_is_a_miss(tmp_path, computed, monkeypatch):
    from shambench.scoring import scorer

    corpus_of = kept_file(tmp_path, annotated())
    expected = Scorer(corpus_of(), n_resamples=50).agreement()
    monkeypatch.setattr(scorer, "shambench_version", lambda: "99.0")
    # The versions are read once per process: read afresh, as the next process would, until the test ends.
    monkeypatch.setattr(scorer, "_kept_versions", functools.cache(scorer._kept_versions.__wrapped__))
    with pytest.warns(RuntimeWarning, match="not used, computed again.*another version") as caught:
        assert Scorer(corpus_of(), n_resamples=50).agreement() == expected
    # The report and its rows, one warning each.
    named = sorted(str(w.message).split("/")[-1].split()[0] for w in caught if issubclass(w.category, RuntimeWarning))
    assert named == ["agreement-50-0.json", "leave-one-out.json"]
    assert computed["report"] == computed["rows"] == 2


def test_a_corpus_that_is_not_kept_keeps_no_report(tmp_path, computed, monkeypatch):
    from shambench.scoring import kept as kept_module

    monkeypatch.setattr(kept_module, "KEPT_CORPUS_BYTES", 10)
    corpus_of = kept_file(tmp_path, annotated())
    for _ in range(2):
        corpus = corpus_of()
        assert corpus.kept is None
        Scorer(corpus, n_resamples=50).agreement()
    assert computed["report"] == 2 and kept_module.corpora_stats() == (0, 0)


def test_score_twice_writes_the_same_results_reading_the_kept_report(tmp_path, computed):
    from click.testing import CliRunner

    from shambench.cli import main

    kept_file(tmp_path, annotated())
    predictions = tmp_path / "predictions.jsonl"
    predictions.write_text(Prediction(id="x", spans=[SAT]).model_dump_json() + "\n", encoding="utf-8")
    outs = []
    for k in range(2):
        out = tmp_path / f"results{k}.json"
        args = ["score", "--examples", tmp_path / "examples.jsonl", "--predictions", predictions, "--out", out]
        result = CliRunner().invoke(main, [*map(str, args), "--bootstrap", "50"])
        assert result.exit_code == 0 and "warning" not in result.output, result.output
        outs.append({k: v for k, v in json.loads(out.read_text()).items() if k != "created_at"})
    assert computed["report"] == 1 and outs[0] == outs[1]
    assert outs[0]["groups"]["agreement"]["partitions"]["qa/toy"]["human"]["token"]["f1"] == pytest.approx(5 / 6)
