"""The SHAM-Bench scorer, vectorised over the whole corpus.

Every response is laid end to end on one global character axis, so the tokens, sentence units and characters of
all examples form three sorted arrays. A set of spans then marks the items it overlaps with two `searchsorted`
calls and a difference array, and per-example counts come from `bincount`: no Python loop over tokens.
Segmentation is prepared once per `Scorer`; `Scorer.score` can be called again with new predictions cheaply.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from shambench import metrics
from shambench.io import DataError
from shambench.provenance import git_commit, now_iso, shambench_version
from shambench.results import (
    PRF,
    GroupScores,
    MushroomScores,
    Overall,
    OverallLevel,
    Results,
    ThresholdFree,
)
from shambench.schema import Example, Prediction
from shambench.text import SENTENCE_SPLITTER, TOKENIZER, Segmentation, segment_all

LEVELS = ("token", "sentence")


class ScoringError(DataError):
    """Predictions that cannot be scored against the examples (unknown id, range past the response, ...)."""

    def __init__(self, message: str, prediction_id: str | None = None):
        super().__init__(message)
        # The offending prediction's id, so that a caller that read the predictions from a file can name the line.
        self.prediction_id = prediction_id


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
        "token_pooled": "micro precision/recall/F1 over all tokens of the group",
        "char_pooled": "micro precision/recall/F1 over all characters of the group",
        "mushroom": "Mu-SHROOM official IoU and Cor per item, mean over items with soft labels; predicted soft "
        "labels are the prediction's scored ranges, else its spans with their score (1.0 when unset)",
        "threshold_free": "AUPRC (average precision) and AUROC over all tokens of the group; a token's score "
        "is the max over the scored ranges it overlaps (predicted spans when no scores are given), else 0",
    }


def _covered(starts: np.ndarray, ends: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
    """Mask of the sorted, disjoint items `[starts, ends)` that overlap any range `[s, e)` by a character."""
    n = len(starts)
    lo = np.searchsorted(ends, s, side="right")
    hi = np.searchsorted(starts, e, side="left")
    keep = lo < hi
    diff = np.bincount(lo[keep], minlength=n + 1) - np.bincount(hi[keep], minlength=n + 1)
    return np.cumsum(diff[:n]) > 0


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
    lo = np.searchsorted(ends, s, side="right")
    hi = np.searchsorted(starts, e, side="left")
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
    tp = np.bincount(owner, weights=pred & gold, minlength=n)
    return tp, np.bincount(owner, weights=pred, minlength=n), np.bincount(owner, weights=gold, minlength=n)


def _units(
    starts: list[np.ndarray], ends: list[np.ndarray], offsets: np.ndarray, gs: np.ndarray, ge: np.ndarray
) -> _Units:
    sizes = np.array([len(a) for a in starts], dtype=np.int64)
    owner = np.repeat(np.arange(len(starts)), sizes)
    glob_s = np.concatenate(starts + [np.empty(0, np.int64)]) + offsets[owner]
    glob_e = np.concatenate(ends + [np.empty(0, np.int64)]) + offsets[owner]
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
        gs, ge = self._global([ex.hallu_spans for ex in exs])
        self.gold_chars = (gs, ge, self._owner_of(gs))
        segs = segment_all(ex.response for ex in exs)
        self.tokens = _units([s.token_starts for s in segs], [s.token_ends for s in segs], self.offsets, gs, ge)
        unit_bounds = [self._unit_bounds(ex, seg) for ex, seg in zip(exs, segs)]
        self.n_units = np.array([len(b[0]) for b in unit_bounds], dtype=np.int64)
        self.unit_first = np.cumsum(self.n_units) - self.n_units
        self.units = _units([b[0] for b in unit_bounds], [b[1] for b in unit_bounds], self.offsets, gs, ge)
        self.gold_counts = {
            "token": np.bincount(self.tokens.owner, weights=self.tokens.gold, minlength=len(exs)),
            "sentence": np.bincount(self.units.owner, weights=self.units.gold, minlength=len(exs)),
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
        self._weights: dict[str, np.ndarray] = {}

    def bootstrap_weights(self, name: str, n: int) -> np.ndarray:
        """The resample weights of the group `name` of `n` examples (drawn on first use, then kept)."""
        if name not in self._weights:
            self._weights[name] = metrics.bootstrap_weights(n, name, self.n_resamples, self.seed)
        return self._weights[name]

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

        What a paired comparison of two runs resamples (see `shambench.compare`).
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
        return Results(
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
            groups=self._math_group(pa),
        )

    def _math_group(self, pa: _PredictionArrays) -> dict:
        """Step-level (math) metrics in their own group, apart from the overall (see `shambench.steps`)."""
        step_examples = [ex for ex in self.examples if ex.steps]
        if not step_examples:
            return {}
        from shambench.steps import math_group

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

    def group(self, name: str, idx: np.ndarray) -> tuple[GroupScores, np.ndarray]:
        """A group's scores and its bootstrap replicates of (token F1, sentence F1)."""
        sc = self.scorer
        f1 = np.stack([self.prf[lvl][2][idx] for lvl in LEVELS])
        reps = metrics.bootstrap_replicates(f1, sc.bootstrap_weights(name, len(idx)))
        per_example = {
            lvl: PRF(
                precision=float(self.prf[lvl][0][idx].mean()),
                recall=float(self.prf[lvl][1][idx].mean()),
                f1=float(self.prf[lvl][2][idx].mean()),
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
            **per_example,
            **pooled,
            mushroom=self._mushroom(idx),
            threshold_free=self._threshold_free(idx),
        )
        return scores, reps

    def _mushroom(self, idx: np.ndarray) -> MushroomScores | None:
        sc = self.scorer
        soft = idx[sc.soft[idx]]
        if not len(soft):
            return None
        tp, pred, gold = (c[soft] for c in self.counts["char"])
        ious = metrics.iou(tp, pred + gold - tp)
        cors = [
            metrics.cor(_soft_vector(len(sc.examples[i].response), sc.examples[i].soft_spans), self._pred_soft(i))
            for i in soft
        ]
        return MushroomScores(iou=float(np.mean(ious)), cor=float(np.mean(cors)), n=len(soft))

    def _pred_soft(self, i: int) -> np.ndarray:
        pred = self.pa.by_index.get(i)
        length = len(self.scorer.examples[i].response)
        if pred is None:
            return np.zeros(length)
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


def _soft_vector(length: int, ranges: Iterable[Any]) -> np.ndarray:
    vec = np.zeros(length)
    for r in ranges:
        start, end, prob = (r.start, r.end, r.prob) if hasattr(r, "prob") else r
        vec[start:end] = prob
    return vec


def score(
    examples: Sequence[Example], predictions: Iterable[Prediction], n_resamples: int = 1000, seed: int = 0
) -> Results:
    """Score predictions against examples in one call (see `Scorer` to rescore cheaply)."""
    return Scorer(examples, n_resamples=n_resamples, seed=seed).score(predictions)
