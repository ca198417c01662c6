"""HalluEntity (Yeh et al. 2025): biographies written by an LLM, with every entity labelled factual or not.

Reads `HalluEntity.jsonl` from the Hugging Face dataset `samuelyeh/HalluEntity` (its only split, `train`, is
the benchmark's test set). Each line holds `prompt`, `response`, `entity` (surface strings, in reading order) and
`entity_label` (True = factual, False = hallucinated).

Entities are placed on the response with a cursor: entity k is searched from the end of entity k-1, so a name
that occurs several times gets the occurrence the list order implies; when that fails the search restarts at 0
(lists out of order, overlapping entities), then runs on a whitespace- and quote-normalised copy. Gold spans are
the hallucinated entities; every placed entity (with its label) is kept in `meta["entities"]` for entity-level
metrics, and factual entities that could not be placed are counted in `meta["unplaced_factual"]`. Dropped, each
counted by reason: rows without entities, rows whose `entity` and `entity_label` lists differ in length, and
rows with a hallucinated entity that cannot be found in the response (their gold would be incomplete).
"""

from __future__ import annotations

import re
from collections import Counter
from pathlib import Path

from pydantic import ConfigDict

from shambench.adapters._released import example_at, jsonl_rows, source_file
from shambench.data.adapter import Adapter, HubFiles, LoadResult, adapter
from shambench.schema import Model, Name
from shambench.sources import PAPER_SOURCE, PublishedCount

FILE = "HalluEntity.jsonl"
EXPECTED = "HalluEntity JSON lines with prompt, response, entity (list of strings) and entity_label (list of booleans)"
QUOTES = str.maketrans({"\u2018": "'", "\u2019": "'", "\u201c": '"', "\u201d": '"', "\u00a0": " "})
SPACES = re.compile(r"\s+")

NO_ENTITY = "no entities"
LENGTHS = "entity and entity_label differ in length"
UNPLACED = "hallucinated entity not found in response"


def subject_of(prompt: str) -> str | None:
    """The person a "Tell me a bio of NAME." prompt asks about (the page context providers look up)."""
    match = re.search(r"\bbio(?:graphy)? of (.+?)[.?!]*\s*$", prompt, flags=re.IGNORECASE)
    return match.group(1).strip() if match else None


class HalluEntityRow(Model):
    """One line of `HalluEntity.jsonl` (fields this adapter reads; the rest are ignored)."""

    model_config = ConfigDict(extra="ignore")

    id: Name | int | None = None
    """The row's own id, when the release has one (else its 1-based row number is used)."""
    prompt: str
    """The request, e.g. `Tell me a bio of <name>`."""
    response: str
    """The generated biography."""
    entity: list[str]
    """Entity surface strings, in reading order."""
    entity_label: list[bool]
    """Per entity: True = factual, False = hallucinated."""


def _normalised(text: str) -> tuple[str, list[int]]:
    """`text` with curly quotes straightened and whitespace runs collapsed, and each character's source offset."""
    chars, where = [], []
    for m in re.finditer(r"\s+|\S", text.translate(QUOTES)):
        chars.append(" " if m.group().isspace() else m.group())
        where.append(m.start())
    return "".join(chars), where


def locate(response: str, entity: str, cursor: int) -> tuple[int, int] | None:
    """The `[start, end)` of `entity` in `response`: from the cursor, else from 0, else normalised; None if absent."""
    if not entity.strip():
        return None
    for origin in (cursor, 0):
        i = response.find(entity, origin)
        if i >= 0:
            return i, i + len(entity)
    text, where = _normalised(response)
    needle = SPACES.sub(" ", entity.translate(QUOTES)).strip()
    i = text.find(needle)
    if i < 0:
        return None
    # The needle is stripped, so its last character is a visible one with an exact source offset.
    return where[i], where[i + len(needle) - 1] + 1


class HalluEntityAdapter(Adapter):
    """Reads `HalluEntity.jsonl`."""

    name = "halluentity"
    tasks = ("open_bio",)
    published_counts = {
        "open_bio/halluentity": PublishedCount(count=152, source=PAPER_SOURCE),
    }
    license = "MIT"
    homepage = "https://huggingface.co/datasets/samuelyeh/HalluEntity"
    revision = "samuelyeh/HalluEntity@00b3e0c (HalluEntity.jsonl)"
    citation = (
        "Yeh et al. 2025. Can Your Uncertainty Scores Detect Hallucinated Entity? (HalluEntity). arXiv:2502.11948."
    )
    # The card shows the commit only by its short id; the download resolves it against the repository's history.
    remote_files = (HubFiles(repo_id="samuelyeh/HalluEntity", revision="00b3e0c", files=(FILE,)),)

    def available(self, data_dir: Path) -> bool:
        return (self.root(data_dir) / FILE).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        path = source_file(self.root(data_dir), FILE, self.name, EXPECTED)
        dropped: Counter[str] = Counter()
        examples = []
        for number, (where, row) in enumerate(jsonl_rows(path, HalluEntityRow, EXPECTED), start=1):
            reason = NO_ENTITY if not row.entity else LENGTHS if len(row.entity) != len(row.entity_label) else None
            entities, unplaced = ([], []) if reason else self._entities(row)
            if not reason and any(not factual for _, factual in unplaced):
                reason = UNPLACED
            if reason:
                dropped[reason] += 1
                continue
            meta = {"entities": entities, "unplaced_factual": len(unplaced)}
            if subject := subject_of(row.prompt):
                meta["subject"] = subject
            examples.append(
                example_at(
                    where,
                    id=f"halluentity/{row.id if row.id is not None else number}",
                    dataset=self.name,
                    task="open_bio",
                    question=row.prompt,
                    response=row.response,
                    hallu_spans=[[e["start"], e["end"]] for e in entities if not e["factual"]],
                    meta=meta,
                )
            )
        return LoadResult(examples=examples, dropped=dict(dropped), files=[FILE])

    @staticmethod
    def _entities(row: HalluEntityRow) -> tuple[list[dict], list[tuple[str, bool]]]:
        """Placed entities as `{start, end, text, factual}`, and the `(text, factual)` pairs that were not found."""
        placed, unplaced = [], []
        cursor = 0
        for text, factual in zip(row.entity, row.entity_label):
            found = locate(row.response, text, cursor)
            if found is None:
                unplaced.append((text, factual))
                continue
            placed.append({"start": found[0], "end": found[1], "text": text, "factual": factual})
            cursor = max(cursor, found[1])
        return placed, unplaced


@adapter("halluentity")
def halluentity() -> Adapter:
    """HalluEntity, open-ended biographies: hallucinated entities as spans, factual ones kept in meta."""
    return HalluEntityAdapter()
