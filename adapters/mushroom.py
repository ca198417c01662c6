"""Mu-SHROOM (SemEval-2025 Task 3, Vázquez et al. 2025), English: open-domain QA with character-level labels.

Reads the labelled English files of the official repository (`Helsinki-NLP/mu-shroom`): the 154-item test split
and the 50-item validation split (used only for the dev set). Gold spans are the released `hard_labels`
(`[start, end)` code-point offsets into `model_output_text`, which may begin with a space); the `soft_labels`
(annotator agreement per segment) are kept as `Example.soft_spans` for the official IoU/Cor scores. No row is
dropped.

The `.extra` files also hold `annotations`, every annotator's raw spans (those who marked nothing included). They
become `Example.annotations` for human agreement (`shambench agreement`): each annotator's spans, read with the
organisers' own boundary rule, beside the gold the organisers' rule builds from the other annotators (characters
marked by more than half of them; their shares for Cor). The organisers did not use the raw spans as they are: their
annotation tool (`mushroom-annot-interface/utils/format_annotated2.py`, `cleanup_spans`) first moves each span's
start past leading punctuation and spaces, extends its end over the punctuation and spaces that follow it, joins a
span to the one before when it starts where that one ended, and cuts trailing punctuation and spaces (punctuation:
ASCII punctuation and whitespace, and Unicode categories P and Z). With that rule the share over all annotators
reproduces the released soft labels, hence the hard labels, on every one of the 1,902 test items of the 14
languages; the raw spans reproduce the hard labels on only 985 (English 83 of 154). `boundaries="raw"` reads them
as they are, for comparison.
"""

from __future__ import annotations

import string
import unicodedata
from collections import Counter
from pathlib import Path
from typing import Any

from pydantic import ConfigDict

from shambench.adapters._released import example_at, jsonl_rows, source_file
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.errors import SourceError
from shambench.schema import Annotations, Example, MarkedByMoreThan, Model, Name, Span
from shambench.sources import PAPER_SOURCE, PublishedCount

COMMIT = "7fea78a0e5af887d196931721147ace5b4c4d9a8"
REPOSITORY = f"https://raw.githubusercontent.com/Helsinki-NLP/mu-shroom/{COMMIT}"
FILES = {
    "test": "mushroom.en-tst.v1.extra.jsonl",
    "validation": "mushroom.en-val.v2.extra.jsonl",
}
EXPECTED = "Mu-SHROOM JSON lines with id, model_input, model_output_text, hard_labels and soft_labels"
ORGANISERS, RAW = "organisers", "raw"
BOUNDARIES = (ORGANISERS, RAW)
RULE = (
    "Mu-SHROOM: the gold is the characters marked by more than half of the annotators (soft labels: the share "
    "marking each character, annotators who marked nothing counted); each annotator's spans read with the "
    "organisers' boundary rule ({boundaries})"
)
CUT = "span ends past the answer (cut at its end, kept)"
OUTSIDE = "span starts past the answer (left out)"
# What the organisers' boundary rule trims: ASCII punctuation and whitespace, and Unicode punctuation and separators.
_ASCII_TRIMMED = frozenset(string.punctuation + string.whitespace)


class SoftLabel(Model):
    """One released soft-label segment."""

    start: int
    """First character of the segment."""
    end: int
    """One past the last character."""
    prob: float
    """Share of annotators who marked these characters."""


class MushroomRow(Model):
    """One line of a labelled Mu-SHROOM file (fields this adapter reads; the rest are ignored)."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())

    id: Name
    """The organisers' item id, e.g. `tst-en-10`."""
    lang: str = ""
    """Language code (`EN`)."""
    model_input: str
    """The question put to the model."""
    model_output_text: str
    """The model's answer, whose characters are labelled."""
    model_id: Name = ""
    """Hugging Face id of the generating model."""
    hard_labels: list[tuple[int, int]]
    """Majority-vote hallucinated segments, `[start, end)`."""
    soft_labels: list[SoftLabel]
    """Segments with the share of annotators marking them."""
    wikipedia_url: str | None = None
    """The Wikipedia page the question was written from."""
    annotations: dict[str, list[tuple[int, int]]] | None = None
    """Each annotator's raw spans, `[start, end)` in the order marked (only in the organisers' `.extra` files)."""


