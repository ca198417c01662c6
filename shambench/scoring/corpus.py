"""What the scorer keeps of the examples: columns, not objects.

`Corpus.of(examples)` reads the examples once, in chunks, and keeps only what scoring reads: ids, partitions, tasks,
response lengths, gold spans, and the tokens and sentence units of every response laid end to end on one global
character axis (see `shambench.scoring.scorer`). Response texts, questions and contexts are dropped chunk by chunk,
so an iterator over a file's examples is scored without ever holding them all. Only examples with steps are kept
whole (the math metrics read them); of examples with soft labels (Mu-SHROOM's Cor), their soft labels; of examples
with individual annotators, their readings as columns (`Readings`: human agreement, `shambench.scoring.agreement`).
"""

from __future__ import annotations

import array
import math
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

from shambench.errors import ScoringError
from shambench.memory import collector_paused
from shambench.schema import Annotations, Example, Prediction
from shambench.scoring.arrays import runs
from shambench.scoring.text import Segmentation, Segmenter, convention, example_language

# Examples segmented together: large enough that a chunk of uncached texts is tokenised on every core, small enough
# that its texts cost little memory (about 10 MB of real responses).
CHUNK_EXAMPLES = 16_384
_INT32_MAX = int(np.iinfo(np.int32).max)
# A soft label as the scorer keeps it: start, end, probability (`SoftSpan`'s fields).
SoftRange = tuple[int, int, float]


def covered(starts: np.ndarray, ends: np.ndarray, s: np.ndarray, e: np.ndarray) -> np.ndarray:
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


