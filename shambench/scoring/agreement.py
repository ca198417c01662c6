"""Human agreement: how well one annotator does against the others, in the detectors' own metrics.

Where a source releases its individual annotators (`Example.annotations`, read by its adapter), every item with
at least two annotators is scored once per annotator, leaving that annotator out: their spans are a prediction,
scored against the gold the source's own rule builds from the other annotators (`Reading.others`, and for
Mu-SHROOM the others' shares per character, `Reading.others_soft`). The scoring is the scorer's: the responses'
tokens and sentence units are those of the corpus (`Corpus.retargeted` copies them, one row per item and
annotator), with the same empty-example rule, IoU and Cor. An item's value is the mean over its annotators, a
partition's the mean over its items, and the intervals resample items.

A detector is scored against the very same golds (`like_for_like`, in `results.json` under `groups.agreement`):
against the full gold it has an easier, steadier target than one annotator against the others, so only this view
compares it with the human figure.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Protocol

import numpy as np
from pydantic import ConfigDict

from shambench.schema import Model, Name, Prediction, Span
from shambench.scoring import metrics
from shambench.scoring.alternative import ALT_EPSILON, AlternativeTest, alternative_test, annotator_rows
from shambench.scoring.arrays import runs
from shambench.scoring.corpus import Corpus, Readings, RowPredictions, SoftRange
from shambench.scoring.text import SENTENCE_SPLITTER, TOKENIZER

LIKE_FOR_LIKE = (
    "groups.agreement in results.json: the detector's prediction of each item scored against the same "
    "leave-one-out golds (mean over an item's golds, then over items), beside the human figure; gap = detector "
    "minus human"
)


def conventions(n_resamples: int, seed: int) -> dict[str, str]:
    """How the agreement figures are computed, as stored beside them."""
    return {
        "leave_one_out": "for every item with at least two annotators and every annotator a: a's spans are a "
        "prediction, scored against the gold that the source's own aggregation rule builds from the other "
        "annotators (each partition's `rule` says which: Mu-SHROOM characters marked by more than half of the "
        "others, FaithBench the union of the others' Unwanted/Questionable spans, Zhou both of the other two "
        "workers, FAVABench the other fitting rows of the response)",
        "averaging": "an item's value is the mean over its annotators; a partition's is the mean over its items",
        "tokenizer": TOKENIZER,
        "sentence_splitter": SENTENCE_SPLITTER,
        "positive_unit": "a token or sentence unit is positive when a span overlaps it by at least one character",
        "empty_example": metrics.EMPTY_RULE,
        "pooled_token": "micro token precision/recall/F1 over every (item, annotator) pair of the partition",
        "ci": f"percentile bootstrap 95% interval over {n_resamples} resamples of items (in id order), seed "
        f"{seed}; pooled figures resample items with their annotators' counts",
        "iou_cor": "Mu-SHROOM only, as the official scorer computes them: IoU of a's characters against the "
        "characters marked by more than half of the others (1.0 when both are empty); Cor: Spearman correlation "
        "of a's 0/1 per-character vector with the others' per-character shares, 1.0 or 0.0 by the official rule "
        "when either vector is constant; means over annotators, then items",
        "annotators": "an item's annotators are those the source says read it, including those who marked "
        "nothing (silent_readings counts such (item, annotator) pairs); items_by_annotators counts items with "
        "one annotator too, which are not scored",
        "reproduces_gold": "items where the source's rule over all annotators gives the released gold exactly, "
        "out of the items where that was checked",
        "like_for_like": LIKE_FOR_LIKE,
    }


class Level(Model):
    """Precision, recall and F1 of one level, with a bootstrap interval of F1 over items."""

    model_config = ConfigDict(allow_inf_nan=False)

    p: float
    """Precision."""
    r: float
    """Recall."""
    f1: float
    """F1."""
    ci: tuple[float, float]
    """Percentile-bootstrap 95% interval of F1, resampling items."""


class Figures(Model):
    """The agreement metrics of one partition, for annotators or for a detector against the same golds."""

    model_config = ConfigDict(allow_inf_nan=False)

    token: Level
    """Per-example token P/R/F1: mean over an item's annotators, then over items."""
    sentence: Level
    """Per-example sentence-unit P/R/F1, averaged the same way."""
    pooled_token: Level
    """Micro token P/R/F1 over every (item, annotator) pair."""
    iou: float | None = None
    """Mu-SHROOM official IoU (mean over annotators, then items); None without soft labels."""
    cor: float | None = None
    """Mu-SHROOM official Cor, averaged the same way; None without soft labels."""


