"""The SHAM-Bench scorer, vectorised over the whole corpus.

Every response is laid end to end on one global character axis, so the tokens, sentence units and characters of
all examples form three sorted arrays. A set of spans then marks the items it overlaps with two `searchsorted`
calls and a difference array, and per-example counts come from `bincount`: no Python loop over tokens.
Segmentation is prepared once per `Scorer`; `Scorer.score` can be called again with new predictions cheaply.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field

import numpy as np

from shambench.errors import ScoringError
from shambench.runs.provenance import git_commit, now_iso, shambench_version
from shambench.schema import Example, Prediction, SoftSpan
from shambench.scoring import metrics
from shambench.scoring.results import (
    PRF,
    ExampleScores,
    GroupScores,
    MushroomScores,
    Overall,
    OverallLevel,
    Results,
    ThresholdFree,
)
from shambench.scoring.shared_task import shared_task_group
from shambench.scoring.text import SENTENCE_SPLITTER, TOKENIZER, Segmentation, convention, language_of, segment_mixed

LEVELS = ("token", "sentence")
# Up to this many bytes of bootstrap draw counts are kept between scorings (about 128,000 examples at 1000
# resamples); larger corpora draw them again on each scoring, so memory stays linear.
KEPT_RESAMPLES_BYTES = 256 * 2**20


def conventions(n_resamples: int, seed: int) -> dict[str, str]:
    """The description of every convention, as stored in results JSON."""
    return {
        "averaging": "per-example precision/recall/F1 averaged over the examples of each task/dataset partition "
        "and of each task (datasets weigh by their size)",
        "overall": "unweighted mean of the task scores; std is the population standard deviation (ddof=0) "
        "over tasks; step-level (math) tasks are excluded",
        "tokenizer": TOKENIZER,
        "sentence_splitter": SENTENCE_SPLITTER,
        "positive_unit": "a token or sentence unit is positive when a span overlaps it by at least one character",
        "empty_example": metrics.EMPTY_RULE,
        "missing_prediction": "an example with no prediction, or a failed one, is scored as predicting no span",
        "ci": f"percentile bootstrap 95% interval over {n_resamples} resamples of examples (listed in id order, "
        f"so the interval does not depend on input order), seed {seed}; the "
        "overall interval averages the tasks' replicates (resampled independently per task)",
        "token_with_gold": "per-example token precision/recall/F1 averaged over the examples of the group that "
        "have at least one gold span (examples without gold, where an empty prediction scores 1, are left out)",
        "token_pooled": "micro precision/recall/F1 over all tokens of the group",
        "char_pooled": "micro precision/recall/F1 over all characters of the group",
        "mushroom": "Mu-SHROOM official IoU and Cor per item, mean over items with soft labels; predicted soft "
        "labels are the prediction's soft_spans, else its scored ranges, else its spans with their score (1.0 "
        "when unset), written into a per-character vector in the order the prediction lists them (a later range "
        "overwrites an earlier one, as in the official scorer); a constant or empty vector scores 1.0 when both "
        "vectors have the same number of distinct values, else 0.0",
        "per_example": "means are exactly rounded (math.fsum / n), so the mean of the per-example values in "
        "per_example.jsonl, in any order, equals the reported figure",
        "threshold_free": "AUPRC (average precision) and AUROC over all tokens of the group; a token's score "
        "is the max over the scored ranges it overlaps (predicted spans when no scores are given), else 0",
    }


def _covered(starts: np.ndarray, ends: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Mask of the sorted, disjoint items `[starts, ends)` that overlap any range `[s, e)` by a character."""
    n = len(starts)
    # The ranges in the items' own dtype: searchsorted would otherwise copy the (large) item arrays to int64.
    lo = np.searchsorted(ends, s.astype(ends.dtype), side="right")
    hi = np.searchsorted(starts, e.astype(starts.dtype), side="left")
    keep = lo < hi
    diff = np.zeros(n + 1, np.int32)
    np.add.at(diff, lo[keep], 1)
    np.add.at(diff, hi[keep], -1)
    return np.cumsum(diff[:n], out=diff[:n]) > 0


def _char_counts(s: np.ndarray, e: np.ndarray, owner: np.ndarray, n: int) -> np.ndarray:
    """Per example, how many characters the ranges `[s, e)` cover (overlaps counted once).

    Sorted by start, a range adds only what reaches past every earlier range's end; ranges of different
    examples never overlap on the global axis, so no per-character mask is needed.
    """
    order = np.argsort(s, kind="stable")
    s, e, owner = s[order], e[order], owner[order]
    reach = np.concatenate([[0], np.maximum.accumulate(e)[:-1]]) if len(e) else e
    gain = np.maximum(0, e - np.maximum(s, reach))
    return np.bincount(owner, weights=gain, minlength=n)