@dataclass
class Units:
    """Items of one kind (tokens or sentence units) of all examples, on the global axis."""

    starts: np.ndarray
    """Global start offsets, sorted (int32 while the corpus has fewer than 2**31 characters, else int64)."""
    ends: np.ndarray
    """Global end offsets (half-open), same dtype."""
    owner: np.ndarray
    """The example (its position in the corpus) each item belongs to, int32."""
    gold: np.ndarray
    """Whether a gold span overlaps the item."""
    first: np.ndarray
    """Per example, the position of its first item."""
    count: np.ndarray
    """Per example, how many items it has."""

    def counts(self, pred: np.ndarray, n_examples: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """Per-example true positives, predicted positives and gold positives."""
        # Counting the owners of the positive items only: a weighted bincount would make float64 copies of the masks.
        masks = (pred & self.gold, pred, self.gold)
        tp, predicted, positive = (np.bincount(self.owner[mask], minlength=n_examples) for mask in masks)
        return tp, predicted, positive

    def copied(self, rows: np.ndarray, shift: np.ndarray, gold_starts: np.ndarray, gold_ends: np.ndarray) -> Units:
        """The items of the examples at `rows` (repeats allowed), in that order, each example's moved by its
        `shift` on the axis, with positives from the given gold ranges."""
        count = self.count[rows]
        first = np.cumsum(count) - count
        starts, ends = self._moved(rows, first, count, shift)
        owner = np.repeat(np.arange(len(rows), dtype=np.int32), count)
        return Units(starts, ends, owner, covered(starts, ends, gold_starts, gold_ends), first, count)

    def _moved(
        self, rows: np.ndarray, first: np.ndarray, count: np.ndarray, shift: np.ndarray
    ) -> tuple[np.ndarray, np.ndarray]:
        """The bounds of `copied`, computed in place in the items' dtype: the copies of a large corpus's rows (one
        per item and annotator) hold tens of millions of items, and each int64 temporary of them costs 8 bytes
        an item."""
        take = np.repeat(self.first[rows] - first, count)
        take += np.arange(len(take))
        moved = np.repeat(shift.astype(self.starts.dtype), count)
        starts, ends = self.starts[take], self.ends[take]
        starts += moved
        ends += moved
        return starts, ends


class _Axis:
    """Bounds of one kind of item, gathered chunk by chunk and laid on the global axis at the end."""

    def __init__(self) -> None:
        self.starts: list[np.ndarray] = []
        self.ends: list[np.ndarray] = []
        self.sizes: list[np.ndarray] = []

    def add(self, starts: list[np.ndarray], ends: list[np.ndarray], offsets: np.ndarray, dtype: type) -> None:
        """The local bounds of a chunk's examples, moved to the global axis by their examples' offsets."""
        sizes = np.fromiter(map(len, starts), np.int64, len(starts))
        shift: np.ndarray = np.repeat(offsets, sizes).astype(dtype)
        for parts, out in ((starts, self.starts), (ends, self.ends)):
            glob: np.ndarray = np.concatenate([*parts, np.empty(0, dtype)], dtype=dtype, casting="same_kind")
            glob += shift
            out.append(glob)
        self.sizes.append(sizes)

    def units(self, dtype: type, gold_starts: np.ndarray, gold_ends: np.ndarray) -> Units:
        """The items of every chunk as one `Units` (each list freed as soon as it is joined)."""
        starts = _joined(self.starts, dtype)
        ends = _joined(self.ends, dtype)
        count = _joined(self.sizes, np.int64)
        owner = np.repeat(np.arange(len(count), dtype=np.int32), count)
        return Units(
            starts, ends, owner, covered(starts, ends, gold_starts, gold_ends), np.cumsum(count) - count, count
        )


def _joined(parts: list[np.ndarray], dtype: type) -> np.ndarray:
    out: np.ndarray = np.concatenate([*parts, np.empty(0, dtype)], dtype=dtype, casting="same_kind")
    parts.clear()
    return out


@dataclass
class Ranges:
    """Lists of character ranges, one list per reading, laid end to end."""

    bounds: np.ndarray
    """Where each list starts, and one past the last range at the end (int64): list k is `bounds[k]:bounds[k+1]`."""
    starts: np.ndarray
    """Start offsets in the response (int64)."""
    ends: np.ndarray
    """End offsets (half-open, int64)."""
    values: np.ndarray
    """Per range, a span's score (NaN for none) or a soft range's probability (float64)."""

    def lists(self, first: int, last: int) -> list[list[tuple[int, int, float]]]:
        """Lists `first:last`, each as `(start, end, value)` tuples."""
        bounds = self.bounds[first : last + 1].tolist()
        cut = slice(bounds[0], bounds[-1])
        ranges = list(zip(self.starts[cut].tolist(), self.ends[cut].tolist(), self.values[cut].tolist()))
        return [ranges[lo - bounds[0] : hi - bounds[0]] for lo, hi in zip(bounds, bounds[1:])]

    def taken(self, picks: np.ndarray) -> Ranges:
        """Lists `picks[k]` of these as list k, in a few numpy calls (a list may be taken several times)."""
        sizes = (self.bounds[1:] - self.bounds[:-1])[picks]
        at = runs(self.bounds[picks], sizes)
        bounds = np.concatenate([[0], np.cumsum(sizes)]).astype(np.int64)
        return Ranges(bounds=bounds, starts=self.starts[at], ends=self.ends[at], values=self.values[at])


@dataclass
class RowPredictions:
    """Predictions as columns, one row per example of a corpus: what the scorer scores against repeated rows
    (human agreement's leave-one-out rows) without an object per span."""

    spans: Ranges
    """Per row, its predicted spans (offsets in the row's response; usable predictions only: a row without one
    predicts nothing)."""
    sentence_labels: dict[int, list[int]]
    """The rows' `Prediction.sentence_labels`, where given."""
    kept: dict[int, Prediction]
    """The predictions of the rows whose scoring reads more than spans (the soft labels that Cor reads)."""

    def taken(self, picks: np.ndarray) -> RowPredictions:
        """Row `picks[k]` of these as row k (a row may be taken several times)."""
        listed = picks.tolist()
        return RowPredictions(
            spans=self.spans.taken(picks),
            sentence_labels={k: self.sentence_labels[i] for k, i in enumerate(listed) if i in self.sentence_labels},
            kept={k: self.kept[i] for k, i in enumerate(listed) if i in self.kept},
        )


class _RangesBuilder:
    def __init__(self) -> None:
        self.bounds, self.starts, self.ends = array.array("q", [0]), array.array("q"), array.array("q")
        self.values = array.array("d")

    def add(self, ranges: Iterable[tuple[int, int, float]]) -> None:
        for start, end, value in ranges:
            self.starts.append(start)
            self.ends.append(end)
            self.values.append(value)
        self.bounds.append(len(self.starts))

    def ranges(self) -> Ranges:
        bounds, starts, ends = (np.array(a, np.int64) for a in (self.bounds, self.starts, self.ends))
        return Ranges(bounds=bounds, starts=starts, ends=ends, values=np.array(self.values, np.float64))


@dataclass
class Readings:
    """The individual annotators' readings (`Example.annotations`) of the examples that have them, as columns: what
    human agreement reads of them (`shambench.scoring.agreement`), without the spans' labels. As `Annotations`
    objects they took about 13 KB an annotated example, most of a large corpus's memory."""

    examples: np.ndarray
    """The positions in the corpus of the examples with readings, increasing (int64)."""
    first: np.ndarray
    """Where each of those examples' readings start, and the number of readings at the end (int64): example j's
    are `first[j]:first[j+1]`."""
    rule_code: np.ndarray
    """Per example, its `Annotations.rule` as a position in `rules` (int32)."""
    rules: list[str]
    """The rules, in order of first appearance."""
    reproduces_gold: np.ndarray
    """Per example, `Annotations.reproduces_gold`: 1, 0, or -1 where not checked (int8)."""
    unplaced: dict[int, dict[str, int]]
    """`Annotations.unplaced` of the examples that have any, by position in the corpus."""
    annotators: list[str]
    """Per reading, its annotator."""
    spans: Ranges
    """Per reading, the annotator's spans (`Reading.spans`), with their scores."""
    others: Ranges
    """Per reading, the gold of the other annotators (`Reading.others`)."""
    others_soft: Ranges
    """Per reading, the other annotators' shares per character (`Reading.others_soft`; empty where None)."""
    soft_given: np.ndarray
    """Per reading, whether `Reading.others_soft` is given (bool)."""
    index: dict[int, int] = field(init=False, repr=False)
    """The number of each example with readings (its row in the per-example columns), by position in the corpus."""

    def __post_init__(self) -> None:
        self.index = {i: j for j, i in enumerate(self.examples.tolist())}

    @classmethod
    def none(cls) -> Readings:
        """No readings."""
        return _ReadingsBuilder().readings()

    def __contains__(self, i: object) -> bool:
        return i in self.index

    def __len__(self) -> int:
        return len(self.examples)

    def arrays(self) -> dict[str, np.ndarray]:
        """The columns that are arrays, by their stored names (`spans.starts`, ...)."""
        out = {name: getattr(self, name) for name in _READING_ARRAYS}
        for kind in _READING_RANGES:
            out |= {f"{kind}.{name}": getattr(getattr(self, kind), name) for name in _RANGE_ARRAYS}
        return out

    def names(self) -> dict[str, Any]:
        """The columns that are not arrays, as JSON values."""
        return {"rules": self.rules, "annotators": self.annotators, "unplaced": list(self.unplaced.items())}

    @classmethod
    def stored(cls, arrays: Mapping[str, np.ndarray], names: dict[str, Any]) -> Readings:
        """Readings from their `arrays()` and `names()`."""
        ranges = {
            kind: Ranges(**{name: arrays[f"{kind}.{name}"] for name in _RANGE_ARRAYS}) for kind in _READING_RANGES
        }
        return cls(
            examples=arrays["examples"],
            first=arrays["first"],
            rule_code=arrays["rule_code"],
            rules=names["rules"],
            reproduces_gold=arrays["reproduces_gold"],
            unplaced={i: dict(u) for i, u in names["unplaced"]},
            annotators=names["annotators"],
            spans=ranges["spans"],
            others=ranges["others"],
            others_soft=ranges["others_soft"],
            soft_given=arrays["soft_given"],
        )


_READING_ARRAYS = ("examples", "first", "rule_code", "reproduces_gold", "soft_given")
_READING_RANGES = ("spans", "others", "others_soft")
_RANGE_ARRAYS = ("bounds", "starts", "ends", "values")


class _ReadingsBuilder:
    """`Readings` gathered one annotated example at a time (in compact arrays: no object per span is kept)."""

    def __init__(self) -> None:
        self.examples, self.first = array.array("q"), array.array("q", [0])
        self.rule_code, self.reproduces, self.soft_given = array.array("i"), array.array("b"), array.array("b")
        self.rules: dict[str, int] = {}
        self.names: dict[str, str] = {}  # one string per annotator id, however many readings
        self.annotators: list[str] = []
        self.unplaced: dict[int, dict[str, int]] = {}
        self.spans, self.others, self.others_soft = _RangesBuilder(), _RangesBuilder(), _RangesBuilder()

    def add(self, i: int, ann: Annotations) -> None:
        self.examples.append(i)
        self.rule_code.append(self.rules.setdefault(ann.rule, len(self.rules)))
        self.reproduces.append(-1 if ann.reproduces_gold is None else int(ann.reproduces_gold))
        if ann.unplaced:
            self.unplaced[i] = dict(ann.unplaced)
        for r in ann.readings:
            self.annotators.append(self.names.setdefault(r.annotator, r.annotator))
            self.spans.add((s.start, s.end, math.nan if s.score is None else s.score) for s in r.spans)
            self.others.add((s.start, s.end, math.nan if s.score is None else s.score) for s in r.others)
            self.others_soft.add((s.start, s.end, s.prob) for s in r.others_soft or ())
            self.soft_given.append(r.others_soft is not None)
        self.first.append(len(self.annotators))

    def readings(self) -> Readings:
        return Readings(
            examples=np.array(self.examples, np.int64),
            first=np.array(self.first, np.int64),
            rule_code=np.array(self.rule_code, np.int32),
            rules=list(self.rules),
            reproduces_gold=np.array(self.reproduces, np.int8),
            unplaced=self.unplaced,
            annotators=self.annotators,
            spans=self.spans.ranges(),
            others=self.others.ranges(),
            others_soft=self.others_soft.ranges(),
            soft_given=np.array(self.soft_given, bool),
        )


@dataclass
class Corpus:
    """The examples as the scorer reads them (see the module docstring)."""

    ids: list[str]
    """Example ids, in input order."""
    index: dict[str, int]
    """Position of each id."""
    partition_code: np.ndarray
    """Per example, its `task/dataset` partition as a position in `partitions`."""
    partitions: list[str]
    """The partition names, in order of first appearance."""
    task_code: np.ndarray
    """Per example, its task as a position in `tasks`."""
    tasks: list[str]
    """The task names, in order of first appearance."""
    dataset_code: np.ndarray
    """Per example, its dataset as a position in `datasets`."""
    datasets: list[str]
    """The dataset names, in order of first appearance."""
    lengths: np.ndarray
    """Response lengths in characters (int64)."""
    offsets: np.ndarray
    """Where each response starts on the global axis (int64)."""
    gold_starts: np.ndarray
    """Global starts of the gold spans, in example order (int64)."""
    gold_ends: np.ndarray
    """Global ends of the gold spans (int64)."""
    gold_label_code: np.ndarray
    """Per gold span, its `Span.label` (an error type, or several joined by `|`) as a position in `gold_labels`;
    -1 for a span without a label (int32)."""
    gold_labels: list[str]
    """The gold spans' distinct labels, in order of first appearance."""
    tokens: Units
    """Non-whitespace tokens."""
    units: Units
    """Sentence units, or steps for examples that have them."""
    soft: dict[int, list[SoftRange]]
    """Gold soft labels (`Example.soft_spans` as `(start, end, prob)`) of the examples that have them, by
    position."""
    with_steps: dict[int, Example]
    """The examples that have steps, whole, by position (the math metrics read them)."""
    segmentation: dict[str, str]
    """Per partition, the segmentation conventions of its languages."""
    annotations: Readings
    """The individual annotators' readings of the examples that have them."""
    kept: Path | None = None
    """The folder this corpus is kept in (`file_corpus`), beside which what is computed from the corpus alone is
    kept too (`kept_beside`); None when it is not kept."""
    reread: bool = False
    """Whether it was read from that folder: its file was scored before, and is likely to be scored again."""

    @classmethod
    def of(cls, examples: Iterable[Example]) -> Corpus:
        """The corpus of the examples, read once, chunk by chunk."""
        ids: list[str] = []
        index: dict[str, int] = {}
        codes: dict[str, dict[str, int]] = {"partition": {}, "task": {}, "dataset": {}}
        coded: dict[str, list[int]] = {kind: [] for kind in codes}
        lengths: list[int] = []
        gold: tuple[list[int], list[int]] = ([], [])
        labels: dict[str, int] = {}
        label_codes: list[int] = []
        soft: dict[int, list[SoftRange]] = {}
        with_steps: dict[int, Example] = {}
        annotations = _ReadingsBuilder()
        languages: dict[str, dict[str, None]] = {}
        usable: set[str] = set()
        tokens, units = _Axis(), _Axis()
        total = 0
        wide = False
        chunk: list[Example] = []
        offsets: list[int] = []

        def segmented(segs: list[Segmentation], dtype: type) -> None:
            chunk_offsets = np.array(offsets, np.int64)
            tokens.add([s.token_starts for s in segs], [s.token_ends for s in segs], chunk_offsets, dtype)
            bounds = [_unit_bounds(ex, seg.sentence_starts, seg.sentence_ends) for ex, seg in zip(chunk, segs)]
            units.add([b[0] for b in bounds], [b[1] for b in bounds], chunk_offsets, dtype)
            chunk.clear()
            offsets.clear()

        # Each response is handed to the segmenter as it is read, so tokenising runs beside reading. What is kept
        # (the annotators' readings above all) outlives the reading and forms no cycles: worker processes forked
        # meanwhile start with the collector paused too (tokenising makes none either).
        with collector_paused(), Segmenter() as segmenter:
            for i, ex in enumerate(examples):
                if index.setdefault(ex.id, i) != i:
                    raise ScoringError(f"duplicate example id {ex.id!r}", ex.id)
                ids.append(ex.id)
                for kind, value in (("partition", ex.partition), ("task", ex.task), ("dataset", ex.dataset)):
                    coded[kind].append(codes[kind].setdefault(value, len(codes[kind])))
                offsets.append(total)
                lengths.append(len(ex.response))
                for span in ex.hallu_spans:
                    gold[0].append(span.start + total)
                    gold[1].append(span.end + total)
                    label_codes.append(-1 if span.label is None else labels.setdefault(span.label, len(labels)))
                if ex.soft_spans is not None:
                    soft[i] = [(s.start, s.end, s.prob) for s in ex.soft_spans]
                if ex.steps:
                    with_steps[i] = ex
                if ex.annotations is not None and ex.annotations.readings:
                    annotations.add(i, ex.annotations)
                total += len(ex.response)
                wide = wide or total > _INT32_MAX
                lang = example_language(ex.id, ex.meta, usable)
                languages.setdefault(ex.partition, {})[lang] = None
                segmenter.add(ex.response, lang)
                chunk.append(ex)
                # int32 offsets while the corpus fits (halving the item arrays); a chunk past that goes int64.
                if len(chunk) == CHUNK_EXAMPLES:
                    segmented(segmenter.take(), np.int64 if wide else np.int32)
            if chunk:
                segmented(segmenter.take(), np.int64 if wide else np.int32)
        if not ids:
            raise ScoringError("no examples to score")
        length_array = np.array(lengths, np.int64)
        gs, ge = (np.array(g, np.int64) for g in gold)
        axis = np.int64 if wide else np.int32
        return cls(
            ids=ids,
            index=index,
            partition_code=np.array(coded["partition"], np.int32),
            partitions=list(codes["partition"]),
            task_code=np.array(coded["task"], np.int32),
            tasks=list(codes["task"]),
            dataset_code=np.array(coded["dataset"], np.int32),
            datasets=list(codes["dataset"]),
            lengths=length_array,
            offsets=np.cumsum(length_array) - length_array,
            gold_starts=gs,
            gold_ends=ge,
            gold_label_code=np.array(label_codes, np.int32),
            gold_labels=list(labels),
            tokens=tokens.units(axis, gs, ge),
            units=units.units(axis, gs, ge),
            soft=soft,
            with_steps=with_steps,
            segmentation={p: "; ".join(map(convention, ls)) for p, ls in sorted(languages.items())},
            annotations=annotations.readings(),
        )

    def retargeted(
        self,
        rows: Sequence[int],
        ids: Sequence[str],
        golds: Sequence[Sequence[tuple[int, int]]],
        soft: Sequence[list[SoftRange] | None],
    ) -> Corpus:
        """A corpus whose example k copies example `rows[k]` (its partition, response length, tokens and sentence
        units: nothing is segmented again), named `ids[k]`, with `golds[k]` (`(start, end)` ranges) and `soft[k]`
        as its gold instead of its own (without labels). Repeats are allowed: this is how one response is scored
        against several golds."""
        at = np.asarray(rows, np.int64)
        lengths = self.lengths[at]
        offsets = np.cumsum(lengths) - lengths
        gold = [(start + int(off), end + int(off)) for off, spans in zip(offsets, golds) for start, end in spans]
        gs, ge = (np.array([g[k] for g in gold], np.int64) for k in (0, 1))
        shift = offsets - self.offsets[at]
        partition_code, partitions = _recoded(self.partition_code[at], self.partitions)
        task_code, tasks = _recoded(self.task_code[at], self.tasks)
        dataset_code, datasets = _recoded(self.dataset_code[at], self.datasets)
        return Corpus(
            ids=list(ids),
            index={id_: k for k, id_ in enumerate(ids)},
            partition_code=partition_code,
            partitions=partitions,
            task_code=task_code,
            tasks=tasks,
            dataset_code=dataset_code,
            datasets=datasets,
            lengths=lengths,
            offsets=offsets,
            gold_starts=gs,
            gold_ends=ge,
            gold_label_code=np.full(len(gs), -1, np.int32),
            gold_labels=[],
            tokens=self.tokens.copied(at, shift, gs, ge),
            units=self.units.copied(at, shift, gs, ge),
            soft={k: s for k, s in enumerate(soft) if s is not None},
            with_steps={},
            segmentation={p: self.segmentation[p] for p in partitions if p in self.segmentation},
            annotations=Readings.none(),
        )

    def __len__(self) -> int:
        return len(self.ids)

    def owner_of(self, global_starts: np.ndarray) -> np.ndarray:
        """The example each global offset falls in (empty responses own nothing)."""
        return np.searchsorted(self.offsets, global_starts, side="right") - 1

    def dataset_of(self, i: int) -> str:
        """The dataset of the example at position `i`."""
        return self.datasets[self.dataset_code[i]]

    def task_of(self, i: int) -> str:
        """The task of the example at position `i`."""
        return self.tasks[self.task_code[i]]


def _recoded(codes: np.ndarray, names: list[str]) -> tuple[np.ndarray, list[str]]:
    """Codes and names of only the names that occur, in order of first appearance."""
    present = list(dict.fromkeys(codes.tolist()))
    new = {old: k for k, old in enumerate(present)}
    return np.array([new[c] for c in codes.tolist()], np.int32), [names[c] for c in present]


def _unit_bounds(ex: Example, sentence_starts: np.ndarray, sentence_ends: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    if ex.steps:
        return np.array([s.start for s in ex.steps], np.int64), np.array([s.end for s in ex.steps], np.int64)
    return sentence_starts, sentence_ends
