"""Per error type: how much of each type's gold a detector finds, and for typed predictions, typed P/R/F1.

Sources that give their gold spans error types (RAGTruth's four label types, FAVABench's six, FaithBench's
Unwanted/Questionable, FELM's four) keep them in `Span.label`; which released label is which type is the adapter's
rule (its `span_types`), so a gold span's label here is its type, or several joined by `|`: a span carrying several
types counts for each. The figures are per dataset (one source), over its examples in the run, in
`results.json` under `groups.types`; a dataset without typed gold has none.

For every detector, per type T of a dataset:

- character recall: the gold characters of type T that any predicted span covers, over all gold characters of
  type T, pooled over the dataset's examples. Characters are those of the response's tokens (every character but
  whitespace): annotators' spans differ in the white space they take in (3 FaithBench spans end in a line break
  past the summary's last word), which no detector can be asked to match;
- token recall: the same over the tokens that a gold span of type T overlaps, a token counting as found when a
  predicted span overlaps it (the headline token metrics' rule);

each with a percentile bootstrap interval over the dataset's examples (resamples drawing no gold of the type are
left out).

For a detector whose predicted spans carry labels (a type, or several joined by `|`), type-aware precision, recall
and F1 too: the characters (tokens) of its spans of type T against those of the gold spans of type T, pooled, with
an interval on F1.

Only the gold's columns and the prediction arrays the scorer already has are read: the gold of every type is
prepared once per scorer (`TypedGold.of`), and each scoring resamples only the examples that have typed gold, with
their draws made once per scorer (`TypedGold.draws`), or read from beside a kept corpus where they were made before
(`Source.kept_arrays`): they need no prediction.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from dataclasses import dataclass, field
from typing import Protocol

import numpy as np
from pydantic import ConfigDict

from shambench.documented import DOCUMENTED
from shambench.schema import Model, Name
from shambench.scoring import metrics
from shambench.scoring.arrays import runs
from shambench.scoring.corpus import Corpus, Units

TYPES_CONVENTION = (
    "per dataset and gold error type (a span's label, as its adapter maps the source's labels; a span with several "
    "types counts for each): character recall = gold characters of the type covered by any predicted span / gold "
    "characters of the type, pooled over the dataset's examples, whitespace characters left out; token recall likewise over the tokens a gold span "
    "of the type overlaps (a token is found when a predicted span overlaps it); intervals: percentile bootstrap "
    "over the dataset's examples, resamples without gold of the type left out; typed_char / typed_token (only for "
    "predictions whose spans carry labels): pooled precision/recall/F1 of the predicted spans labelled with the "
    "type against the gold spans of the type, interval on F1"
)


class Recall(Model):
    """A pooled recall with its bootstrap interval."""

    model_config = DOCUMENTED | ConfigDict(allow_inf_nan=False)

    recall: float
    """Found gold units of the type / all gold units of the type, pooled over the examples (0 when the type's
    spans hold no unit: white space only)."""
    ci: tuple[float, float] | None = None
    """Seeded percentile-bootstrap 95% interval over examples; None when no resample holds gold of the type."""


class TypedPRF(Model):
    """Type-aware pooled precision, recall and F1: predicted spans of one type against gold spans of that type."""

    model_config = DOCUMENTED | ConfigDict(allow_inf_nan=False)

    precision: float
    """Units of predicted spans of the type that gold spans of the type also cover / units of predicted spans of
    the type (0 when none is predicted)."""
    recall: float
    """The same shared units / units of gold spans of the type."""
    f1: float
    """Harmonic mean of the two (0 when both are 0)."""
    ci: tuple[float, float] | None = None
    """Seeded percentile-bootstrap 95% interval of F1 over examples."""


class TypeScores(Model):
    """One gold error type of one dataset."""

    model_config = DOCUMENTED | ConfigDict(allow_inf_nan=False)

    n_examples: int
    """Examples with a gold span of the type."""
    gold_spans: int
    """Gold spans carrying the type (merged spans: a span may carry several types)."""
    gold_chars: int
    """Characters of those spans, whitespace left out."""
    gold_tokens: int
    """Tokens those spans overlap."""
    char_recall: Recall
    """Share of the type's gold characters that predicted spans cover."""
    token_recall: Recall
    """Share of the type's gold tokens that predicted spans overlap."""
    predicted_spans: int | None = None
    """Predicted spans labelled with the type; None when the predictions carry no labels."""
    typed_char: TypedPRF | None = None
    """Type-aware character P/R/F1; None when the predictions carry no labels."""
    typed_token: TypedPRF | None = None
    """Type-aware token P/R/F1; None when the predictions carry no labels."""


