"""XSumFaith (Maynez et al., ACL 2020): three crowd workers' hallucinated spans on XSum summaries.

Reads `hallucination_annotations_xsum_summaries.csv` of google-research-datasets/xsum_hallucination_annotations:
one row per (summary, worker, span), a worker who marked nothing having one row of type `NULL`. Its 2,500
summaries are 500 BBC articles x 5 systems (BERTS2S, PtGen, TConvS2S, TranS2S and `Gold`, the human-written
reference), the same texts as Zhou et al.'s `.target` lines.

The released offsets are not consistent (1-based on most rows, 0-based or end-inclusive on others, shifted by the
release's `\\'` escapes on some), so a span is placed by its text: the occurrence of the span (its surrounding
whitespace stripped) nearest to the given start, read 1-based. A span that does not occur verbatim is tried again
without the release's own escapes (a literal `\\n` at its ends, doubled backslashes). What cannot be placed is
counted by reason, never guessed: an empty span, a text found nowhere, or two occurrences equally near the offset.
`NULL` rows mean "marked nothing", even the few that carry stray span text (counted apart).

The adapter (`xsumfaith`, partition `summ/xsumfaith-gold`, suite `extended`) reads only the 500 `Gold` summaries:
the four systems' summaries are `summ/zhou` already. A token is gold-hallucinated when more than half of the
summary's workers marked it (Zhou's "majority voting"), and each run of such tokens becomes one span, as in
`summ/zhou`. This reproduces Zhou's released labels on 99.5% of the tokens, of the four systems (1,912 of their
2,000 summaries identical) as of Gold (494 of 500): Zhou's unpublished aggregation ignored the spans written with
the release's escapes and read a few offsets differently. The context is the XSum article of the same BBC id
in Zhou's `Gold.source` (`../zhou/`; `shambench data download zhou` fetches it).
Ids are `xsumfaith/gold/<BBC id>`.
"""

from __future__ import annotations

import bisect
from collections import Counter
from collections.abc import Collection, Sequence
from pathlib import Path
from typing import Literal

from pydantic import Field

from shambench.adapters._released import csv_rows, source_file, spans_of_labels, text_lines, token_bounds, validated
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.errors import SourceError
from shambench.schema import Example, Model, Name, Span
from shambench.sources import PublishedCount

ANNOTATIONS = "hallucination_annotations_xsum_summaries.csv"
_COMMIT = "4abdbb2c807cb93c1df1188a1992d20a55cdcc34"
_RAW = f"https://raw.githubusercontent.com/google-research-datasets/xsum_hallucination_annotations/{_COMMIT}"
_SHA256 = "fa7fb66a36cc0f32ede4135985d0d65591dc2a8d21103a0bacd0583d77d4c8ea"
ZHOU = "zhou"
GOLD_ARTICLES = ("eval_data/xsum/Gold/Gold.docid", "eval_data/xsum/Gold/Gold.source")
"""Zhou et al.'s files (in the `zhou` folder, declared by its adapter) holding the Gold summaries' articles."""
GOLD = "Gold"
DATASET = "xsumfaith-gold"
NO_ARTICLE = "no XSum article for the BBC id in Zhou et al.'s Gold.source"
EXPECTED = (
    "Maynez et al.'s CSV with columns bbcid, system, summary, hallucination_type (intrinsic, extrinsic or NULL), "
    "hallucinated_span, hallucinated_span_start, hallucinated_span_end, worker_id"
)
_COLUMNS = (
    "bbcid",
    "system",
    "summary",
    "hallucination_type",
    "hallucinated_span",
    "hallucinated_span_start",
    "hallucinated_span_end",
    "worker_id",
)
_TYPES = ("intrinsic", "extrinsic")

Method = Literal["offset", "nearest", "unescaped"]

# Reasons a span is not placed (keys of `Annotations.unplaced`).
EMPTY = "empty span text"
NOT_FOUND = "span text not in the summary"
TIED = "two occurrences equally near the offset"
# Rows that are not spans (keys of `Annotations.ignored`).
STRAY_NULL = "NULL row with stray span text"


class AnnotatedSummary(Model):
    """One summary (one system's summary of one BBC article) with each worker's spans placed on its text."""

    bbcid: Name
    """XSum document id of the article, as in Zhou et al.'s `.docid` files."""
    system: str
    """The summariser: BERTS2S, PtGen, TConvS2S, TranS2S, or `Gold` (the human-written reference summary)."""
    summary: str
    """The annotated summary exactly as released (lower-cased, whitespace-tokenised, `\\'` before apostrophes)."""
    workers: dict[str, list[Span]]
    """Per worker id (`wid_0`, ...), the placed spans sorted by start, labelled `intrinsic` or `extrinsic`; an empty
    list for a worker who marked nothing. Spans of one worker are not merged (they may overlap)."""

    def token_votes(self) -> list[int]:
        """Per whitespace token of `summary`, how many workers marked at least one of its characters."""
        return token_votes(self.summary, list(self.workers.values()))

    def majority_labels(self) -> list[str]:
        """Per whitespace token, `1` when more than half of the workers marked it, else `0` (Zhou's aggregation)."""
        return majority_labels(self.summary, list(self.workers.values()))