class Reproduction(Model):
    """How often the source's rule over all annotators gives the released gold."""

    checked: int
    """Items where it was checked."""
    reproduced: int
    """Of those, the items where it gives the released gold exactly."""
    share: float
    """reproduced / checked."""


class Range(Model):
    """The smallest and largest number of annotators of the scored items."""

    min: int
    """Fewest annotators of an item."""
    max: int
    """Most annotators of an item."""


class PartitionAgreement(Figures):
    """One partition's human agreement, with who annotated what."""

    items: int
    """Items scored (those with at least two annotators)."""
    annotators: Range
    """Annotators per scored item."""
    items_by_annotators: dict[str, int]
    """Items (with annotators) per number of annotators, one-annotator items included."""
    silent_readings: int
    """(item, annotator) pairs scored where the annotator marked nothing."""
    identical_readings: int
    """Scored items where every annotator marked exactly the same characters."""
    reproduces_gold: Reproduction | None
    """How often the full aggregation gives the released gold; None when the source could not check it."""
    unplaced: dict[str, int]
    """Annotators' spans that could not be placed on the response, by reason."""
    rule: str
    """The source's gold rule and how its annotators were read."""


class AgreementReport(Model):
    """What `shambench agreement` writes: per partition with annotators, its human figures."""

    partitions: dict[str, PartitionAgreement]
    """Per `task/dataset` partition with at least one item of two or more annotators, in name order."""
    without_annotators: list[str]
    """The other partitions of the selection: their sources release no individual annotators (no figure)."""
    conventions: dict[str, str]
    """How every figure is computed."""


class LikeForLike(Model):
    """A detector and the annotators on one partition, against the same leave-one-out golds."""

    items: int
    """Items scored."""
    detector: Figures
    """The detector's prediction of each item against each of its leave-one-out golds."""
    human: Figures
    """Each annotator against the others (the partition's human figure)."""
    gap: dict[str, float]
    """Detector minus human, per figure (token_f1, sentence_f1, pooled_token_f1, and iou, cor where present)."""
    alternative: AlternativeTest | None = None
    """The alternative annotator test of the detector (`shambench.scoring.alternative`); None in results scored
    before it existed."""


class AgreementGroup(Model):
    """`Results.groups.agreement`: the like-for-like view of every partition with annotators."""

    convention: str
    """How the figures are computed."""
    partitions: dict[str, LikeForLike]
    """Per partition, in name order."""


class RowArrays(Protocol):
    """Per-row scores of one pass (what `Scorer.row_arrays` returns)."""

    @property
    def prf(self) -> dict[str, np.ndarray]: ...
    @property
    def token_counts(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]: ...
    @property
    def iou(self) -> np.ndarray: ...
    @property
    def cor(self) -> np.ndarray: ...


class RowScorer(Protocol):
    """What scores the rows: a `Scorer` of the retargeted corpus (this module sits below the scorer)."""

    corpus: Corpus
    n_resamples: int
    seed: int

    def row_arrays(self, rows: RowPredictions) -> RowArrays: ...

    def bootstrap_weights(self, name: str, n: int) -> metrics.Resamples: ...