class DatasetTypes(Model):
    """The per-type figures of one dataset (source)."""

    model_config = DOCUMENTED | ConfigDict(allow_inf_nan=False)

    n: int
    """Examples of the dataset scored."""
    partitions: list[Name]
    """Its `task/dataset` partitions in the run."""
    untyped_gold_spans: int
    """Gold spans without a type (in no type's figures; FELM's untyped false segments)."""
    labelled_predictions: int
    """Predicted spans in the dataset that carry a label (0: no type-aware figures)."""
    types: dict[str, TypeScores]
    """Per gold type, in alphabetical order."""


class TypesGroup(Model):
    """Per error type figures of every dataset whose gold spans carry types."""

    model_config = DOCUMENTED

    convention: str = TYPES_CONVENTION
    """How the figures are computed."""
    datasets: dict[str, DatasetTypes]
    """Per dataset name, in alphabetical order."""


def tokens_overlapping(units: Units, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
    """The positions (sorted, distinct) of the items that any range `[starts, ends)` overlaps by a character."""
    lo = np.searchsorted(units.ends, starts.astype(units.ends.dtype), side="right")
    hi = np.searchsorted(units.starts, ends.astype(units.starts.dtype), side="left")
    idx = runs(lo, np.maximum(hi - lo, 0))
    # Ranges in order (the gold's) give their items in order, repeated only where two share one: dropping the
    # repeats is then cheaper than sorting.
    if len(idx) > 1 and (idx[1:] >= idx[:-1]).all():
        return idx[np.concatenate(([True], idx[1:] != idx[:-1]))]
    return np.unique(idx)


def type_names(label: str) -> list[str]:
    """The types a span's label names (`a|b` -> `a`, `b`)."""
    return [t for t in label.split("|") if t]


@dataclass
class _TypeGold:
    """The gold spans of one type in one dataset, on the corpus's global axis, and their counts per member of the
    dataset (its examples in id order)."""

    starts: np.ndarray
    ends: np.ndarray
    owner: np.ndarray
    """Per span, its example (corpus position)."""
    member: np.ndarray
    """Per span, its example's position among the dataset's members."""
    token_idx: np.ndarray
    """The tokens (corpus positions, sorted) a gold span of the type overlaps."""
    token_member: np.ndarray
    """Per token of `token_idx`, its example's position among the members."""
    pieces: np.ndarray
    """The positions of the spans' pieces among the dataset's (`_DatasetGold.piece_starts`)."""
    chars: np.ndarray
    """Per member, the gold characters of the type."""
    tokens: np.ndarray
    """Per member, the gold tokens of the type."""


@dataclass
class _DatasetGold:
    """One dataset's members (in id order, as the scorer's groups), partitions and typed gold."""

    code: int
    members: np.ndarray
    partitions: list[str]
    untyped: int
    types: dict[str, _TypeGold]
    piece_starts: np.ndarray
    piece_ends: np.ndarray
    """The typed gold spans' characters without white space, as ranges (each span cut by the words it holds):
    what the character figures count, so that a scoring searches the predicted ranges once per dataset, and never
    the corpus's words."""
    piece_member: np.ndarray
    """Per piece, its example's position among the members."""
    weights: dict[str, np.ndarray] = field(default_factory=dict)
    """Per type, the resamples' draw counts of the members with gold of the type (the only ones its sums read),
    members × resamples (float32; this layout halves einsum's time against the resamples' own), set once per
    scorer (`types_group`)."""
    gold_sums: dict[str, np.ndarray] = field(default_factory=dict)
    """Per type, the resamples' gold characters and tokens (2 × resamples), kept once computed."""

    def typed_members(self) -> np.ndarray:
        """The members with gold of some type (positions among the members, in order)."""
        return np.flatnonzero(np.any([g.chars > 0 for g in self.types.values()], axis=0))

    def drawn(self, draws: Iterable[np.ndarray]) -> np.ndarray:
        """How often each member with gold of some type (`typed_members`) is drawn in each of the dataset's
        resamples (`draws`: blocks of resamples × members): members × resamples, in the draws' own integer type
        (the types' members overlap: kept once, a type's rows are picked by `weigh`)."""
        typed = self.typed_members()
        return np.ascontiguousarray(np.concatenate([b[:, typed] for b in draws]).T)

    def weigh(self, drawn: np.ndarray) -> None:
        """Sets each type's `weights` from the `drawn` counts of the typed members: the rows of its own members."""
        typed = self.typed_members()
        self.weights = {t: drawn[np.flatnonzero(g.chars[typed] > 0)].astype(np.float32) for t, g in self.types.items()}

    def resampled(self, t: str, rows: np.ndarray) -> np.ndarray:
        """The sums of two per-member rows of type `t` (found characters and tokens, or the gold's) in every
        resample, over the members with gold of the type; rows of zeros (what `none` finds) cost nothing."""
        weights = self.weights[t]
        values = rows[:, self.types[t].chars > 0].astype(np.float32)
        if not values.any():
            return np.zeros((len(rows), weights.shape[1]))
        # einsum's own loop rather than BLAS, as in `metrics.bootstrap_replicates`.
        return np.einsum("ln,nr->lr", values, weights).astype(np.float64)


@dataclass
class TypedGold:
    """Every dataset's typed gold, prepared once per scorer: it needs no prediction."""

    datasets: dict[str, _DatasetGold]
    words: _Coverage
    """The characters of the corpus's tokens: every non-whitespace character, the unit of the character figures."""

    @classmethod
    def of(cls, corpus: Corpus) -> TypedGold | None:
        """The typed gold of a corpus; None when no gold span has a label."""
        codes = corpus.gold_label_code
        if not len(codes) or int(codes.max()) < 0:
            return None
        owner = corpus.owner_of(corpus.gold_starts)
        span_dataset = corpus.dataset_code[owner]
        by_id = np.argsort(np.array(corpus.ids), kind="stable")
        labelled = codes >= 0
        label_types = [set(type_names(label)) for label in corpus.gold_labels]
        words = _Coverage(corpus.tokens.starts.astype(np.int64), corpus.tokens.ends.astype(np.int64))
        datasets = {}
        for d in np.unique(span_dataset[labelled]).tolist():
            in_dataset = span_dataset == d
            typed = in_dataset & labelled
            members = by_id[corpus.dataset_code[by_id] == d]
            member_of = np.full(len(corpus), -1, np.int64)
            member_of[members] = np.arange(len(members))
            names = sorted({t for c in np.unique(codes[typed]).tolist() for t in label_types[c]})
            # Every typed span's pieces at once; each type takes those of its own spans.
            of, piece_starts, piece_ends = words.pieces(corpus.gold_starts[typed], corpus.gold_ends[typed])
            piece_member = member_of[owner[typed]][of]
            lengths = (piece_ends - piece_starts).astype(np.float64)
            types = {}
            for name in names:
                has = np.array([name in ts for ts in label_types], bool)
                mask = typed & has[np.maximum(codes, 0)]
                pieces = np.flatnonzero(mask[typed][of])
                chars = np.bincount(piece_member[pieces], weights=lengths[pieces], minlength=len(members))
                types[name] = _type_gold(corpus, mask, owner, member_of, pieces, chars.astype(np.int64))
            partitions = sorted({corpus.partitions[c] for c in np.unique(corpus.partition_code[members]).tolist()})
            untyped = int((in_dataset & ~labelled).sum())
            datasets[corpus.datasets[d]] = _DatasetGold(
                d, members, partitions, untyped, types, piece_starts, piece_ends, piece_member
            )
        return cls(dict(sorted(datasets.items())), words)

    def draws(self, resamples: Callable[[str, int], Iterable[np.ndarray]]) -> dict[str, np.ndarray]:
        """Every dataset's `drawn` counts, from its resamples as the group `types:<dataset>`."""
        return {name: ds.drawn(resamples(f"types:{name}", len(ds.members))) for name, ds in self.datasets.items()}


def _type_gold(
    corpus: Corpus, mask: np.ndarray, owner: np.ndarray, member_of: np.ndarray, pieces: np.ndarray, chars: np.ndarray
) -> _TypeGold:
    """The gold spans picked by `mask` (one type of one dataset) with their tokens and per-member counts."""
    s, e, o = corpus.gold_starts[mask], corpus.gold_ends[mask], owner[mask]
    token_idx = tokens_overlapping(corpus.tokens, s, e)
    token_member = member_of[corpus.tokens.owner[token_idx]]
    tokens = np.bincount(token_member, minlength=len(chars))
    return _TypeGold(s, e, o, member_of[o], token_idx, token_member, pieces, chars, tokens)


class _Coverage:
    """The characters that a set of ranges covers, as disjoint runs in order, so that how many of them fall in any
    range is two binary searches."""

    def __init__(self, starts: np.ndarray, ends: np.ndarray):
        # The corpus's tokens and most predictions come sorted: checking is cheaper than sorting them again.
        if len(starts) > 1 and not (starts[1:] >= starts[:-1]).all():
            order = np.argsort(starts, kind="stable")
            starts, ends = starts[order], ends[order]
        s, e = starts, ends
        # Disjoint ranges (the corpus's tokens: the words coverage is built from 600k of them) are runs already;
        # checking costs a pass, merging several.
        if len(s) > 1 and not (s[1:] >= e[:-1]).all():
            reach = np.maximum.accumulate(e)
            # A range opens a new merged run where it starts past every earlier range's end; the run ends at the
            # reach of its last range (no earlier range reaches past the run's first start).
            new = np.ones(len(s), bool)
            new[1:] = s[1:] > reach[:-1]
            last = np.ones(len(s), bool)
            last[:-1] = new[1:]
            s, e = s[new], reach[last]
        self.starts, self.ends = s, e
        self.lengths = self.ends - self.starts
        self.before = np.concatenate([[0], np.cumsum(self.lengths)])

    def upto(self, x: np.ndarray) -> np.ndarray:
        """Per offset, how many covered characters lie before it."""
        k = np.searchsorted(self.starts, x, side="right") - 1
        at = np.maximum(k, 0)
        inside = np.clip(x - self.starts[at], 0, self.lengths[at])
        return np.where(k >= 0, self.before[at] + inside, 0)

    def within(self, starts: np.ndarray, ends: np.ndarray) -> np.ndarray:
        """Per range, how many covered characters it holds."""
        if not len(self.starts):
            return np.zeros(len(starts), np.int64)
        return self.upto(ends) - self.upto(starts)

    def pieces(self, starts: np.ndarray, ends: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
        """The covered parts of the ranges: per part, the range it belongs to, its start and its end."""
        lo = np.searchsorted(self.ends, starts, side="right")
        hi = np.searchsorted(self.starts, ends, side="left")
        count = np.maximum(hi - lo, 0)
        k = runs(lo, count)
        of = np.repeat(np.arange(len(starts)), count)
        return of, np.maximum(starts[of], self.starts[k]), np.minimum(ends[of], self.ends[k])

    def shared(self, starts: np.ndarray, ends: np.ndarray, words: _Coverage) -> np.ndarray:
        """Per range, how many of its characters this coverage and `words` both cover (float64)."""
        of, a, b = self.pieces(starts, ends)
        return np.bincount(of, weights=words.within(a, b), minlength=len(starts))


@dataclass
class Predicted:
    """What the per-type figures read of one scoring pass: the scorer's prediction arrays."""

    starts: np.ndarray
    """Global starts of every predicted span."""
    ends: np.ndarray
    """Global ends, same order."""
    labelled: list[tuple[int, str]]
    """`(position in starts, label)` of the predicted spans that carry a label."""
    token_hit: np.ndarray
    """Per token of the corpus, whether a predicted span overlaps it."""


class Source(Protocol):
    """What the figures read of the scorer: its corpus, its seeded resamples of a group (name, size), and arrays
    made from those alone, kept beside a kept corpus (name, how they are made)."""

    corpus: Corpus

    def bootstrap_weights(self, name: str, n: int) -> Iterable[np.ndarray]: ...

    def kept_arrays(self, name: str, compute: Callable[[], dict[str, np.ndarray]]) -> dict[str, np.ndarray]: ...


def types_group(gold: TypedGold | None, predicted: Predicted, scorer: Source) -> TypesGroup | None:
    """The per-type figures of one scoring pass (see the module docstring); None without typed gold."""
    if gold is None:
        return None
    corpus, resamples = scorer.corpus, scorer.bootstrap_weights
    if any(not ds.weights for ds in gold.datasets.values()):
        drawn = scorer.kept_arrays("type-draws", lambda: gold.draws(resamples))
        for name, ds in gold.datasets.items():
            ds.weigh(drawn[name])
    span_dataset = corpus.dataset_code[corpus.owner_of(predicted.starts)]
    datasets = {}
    for name, ds in gold.datasets.items():
        draws = resamples(f"types:{name}", len(ds.members))
        # The dataset's own predicted spans only: a smaller coverage to search.
        mine = span_dataset == ds.code
        recalls = _recalls(ds, _Coverage(predicted.starts[mine], predicted.ends[mine]), predicted.token_hit)
        labelled = [(k, label) for k, label in predicted.labelled if mine[k]]
        typed = _typed(ds, labelled, predicted, corpus, gold.words, draws) if labelled else {}
        types = {
            t: TypeScores(
                n_examples=int((g.chars > 0).sum()),
                gold_spans=len(g.starts),
                gold_chars=int(g.chars.sum()),
                gold_tokens=int(g.tokens.sum()),
                char_recall=recalls[t][0],
                token_recall=recalls[t][1],
                **typed.get(t, {}),
            )
            for t, g in ds.types.items()
        }
        datasets[name] = DatasetTypes(
            n=len(ds.members),
            partitions=ds.partitions,
            untyped_gold_spans=ds.untyped,
            labelled_predictions=len(labelled),
            types=types,
        )
    return TypesGroup(datasets=datasets)


def _recalls(ds: _DatasetGold, cover: _Coverage, token_hit: np.ndarray) -> dict[str, tuple[Recall, Recall]]:
    """Per type, the pooled character and token recall with their intervals (every interval in one percentile
    call)."""
    m = len(ds.members)
    found_pieces = cover.within(ds.piece_starts, ds.piece_ends)
    found: list[np.ndarray] = []
    for g in ds.types.values():
        chars = np.bincount(ds.piece_member[g.pieces], weights=found_pieces[g.pieces], minlength=m)
        tokens = np.bincount(g.token_member[token_hit[g.token_idx]], minlength=m)
        found += [chars, tokens]
    hits, gold_sums, totals = [], [], []
    for k, (t, g) in enumerate(ds.types.items()):
        if t not in ds.gold_sums:
            ds.gold_sums[t] = ds.resampled(t, np.stack([g.chars, g.tokens]))
        hits.append(ds.resampled(t, np.stack(found[2 * k : 2 * k + 2])))
        gold_sums.append(ds.gold_sums[t])
        totals += [int(g.chars.sum()), int(g.tokens.sum())]
    recalls = [
        Recall(recall=int(f.sum()) / total if total else 0.0, ci=ci)
        for f, total, ci in zip(found, totals, _cis(np.concatenate(hits), np.concatenate(gold_sums)))
    ]
    return {t: (recalls[2 * k], recalls[2 * k + 1]) for k, t in enumerate(ds.types)}


def _cis(found: np.ndarray, gold: np.ndarray) -> list[tuple[float, float] | None]:
    """Per row, the percentile interval of the resamples' recalls (found / gold), over the resamples that draw
    some gold; None where none does. One percentile call for every row."""
    with np.errstate(divide="ignore", invalid="ignore"):
        ratios = np.where(gold > 0, found / gold, np.nan)
    defined = np.asarray(~np.isnan(ratios).all(axis=1))
    bounds = np.full((len(ratios), 2), np.nan)
    if defined.any():
        take = np.nanpercentile if np.isnan(ratios[defined]).any() else np.percentile
        bounds[defined] = take(ratios[defined], [2.5, 97.5], axis=1).T
    return [(float(lo), float(hi)) if ok else None for (lo, hi), ok in zip(bounds.tolist(), defined.tolist())]


def _typed(
    ds: _DatasetGold,
    labelled: list[tuple[int, str]],
    predicted: Predicted,
    corpus: Corpus,
    words: _Coverage,
    draws: Iterable[np.ndarray],
) -> dict[str, dict]:
    """Per gold type, the type-aware character and token P/R/F1 of the predicted spans labelled with it."""
    m = len(ds.members)
    member_of = np.full(len(corpus), -1, np.int64)
    member_of[ds.members] = np.arange(m)
    responses = (corpus.offsets[ds.members], corpus.offsets[ds.members] + corpus.lengths[ds.members])
    out = {}
    for t, gold in ds.types.items():
        picks = np.array([k for k, label in labelled if t in type_names(label)], np.int64)
        s, e = predicted.starts[picks], predicted.ends[picks]
        cover = _Coverage(s, e)
        within = cover.within(ds.piece_starts, ds.piece_ends)
        pred_idx = tokens_overlapping(corpus.tokens, s, e)
        shared_idx = np.intersect1d(pred_idx, gold.token_idx, assume_unique=True)
        counts = np.stack(
            [
                np.bincount(ds.piece_member[gold.pieces], weights=within[gold.pieces], minlength=m),
                cover.shared(*responses, words),
                gold.chars,
                np.bincount(member_of[corpus.tokens.owner[shared_idx]], minlength=m),
                np.bincount(member_of[corpus.tokens.owner[pred_idx]], minlength=m),
                gold.tokens,
            ]
        ).astype(np.float64)
        reps = metrics.bootstrap_replicates(counts, draws)
        out[t] = {
            "predicted_spans": len(picks),
            "typed_char": _typed_prf(counts[:3], reps[:3]),
            "typed_token": _typed_prf(counts[3:], reps[3:]),
        }
    return out


def _typed_prf(counts: np.ndarray, reps: np.ndarray) -> TypedPRF:
    """Pooled P/R/F1 from per-member (shared, predicted, gold) counts, the interval from their replicate means."""
    shared, pred, gold = (float(c.sum()) for c in counts)
    p, r, f = metrics.pooled_prf(shared, pred, gold)
    with np.errstate(divide="ignore", invalid="ignore"):
        f_reps = np.where(reps[1] + reps[2] > 0, 2 * reps[0] / (reps[1] + reps[2]), 0.0)
    return TypedPRF(precision=p, recall=r, f1=f, ci=metrics.percentile_ci(f_reps))
