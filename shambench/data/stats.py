"""The composition of a loaded benchmark, in the layout of the SHAM-Bench paper's Table 1.

Per `task/dataset` partition and in total: the example count (beside the paper's), mean response tokens, mean
hallucinated tokens, the mean per-example share of hallucinated tokens, and the share of examples with at least
one gold span; per source, the rows its adapter dropped and why. Tokens are counted exactly as the scorer counts
them (`shambench.scoring.text`), and a token is hallucinated when a gold span overlaps it by at least one character.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
from pydantic import Field

from shambench.data.benchmark import Benchmark
from shambench.schema import Example, Model, Name
from shambench.scoring.text import TOKENIZER, Segmentation, language_of, segment_mixed
from shambench.sources import PAPER_SOURCE, paper_counts, published_count

CONVENTIONS = {
    "tokenizer": f"{TOKENIZER}; an example with meta.lang is tokenised with spacy.blank(lang) instead (Chinese: one "
    "token per Han character), as the scorer does",
    "hallucinated_token": "a token overlapped by a gold span by at least one character",
    "mean_response_tokens": "mean over examples of the number of tokens in the response",
    "mean_hallucinated_tokens": "mean over examples of the number of hallucinated tokens",
    "mean_hallucinated_rate": "mean over examples of hallucinated tokens / response tokens (0 for an empty response)",
    "share_with_span": "share of examples with at least one gold span",
    "total": "the same quantities over all examples together (examples weigh equally)",
    "paper_count": "the example count of SHAM-Bench's Table 1 (test split), or for a partition of the extended "
    "suite the count its corpus's paper or release reports (count_source says which); null where none is reported; "
    "the total's only when every partition is SHAM-Bench's",
}


class GroupStats(Model):
    """The Table-1 figures of one partition, or of all examples."""

    task: Name
    """Task name, or `total`."""
    dataset: Name
    """Dataset name; empty for the total."""
    count: int
    """Examples loaded."""
    paper_count: int | None
    """Examples reported by the paper: SHAM-Bench's Table 1, or the corpus's own paper (test split only)."""
    count_source: str | None = None
    """Where `paper_count` is printed."""
    mean_response_tokens: float
    """Mean tokens per response."""
    mean_hallucinated_tokens: float
    """Mean hallucinated tokens per response."""
    mean_hallucinated_rate: float
    """Mean per-example share of hallucinated tokens."""
    share_with_span: float
    """Share of examples with at least one gold span."""


class BenchmarkStats(Model):
    """What `shambench data stats --json` prints."""

    split: Name
    """The split described."""
    data_dir: str
    """Where the sources were read from."""
    partitions: list[GroupStats]
    """One row per `task/dataset` partition, sorted."""
    total: GroupStats
    """All examples together."""
    dropped: dict[str, dict[str, int]]
    """Per dataset, rows its adapter did not keep, by reason."""
    spans: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per dataset whose gold spans are placed by their text, the spans by outcome (`LoadResult.spans`)."""
    errors: dict[str, str]
    """Per dataset, why it could not be loaded."""
    conventions: dict[str, str]
    """How every figure is computed."""


def hallucinated_tokens(seg: Segmentation, example: Example) -> int:
    """How many tokens of the response a gold span overlaps by at least one character."""
    hit = np.zeros(len(seg.token_starts), dtype=bool)
    for span in example.hallu_spans:
        hit |= (seg.token_starts < span.end) & (seg.token_ends > span.start)
    return int(hit.sum())


def reported_count(partition: str) -> tuple[int | None, str | None]:
    """The example count a paper reports for a partition and where (SHAM-Bench's Table 1, else the corpus's own
    paper or release, as its adapter declares: `Adapter.published_counts`); `(None, None)` when none does."""
    reported = published_count(partition)
    return (reported.count, reported.source) if reported else (None, None)


def group_stats(
    task: str,
    dataset: str,
    examples: Sequence[Example],
    paper_count: int | None = None,
    count_source: str | None = None,
) -> GroupStats:
    """The Table-1 figures of a group of examples, beside the count a paper reports (and where)."""
    segs = segment_mixed([ex.response for ex in examples], [language_of(ex.meta) for ex in examples])
    n_tokens = np.array([len(s.token_starts) for s in segs], dtype=float)
    n_hallu = np.array([hallucinated_tokens(s, ex) for s, ex in zip(segs, examples)], dtype=float)
    rate = np.divide(n_hallu, n_tokens, out=np.zeros_like(n_hallu), where=n_tokens > 0)
    return GroupStats(
        task=task,
        dataset=dataset,
        count=len(examples),
        paper_count=paper_count,
        count_source=count_source,
        mean_response_tokens=_mean(n_tokens),
        mean_hallucinated_tokens=_mean(n_hallu),
        mean_hallucinated_rate=_mean(rate),
        share_with_span=_mean(np.array([bool(ex.hallu_spans) for ex in examples], dtype=float)),
    )


def _mean(values: np.ndarray) -> float:
    return float(values.mean()) if len(values) else 0.0


def paper_total(partitions: Sequence[str]) -> tuple[int, str]:
    """The paper's count of these partitions, and where it comes from. Beside a subset of the nine, Table 1's total
    (6,461) would compare unlike sets: the sum over the subset is the figure to put beside ours."""
    paper = paper_counts()
    missing = sorted(set(paper) - set(partitions))
    total = sum(paper[name] for name in partitions)
    if not missing:
        return total, PAPER_SOURCE
    others = ", ".join(f"{name} {paper[name]}" for name in missing)
    return total, f"{PAPER_SOURCE}, the partitions present (its total, {sum(paper.values())}, also has {others})"


def benchmark_stats(bench: Benchmark) -> BenchmarkStats:
    """The Table-1 view of a loaded benchmark; paper counts are shown for the test split only."""
    by_partition: dict[str, list[Example]] = {}
    for ex in bench.examples:
        by_partition.setdefault(ex.partition, []).append(ex)
    test = bench.split == "test"
    rows = [
        group_stats(task, dataset, exs, *(reported_count(name) if test else (None, None)))
        for name, exs in sorted(by_partition.items())
        for task, dataset in [name.split("/", 1)]
    ]
    paper = paper_counts()
    total = paper_total(list(by_partition)) if test and all(name in paper for name in by_partition) else None
    return BenchmarkStats(
        split=bench.split,
        data_dir=str(bench.data_dir),
        partitions=rows,
        total=group_stats("total", "", bench.examples, *(total or (None, None))),
        dropped={name: load.dropped for name, load in bench.loads.items()},
        spans={name: load.spans for name, load in bench.loads.items() if load.spans},
        errors=bench.errors,
        conventions=CONVENTIONS,
    )
