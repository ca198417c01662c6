"""The SHAM-Bench scorer, vectorised over the whole corpus.

Every response is laid end to end on one global character axis, so the tokens, sentence units and characters of
all examples form three sorted arrays. A set of spans then marks the items it overlaps with two `searchsorted`
calls and a difference array, and per-example counts come from `bincount`: no Python loop over tokens.
Segmentation is prepared once per `Scorer`; `Scorer.score` can be called again with new predictions cheaply.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from functools import cache, cached_property
from importlib.metadata import version
from typing import TYPE_CHECKING, overload

import numpy as np

from shambench.errors import ScoringError
from shambench.provenance import git_commit, now_iso, shambench_version
from shambench.schema import Example, Prediction, Span
from shambench.scoring import metrics
from shambench.scoring.alternative import ALT_EPSILON
from shambench.scoring.arrays import char_counts, max_scores
from shambench.scoring.corpus import Corpus, Ranges, RowPredictions, Units, covered
from shambench.scoring.extended import declarations, extended_group, joins_task, kept_apart, kept_apart_names
from shambench.scoring.kept import kept_arrays_beside, kept_beside, kept_draws, rules_hash
from shambench.scoring.measures import AVERAGING, Group, figures, metric_conventions
from shambench.scoring.results import (
    PRF,
    ExampleScores,
    ExtendedView,
    GroupScores,
    Overall,
    OverallLevel,
    ResultGroups,
    Results,
)
from shambench.scoring.shared_task import shared_task_groups
from shambench.scoring.steps import MathGroup, math_group
from shambench.scoring.text import SENTENCE_SPLITTER, TOKENIZER
from shambench.scoring.typed import Predicted, TypedGold, types_group

if TYPE_CHECKING:
    from shambench.scoring.agreement import AgreementGroup, AgreementReport, AlternativeRows, LeaveOneOut

LEVELS = ("token", "sentence")
PER_EXAMPLE = (
    "means are exactly rounded (math.fsum / n), so the mean of the per-example values in per_example.jsonl, in any "
    "order, equals the reported figure"
)
# Up to this many bytes of bootstrap draw counts are kept between scorings (about 128,000 examples at 1000
# resamples); larger corpora draw them again on each scoring, so memory stays linear.
KEPT_RESAMPLES_BYTES = 256 * 2**20
# Gold soft labels are kept prepared for Cor (values, ranks and owners, 24 bytes a character) up to this many
# characters (48 MB): every Mu-SHROOM item of a benchmark and its annotators' rows, many times over.
KEPT_GOLD_SOFT_CHARS = 2_000_000
# Cor is computed for the examples with soft labels in runs of up to this many characters, each in a few numpy
# calls: a handful of arrays of 8 bytes a character exist at a time, however large the corpus.
SOFT_RUN_CHARS = 500_000
# The modules whose rules make the human agreement report of a corpus (those of the corpus itself are in its key).
_KEPT_RULES = (
    "shambench.scoring.agreement",
    "shambench.scoring.arrays",
    "shambench.scoring.metrics",
    "shambench.scoring.scorer",
    "shambench.scoring.typed",
)


def conventions(n_resamples: int, seed: int) -> dict[str, str]:
    """The description of every convention, as stored in results JSON: the general ones, then every registered
    metric's (`shambench.scoring.measures`; the headline levels' is `averaging`, stated first)."""
    general = {
        "averaging": AVERAGING,
        "overall": "unweighted mean of the task scores; std is the population standard deviation (ddof=0) "
        "over tasks; step-level (math) tasks are excluded, and tasks hold no partition of the extended suite's "
        f"additions ({', '.join(kept_apart_names())}: groups.extended)",
        "tokenizer": TOKENIZER,
        "sentence_splitter": SENTENCE_SPLITTER,
        "positive_unit": "a token or sentence unit is positive when a span overlaps it by at least one character",
        "empty_example": metrics.EMPTY_RULE,
        "missing_prediction": "an example with no prediction, or a failed one, is scored as predicting no span",
        "ci": f"percentile bootstrap 95% interval over {n_resamples} resamples of examples (listed in id order, "
        f"so the interval does not depend on input order), seed {seed}; the "
        "overall interval averages the tasks' replicates (resampled independently per task)",
    }
    return general | metric_conventions() | {"per_example": PER_EXAMPLE}


@cache
def _kept_versions() -> str:
    """The versions and rules that what is kept beside a corpus (the human agreement figures and their rows, the
    per-type draws) depends on beyond the corpus (whose key has its own rules). Once per process: each package version read parses its metadata (a scorer of a kept
    corpus asks three times, about 4 ms of CPU each)."""
    versions = "|".join(version(p) for p in ("numpy", "pydantic"))
    return f"{shambench_version()}|{versions}|{rules_hash(_KEPT_RULES)}"


def _members(by_id: np.ndarray, codes: np.ndarray, names: list[str]) -> dict[str, np.ndarray]:
    """Per name (sorted) that has examples, their positions in id order (`codes`: each position's name, in that
    order)."""
    members = {name: by_id[codes == code] for code, name in sorted(enumerate(names), key=lambda item: item[1])}
    return {name: idx for name, idx in members.items() if len(idx)}


@dataclass
class ExampleArrays:
    """Per-example scores of one scoring pass, in example order."""

    prf: dict[str, np.ndarray]
    """Per level in `LEVELS`, (precision, recall, F1): shape 3 × examples."""
    token_counts: tuple[np.ndarray, np.ndarray, np.ndarray]
    """Per example, token true positives, predicted and gold positives."""
    iou: np.ndarray
    """Mu-SHROOM IoU per example; NaN without gold soft labels."""
    cor: np.ndarray
    """Mu-SHROOM Cor per example; NaN without gold soft labels."""
    char_counts: tuple[np.ndarray, np.ndarray, np.ndarray] | None = None
    """Per example, character true positives, predicted and gold characters (where the pass counted them)."""


@dataclass
class _PredictionArrays:
    """Predicted spans of all examples on the global axis, plus which examples had a usable prediction."""

    starts: np.ndarray
    ends: np.ndarray
    present: np.ndarray
    failed: np.ndarray
    sentence_labels: dict[int, list[int]]
    scored: tuple[np.ndarray, np.ndarray, np.ndarray] | None
    kept: dict[int, Prediction]
    """The usable predictions of the examples whose scoring reads more than spans (soft labels, steps,
    annotators)."""
    labelled: list[tuple[int, str]]
    """`(position in starts, label)` of the predicted spans that carry a label (the per-type figures read them)."""


class _Ranges:
    """Global `[start, end)` ranges (with a score each) gathered one prediction at a time."""

    def __init__(self) -> None:
        self.starts: list[int] = []
        self.ends: list[int] = []
        self.values: list[float] = []
        self.labelled: list[tuple[int, str]] = []

    def add(self, ranges: Iterable[Span], offset: int) -> None:
        for r in ranges:
            if r.label is not None:
                self.labelled.append((len(self.starts), r.label))
            self.starts.append(r.start + offset)
            self.ends.append(r.end + offset)
            self.values.append(1.0 if r.score is None else r.score)

    def bounds(self) -> tuple[np.ndarray, np.ndarray]:
        return np.array(self.starts, np.int64), np.array(self.ends, np.int64)

    def scored(self) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        return (*self.bounds(), np.array(self.values, float))


class Scorer:
    """Scores predictions against a fixed list of examples; build once, score many times.

    The examples are read once (any iterable: a generator over a file is never held whole) into a `Corpus` of
    columns, or given as one; the predictions of each scoring are likewise read once into arrays.
    """

    def __init__(
        self,
        examples: Iterable[Example] | Corpus,
        n_resamples: int = 1000,
        seed: int = 0,
        alt_epsilon: float = ALT_EPSILON,
    ):
        self.corpus = examples if isinstance(examples, Corpus) else Corpus.of(examples)
        self.n_resamples = n_resamples
        self.seed = seed
        self.alt_epsilon = alt_epsilon
        self.index = self.corpus.index
        corpus = self.corpus
        self.tokens, self.units = corpus.tokens, corpus.units
        n = len(corpus)
        self.gold_chars = (corpus.gold_starts, corpus.gold_ends, corpus.owner_of(corpus.gold_starts))
        self.segmentation = corpus.segmentation
        self.gold_counts = {
            "token": np.bincount(self.tokens.owner[self.tokens.gold], minlength=n),
            "sentence": np.bincount(self.units.owner[self.units.gold], minlength=n),
            "char": char_counts(*self.gold_chars, n),
        }
        self.soft = np.zeros(n, bool)
        self.soft[list(corpus.soft)] = True
        # Group members are listed in id order, so that the bootstrap (which resamples positions) gives the
        # same interval whatever order the examples came in.
        by_id = np.argsort(np.array(corpus.ids), kind="stable")
        partition_of = corpus.partition_code[by_id]
        # Partitions their source keeps apart (the extended suite's) never enter the paper's tasks.
        self.sources = declarations(corpus.partitions)
        paper = np.array([not kept_apart(p, s) for p, s in self.sources.items()], bool)[partition_of]
        self.groups = {
            "partitions": _members(by_id, partition_of, corpus.partitions),
            "tasks": _members(by_id[paper], corpus.task_code[by_id][paper], corpus.tasks),
        }
        if any(joins_task(s) for s in self.sources.values()):
            groups = [extended_group(p, s) for p, s in self.sources.items()]
            names = sorted(set(groups))
            codes = np.array([names.index(g) for g in groups])[partition_of]
            self.groups["extended"] = _members(by_id, codes, names)
        self.step_tasks = {
            t
            for key in ("tasks", "extended")
            for t, idx in self.groups.get(key, {}).items()
            if all(int(i) in corpus.with_steps for i in idx)
        }
        self._resamples: dict[str, metrics.Resamples] = {}
        # Draws depend on no corpus: kept beside a kept one scored again, or the source of a rows corpus (`_rows_scorer`).
        self.draws_beside = self.corpus if self.corpus.reread else None
        self._gold_soft: dict[int, metrics.SoftVectors] = {}
        self._gold_soft_chars = 0
        self._human: AgreementReport | None = None
        # Draw counts of every group take one byte per example, resample and grouping (datasets, tasks): kept for
        # cheap rescoring up to a budget, drawn again block by block on each scoring beyond it.
        self._keep_resamples = n * self.n_resamples * len(self.groups) <= KEPT_RESAMPLES_BYTES

    @cached_property
    def soft_runs(self) -> list[np.ndarray]:
        """The positions of the examples with soft labels, in order, in runs of about `SOFT_RUN_CHARS` characters
        (what Cor is computed on at once)."""
        idx = np.flatnonzero(self.soft)
        run_of = np.cumsum(self.corpus.lengths[idx]) // SOFT_RUN_CHARS
        return np.split(idx, np.flatnonzero(np.diff(run_of)) + 1) if len(idx) else []

    def gold_soft(self, run: int) -> metrics.SoftVectors:
        """The gold soft labels of the examples of `soft_runs[run]` as Cor reads them, prepared once per scorer
        (they need no prediction) while the prepared runs stay within `KEPT_GOLD_SOFT_CHARS`."""
        if run in self._gold_soft:
            return self._gold_soft[run]
        idx = self.soft_runs[run]
        lengths = self.corpus.lengths[idx]
        vectors = metrics.SoftVectors(_soft_values(lengths, (self.corpus.soft[i] for i in idx.tolist())), lengths)
        if self._gold_soft_chars + int(lengths.sum()) <= KEPT_GOLD_SOFT_CHARS:
            self._gold_soft[run] = vectors
            self._gold_soft_chars += int(lengths.sum())
        return vectors

    def bootstrap_weights(self, name: str, n: int) -> metrics.Resamples:
        """The seeded resamples of the group `name` of `n` examples (`metrics.Resamples`), kept in memory where they
        fit, and then beside a kept corpus scored again (`kept_draws`): a file scored once never pays for keeping them."""
        if name not in self._resamples:
            resamples = metrics.Resamples(n, name, self.n_resamples, self.seed, self._keep_resamples)
            if self._keep_resamples and self.draws_beside is not None:
                kept_draws(resamples, self.draws_beside, f"{self.n_resamples}|{self.seed}|{_kept_versions()}")
            self._resamples[name] = resamples
        return self._resamples[name]

    def kept_arrays(self, name: str, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]:
        """Arrays made from the corpus and this scorer's resamples alone: `compute()`, or read from beside a kept
        corpus where they were made before with the same resamples, seed and versions."""
        context = f"{self.n_resamples}|{self.seed}|{_kept_versions()}"
        return kept_arrays_beside(self.corpus, f"{name}-{self.n_resamples}-{self.seed}.bin", context, compute)

    def units_of(self, example_id: str) -> list[tuple[int, int]]:
        """The sentence units (or steps) of an example, local offsets: what `sentence_labels` must label."""
        i = self.index[example_id]
        first = int(self.units.first[i])
        cut = slice(first, first + int(self.units.count[i]))
        off = self.corpus.offsets[i]
        return list(zip((self.units.starts[cut] - off).tolist(), (self.units.ends[cut] - off).tolist()))

    def response_length(self, example_id: str) -> int:
        """The length of an example's response: every predicted range must lie within it."""
        return int(self.corpus.lengths[self.index[example_id]])

    def _positioned(self, predictions: Iterable[Prediction]) -> Iterator[tuple[int, Prediction]]:
        """Each prediction with the position of the example its id names."""
        for pred in predictions:
            i = self.index.get(pred.id)
            if i is None:
                raise ScoringError(f"prediction for unknown example id {pred.id!r}", pred.id)
            yield i, pred

    def _prediction_arrays(self, positioned: Iterable[tuple[int, Prediction]]) -> _PredictionArrays:
        corpus = self.corpus
        n = len(corpus)
        seen = np.zeros(n, bool)
        present = np.zeros(n, bool)
        failed = np.zeros(n, bool)
        spans, scored = _Ranges(), _Ranges()
        has_scores = False
        labels: dict[int, list[int]] = {}
        kept: dict[int, Prediction] = {}
        for i, pred in positioned:
            if seen[i]:
                raise ScoringError(f"two predictions for example id {pred.id!r}", pred.id)
            seen[i] = True
            if pred.error is not None:
                failed[i] = True
                continue
            try:
                pred.check_inside(int(corpus.lengths[i]))
            except ValueError as err:
                raise ScoringError(str(err), pred.id) from None
            present[i] = True
            off = int(corpus.offsets[i])
            spans.add(pred.spans, off)
            scored.add(pred.scores if pred.scores is not None else pred.spans, off)
            has_scores = has_scores or pred.scores is not None or any(sp.score is not None for sp in pred.spans)
            if pred.sentence_labels is not None:
                if len(pred.sentence_labels) != self.units.count[i]:
                    raise ScoringError(
                        f"prediction {pred.id!r}: {len(pred.sentence_labels)} sentence_labels for "
                        f"{self.units.count[i]} sentence units",
                        pred.id,
                    )
                labels[i] = pred.sentence_labels
            if i in corpus.soft or i in corpus.with_steps or i in corpus.annotations:
                kept[i] = pred
        s, e = spans.bounds()
        return _PredictionArrays(
            s, e, present, failed, labels, scored.scored() if has_scores else None, kept, spans.labelled
        )

    def example_arrays(self, predictions: Iterable[Prediction]) -> ExampleArrays:
        """Per example, in example order: P/R/F1 per level, token and character counts and IoU/Cor (NaN without
        soft labels): what a paired bootstrap of runs resamples (`shambench.reporting.ranks`)."""
        pa = self._prediction_arrays(self._positioned(predictions))
        counts, prf, _ = self._counted(pa)
        iou, cor = _GroupContext(self, pa, counts, prf, None).soft_scores
        return ExampleArrays(prf=prf, token_counts=counts["token"], iou=iou, cor=cor, char_counts=counts["char"])

    def example_prf(self, predictions: Iterable[Prediction]) -> dict[str, np.ndarray]:
        """Per level in `LEVELS`, the per-example (precision, recall, F1): shape 3 × examples, in example order.

        What a paired comparison of two runs resamples (see `shambench.reporting.compare`).
        """
        return self._counted(self._prediction_arrays(self._positioned(predictions)))[1]

    def _counted(
        self, pa: _PredictionArrays
    ) -> tuple[dict[str, tuple[np.ndarray, np.ndarray, np.ndarray]], dict[str, np.ndarray], np.ndarray]:
        """Per-level (tp, predicted, gold) counts and per-example P/R/F1 of the prediction arrays, and which
        tokens the predicted spans overlap."""
        n = len(self.corpus)
        tok_pred = covered(self.tokens.starts, self.tokens.ends, pa.starts, pa.ends)
        unit_pred = covered(self.units.starts, self.units.ends, pa.starts, pa.ends)
        for i, lab in pa.sentence_labels.items():
            first = int(self.units.first[i])
            unit_pred[first : first + len(lab)] = np.array(lab, bool)
        counts = {
            "token": self.tokens.counts(tok_pred, n),
            "sentence": self.units.counts(unit_pred, n),
            "char": self._char_tp_pred_gold(pa),
        }
        prf = {lvl: np.stack(metrics.per_example_prf(*counts[lvl])) for lvl in LEVELS}
        return counts, prf, tok_pred

    def row_arrays(self, rows: RowPredictions) -> ExampleArrays:
        """Per example, in example order: P/R/F1 per level, token counts, and IoU/Cor (NaN without soft labels), of
        predictions given as columns, one row per example (what human agreement scores its rows with)."""
        n = len(self.corpus)
        offsets = np.repeat(self.corpus.offsets, np.diff(rows.spans.bounds))
        # Every row counts as predicted: a row without a usable prediction predicts nothing.
        pa = _PredictionArrays(
            rows.spans.starts + offsets,
            rows.spans.ends + offsets,
            np.ones(n, bool),
            np.zeros(n, bool),
            rows.sentence_labels,
            None,
            rows.kept,
            [],
        )
        counts, prf, _ = self._counted(pa)
        iou, cor = _GroupContext(self, pa, counts, prf, None).soft_scores
        return ExampleArrays(prf=prf, token_counts=counts["token"], iou=iou, cor=cor)

    def score(self, predictions: Iterable[Prediction] | Mapping[str, Prediction]) -> Results:
        """Results of the predictions; examples without one are scored as empty and counted."""
        return self.score_with_examples(predictions)[0]

    def score_with_examples(
        self, predictions: Iterable[Prediction] | Mapping[str, Prediction]
    ) -> tuple[Results, ExampleRows]:
        """The results and, in example order, each example's own scores (what `per_example.jsonl` holds; made
        one row at a time as they are read)."""
        if isinstance(predictions, Mapping):
            predictions = predictions.values()
        pa = self._prediction_arrays(self._positioned(predictions))
        counts, prf, tok_pred = self._counted(pa)
        n = len(self.corpus)
        token_scores = None
        if pa.scored is not None:
            token_scores = max_scores(self.tokens.starts, self.tokens.ends, *pa.scored)
        ctx = _GroupContext(self, pa, counts, prf, token_scores)
        partitions = {name: ctx.group(name, idx)[0] for name, idx in self.groups["partitions"].items()}
        task_scores = {name: ctx.group(name, idx) for name, idx in self.groups["tasks"].items()}
        results = Results(
            shambench_version=shambench_version(),
            git_commit=git_commit(),
            created_at=now_iso(),
            conventions=conventions(self.n_resamples, self.seed),
            n_examples=n,
            missing_predictions=int((~pa.present).sum()),
            failed_predictions=int(pa.failed.sum()),
            partitions=partitions,
            tasks={name: gs for name, (gs, _) in task_scores.items()},
            overall=self._overall({t: v for t, v in task_scores.items() if t not in self.step_tasks}),
            segmentation=self.segmentation,
            groups=ResultGroups(
                math=self._math_group(pa),
                agreement=self._agreement_group(pa),
                extended=self._extended_group(ctx, task_scores),
                types=types_group(self._typed_gold, Predicted(pa.starts, pa.ends, pa.labelled, tok_pred), self),
                **shared_task_groups(partitions, self.sources),
            ),
        )
        return results, ExampleRows(ctx)

    def agreement(self) -> AgreementReport:
        """The human agreement of the corpus's partitions with annotators (see `shambench.scoring.agreement`),
        computed once per scorer (it needs no prediction), or read from beside a kept corpus where it was computed
        before with the same resamples, seed and versions."""
        if self._human is None:
            from shambench.scoring.agreement import AgreementReport, report

            self._human = kept_beside(
                self.corpus,
                f"agreement-{self.n_resamples}-{self.seed}.json",
                f"{self.n_resamples}|{self.seed}|{_kept_versions()}",
                AgreementReport,
                lambda: report(self.corpus, self._leave_one_out, self.n_resamples, self.seed),
            )
        return self._human

    @cached_property
    def _leave_one_out(self) -> LeaveOneOut | None:
        """The leave-one-out rows, made once per scorer, and only when a prediction is scored against them or the
        human figures are computed; read from beside a kept corpus where they were made before (they need none of
        the annotators' own spans, which are then never read)."""
        from shambench.scoring.agreement import Rows, leave_one_out, rows_of

        rows = kept_beside(self.corpus, "leave-one-out.json", _kept_versions(), Rows, lambda: rows_of(self.corpus))
        return leave_one_out(self.corpus, rows, self._rows_scorer)

    def _rows_scorer(self, rows: Corpus) -> Scorer:
        """A scorer of rows made from this corpus (the leave-one-out golds), keeping its draws beside this corpus."""
        scorer = Scorer(rows, self.n_resamples, self.seed)
        scorer.draws_beside = self.draws_beside
        return scorer

    def _agreement_group(self, pa: _PredictionArrays) -> AgreementGroup | None:
        """The detector against the leave-one-out golds, beside the human figure, where annotators are known."""
        if not self.corpus.annotations:
            return None
        loo = self._leave_one_out
        if loo is None:
            return None
        from shambench.scoring.agreement import like_for_like

        columns = self._as_columns(pa)
        return like_for_like(loo, columns, self.agreement(), self._alternative_rows, self.alt_epsilon)

    @cached_property
    def _alternative_rows(self) -> dict[str, AlternativeRows]:
        """The rows of the alternative annotator test with the annotators' own alignments it compares with, made
        once per scorer (they need no prediction); the alignments are read from beside a kept corpus where they
        were made before."""
        from shambench.scoring.agreement import HumanAlignment, alternative_rows, human_alignment

        loo = self._leave_one_out
        assert loo is not None  # only asked for where there are leave-one-out rows
        alignment = kept_beside(
            self.corpus,
            "human-alignment.json",
            _kept_versions(),
            HumanAlignment,
            lambda: human_alignment(loo, self.corpus),
        )
        return alternative_rows(loo, self.corpus, alignment)

    def _as_columns(self, pa: _PredictionArrays) -> RowPredictions:
        """The prediction arrays as columns, one row per example (spans in order, offsets in the response)."""
        owner = self.corpus.owner_of(pa.starts)
        order = np.argsort(owner, kind="stable")
        bounds = np.concatenate([[0], np.cumsum(np.bincount(owner, minlength=len(self.corpus)))]).astype(np.int64)
        local = self.corpus.offsets[owner[order]]
        # No scores: a row pass reads the spans' scores only for Cor, from the kept predictions.
        spans = Ranges(
            bounds=bounds,
            starts=pa.starts[order] - local,
            ends=pa.ends[order] - local,
            values=np.full(len(order), np.nan),
        )
        return RowPredictions(spans=spans, sentence_labels=pa.sentence_labels, kept=pa.kept)

    def _extended_group(
        self, ctx: _GroupContext, task_scores: dict[str, tuple[GroupScores, np.ndarray]]
    ) -> ExtendedView | None:
        """The extended suite's view, when an added partition was scored (see `shambench.scoring.extended`)."""
        members = {g: idx for g, idx in self.groups.get("extended", {}).items() if g not in self.step_tasks}
        if not members:
            return None
        scores = {}
        for name, idx in members.items():
            same = name in self.groups["tasks"] and np.array_equal(self.groups["tasks"][name], idx)
            # A group that is also a paper task, with the same examples, keeps that task's scores and replicates.
            scores[name] = task_scores[name] if same else ctx.group(f"extended:{name}", idx)
        overall = self._overall(scores)
        assert overall is not None  # members is not empty
        partitions: dict[str, list[str]] = {}
        for partition in self.groups["partitions"]:
            group = extended_group(partition, self.sources[partition])
            if group in members:
                partitions.setdefault(group, []).append(partition)
        view = ExtendedView(groups={g: gs for g, (gs, _) in scores.items()}, partitions=partitions, overall=overall)
        return view

    @cached_property
    def _typed_gold(self) -> TypedGold | None:
        """The gold of every error type (`shambench.scoring.typed`), prepared once; None where no span has one."""
        return TypedGold.of(self.corpus)

    def _math_group(self, pa: _PredictionArrays) -> MathGroup | None:
        """Step-level (math) metrics in their own group, apart from the overall (see `shambench.scoring.steps`);
        None without step examples."""
        step_examples = list(self.corpus.with_steps.values())
        if not step_examples:
            return None
        predictions = {self.corpus.ids[i]: p for i, p in pa.kept.items()}
        return math_group(step_examples, predictions, seed=self.seed)

    def _char_tp_pred_gold(self, pa: _PredictionArrays) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-example character true positives, predicted and gold counts: |P∩G| = |P| + |G| - |P∪G|."""
        n = len(self.corpus)
        gs, ge, g_owner = self.gold_chars
        p_owner = self.corpus.owner_of(pa.starts)
        pred = char_counts(pa.starts, pa.ends, p_owner, n)
        union = char_counts(
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
    _replicates: dict[str, np.ndarray] = field(default_factory=dict)

    def row(self, i: int) -> ExampleScores:
        """Example `i`'s P/R/F1 per level (and IoU/Cor with soft labels), from the arrays the groups average."""
        sc, pa = self.scorer, self.pa
        iou, cor = (float(a[i]) for a in self.soft_scores) if sc.soft[i] else (None, None)
        status = "predicted" if pa.present[i] else "failed" if pa.failed[i] else "missing"
        levels = {
            lvl: PRF.model_validate(dict(zip(("precision", "recall", "f1"), self.prf[lvl][:, i].tolist())))
            for lvl in LEVELS
        }
        corpus = sc.corpus
        return ExampleScores(
            id=corpus.ids[i],
            dataset=corpus.dataset_of(i),
            task=corpus.task_of(i),
            status=status,
            iou=iou,
            cor=cor,
            **levels,
        )

    @cached_property
    def soft_scores(self) -> tuple[np.ndarray, np.ndarray]:
        """Per example, its Mu-SHROOM IoU and Cor (NaN without soft labels), computed once per pass for every
        example with soft labels at once."""
        sc = self.scorer
        n = len(sc.corpus)
        iou, cor = np.full(n, np.nan), np.full(n, np.nan)
        idx = np.flatnonzero(sc.soft)
        tp, pred, gold = (c[idx].astype(np.float64) for c in self.counts["char"])
        iou[idx] = metrics.iou(tp, pred + gold - tp)
        for run, members in enumerate(sc.soft_runs):
            lengths = sc.corpus.lengths[members]
            predicted = _soft_values(lengths, (self._pred_ranges(i) for i in members.tolist()))
            cor[members] = metrics.cor_many(sc.gold_soft(run), metrics.SoftVectors(predicted, lengths))
        return iou, cor

    @property
    def tokens(self) -> Units:
        """The corpus's tokens."""
        return self.scorer.tokens

    @property
    def soft(self) -> np.ndarray:
        """Per example, whether it carries gold soft labels."""
        return self.scorer.soft

    def replicates(self, group: Group) -> np.ndarray:
        """The group's bootstrap replicates of (token F1, sentence F1), drawn once per group and pass."""
        if group.name not in self._replicates:
            f1 = np.stack([self.prf[lvl][2][group.idx] for lvl in LEVELS])
            weights = self.scorer.bootstrap_weights(group.name, len(group.idx))
            self._replicates[group.name] = metrics.bootstrap_replicates(f1, weights)
        return self._replicates[group.name]

    def group(self, name: str, idx: np.ndarray) -> tuple[GroupScores, np.ndarray]:
        """A group's scores (every registered metric's figure) and its bootstrap replicates of (token F1, sentence
        F1)."""
        group = Group(name, idx)
        scores = GroupScores(
            n=len(idx),
            n_with_gold=int((self.scorer.gold_counts["token"][idx] > 0).sum()),
            missing_predictions=int((~self.pa.present[idx]).sum()),
            failed_predictions=int(self.pa.failed[idx].sum()),
            **figures(self, group),
        )
        return scores, self.replicates(group)

    def _pred_ranges(self, i: int) -> list[tuple[int, int, float]]:
        """Example `i`'s predicted soft labels as `(start, end, prob)`: its soft spans, else its scored ranges or
        spans (an unscored span counts 1.0); none without a usable prediction."""
        pred = self.pa.kept.get(i)
        if pred is None:
            return []
        if pred.soft_spans is not None:
            return [(r.start, r.end, r.prob) for r in pred.soft_spans]
        listed = pred.scores if pred.scores is not None else pred.spans
        return [(r.start, r.end, 1.0 if r.score is None else r.score) for r in listed]