class Rows(Model):
    """The leave-one-out rows of a corpus's items with at least two annotators, as `Corpus.retargeted` reads
    them: what scoring a prediction against the annotators' golds needs, without the annotators' own spans."""

    examples: list[int]
    """Per row, the position of its item in the corpus (an item's rows together, items in corpus order)."""
    ids: list[Name]
    """Per row, its id: the item's id, `#`, the left-out annotator's id."""
    golds: list[list[tuple[int, int]]]
    """Per row, the gold of the other annotators (`Reading.others`), as `(start, end)` ranges."""
    soft: list[list[SoftRange] | None]
    """Per row, the other annotators' shares per character (`Reading.others_soft`, as `(start, end, prob)`)
    where the item has soft labels, else None."""


def rows_of(corpus: Corpus) -> Rows:
    """The leave-one-out rows of the corpus, from its annotators' readings."""
    readings = corpus.annotations
    rows = Rows(examples=[], ids=[], golds=[], soft=[])
    first, soft_given = readings.first.tolist(), readings.soft_given.tolist()
    for j, i in enumerate(readings.examples.tolist()):
        lo, hi = first[j], first[j + 1]
        if hi - lo < 2:
            continue
        soft = readings.others_soft.lists(lo, hi) if i in corpus.soft else None
        for k, others in enumerate(readings.others.lists(lo, hi)):
            rows.examples.append(i)
            rows.ids.append(f"{corpus.ids[i]}#{readings.annotators[lo + k]}")
            rows.golds.append([(start, end) for start, end, _ in others])
            rows.soft.append(soft[k] if soft is not None and soft_given[lo + k] else None)
    return rows


@dataclass
class LeaveOneOut:
    """The corpus of (item, annotator) rows and how they map back to items and partitions."""

    scorer: RowScorer
    """Scores the rows: row k is its item's response with the others' gold of one annotator."""
    item_of: np.ndarray
    """Per row, the number of its item (0-based, in corpus order)."""
    example_of: list[int]
    """Per item, its position in the source corpus."""
    partitions: dict[str, np.ndarray]
    """Per partition, its items' numbers, in id order."""
    human_rows: RowArrays | None = None
    """The annotators' own row scores (`human_rows`), once computed."""

    def detector(self, predicted: RowPredictions) -> RowPredictions:
        """Per row, the detector's prediction of its item (`predicted`: one row per example of the source corpus;
        an item without a usable prediction predicts nothing)."""
        return predicted.taken(np.array(self.example_of, np.int64)[self.item_of])


def leave_one_out(corpus: Corpus, rows: Rows, scorer_of: Callable[[Corpus], RowScorer]) -> LeaveOneOut | None:
    """The leave-one-out rows of the corpus (`rows_of` it), scored by `scorer_of` their corpus; None when there
    are none."""
    if not rows.examples:
        return None
    example_of = sorted(set(rows.examples))
    item_of = np.searchsorted(np.array(example_of, np.int64), np.array(rows.examples, np.int64))
    by_partition: dict[str, list[int]] = {}
    for item, i in enumerate(example_of):
        by_partition.setdefault(corpus.partitions[corpus.partition_code[i]], []).append(item)
    return LeaveOneOut(
        scorer=scorer_of(corpus.retargeted(rows.examples, rows.ids, rows.golds, rows.soft)),
        item_of=item_of,
        example_of=example_of,
        partitions={
            p: np.array(sorted(items, key=lambda k: corpus.ids[example_of[k]]), np.int64)
            for p, items in sorted(by_partition.items())
        },
    )