def token_votes(summary: str, span_lists: Sequence[Sequence[Span]]) -> list[int]:
    """Per whitespace token of `summary`, how many of the span lists (one per worker) mark at least one of its
    characters."""
    starts, ends = token_bounds(summary)
    votes = [0] * len(starts)
    for spans in span_lists:
        marked: set[int] = set()
        for s in spans:
            # Tokens are sorted and disjoint: those overlapping [s.start, s.end) are one run, found by bisection
            # (a span and a token overlap when each starts before the other ends).
            marked.update(range(bisect.bisect_right(ends, s.start), bisect.bisect_left(starts, s.end)))
        for i in marked:
            votes[i] += 1
    return votes


def majority_labels(summary: str, span_lists: Sequence[Sequence[Span]]) -> list[str]:
    """Per whitespace token of `summary`, `1` when more than half of the span lists mark it, else `0` (Zhou's
    aggregation of its workers)."""
    return ["1" if 2 * votes > len(span_lists) else "0" for votes in token_votes(summary, span_lists)]


class Annotations(Model):
    """The whole annotation file: every summary with its workers' spans, and an account of every span row."""

    summaries: list[AnnotatedSummary]
    """One per (BBC id, system), in the order of their first row in the file."""
    placed: dict[str, int] = Field(default_factory=dict)
    """Placed spans by how: `offset` (at the given start, read 1- or 0-based), `nearest` (the occurrence nearest
    the given start, elsewhere), `unescaped` (found only once the release's escapes were removed)."""
    unplaced: dict[str, int] = Field(default_factory=dict)
    """Span rows (type intrinsic or extrinsic) that could not be placed, by reason."""
    ignored: dict[str, int] = Field(default_factory=dict)
    """`NULL` rows that are not plain "marked nothing" rows, by reason (they add no span)."""


def _unescaped(text: str) -> str:
    """`text` without the release's own escapes: literal `\\n` sequences, doubled backslashes."""
    return text.replace("\\n", "").replace("\\\\", "\\")


def place_span(summary: str, text: str, start: int) -> tuple[int, int, Method] | str:
    """Where a released span lies on its summary, `(start, end, method)`, or the reason it cannot be placed.

    `start` is the released `hallucinated_span_start`; the occurrence nearest to it read 1-based wins.
    """
    anchor = start - 1 + len(text) - len(text.lstrip())
    for needle, escaped in ((text.strip(), False), (_unescaped(text).strip(), True)):
        if not needle:
            return EMPTY
        found = occurrences(summary, needle)
        if not found:
            continue
        distances = sorted((abs(at - anchor), at) for at in found)
        if len(distances) > 1 and distances[0][0] == distances[1][0]:
            return TIED
        distance, at = distances[0]
        method: Method = "unescaped" if escaped else "offset" if distance <= 1 else "nearest"
        return at, at + len(needle), method
    return NOT_FOUND


def occurrences(text: str, needle: str) -> list[int]:
    """Every position where `needle` starts in `text`, overlapping ones included (a regular expression compiled
    per span would cost more than placing it)."""
    found: list[int] = []
    at = text.find(needle)
    while at != -1:
        found.append(at)
        at = text.find(needle, at + 1)
    return found


def _offset(where: str, row: dict[str, str]) -> int:
    value = row["hallucinated_span_start"]
    try:
        return int(value)
    except ValueError:
        raise SourceError(f"{where}: hallucinated_span_start is {value!r}, expected an integer") from None