class MushroomAdapter(Adapter):
    """Reads the labelled English Mu-SHROOM files."""

    name = "mushroom"
    tasks = ("open_qa",)
    published_counts = {
        "open_qa/mushroom": PublishedCount(count=154, source=PAPER_SOURCE),
    }
    splits = ("test", "validation")
    license = "unstated (no LICENSE file; the authors ask to be cited)"
    homepage = "https://helsinki-nlp.github.io/shroom/"
    revision = f"Helsinki-NLP/mu-shroom@{COMMIT}"
    citation = (
        "Vázquez et al. 2025. SemEval-2025 Task 3: Mu-SHROOM, the Multilingual Shared-task on Hallucinations "
        "and Related Observable Overgeneration Mistakes."
    )
    remote_files = (
        RemoteFile(
            url=f"{REPOSITORY}/splits/test_labeled/v1/{FILES['test']}",
            path=FILES["test"],
            sha256="758df17a159bb1c75adb7e7ef6900a3903a56a6d803195770ec73ea2f0c45131",
        ),
        RemoteFile(
            url=f"{REPOSITORY}/splits/val/v2/{FILES['validation']}",
            path=FILES["validation"],
            sha256="e629e5e085011f22b396b222538b0a21f5aae0b634798c4d0143bb58026cee4b",
        ),
    )

    def __init__(self, boundaries: str = ORGANISERS):
        if boundaries not in BOUNDARIES:
            raise ValueError(f"boundaries must be one of {', '.join(BOUNDARIES)}, not {boundaries!r}")
        self.boundaries = boundaries

    def available(self, data_dir: Path) -> bool:
        return (self.root(data_dir) / FILES["test"]).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        path = source_file(self.root(data_dir), FILES[split], self.name, EXPECTED)
        examples = [
            row_example(
                where,
                row,
                self.boundaries,
                id=f"mushroom/{row.id}",
                dataset=self.name,
                split=split,
                meta={"model": row.model_id, "lang": row.lang, "wikipedia_url": row.wikipedia_url},
            )
            for where, row in jsonl_rows(path, MushroomRow, EXPECTED)
        ]
        return LoadResult(examples=examples, files=[FILES[split]])


def row_example(where: str, row: MushroomRow, boundaries: str = ORGANISERS, **fields: Any) -> Example:
    """The example of one released Mu-SHROOM row (any language): the question, the answer, hard labels as spans,
    soft labels and (in the `.extra` files) the annotators' readings; `fields` give its id, dataset, split, meta."""
    return example_at(
        where,
        task="open_qa",
        question=row.model_input,
        response=row.model_output_text,
        hallu_spans=[list(pair) for pair in row.hard_labels],
        soft_spans=[s.model_dump() for s in row.soft_labels],
        annotations=annotations_of(where, row, boundaries),
        **fields,
    )


def annotations_of(where: str, row: MushroomRow, boundaries: str = ORGANISERS) -> Annotations | None:
    """The annotators' readings of one row (None without `annotations`): spans read with the boundary rule, each
    beside the majority and shares of the other annotators; checked against the released hard labels."""
    if row.annotations is None:
        return None
    text = row.model_output_text
    unplaced: Counter[str] = Counter()
    marked = {}
    for annotator, raw in row.annotations.items():
        fitted = []
        for start, end in raw:
            if not 0 <= start <= end:
                raise SourceError(f"{where}: {annotator}'s span [{start}, {end}) is reversed or negative")
            if start == end:
                continue  # marks no character (the organisers' rule drops it too)
            if start >= len(text):
                unplaced[OUTSIDE] += 1
                continue
            if end > len(text):
                # One released English validation span ends a character past its answer (val-en-34).
                unplaced[CUT] += 1
            fitted.append((start, min(end, len(text))))
        pairs = organisers_boundaries(fitted, text) if boundaries == ORGANISERS else fitted
        marked[annotator] = [Span(start=a, end=b) for a, b in pairs if a < b]
    return Annotations.leave_one_out(
        marked,
        majority,
        RULE.format(boundaries=boundaries),
        soft=True,
        released=[Span(start=a, end=b) for a, b in row.hard_labels],
        unplaced=dict(unplaced),
    )


majority = MarkedByMoreThan(share=0.5)  # Mu-SHROOM's gold from several annotators: what more than half marked


def _trimmed(char: str) -> bool:
    return char in _ASCII_TRIMMED or unicodedata.category(char)[0] in "PZ"


def _past_trimmed(text: str, i: int) -> int:
    """The first position at or after `i` that is not punctuation or space."""
    while i < len(text) and _trimmed(text[i]):
        i += 1
    return i


def organisers_boundaries(raw: list[tuple[int, int]], text: str) -> list[tuple[int, int]]:
    """One annotator's raw spans as the organisers read them before counting votes (see the module docstring):
    starts moved past punctuation and spaces, ends extended over those that follow, a span joined to the last new
    one when it starts at that one's end, trailing punctuation and spaces cut."""
    joined: list[tuple[int, int]] = []
    last_end = -1
    for start, end in raw:
        start, end = _past_trimmed(text, start), _past_trimmed(text, end)
        if start == end:
            continue
        if start == last_end:
            joined[-1] = (joined[-1][0], end)
        else:
            # Only a new span moves the joining point (as in the organisers' code): a third span starting where a
            # joined one ends stays apart, so its predecessor's trailing punctuation is cut.
            joined.append((start, end))
            last_end = end
    out = []
    for start, end in joined:
        while end > start and _trimmed(text[end - 1]):
            end -= 1
        out.append((start, end))
    return out


@adapter("mushroom")
def mushroom(boundaries: str = ORGANISERS) -> Adapter:
    """Mu-SHROOM (SemEval-2025 Task 3), English open-domain QA: hard-label spans plus soft labels."""
    return MushroomAdapter(boundaries=boundaries)