def figures(loo: LeaveOneOut, rows: RowArrays) -> dict[str, Figures]:
    """Per partition, the figures of the rows' scores (`RowScorer.row_arrays` of a prediction per row): per row,
    then mean over an item's rows, then items."""
    sc = loo.scorer
    n_items = len(loo.example_of)
    per_item = np.bincount(loo.item_of, minlength=n_items).astype(float)

    def item_means(values: np.ndarray) -> np.ndarray:
        return np.bincount(loo.item_of, weights=values, minlength=n_items) / per_item

    levels = {lvl: np.stack([item_means(a) for a in rows.prf[lvl]]) for lvl in ("token", "sentence")}
    counts = np.stack([np.bincount(loo.item_of, weights=c, minlength=n_items) for c in rows.token_counts])
    soft = {name: item_means(np.nan_to_num(v)) for name, v in (("iou", rows.iou), ("cor", rows.cor))}
    has_soft = np.bincount(loo.item_of, weights=~np.isnan(rows.iou), minlength=n_items) == per_item
    out = {}
    for partition, items in loo.partitions.items():
        resamples = sc.bootstrap_weights(f"agreement:{partition}", len(items))
        f1s = np.stack([levels["token"][2][items], levels["sentence"][2][items]])
        reps = metrics.bootstrap_replicates(f1s, resamples)
        token, sentence = (_level(levels[lvl][:, items], reps[k]) for k, lvl in enumerate(("token", "sentence")))
        soft_items = bool(has_soft[items].all())
        out[partition] = Figures(
            token=token,
            sentence=sentence,
            pooled_token=_pooled(counts[:, items], resamples),
            iou=metrics.exact_mean(soft["iou"][items]) if soft_items else None,
            cor=metrics.exact_mean(soft["cor"][items]) if soft_items else None,
        )
    return out


def _level(prf: np.ndarray, replicates: np.ndarray) -> Level:
    p, r, f = (metrics.exact_mean(a) for a in prf)
    return Level(p=p, r=r, f1=f, ci=metrics.percentile_ci(replicates))


def _pooled(counts: np.ndarray, resamples: metrics.Resamples) -> Level:
    """Micro P/R/F1 of summed (tp, predicted, gold) counts, with an interval from resampled items' counts."""
    p, r, f = metrics.pooled_prf(*(float(c.sum()) for c in counts))
    reps = metrics.bootstrap_replicates(counts, resamples)
    f1_reps = metrics.per_example_prf(*reps)[2]
    return Level(p=p, r=r, f1=f, ci=metrics.percentile_ci(f1_reps))


def report(corpus: Corpus, loo: LeaveOneOut | None, n_resamples: int = 1000, seed: int = 0) -> AgreementReport:
    """The human agreement of every partition of the corpus with annotators, with who annotated what."""
    with_figures = set(loo.partitions) if loo else set()
    partitions = {}
    if loo is not None:
        readings = corpus.annotations
        scored = np.array([readings.index[i] for i in loo.example_of], np.int64)
        human = figures(loo, human_rows(loo, corpus))
        everyone: dict[str, list[int]] = {}
        for j, i in enumerate(readings.examples.tolist()):
            everyone.setdefault(corpus.partitions[corpus.partition_code[i]], []).append(j)
        for partition, items in loo.partitions.items():
            partitions[partition] = _counted(
                human[partition], readings, scored[items], np.array(everyone[partition], np.int64)
            )
    return AgreementReport(
        partitions=partitions,
        without_annotators=sorted(set(corpus.partitions) - with_figures),
        conventions=conventions(n_resamples, seed),
    )


def human_rows(loo: LeaveOneOut, corpus: Corpus) -> RowArrays:
    """The row scores of each row's own annotator against the others' gold, computed once per `LeaveOneOut`."""
    if loo.human_rows is None:
        readings = corpus.annotations
        scored = np.array([readings.index[i] for i in loo.example_of], np.int64)
        loo.human_rows = loo.scorer.row_arrays(_human(loo, readings, scored))
    return loo.human_rows