class ExampleRows(Sequence[ExampleScores]):
    """Each example's own scores, in example order; a row is made when it is read, so a large corpus never holds
    them all at once."""

    def __init__(self, ctx: _GroupContext):
        self._ctx = ctx

    def __len__(self) -> int:
        return len(self._ctx.scorer.corpus)

    @overload
    def __getitem__(self, i: int) -> ExampleScores: ...

    @overload
    def __getitem__(self, i: slice) -> list[ExampleScores]: ...

    def __getitem__(self, i: int | slice) -> ExampleScores | list[ExampleScores]:
        if isinstance(i, slice):
            return [self._ctx.row(k) for k in range(*i.indices(len(self)))]
        k = i + len(self) if i < 0 else i
        if not 0 <= k < len(self):
            raise IndexError(i)
        return self._ctx.row(k)


def _soft_values(lengths: np.ndarray, ranges: Iterable[Iterable[tuple[int, int, float]]]) -> np.ndarray:
    """Per-character probabilities of items of `lengths` laid end to end, each item's ranges written in the order
    given (a later one overwrites)."""
    values = np.zeros(int(lengths.sum()))
    for offset, length, item in zip((np.cumsum(lengths) - lengths).tolist(), lengths.tolist(), ranges):
        for start, end, prob in item:
            values[offset + start : offset + min(end, length)] = prob
    return values


# Fields the scorer never reads: left out of the examples and predictions that are only scored, as each line is read
# (the corpus keeps none of them; see `shambench.scoring.corpus`).
UNSCORED_EXAMPLE_FIELDS = ("question", "context")
UNSCORED_PREDICTION_FIELDS = ("raw", "meta")


def score(
    examples: Iterable[Example], predictions: Iterable[Prediction], n_resamples: int = 1000, seed: int = 0
) -> Results:
    """Score predictions against examples in one call (see `Scorer` to rescore cheaply)."""
    return Scorer(examples, n_resamples=n_resamples, seed=seed).score(predictions)