def _max_scores(starts: np.ndarray, ends: np.ndarray, s: np.ndarray, e: np.ndarray, v: np.ndarray) -> np.ndarray:
    """Per item, the max score `v` over the ranges that overlap it (0 where none does)."""
    out = np.zeros(len(starts))
    lo = np.searchsorted(ends, s.astype(ends.dtype), side="right")
    hi = np.searchsorted(starts, e.astype(starts.dtype), side="left")
    counts = np.maximum(hi - lo, 0)
    if counts.sum():
        first = np.repeat(lo, counts)
        step = np.arange(counts.sum()) - np.repeat(np.cumsum(counts) - counts, counts)
        np.maximum.at(out, first + step, np.repeat(v, counts))
    return out


@dataclass
class _Units:
    """Items of one kind (tokens, sentence units or characters) of all examples, on the global axis."""

    starts: np.ndarray
    ends: np.ndarray
    owner: np.ndarray
    gold: np.ndarray

    def counts(self, pred: np.ndarray, n_examples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-example true positives, predicted positives and gold positives."""
        return _counts(self.owner, pred, self.gold, n_examples)


def _counts(owner: np.ndarray, pred: np.ndarray, gold: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    # Counting the owners of the positive items only: a weighted bincount would make float64 copies of the masks.
    tp, predicted, positive = (np.bincount(owner[mask], minlength=n) for mask in (pred & gold, pred, gold))
    return tp, predicted, positive


def _axis_dtype(total_chars: int) -> type:
    """int32 global offsets while the whole corpus fits (halving the item arrays), else int64."""
    return np.int32 if total_chars < np.iinfo(np.int32).max else np.int64


def _units(
    starts: list[np.ndarray], ends: list[np.ndarray], offsets: np.ndarray, dtype: type, gs: np.ndarray, ge: np.ndarray
) -> _Units:
    sizes = np.fromiter(map(len, starts), np.int64, len(starts))
    owner = np.repeat(np.arange(len(starts), dtype=np.int32), sizes)
    shift: np.ndarray = offsets.astype(dtype)[owner]
    glob_s: np.ndarray = np.concatenate(starts + [np.empty(0, dtype)], dtype=dtype, casting="same_kind")
    glob_s += shift
    glob_e: np.ndarray = np.concatenate(ends + [np.empty(0, dtype)], dtype=dtype, casting="same_kind")
    glob_e += shift
    del shift
    return _Units(glob_s, glob_e, owner, _covered(glob_s, glob_e, gs, ge))


@dataclass
class _PredictionArrays:
    """Predicted spans of all examples on the global axis, plus which examples had a usable prediction."""

    starts: np.ndarray
    ends: np.ndarray
    present: np.ndarray
    failed: np.ndarray
    sentence_labels: dict[int, list[int]]
    scored: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    by_index: dict[int, Prediction]


class Scorer:
    """Scores predictions against a fixed list of examples; build once, score many times."""

    def __init__(self, examples: Sequence[Example], n_resamples: int = 1000, seed: int = 0):
        if not examples:
            raise ScoringError("no examples to score")
        self.examples = list(examples)
        self.n_resamples = n_resamples
        self.seed = seed
        self.index = {ex.id: i for i, ex in enumerate(self.examples)}
        if len(self.index) != len(self.examples):
            dup = next(ex.id for i, ex in enumerate(self.examples) if self.index[ex.id] != i)
            raise ScoringError(f"duplicate example id {dup!r}")
        self._prepare()

    def _prepare(self) -> None:
        exs = self.examples
        lengths = np.array([len(ex.response) for ex in exs], dtype=np.int64)
        self.offsets = np.concatenate([[0], np.cumsum(lengths)[:-1]]).astype(np.int64)
        axis = _axis_dtype(int(lengths.sum()))
        gs, ge = self._global([ex.hallu_spans for ex in exs])
        self.gold_chars = (gs, ge, self._owner_of(gs))
        langs = [language_of(ex.meta) for ex in exs]
        segs = segment_mixed([ex.response for ex in exs], langs)
        by_partition: dict[str, dict[str, None]] = {}
        for ex, lang in zip(exs, langs):
            by_partition.setdefault(ex.partition, {})[lang] = None
        self.segmentation = {p: "; ".join(map(convention, ls)) for p, ls in sorted(by_partition.items())}
        self.tokens = _units([s.token_starts for s in segs], [s.token_ends for s in segs], self.offsets, axis, gs, ge)
        unit_bounds = [self._unit_bounds(ex, seg) for ex, seg in zip(exs, segs)]
        self.n_units = np.array([len(b[0]) for b in unit_bounds], dtype=np.int64)
        self.unit_first = np.cumsum(self.n_units) - self.n_units
        self.units = _units([b[0] for b in unit_bounds], [b[1] for b in unit_bounds], self.offsets, axis, gs, ge)
        self.gold_counts = {
            "token": np.bincount(self.tokens.owner[self.tokens.gold], minlength=len(exs)),
            "sentence": np.bincount(self.units.owner[self.units.gold], minlength=len(exs)),
            "char": _char_counts(*self.gold_chars, len(exs)),
        }
        self.soft = np.array([ex.soft_spans is not None for ex in exs])
        # Group members are listed in id order, so that the bootstrap (which resamples positions) gives the
        # same interval whatever order the examples came in.
        by_id = np.argsort(np.array([ex.id for ex in exs]), kind="stable")
        partitions = np.array([ex.partition for ex in exs])[by_id]
        tasks = np.array([ex.task for ex in exs])[by_id]
        self.groups = {
            "datasets": {name: by_id[partitions == name] for name in sorted(set(partitions.tolist()))},
            "tasks": {name: by_id[tasks == name] for name in sorted(set(tasks.tolist()))},
        }
        self.step_tasks = {t for t, idx in self.groups["tasks"].items() if all(exs[i].steps for i in idx)}
        self._resamples: dict[str, metrics.Resamples] = {}
        # Draw counts of every group take one byte per example, resample and grouping (datasets, tasks): kept for
        # cheap rescoring up to a budget, drawn again block by block on each scoring beyond it.
        self._keep_resamples = len(exs) * self.n_resamples * len(self.groups) <= KEPT_RESAMPLES_BYTES

    def bootstrap_weights(self, name: str, n: int) -> metrics.Resamples:
        """The seeded resamples of the group `name` of `n` examples (see `metrics.Resamples`)."""
        if name not in self._resamples:
            self._resamples[name] = metrics.Resamples(n, name, self.n_resamples, self.seed, self._keep_resamples)
        return self._resamples[name]

    def _owner_of(self, global_starts: np.ndarray) -> np.ndarray:
        """The example each global offset falls in (empty responses own nothing)."""
        return np.searchsorted(self.offsets, global_starts, side="right") - 1

    @staticmethod
    def _unit_bounds(ex: Example, seg: Segmentation) -> tuple[np.ndarray, np.ndarray]:
        if ex.steps:
            return (
                np.array([s.start for s in ex.steps], np.int64),
                np.array([s.end for s in ex.steps], np.int64),
            )
        return seg.sentence_starts, seg.sentence_ends

    def _global(
        self, per_example: Iterable[Iterable], owners: Iterable[int] | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        s, e = [], []
        for i, spans in zip(owners if owners is not None else range(len(self.examples)), per_example):
            off = self.offsets[i]
            for span in spans:
                s.append(span.start + off)
                e.append(span.end + off)
        return np.array(s, dtype=np.int64), np.array(e, dtype=np.int64)

    def units_of(self, example_id: str) -> list[tuple[int, int]]:
        """The sentence units (or steps) of an example, local offsets: what `sentence_labels` must label."""
        i = self.index[example_id]
        cut = slice(self.unit_first[i], self.unit_first[i] + self.n_units[i])
        off = self.offsets[i]
        return list(zip((self.units.starts[cut] - off).tolist(), (self.units.ends[cut] - off).tolist()))

    def _prediction_arrays(self, predictions: Iterable[Prediction]) -> _PredictionArrays:
        by_index: dict[int, Prediction] = {}
        for pred in predictions:
            i = self.index.get(pred.id)
            if i is None:
                raise ScoringError(f"prediction for unknown example id {pred.id!r}", pred.id)
            if i in by_index:
                raise ScoringError(f"two predictions for example id {pred.id!r}", pred.id)
            if pred.error is None:
                try:
                    pred.check_against(self.examples[i])
                except ValueError as err:
                    raise ScoringError(str(err), pred.id) from None
            by_index[i] = pred
        usable = {i: p for i, p in by_index.items() if p.error is None}
        s, e = self._global([p.spans for p in usable.values()], usable.keys())
        present = np.zeros(len(self.examples), bool)
        present[list(usable)] = True
        failed = np.zeros(len(self.examples), bool)
        failed[[i for i, p in by_index.items() if p.error is not None]] = True
        labels = {i: p.sentence_labels for i, p in usable.items() if p.sentence_labels is not None}
        for i, lab in labels.items():
            if len(lab) != self.n_units[i]:
                raise ScoringError(
                    f"prediction {self.examples[i].id!r}: {len(lab)} sentence_labels for "
                    f"{self.n_units[i]} sentence units",
                    self.examples[i].id,
                )
        return _PredictionArrays(s, e, present, failed, labels, self._scored(usable), usable)

    def _scored(self, usable: dict[int, Prediction]) -> tuple[np.ndarray, np.ndarray, np.ndarray] | None:
        if not any(p.scores is not None or any(sp.score is not None for sp in p.spans) for p in usable.values()):
            return None
        s, e, v = [], [], []
        for i, p in usable.items():
            ranges = p.scores if p.scores is not None else p.spans
            off = self.offsets[i]
            for r in ranges:
                s.append(r.start + off)
                e.append(r.end + off)
                v.append(1.0 if r.score is None else r.score)
        return np.array(s, np.int64), np.array(e, np.int64), np.array(v, float)

    def example_prf(self, predictions: Iterable[Prediction]) -> dict[str, np.ndarray]:
        """Per level in `LEVELS`, the per-example (precision, recall, F1): shape 3 × examples, in example order.

        What a paired comparison of two runs resamples (see `shambench.reporting.compare`).
        """
        return self._counted(predictions)[2]

    def _counted(
        self, predictions: Iterable[Prediction]
    ) -> tuple[_PredictionArrays, dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], dict[str, np.ndarray]]:
        """The prediction arrays, per-level (tp, predicted, gold) counts and per-example P/R/F1."""
        pa = self._prediction_arrays(predictions)
        n = len(self.examples)
        tok_pred = _covered(self.tokens.starts, self.tokens.ends, pa.starts, pa.ends)
        unit_pred = _covered(self.units.starts, self.units.ends, pa.starts, pa.ends)
        for i, lab in pa.sentence_labels.items():
            unit_pred[self.unit_first[i] : self.unit_first[i] + self.n_units[i]] = np.array(lab, bool)
        counts = {
            "token": self.tokens.counts(tok_pred, n),
            "sentence": self.units.counts(unit_pred, n),
            "char": self._char_tp_pred_gold(pa),
        }
        prf = {lvl: np.stack(metrics.per_example_prf(*counts[lvl])) for lvl in LEVELS}
        return pa, counts, prf

    def score(self, predictions: Iterable[Prediction] | Mapping[str, Prediction]) -> Results:
        """Results of the predictions; examples without one are scored as empty and counted."""
        return self.score_with_examples(predictions)[0]

    def score_with_examples(
        self, predictions: Iterable[Prediction] | Mapping[str, Prediction]
    ) -> tuple[Results, list[ExampleScores]]:
        """The results and, in example order, each example's own scores (what `per_example.jsonl` holds)."""
        if isinstance(predictions, Mapping):
            predictions = predictions.values()
        pa, counts, prf = self._counted(predictions)
        n = len(self.examples)
        token_scores = None
        if pa.scored is not None:
            token_scores = _max_scores(self.tokens.starts, self.tokens.ends, *pa.scored)
        ctx = _GroupContext(self, pa, counts, prf, token_scores)
        datasets = {name: ctx.group(name, idx)[0] for name, idx in self.groups["datasets"].items()}
        task_scores = {name: ctx.group(name, idx) for name, idx in self.groups["tasks"].items()}
        results = Results(
            shambench_version=shambench_version(),
            git_commit=git_commit(),
            created_at=now_iso(),
            conventions=conventions(self.n_resamples, self.seed),
            n_examples=n,
            missing_predictions=int((~pa.present).sum()),
            failed_predictions=int(pa.failed.sum()),
            datasets=datasets,
            tasks={name: gs for name, (gs, _) in task_scores.items()},
            overall=self._overall({t: v for t, v in task_scores.items() if t not in self.step_tasks}),
            segmentation=self.segmentation,
            groups={**self._math_group(pa), **shared_task_group(datasets)},
        )
        return results, ctx.per_example()

    def _math_group(self, pa: _PredictionArrays) -> dict:
        """Step-level (math) metrics in their own group, apart from the overall (see `shambench.scoring.steps`)."""
        step_examples = [ex for ex in self.examples if ex.steps]
        if not step_examples:
            return {}
        from shambench.scoring.steps import math_group

        predictions = {self.examples[i].id: p for i, p in pa.by_index.items()}
        return {"math": math_group(step_examples, predictions, seed=self.seed).model_dump(mode="json")}

    def _char_tp_pred_gold(self, pa: _PredictionArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-example character true positives, predicted and gold counts: |P∩G| = |P| + |G| - |P∪G|."""
        n = len(self.examples)
        gs, ge, g_owner = self.gold_chars
        p_owner = self._owner_of(pa.starts)
        pred = _char_counts(pa.starts, pa.ends, p_owner, n)
        union = _char_counts(
            np.concatenate([gs, pa.starts]), np.concatenate([ge, pa.ends]), np.concatenate([g_owner, p_owner]), n
        )
        gold = self.gold_counts["char"]
        return pred + gold - union, pred, gold

    @staticmethod
    def _overall(task_scores: dict[str, tuple[GroupScores, np.ndarray]]) -> Overall | None:
        if not task_scores:
            return None
        levels = {}
        for li, lvl in enumerate(LEVELS):
            per_task = [getattr(gs, lvl) for gs, _ in task_scores.values()]
            f1s = np.array([p.f1 for p in per_task])
            replicates = np.mean([reps[li] for _, reps in task_scores.values()], axis=0)
            levels[lvl] = OverallLevel(
                f1=float(f1s.mean()),
                std=float(f1s.std(ddof=0)),
                precision=float(np.mean([p.precision for p in per_task])),
                recall=float(np.mean([p.recall for p in per_task])),
                ci=metrics.percentile_ci(replicates),
            )
        return Overall(tasks=sorted(task_scores), **levels)


@dataclass
class _GroupContext:
    """The per-example arrays of one scoring pass, from which each group's scores are cut out."""

    scorer: Scorer
    pa: _PredictionArrays
    counts: dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]]
    prf: dict[str, np.ndarray]
    token_scores: np.ndarray | None
    soft_scores: dict[int, tuple[float, float]] = field(default_factory=dict)

    def per_example(self) -> list[ExampleScores]:
        """Every example's P/R/F1 per level (and IoU/Cor with soft labels), from the arrays the groups average."""
        sc, pa = self.scorer, self.pa
        values = {lvl: self.prf[lvl].T.tolist() for lvl in LEVELS}
        rows = []
        for i, ex in enumerate(sc.examples):
            iou, cor = self._iou_cor(i) if sc.soft[i] else (None, None)
            status = "predicted" if pa.present[i] else "failed" if pa.failed[i] else "missing"
            levels = {
                lvl: PRF.model_validate(dict(zip(("precision", "recall", "f1"), values[lvl][i]))) for lvl in LEVELS
            }
            rows.append(
                ExampleScores(id=ex.id, dataset=ex.dataset, task=ex.task, status=status, iou=iou, cor=cor, **levels)
            )
        return rows

    def _iou_cor(self, i: int) -> tuple[float, float]:
        """Mu-SHROOM IoU and Cor of example `i` (computed once per scoring pass)."""
        if i not in self.soft_scores:
            sc = self.scorer
            tp, pred, gold = (float(c[i]) for c in self.counts["char"])
            iou = float(metrics.iou(np.array([tp]), np.array([pred + gold - tp]))[0])
            ex = sc.examples[i]
            assert ex.soft_spans is not None  # asked only for the examples with soft labels (`Scorer.soft`)
            self.soft_scores[i] = (iou, metrics.cor(_soft_vector(len(ex.response), ex.soft_spans), self._pred_soft(i)))
        return self.soft_scores[i]

    def group(self, name: str, idx: np.ndarray) -> tuple[GroupScores, np.ndarray]:
        """A group's scores and its bootstrap replicates of (token F1, sentence F1)."""
        sc = self.scorer
        f1 = np.stack([self.prf[lvl][2][idx] for lvl in LEVELS])
        reps = metrics.bootstrap_replicates(f1, sc.bootstrap_weights(name, len(idx)))
        per_example = {
            lvl: PRF(
                precision=_mean(self.prf[lvl][0][idx]),
                recall=_mean(self.prf[lvl][1][idx]),
                f1=_mean(self.prf[lvl][2][idx]),
                ci=metrics.percentile_ci(reps[li]),
            )
            for li, lvl in enumerate(LEVELS)
        }
        pooled = {
            key: PRF.model_validate(
                dict(zip(("precision", "recall", "f1"), metrics.pooled_prf(*(c[idx].sum() for c in cnt))))
            )
            for key, cnt in (("token_pooled", self.counts["token"]), ("char_pooled", self.counts["char"]))
        }
        scores = GroupScores(
            n=len(idx),
            n_with_gold=int((sc.gold_counts["token"][idx] > 0).sum()),
            missing_predictions=int((~self.pa.present[idx]).sum()),
            failed_predictions=int(self.pa.failed[idx].sum()),
            **per_example,
            token_with_gold=self._with_gold(idx),
            **pooled,
            mushroom=self._mushroom(idx),
            threshold_free=self._threshold_free(idx),
        )
        return scores, reps

    def _with_gold(self, idx: np.ndarray) -> PRF | None:
        """Per-example token P/R/F1 averaged over the group's examples that have gold spans."""
        gold = idx[self.scorer.gold_counts["token"][idx] > 0]
        if not len(gold):
            return None
        p, r, f = (float(a[gold].mean()) for a in self.prf["token"])
        return PRF(precision=p, recall=r, f1=f)

    def _mushroom(self, idx: np.ndarray) -> MushroomScores | None:
        sc = self.scorer
        soft = idx[sc.soft[idx]]
        if not len(soft):
            return None
        ious, cors = zip(*(self._iou_cor(int(i)) for i in soft))
        return MushroomScores(iou=_mean(ious), cor=_mean(cors), n=len(soft))

    def _pred_soft(self, i: int) -> np.ndarray:
        pred = self.pa.by_index.get(i)
        length = len(self.scorer.examples[i].response)
        if pred is None:
            return np.zeros(length)
        if pred.soft_spans is not None:
            return _soft_vector(length, pred.soft_spans)
        ranges = pred.scores if pred.scores is not None else pred.spans
        return _soft_vector(length, [(r.start, r.end, 1.0 if r.score is None else r.score) for r in ranges])

    def _threshold_free(self, idx: np.ndarray) -> ThresholdFree | None:
        if self.token_scores is None:
            return None
        from sklearn.metrics import average_precision_score, roc_auc_score

        mask = np.isin(self.scorer.tokens.owner, idx)
        y, s = self.scorer.tokens.gold[mask], self.token_scores[mask]
        both = 0 < y.sum() < len(y)
        return ThresholdFree(
            auprc=float(average_precision_score(y, s)) if both else None,
            auroc=float(roc_auc_score(y, s)) if both else None,
            n_tokens=int(mask.sum()),
        )