def _human(loo: LeaveOneOut, readings: Readings, scored: np.ndarray) -> RowPredictions:
    """Each row's annotator's spans, as the row's prediction (`scored`: per item, its number in `readings`, whose
    readings are the rows in order). As columns: a prediction object per row of a large corpus would outweigh the
    corpus; only the rows with soft labels, whose Cor reads the spans' scores, get one."""
    firsts = readings.first[scored]
    spans = readings.spans.taken(runs(firsts, readings.first[scored + 1] - firsts))
    corpus = loo.scorer.corpus
    kept = {}
    for k in sorted(corpus.soft):
        (listed,) = spans.lists(k, k + 1)
        marked = [Span(start=s, end=e, score=None if math.isnan(v) else v) for s, e, v in listed]
        kept[k] = Prediction(id=corpus.ids[k], spans=marked)
    return RowPredictions(spans=spans, sentence_labels={}, kept=kept)


def _counted(human: Figures, readings: Readings, scored: np.ndarray, everyone: np.ndarray) -> PartitionAgreement:
    """A partition's human figures with who annotated what (`scored`: the numbers in `readings` of its items of
    two or more annotators, in id order; `everyone`: of all its items with readings, in corpus order)."""
    sizes = readings.first[scored + 1] - readings.first[scored]
    checked = readings.reproduces_gold[everyone]
    checked = checked[checked >= 0]
    unplaced: Counter[str] = Counter()
    for i in readings.examples[everyone].tolist():
        unplaced.update(readings.unplaced.get(i, {}))
    reproduction = None
    if len(checked):
        reproduced = int(checked.sum())
        reproduction = Reproduction(checked=len(checked), reproduced=reproduced, share=reproduced / len(checked))
    all_sizes = readings.first[everyone + 1] - readings.first[everyone]
    span_lists = [readings.spans.lists(int(readings.first[j]), int(readings.first[j + 1])) for j in scored.tolist()]
    return PartitionAgreement(
        **human.model_dump(),
        items=len(scored),
        annotators=Range(min=int(sizes.min()), max=int(sizes.max())),
        items_by_annotators={str(k): n for k, n in sorted(Counter(all_sizes.tolist()).items())},
        silent_readings=sum(not spans for lists in span_lists for spans in lists),
        identical_readings=sum(len({_chars(spans) for spans in lists}) == 1 for lists in span_lists),
        reproduces_gold=reproduction,
        unplaced=dict(sorted(unplaced.items())),
        rule=readings.rules[readings.rule_code[scored[0]]],
    )


def _chars(spans: Sequence[tuple[int, int, float]]) -> tuple[tuple[int, int], ...]:
    return tuple((start, end) for start, end, _ in spans)


class HumanAlignment(Model):
    """Per leave-one-out row, its annotator's own alignment with the others' gold: what the alternative annotator
    test sets the detector's beside. It needs no prediction, so a scorer of a kept corpus keeps it beside the corpus
    (made again, it is the annotators' spans scored row by row: about a third of a warm 6k `score`)."""

    iou: list[float | None]
    """Per row, the IoU of the annotator's spans with the others' soft gold; None where the row has none."""
    token_f1: list[float | None]
    """Per row, the annotator's token F1 against the others' gold (None stands for a NaN, as in `iou`)."""

    @classmethod
    def of(cls, rows: RowArrays) -> HumanAlignment:
        """The alignment of the annotators' row scores (`human_rows`)."""
        return cls(iou=_nan_as_none(rows.iou), token_f1=_nan_as_none(rows.prf["token"][2]))

    def arrays(self) -> tuple[np.ndarray, np.ndarray]:
        """`(iou, token F1)` per row, NaN where the lists hold None."""
        return _none_as_nan(self.iou), _none_as_nan(self.token_f1)


def _none_as_nan(values: list[float | None]) -> np.ndarray:
    return np.array([math.nan if v is None else v for v in values], np.float64)


def _nan_as_none(values: np.ndarray) -> list[float | None]:
    # JSON has no NaN: the kept file writes it as null, read back as NaN by `HumanAlignment.arrays`.
    return [None if math.isnan(v) else v for v in values.tolist()]


