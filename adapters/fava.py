"""FAVABench (Mishra et al. 2024): human-annotated ChatGPT and Llama-2-Chat answers with tagged errors.

Reads `annotations.json` from the Hugging Face dataset `fava-uw/fava-data` (a JSON array of 460 records with
`prompt`, `output` = the raw response, `annotated` = the response with error tags, `model`).

Tags to character spans, scanning `annotated` left to right:
- text inside `<mark>...</mark>` is a suggested correction, absent from the response: skipped;
- `<delete>...</delete>` holds response text the annotator would delete: the tags go, the text stays;
- an error-type tag (`<entity>`, `<relation>`, `<contradictory>`, `<invented>`, `<subjective>`,
  `<unverifiable>`, `<sentence>`, and the misspellings in `ALIASES`) opens a span at the current length of the
  clean text and its closing tag ends it, so an entity/relation span covers only its `<delete>` text and a
  sentence-type span the whole wrapped sentence;
- a closing tag closes any error tag opened after its own opener; a stray closing tag is ignored; an unclosed tag
  ends at the end of its sentence (or of the text); each repair is counted in `meta["tag_repairs"]`;
- any other tag (`<b>`, `</s>`, ...) is dropped and its text kept.
Spans are stripped of surrounding whitespace and labelled with their error type. All six types count as
hallucinations, as in FAVA's own metric (subjective and unverifiable statements are unsupported claims).

The clean text must equal `output`; when they differ only in whitespace or `</s>` artefacts the spans are moved
onto `output` through a character alignment (difflib). Dropped, each counted by reason: rows repeating an
earlier (prompt, output) pair (the release has duplicates), rows with an empty output, and rows whose tagged
text does not reproduce the output. Rows without any tag are kept as responses without hallucination.
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from difflib import SequenceMatcher
from pathlib import Path

from pydantic import BaseModel, ConfigDict

from shambench.adapters._released import example_at, json_array_rows, source_file
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter

FILE = "annotations.json"
EXPECTED = "a JSON array of FAVA records with prompt, output and annotated"
ERROR_TYPES = ("entity", "relation", "contradictory", "invented", "subjective", "unverifiable", "sentence")
# Misspelt tag names seen in FAVA's annotations and training data, mapped to the type they mean.
ALIASES = {
    "relational_error": "relation",
    "relative": "relation",
    "contradictary": "contradictory",
    "contraditory": "contradictory",
    "contradicatory": "contradictory",
    "contradiciary": "contradictory",
    "contrdictory": "contradictory",
    "contradiction": "contradictory",
    "contrast": "contradictory",
    "unvalidatable": "unverifiable",
    "inverted": "invented",
    "subective": "subjective",
    "subj": "subjective",
}
TAG = re.compile(r"<(/?)\s*([A-Za-z_]+)[^<>]*>")
SENTENCE_END = re.compile(r"[.!?](?=\s|$)")
ARTEFACT = re.compile(r"</?s>")
log = logging.getLogger(__name__)

DUPLICATE = "duplicate (prompt, output)"
EMPTY = "empty output"
MISMATCH = "annotated text does not reproduce output"


class FavaRow(BaseModel):
    """One record of `annotations.json` (fields this adapter reads; the rest are ignored)."""

    model_config = ConfigDict(extra="ignore")

    prompt: str
    """The user's question."""
    output: str
    """The model's raw response."""
    annotated: str
    """The response with error tags and suggested corrections."""
    model: str = ""
    """The model that wrote the response."""


class Tagged(BaseModel):
    """What the tags of one `annotated` string say."""

    clean: str
    """The response text the tags wrap (corrections removed)."""
    spans: list[tuple[int, int, str]]
    """Error spans on `clean`: start, end, error type; stripped of whitespace, non-empty."""
    repairs: int = 0
    """Unclosed, mismatched or stray error tags that had to be repaired."""


def error_type(tag: str) -> str | None:
    """The canonical error type a tag name stands for, None for any other tag."""
    tag = tag.lower()
    return tag if tag in ERROR_TYPES else ALIASES.get(tag)


