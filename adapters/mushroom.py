"""Mu-SHROOM (SemEval-2025 Task 3, Vázquez et al. 2025), English: open-domain QA with character-level labels.

Reads the labelled English files of the official repository (`Helsinki-NLP/mu-shroom`): the 154-item test split
and the 50-item validation split (used only for the dev set). Gold spans are the released `hard_labels`
(`[start, end)` code-point offsets into `model_output_text`, which may begin with a space); the `soft_labels`
(annotator agreement per segment) are kept as `Example.soft_spans` for the official IoU/Cor scores. The raw
per-annotator `annotations` are not used: the organisers adjusted their boundaries, and only soft/hard labels are
gold. No row is dropped.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from pydantic import BaseModel, ConfigDict

from shambench.adapters._released import example_at, jsonl_rows, source_file
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.schema import Example

COMMIT = "7fea78a0e5af887d196931721147ace5b4c4d9a8"
RAW = f"https://raw.githubusercontent.com/Helsinki-NLP/mu-shroom/{COMMIT}"
FILES = {
    "test": "mushroom.en-tst.v1.extra.jsonl",
    "validation": "mushroom.en-val.v2.extra.jsonl",
}
EXPECTED = "Mu-SHROOM JSON lines with id, model_input, model_output_text, hard_labels and soft_labels"


class SoftLabel(BaseModel):
    """One released soft-label segment."""

    start: int
    """First character of the segment."""
    end: int
    """One past the last character."""
    prob: float
    """Share of annotators who marked these characters."""


class MushroomRow(BaseModel):
    """One line of a labelled Mu-SHROOM file (fields this adapter reads; the rest are ignored)."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())

    id: str
    """The organisers' item id, e.g. `tst-en-10`."""
    lang: str = ""
    """Language code (`EN`)."""
    model_input: str
    """The question put to the model."""
    model_output_text: str
    """The model's answer, whose characters are labelled."""
    model_id: str = ""
    """Hugging Face id of the generating model."""
    hard_labels: list[tuple[int, int]]
    """Majority-vote hallucinated segments, `[start, end)`."""
    soft_labels: list[SoftLabel]
    """Segments with the share of annotators marking them."""
    wikipedia_url: str | None = None
    """The Wikipedia page the question was written from."""


class MushroomAdapter(Adapter):
    """Reads the labelled English Mu-SHROOM files."""

    name = "mushroom"
    tasks = ("open_qa",)
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
            url=f"{RAW}/splits/test_labeled/v1/{FILES['test']}",
            path=FILES["test"],
            sha256="758df17a159bb1c75adb7e7ef6900a3903a56a6d803195770ec73ea2f0c45131",
        ),
        RemoteFile(
            url=f"{RAW}/splits/val/v2/{FILES['validation']}",
            path=FILES["validation"],
            sha256="e629e5e085011f22b396b222538b0a21f5aae0b634798c4d0143bb58026cee4b",
        ),
    )

    def available(self, data_dir: Path) -> bool:
        return (self.root(data_dir) / FILES["test"]).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        path = source_file(self.root(data_dir), FILES[split], self.name, EXPECTED)
        examples = [
            row_example(
                where,
                row,
                id=f"mushroom/{row.id}",
                dataset=self.name,
                split=split,
                meta={"model": row.model_id, "lang": row.lang, "wikipedia_url": row.wikipedia_url},
            )
            for where, row in jsonl_rows(path, MushroomRow, EXPECTED)
        ]
        return LoadResult(examples=examples, files=[FILES[split]])


def row_example(where: str, row: MushroomRow, **fields: Any) -> Example:
    """The example of one released Mu-SHROOM row (any language): the question, the answer, hard labels as spans
    and soft labels kept; `fields` give its id, dataset, split and meta."""
    return example_at(
        where,
        task="open_qa",
        question=row.model_input,
        response=row.model_output_text,
        hallu_spans=[list(pair) for pair in row.hard_labels],
        soft_spans=[s.model_dump() for s in row.soft_labels],
        **fields,
    )


@adapter("mushroom")
def mushroom() -> Adapter:
    """Mu-SHROOM (SemEval-2025 Task 3), English open-domain QA: hard-label spans plus soft labels."""
    return MushroomAdapter()