def human_alignment(loo: LeaveOneOut, corpus: Corpus) -> HumanAlignment:
    """The annotators' own alignments (see `HumanAlignment`), from their row scores."""
    return HumanAlignment.of(human_rows(loo, corpus))


def like_for_like(
    loo: LeaveOneOut,
    predicted: RowPredictions,
    human: AgreementReport,
    alternative: dict[str, AlternativeRows],
    epsilon: float = ALT_EPSILON,
) -> AgreementGroup:
    """`Results.groups.agreement`: the detector against the leave-one-out golds beside the human figures, with the
    alternative annotator test at `epsilon` on the `alternative` rows (`predicted`: one row per example of the
    source corpus)."""
    rows = loo.scorer.row_arrays(loo.detector(predicted))
    detector = figures(loo, rows)
    partitions = {}
    for partition, det in detector.items():
        hum = human.partitions[partition]
        test = alternative[partition]
        partitions[partition] = LikeForLike(
            items=hum.items,
            detector=det,
            human=Figures(**hum.model_dump(include=set(Figures.model_fields))),
            gap=_gap(det, hum),
            alternative=alternative_test(test.annotators, test.detector(rows), test.human, test.metric, epsilon),
        )
    return AgreementGroup(convention=LIKE_FOR_LIKE, partitions=partitions)


@dataclass
class AlternativeRows:
    """What the alternative annotator test reads of one partition's leave-one-out rows beside the detector's
    scores: none of it depends on the prediction, so a scorer prepares it once."""

    metric: str
    """The alignment: `iou` where every row of the partition has soft labels (Mu-SHROOM), else `token_f1`."""
    rows: np.ndarray
    """The rows of the items with at least two other annotators."""
    annotators: dict[str, np.ndarray]
    """Per annotator, in id order, the positions of its rows among `rows`."""
    human: np.ndarray
    """Per row of `rows`, its annotator's own alignment with the others' gold."""

    def detector(self, scores: RowArrays) -> np.ndarray:
        """Per row of `rows`, the detector's alignment with the others' gold, from its row scores."""
        return (scores.iou if self.metric == "iou" else scores.prf["token"][2])[self.rows]


def alternative_rows(loo: LeaveOneOut, corpus: Corpus, human: HumanAlignment) -> dict[str, AlternativeRows]:
    """Per partition, its rows for the alternative annotator test (see `AlternativeRows`), with the annotators'
    alignments `human`."""
    per_item = np.bincount(loo.item_of, minlength=len(loo.example_of))
    row_ids = loo.scorer.corpus.ids
    human_iou, human_f1 = human.arrays()
    out = {}
    for partition, items in loo.partitions.items():
        in_partition = np.isin(loo.item_of, items)
        metric = "token_f1" if np.isnan(human_iou[in_partition]).any() else "iou"
        rows = np.flatnonzero(in_partition & (per_item[loo.item_of] >= 3))
        # A row's id is its item's id, `#`, its annotator's (`rows_of`): the item's id may itself hold a `#`.
        names = [row_ids[k][len(corpus.ids[loo.example_of[loo.item_of[k]]]) + 1 :] for k in rows.tolist()]
        hum = (human_iou if metric == "iou" else human_f1)[rows]
        out[partition] = AlternativeRows(metric, rows, annotator_rows(names), hum)
    return out


def _gap(detector: Figures, human: Figures) -> dict[str, float]:
    gap = {
        "token_f1": detector.token.f1 - human.token.f1,
        "sentence_f1": detector.sentence.f1 - human.sentence.f1,
        "pooled_token_f1": detector.pooled_token.f1 - human.pooled_token.f1,
    }
    for name in ("iou", "cor"):
        d, h = getattr(detector, name), getattr(human, name)
        if d is not None and h is not None:
            gap[name] = d - h
    return gap