def _mean(values: np.ndarray | Sequence[float]) -> float:
    """The exactly rounded mean (see the `per_example` convention): independent of the order of the values."""
    values = np.asarray(values, dtype=np.float64).tolist()
    return math.fsum(values) / len(values)


def _soft_vector(length: int, ranges: Iterable[SoftSpan | tuple[int, int, float]]) -> np.ndarray:
    """Per-character probabilities, the ranges written in the order given (a later one overwrites)."""
    vec = np.zeros(length)
    for r in ranges:
        start, end, prob = (r.start, r.end, r.prob) if isinstance(r, SoftSpan) else r
        vec[start:end] = prob
    return vec


# Fields the scorer never reads: left out of the examples and predictions that are only scored. An example's meta
# stays: its `lang` chooses the segmentation (`scoring_view` keeps only that key).
UNSCORED_EXAMPLE_FIELDS = ("question", "context")
UNSCORED_PREDICTION_FIELDS = ("raw", "meta")


def scoring_view(example: Example) -> Example:
    """The example with only what scoring reads (`UNSCORED_EXAMPLE_FIELDS` back to their defaults, and of its
    meta only the language that chooses its segmentation)."""
    meta = {"lang": example.meta["lang"]} if "lang" in example.meta else {}
    return example.model_copy(update={"question": "", "context": "", "meta": meta})


def score(
    examples: Sequence[Example], predictions: Iterable[Prediction], n_resamples: int = 1000, seed: int = 0
) -> Results:
    """Score predictions against examples in one call (see `Scorer` to rescore cheaply)."""
    return Scorer(examples, n_resamples=n_resamples, seed=seed).score(predictions)