def parse_annotated(annotated: str) -> Tagged:
    """The clean response and its error spans, read from FAVA's tagged text (rules in the module docstring)."""
    out: list[str] = []
    length = 0
    stack: list[tuple[str, int]] = []
    raw: list[tuple[int, int, str]] = []
    repairs = 0
    in_mark = 0
    last = 0
    for m in TAG.finditer(annotated):
        if not in_mark:
            out.append(annotated[last : m.start()])
            length += m.start() - last
        last = m.end()
        closing, name = m.group(1) == "/", m.group(2).lower()
        if name == "mark":
            in_mark = max(0, in_mark - 1) if closing else in_mark + 1
            continue
        kind = error_type(name)
        if kind is None or in_mark:
            continue
        if not closing:
            stack.append((kind, length))
            continue
        opened = [i for i, (k, _) in enumerate(stack) if k == kind]
        if not opened:
            repairs += 1
            continue
        repairs += len(stack) - 1 - opened[-1]
        raw.extend((start, length, k) for k, start in stack[opened[-1] :])
        del stack[opened[-1] :]
    if not in_mark:
        out.append(annotated[last:])
    clean = "".join(out)
    for kind, start in stack:
        end = SENTENCE_END.search(clean, start)
        raw.append((start, end.end() if end else len(clean), kind))
    repairs += len(stack)
    spans = [s for s in (_stripped(clean, *r) for r in raw) if s]
    return Tagged(clean=clean, spans=spans, repairs=repairs)


def _stripped(text: str, start: int, end: int, kind: str) -> tuple[int, int, str] | None:
    while start < end and text[start].isspace():
        start += 1
    while end > start and text[end - 1].isspace():
        end -= 1
    return (start, end, kind) if start < end else None


def _comparable(text: str) -> str:
    return "".join(ARTEFACT.sub("", text).split())


def spans_on_output(tagged: Tagged, output: str) -> list[tuple[int, int, str]] | None:
    """The spans moved from the clean text onto `output`; None when the two texts differ beyond whitespace."""
    if tagged.clean == output:
        return tagged.spans
    if _comparable(tagged.clean) != _comparable(output):
        return None
    where = [-1] * len(tagged.clean)
    for block in SequenceMatcher(None, tagged.clean, output, autojunk=False).get_matching_blocks():
        for k in range(block.size):
            where[block.a + k] = block.b + k
    moved = []
    for start, end, kind in tagged.spans:
        placed = [where[i] for i in range(start, end) if where[i] >= 0]
        if not placed:
            return None
        span = _stripped(output, placed[0], placed[-1] + 1, kind)
        if span:
            moved.append(span)
    return moved


class FavaAdapter(Adapter):
    """Reads FAVABench's `annotations.json`."""

    name = "favabench"
    folder = "fava"
    tasks = ("open_qa",)
    license = "CC BY 4.0"
    homepage = "https://huggingface.co/datasets/fava-uw/fava-data"
    revision = "fava-uw/fava-data@d88b835 (annotations.json, 2024-01-14)"
    citation = "Mishra et al. 2024. Fine-grained Hallucination Detection and Editing for Language Models (FAVA). COLM."
    remote_files = (
        RemoteFile(url="https://huggingface.co/datasets/fava-uw/fava-data/resolve/main/annotations.json", path=FILE),
    )

    def available(self, data_dir: Path) -> bool:
        return (self.root(data_dir) / FILE).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        path = source_file(self.root(data_dir), FILE, self.name, EXPECTED)
        dropped: Counter[str] = Counter()
        seen: set[tuple[str, str]] = set()
        examples = []
        for index, (where, row) in enumerate(json_array_rows(path, FavaRow, EXPECTED)):
            key = (row.prompt, row.output)
            reason = DUPLICATE if key in seen else EMPTY if not row.output.strip() else None
            seen.add(key)
            tagged = parse_annotated(row.annotated)
            spans = None if reason else spans_on_output(tagged, row.output)
            if spans is None:
                dropped[reason or MISMATCH] += 1
                continue
            meta = {"model": row.model, "record": index}
            if tagged.repairs:
                meta["tag_repairs"] = tagged.repairs
                log.info("%s: repaired %d unclosed, mismatched or stray error tag(s)", where, tagged.repairs)
            examples.append(
                example_at(
                    where,
                    id=f"favabench/{index}",
                    dataset=self.name,
                    task="open_qa",
                    question=row.prompt,
                    response=row.output,
                    hallu_spans=[list(s) for s in spans],
                    meta=meta,
                )
            )
        return LoadResult(examples=examples, dropped=dict(dropped), files=[FILE])


@adapter("favabench")
def favabench() -> Adapter:
    """FAVABench (FAVA human annotations), open-domain QA: tagged error spans of ChatGPT/Llama-2 answers."""
    return FavaAdapter()
