"""FaithBench (Bao et al., NAACL 2025): hard summaries by ten modern LLMs, with span annotations by several people.

Reads `data_for_release/batch_<n>.json` (15 batches of 50 samples; there is no batch 13). A sample's gold spans are
the union over all its annotators of the spans whose label set includes `Unwanted` (or one of its `Unwanted.*`
subtypes) or `Questionable`; spans labelled only `Benign`, or with no label at all, are not hallucinations. Offsets
are into the raw `summary`, which in 144 samples begins with whitespace, so the summary is never stripped. Span
labels keep the annotation's hallucination labels as its error types (e.g. `Unwanted|Unwanted.Intrinsic`; a subtype
implies `Unwanted`, which 14 annotations leave out, so the `Unwanted` type holds every unwanted span). `sample_id` restarts in
every batch, hence the ids `faithbench/<batch>-<sample_id>`. `FaithBench.csv` is not read: it holds sample-level
labels only (and 50 rows of a batch 13 that has no spans).

Human agreement (`Example.annotations`): a sample lists only the annotators who marked something in it, so the
annotators of a batch (everyone with an annotation in any of its 50 samples, 2-5 people) are taken as having read
each of its samples; one who marked nothing, or only Benign spans, in a sample marked no hallucination there.
Each annotator's Unwanted/Questionable spans are read beside the union of the others' (the gold rule above).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field

from shambench.adapters._released import source_file, validated
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.errors import SourceError
from shambench.schema import Annotations, Example, MarkedByMoreThan, Model, Name, Span
from shambench.sources import PAPER_SOURCE, PublishedCount
from shambench.structured import MAX_DATA_BYTES, json_file

BATCHES = (1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 14, 15, 16)
"""The released batch numbers."""

HALLUCINATED = re.compile(r"(Unwanted|Questionable)(\.|$)")
"""Labels that make an annotated span a hallucination (`Unwanted.Intrinsic` counts as `Unwanted`)."""
UNWANTED = "Unwanted"
SPAN_TYPES = (UNWANTED, "Unwanted.Intrinsic", "Unwanted.Extrinsic", "Questionable")
"""The error types of the gold spans: `Unwanted` holds every unwanted span, its two subtypes those the annotators
said were intrinsic or extrinsic."""

RULE = (
    "FaithBench: the gold is the union of the annotators' Unwanted/Questionable spans; the annotators of a batch "
    "(everyone who annotated any of its 50 samples) are taken as having read each of its samples, since a sample "
    "lists only those who marked something in it"
)

_COMMIT = "cf89797d82812c23b5d5e5c121f1d9b8983bbbce"
_EXPECTED = 'FaithBench\'s {"samples": [...]}, each sample with sample_id, source, summary and annotations'
# sha256 of each batch file at the commit above.
_SHA256 = {
    1: "a4e7858702e741b0fb024a022a906f61fb8eb65011b7f7b138e56e080a4c8c59",
    2: "18f1b2b9eae6fbf2020f295dc5ca512ef1a7e389e763b707bc51831f58df6a70",
    3: "84b709a9d88998f478f429ee2330ea18666ae9e5340ea398ece03cec6ab54308",
    4: "c0f68bc222dd8b6e332cb6668840de8da150687ddf6f9b5bd243f389033fda42",
    5: "6be08bb37ccdf68e41e117b0174cc3c8b41ed7bf85134d00e0e89c023e96b436",
    6: "a5fd42aa64fbe15f535192ddfd3cfc72b53535cde7834cb6685ebe0a229f8587",
    7: "28e83e1487381ce317103505dab4d5679ad74f53541374a98e24e3673734343b",
    8: "5cf2b8ab42fe1d4b0018cf736448dd8a88318267b0efc2f45ea200e713932975",
    9: "4924fe2d0975890712032a128544c0619c2ebf81d5d472e99e7883f1a9720bd5",
    10: "8e5cec822516abbf74cd6796104bbe537da98628c671b64c10afa3b15bebe08c",
    11: "cf999c8fa9696f4b24d8f4b08f9fdd6603a942cfee63ad851ff6d1f265c116cc",
    12: "fda9f0e0eae69c13b79a8fc1f81d1f8a02e9f28ad8c3274619c4369bb15c818e",
    14: "72f07b9f4b91f8a49d96e7adc79a8308edb92a2e6b34babcd9ef68dc6b7b2f34",
    15: "c6608ce2edd17134674c7f8a0fdfc871e22458b432b35506889886c737eb4663",
    16: "e35ace1069bb79844b122415d3c4192f7147737a2b9ad509185fb2c1ba7090db",
}


class Annotation(Model):
    """One span marked by one annotator."""

    model_config = ConfigDict(extra="ignore")

    annotator_id: Name = ""
    """The annotator's id (the same person keeps it across batches)."""
    label: list[str] | None = None
    """Label set, e.g. `["Unwanted", "Unwanted.Intrinsic"]`, `["Benign"]`; empty in 3 released annotations."""
    summary_span: str | None = None
    """The marked characters of the summary."""
    summary_start: int | None = None
    """Offset of the first marked character in the raw summary."""
    summary_end: int | None = None
    """Offset one past the last marked character."""