def read_annotations(root: Path, systems: Collection[str] | None = None) -> Annotations:
    """The annotation file of an XSumFaith folder, every span placed on its summary (see the module docstring);
    only the summaries of `systems` (and only their rows in the counts) when given."""
    path = source_file(root, ANNOTATIONS, "xsumfaith", EXPECTED)
    summaries: dict[tuple[str, str], AnnotatedSummary] = {}
    placed: Counter[str] = Counter()
    unplaced: Counter[str] = Counter()
    ignored: Counter[str] = Counter()
    for where, row in csv_rows(path, _COLUMNS, EXPECTED):
        if systems is not None and row["system"] not in systems:
            continue
        key = (row["bbcid"], row["system"])
        if key not in summaries:
            fields = {"bbcid": key[0], "system": key[1], "summary": row["summary"], "workers": {}}
            summaries[key] = validated(AnnotatedSummary, fields, where, EXPECTED)
        entry = summaries[key]
        if row["summary"] != entry.summary:
            raise SourceError(f"{where}: summary differs from the earlier rows of bbcid {key[0]}, system {key[1]}")
        spans = entry.workers.setdefault(row["worker_id"], [])
        kind = row["hallucination_type"]
        if kind == "NULL":
            if row["hallucinated_span"] != "NULL":
                ignored[STRAY_NULL] += 1
            continue
        if kind not in _TYPES:
            raise SourceError(f"{where}: hallucination_type is {kind!r}, expected intrinsic, extrinsic or NULL")
        found = place_span(entry.summary, row["hallucinated_span"], _offset(where, row))
        if isinstance(found, str):
            unplaced[found] += 1
            continue
        start, end, method = found
        placed[method] += 1
        spans.append(Span(start=start, end=end, label=kind))
    for entry in summaries.values():
        for spans in entry.workers.values():
            spans.sort(key=lambda s: (s.start, s.end))
    return Annotations(
        summaries=list(summaries.values()), placed=dict(placed), unplaced=dict(unplaced), ignored=dict(ignored)
    )


class XSumFaithAdapter(Adapter):
    """Maynez et al. 2020: the human-written reference summaries (`Gold`), gold by the majority of three workers."""

    name = "xsumfaith"
    tasks = ("summ",)
    suite = "extended"
    datasets = (DATASET,)
    kept_apart = f"summ/{DATASET}"
    published_counts = {
        f"summ/{DATASET}": PublishedCount(
            count=500,
            source="Maynez et al. 2020, release README (google-research-datasets/xsum_hallucination_annotations@4abdbb2): "
            '"3 judgements for each of 500 x 5 document-system pairs", of which the 500 Gold (reference) summaries',
        )
    }
    license = "CC BY 4.0"
    homepage = "https://github.com/google-research-datasets/xsum_hallucination_annotations"
    revision = f"google-research-datasets/xsum_hallucination_annotations@{_COMMIT}"
    citation = (
        "Joshua Maynez, Shashi Narayan, Bernd Bohnet, Ryan McDonald. On Faithfulness and Factuality in Abstractive "
        "Summarization. ACL 2020."
    )
    remote_files = (RemoteFile(url=f"{_RAW}/{ANNOTATIONS}", path=ANNOTATIONS, sha256=_SHA256),)

    def available(self, data_dir: Path) -> bool:
        return (self.root(data_dir) / ANNOTATIONS).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        annotations = read_annotations(self.root(data_dir), systems={GOLD})
        articles = gold_articles(data_dir / ZHOU)
        dropped: Counter[str] = Counter()
        examples = []
        for summary in annotations.summaries:
            if summary.bbcid not in articles:
                dropped[NO_ARTICLE] += 1
                continue
            examples.append(
                Example(
                    id=f"xsumfaith/gold/{summary.bbcid}",
                    dataset=DATASET,
                    task="summ",
                    context=articles[summary.bbcid],
                    response=summary.summary,
                    hallu_spans=spans_of_labels(summary.summary, summary.majority_labels()),
                    meta={"system": GOLD, "bbcid": summary.bbcid, "workers": len(summary.workers)},
                )
            )
        return LoadResult(
            examples=examples,
            dropped=dict(dropped),
            files=[ANNOTATIONS, *(f"../{ZHOU}/{name}" for name in GOLD_ARTICLES)],
            spans=span_account(annotations),
        )


@adapter("xsumfaith")
def xsumfaith() -> Adapter:
    """XSumFaith (Maynez et al. 2020): 500 human-written XSum summaries, 3 workers' spans (suite `extended`)."""
    return XSumFaithAdapter()


def gold_articles(zhou_root: Path) -> dict[str, str]:
    """The XSum article of each Gold summary's BBC id, from Zhou et al.'s `Gold.docid` and `Gold.source`."""
    docids, sources = (text_lines(zhou_root, name, ZHOU) for name in GOLD_ARTICLES)
    if len(docids) != len(sources):
        listed = ", ".join(
            f"{zhou_root / name} has {len(lines)}" for name, lines in zip(GOLD_ARTICLES, (docids, sources))
        )
        raise SourceError(f"line counts differ ({listed}); expected one line per example in both")
    return {docid.strip(): article for docid, article in zip(docids, sources)}


def span_account(annotations: Annotations) -> dict[str, int]:
    """The `LoadResult.spans` view of the annotation counts: placed by how, unplaced by reason."""
    return {
        **{f"placed: {how}": n for how, n in annotations.placed.items()},
        **{f"unplaced: {why}": n for why, n in annotations.unplaced.items()},
        **{f"not a span: {why}": n for why, n in annotations.ignored.items()},
    }