class Sample(Model):
    """One summary with its annotations."""

    model_config = ConfigDict(extra="ignore")

    sample_id: int
    """Index within its batch (restarts in every batch)."""
    source: str
    """The passage that was summarised."""
    summary: str
    """The LLM summary, unstripped."""
    annotations: list[Annotation]
    """Every annotator's spans; empty when nobody marked anything."""
    metadata: dict[str, Any] = Field(default_factory=dict)
    """Summarizer name, detector predictions and the raw sample id."""


class Batch(Model):
    """The content of one `batch_<n>.json`."""

    samples: list[Sample]
    """The batch's samples (50 in every released batch)."""


def _batch_path(batch: int) -> str:
    return f"data_for_release/batch_{batch}.json"


class FaithBenchAdapter(Adapter):
    """FaithBench: 750 summaries of 75 passages by 10 LLMs, Unwanted and Questionable spans as hallucinations."""

    name = "faithbench"
    tasks = ("summ",)
    published_counts = {
        "summ/faithbench": PublishedCount(count=745, source=PAPER_SOURCE),
    }
    span_types = SPAN_TYPES
    license = "CC BY-NC-SA 4.0"
    homepage = "https://github.com/vectara/FaithBench"
    revision = f"vectara/FaithBench@{_COMMIT}"
    citation = (
        "Forrest Sheng Bao, Miaoran Li, Renyi Qu, Ge Luo, Erana Wan, Yujia Tang, Weisi Fan, Manveer Singh Tamber, "
        "Suleman Kazi, Vivek Sourabh, Mike Qi, Ruixuan Tu, Chenyu Xu, Matthew Gonzales, Ofer Mendelevitch, Amin "
        "Ahmad. FaithBench: A Diverse Hallucination Benchmark for Summarization by Modern LLMs. NAACL 2025."
    )
    remote_files = tuple(
        RemoteFile(
            url=f"https://raw.githubusercontent.com/vectara/FaithBench/{_COMMIT}/{_batch_path(b)}",
            path=_batch_path(b),
            sha256=_SHA256[b],
        )
        for b in BATCHES
    )

    def available(self, data_dir: Path) -> bool:
        return (self.root(data_dir) / _batch_path(BATCHES[0])).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        root = self.root(data_dir)
        examples: list[Example] = []
        dropped: Counter[str] = Counter()
        for batch in BATCHES:
            samples = _batch(root, batch).samples
            readers = list(dict.fromkeys(a.annotator_id for sample in samples for a in sample.annotations))
            for sample in samples:
                reason = _defect(sample)
                if reason:
                    dropped[reason] += 1
                else:
                    examples.append(_example(batch, sample, readers))
        return LoadResult(examples=examples, dropped=dict(dropped), files=[_batch_path(b) for b in BATCHES])


@adapter("faithbench")
def faithbench() -> Adapter:
    """FaithBench (Bao et al. 2025): challenging summaries by 10 modern LLMs, human span labels."""
    return FaithBenchAdapter()


def _batch(root: Path, batch: int) -> Batch:
    path = source_file(root, _batch_path(batch), "faithbench", _EXPECTED)
    data = json_file(path, _EXPECTED, limit=MAX_DATA_BYTES, error=SourceError)
    return validated(Batch, data, str(path), _EXPECTED)


def _defect(sample: Sample) -> str | None:
    """Why a sample cannot be used, or None when it is sound."""
    if not sample.summary.strip():
        return "empty summary"
    for ann in sample.annotations:
        start, end = ann.summary_start, ann.summary_end
        if start is None or end is None:
            return "annotation without summary offsets"
        if not 0 <= start < end <= len(sample.summary):
            return "annotation offsets outside the summary"
        if ann.summary_span is not None and sample.summary[start:end] != ann.summary_span:
            return "annotation summary_span differs from the summary at its offsets"
    return None


def _hallucinations(annotations: list[Annotation]) -> list[Span]:
    """The annotations' Unwanted/Questionable spans, labelled with those labels."""
    spans = []
    for ann in annotations:
        labels = _types([lab for lab in ann.label or [] if HALLUCINATED.match(lab)])
        if labels:
            assert ann.summary_start is not None and ann.summary_end is not None  # _defect drops those without
            spans.append(Span(start=ann.summary_start, end=ann.summary_end, label="|".join(labels)))
    return spans


def _types(labels: list[str]) -> list[str]:
    """An annotation's hallucination labels as error types: a subtype (`Unwanted.Intrinsic`) implies `Unwanted`,
    which 14 released annotations leave out, so that the `Unwanted` type holds every unwanted span."""
    if UNWANTED not in labels and any(lab.startswith(f"{UNWANTED}.") for lab in labels):
        return [UNWANTED, *labels]
    return labels


union = MarkedByMoreThan(share=0.0)  # FaithBench's gold from several annotators: every span any of them marked


def _example(batch: int, sample: Sample, readers: list[str]) -> Example:
    spans = _hallucinations(sample.annotations)
    marked = {a: _hallucinations([x for x in sample.annotations if x.annotator_id == a]) for a in readers}
    return Example(
        id=f"faithbench/{batch}-{sample.sample_id}",
        dataset="faithbench",
        task="summ",
        context=sample.source,
        response=sample.summary,
        hallu_spans=spans,
        annotations=Annotations.leave_one_out(marked, union, RULE, released=spans),
        meta={
            "batch": batch,
            "sample_id": sample.sample_id,
            "summarizer": sample.metadata.get("summarizer"),
            "raw_sample_id": sample.metadata.get("raw_sample_id"),
        },
    )
