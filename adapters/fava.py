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
onto `output` by pairing up their non-space characters.

Rows and duplicates (measured on the released file, 460 rows, 267 distinct (prompt, output) pairs, 307 rows with
a tag, no tag repair needed). 146 pairs occur 2-5 times; in 118 of them the annotated strings differ (in 103 the spans still differ
after dropping rows that do not fit), so the repeats are separate annotations of one response, not copies. 28 rows
do not reproduce their `output`: their tagged text is another generation for the same prompt (it departs from
`output` after 42-80 non-space characters; difflib similarity 0.08-0.47), so no alignment can place their tags and
they are always dropped. Every pair still has at least one row that fits.

Options (`FavaAdapter(...)`, or `adapters.create("favabench", ...)`):

- `duplicates`: which rows of a pair give its gold spans. `first-matching` (default): the first row whose tags
  reproduce the output; `first`: the pair's first row, the pair dropped when that row does not fit (the rule of
  earlier versions); `union`: the union of the spans of every fitting row.
- `keep_untagged` (default True): a response no annotator tagged is a response without hallucination;
  False drops it.
- `exclude_types` (default none): error types not counted, e.g. `("subjective", "unverifiable")`.

Each variant's figures (harness tokens, i.e. `shambench data stats`; in brackets whitespace words), against
SHAM-Bench Table 1 (261 examples, 278.4 mean response words, 42.5 mean hallucinated words, rate 0.142):

| variant | examples | response tokens | hallucinated tokens | rate |
|---|---|---|---|---|
| first-matching (default) | 267 | 296.7 (249.8) | 35.0 (30.4) | 0.106 (0.109) |
| first | 253 | 293.3 (246.8) | 34.2 (29.7) | 0.105 (0.109) |
| union | 267 | 296.7 (249.8) | 46.8 (40.5) | 0.153 (0.157) |
| first-matching, keep_untagged=False | 186 | 318.2 (267.4) | 50.2 (43.6) | 0.152 (0.157) |
| first, keep_untagged=False | 172 | 314.8 (264.4) | 50.3 (43.7) | 0.154 (0.160) |
| union, keep_untagged=False | 203 | 314.2 (264.1) | 61.6 (53.2) | 0.201 (0.206) |
| first-matching, without subjective/unverifiable | 267 | 296.7 (249.8) | 25.1 (21.7) | 0.069 (0.071) |

(rate = mean over examples of hallucinated / response tokens.) No variant reproduces Table 1; its count (261)
lies between the one-example-per-response variants (267) and the legacy rule (253), and its rate between the
default's and the union's. The default keeps one example per released response, annotated by one annotator as a
whole: a union would mark text that the other annotators of the same response judged correct (the release's own
issue tracker reports contradictory duplicates) and makes the gold depend on how often a pair was repeated;
dropping untagged responses would remove the clean answers a detector must leave alone; and FAVA's own metric
counts subjective and unverifiable statements as hallucinations. `dropped` counts every row not used, by reason:
duplicate (another row of the pair was used), tags not reproducing the output, empty output, and (when asked)
untagged responses.

Human agreement (`Example.annotations`): each row of a response whose tags fit its output is one annotator's
reading (FAVA names no annotators: a reading is named after its record), set beside the gold the `duplicates`
rule builds from the response's other fitting rows (the first of them, or their union with `union`).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from functools import cached_property
from pathlib import Path

import numpy as np
from pydantic import ConfigDict

from shambench.adapters._released import example_at, json_array_rows, source_file
from shambench.data.adapter import Adapter, HubFiles, LoadResult, adapter
from shambench.schema import Annotations, MarkedByMoreThan, Model, Span
from shambench.sources import PAPER_SOURCE, PublishedCount

FILE = "annotations.json"
# The hub commit that added annotations.json (later commits changed only the card).
COMMIT = "d88b835ccd4075e52a54a29a9eafc31218a1d179"
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
UNTAGGED = "no error tag (keep_untagged=False)"
FIRST_MATCHING, FIRST, UNION = "first-matching", "first", "union"
DUPLICATE_RULES = (FIRST_MATCHING, FIRST, UNION)
RULE = (
    "FAVABench: each row of a response whose tags fit its output is one annotator's reading; the gold of a "
    "response is {gold}"
)
GOLD_RULES = {
    FIRST_MATCHING: "the first of its fitting rows (duplicates=first-matching)",
    FIRST: "its first row, when that row fits (duplicates=first; left out, the first of the other fitting rows)",
    UNION: "the union of its fitting rows' spans (duplicates=union)",
}


class FavaRow(Model):
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


class Tagged(Model):
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


# Whether each character below U+3001 is white space to `str.isspace`, and no character from U+3001 on is (the last
# entry stands for them all; tests/adapters/test_fava.py checks every code point).
_SPACE = np.array([chr(code).isspace() for code in range(0x3002)])


def _kept_positions(text: str) -> np.ndarray:
    """Positions of the characters `_comparable` keeps (neither whitespace nor part of a `</s>` artefact)."""
    # A test per character in Python was most of the cost of reading FAVABench: one code point a UTF-32 unit, looked
    # up in _SPACE at once (a lone surrogate passes as its code).
    codes = np.frombuffer(text.encode("utf-32-le", "surrogatepass"), dtype="<u4")
    kept = ~_SPACE[np.minimum(codes, len(_SPACE) - 1)]
    for m in ARTEFACT.finditer(text):
        kept[m.start() : m.end()] = False
    return np.flatnonzero(kept)


def spans_on_output(tagged: Tagged, output: str) -> list[tuple[int, int, str]] | None:
    """The spans moved from the clean text onto `output`; None when the two texts differ beyond whitespace."""
    if tagged.clean == output:
        return tagged.spans
    if _comparable(tagged.clean) != _comparable(output):
        return None
    # The two texts hold the same non-space characters in the same order: pair them up.
    where = np.full(len(tagged.clean), -1)
    where[_kept_positions(tagged.clean)] = _kept_positions(output)
    moved = []
    for start, end, kind in tagged.spans:
        placed = where[start:end]
        placed = placed[placed >= 0]
        if not placed.size:
            return None
        span = _stripped(output, int(placed[0]), int(placed[-1]) + 1, kind)
        if span:
            moved.append(span)
    return moved


class FavaAdapter(Adapter):
    """Reads FAVABench's `annotations.json` (options: see the module docstring)."""

    name = "favabench"
    folder = "fava"
    tasks = ("open_qa",)
    published_counts = {
        "open_qa/favabench": PublishedCount(count=261, source=PAPER_SOURCE),
    }
    span_types = ERROR_TYPES
    license = "CC BY 4.0"
    homepage = "https://huggingface.co/datasets/fava-uw/fava-data"
    revision = f"fava-uw/fava-data@{COMMIT[:7]} (annotations.json, 2024-01-14)"
    citation = "Mishra et al. 2024. Fine-grained Hallucination Detection and Editing for Language Models (FAVA). COLM."
    remote_files = (HubFiles(repo_id="fava-uw/fava-data", revision=COMMIT, files=(FILE,)),)

    def __init__(
        self, duplicates: str = FIRST_MATCHING, keep_untagged: bool = True, exclude_types: tuple[str, ...] = ()
    ):
        if duplicates not in DUPLICATE_RULES:
            raise ValueError(f"duplicates must be one of {', '.join(DUPLICATE_RULES)}, not {duplicates!r}")
        unknown = set(exclude_types) - set(ERROR_TYPES)
        if unknown:
            raise ValueError(f"unknown error type(s) {sorted(unknown)}; types are {', '.join(ERROR_TYPES)}")
        self.duplicates, self.keep_untagged, self.exclude_types = duplicates, keep_untagged, tuple(exclude_types)

    def available(self, data_dir: Path) -> bool:
        return (self.root(data_dir) / FILE).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        path = source_file(self.root(data_dir), FILE, self.name, EXPECTED)
        dropped: Counter[str] = Counter()
        pairs: dict[tuple[str, str], list[_Read]] = {}
        for index, (where, row) in enumerate(json_array_rows(path, FavaRow, EXPECTED)):
            tagged = parse_annotated(row.annotated)
            if tagged.repairs:
                log.info("%s: repaired %d unclosed, mismatched or stray error tag(s)", where, tagged.repairs)
            pairs.setdefault((row.prompt, row.output), []).append(_Read(index, where, row, tagged))
        examples = []
        for reads in pairs.values():
            chosen, reasons = self._annotations_of(reads)
            dropped.update(reasons)
            if not chosen:
                continue
            spans = [s for r in chosen for s in r.spans or [] if s[2] not in self.exclude_types]
            if not spans and not self.keep_untagged:
                dropped[UNTAGGED] += 1
                continue
            examples.append(self._example(chosen, spans, self._readings(reads)))
        return LoadResult(examples=examples, dropped={k: n for k, n in dropped.items() if n}, files=[FILE])

    def _annotations_of(self, reads: list[_Read]) -> tuple[list[_Read], Counter[str]]:
        """The rows whose tags make one response's gold spans, and why each other row of the pair is dropped."""
        reasons: Counter[str] = Counter()
        if not reads[0].row.output.strip():
            reasons[EMPTY] += len(reads)
            return [], reasons
        # Only the rows tried are aligned (the costly step); the others need only the cheap text comparison.
        candidates = [r for r in reads if r.fits]
        if self.duplicates == FIRST:
            candidates = reads[:1] if reads[0].fits else []
        if self.duplicates == UNION:
            chosen = [r for r in candidates if r.spans is not None]
        else:
            chosen = next(([r] for r in candidates if r.spans is not None), [])
        tried_unplaced = sum(r.fits and "spans" in vars(r) and r.spans is None for r in reads)
        reasons[MISMATCH] += sum(not r.fits for r in reads) + tried_unplaced
        reasons[DUPLICATE] += len(reads) - len(chosen) - reasons[MISMATCH]
        return chosen, reasons

    def _readings(self, reads: list[_Read]) -> Annotations:
        """Every fitting row of one response as an annotator's reading, beside the others' gold."""
        marked = {
            f"record {r.index}": [Span(start=a, end=b, label=k) for a, b, k in r.spans if k not in self.exclude_types]
            for r in reads
            if r.fits and r.spans is not None
        }
        return Annotations.leave_one_out(marked, self.gold_of, RULE.format(gold=GOLD_RULES[self.duplicates]))

    @property
    def gold_of(self) -> Callable[[list[list[Span]]], list[Span]]:
        """The gold this adapter's `duplicates` rule builds from the span lists of a response's fitting rows."""
        return MarkedByMoreThan(share=0.0) if self.duplicates == UNION else _first

    def _example(self, chosen: list[_Read], spans: list[tuple[int, int, str]], readings: Annotations):
        first = chosen[0]
        meta: dict = {"model": first.row.model, "record": first.index}
        if len(chosen) > 1:
            meta["records"] = [r.index for r in chosen]
        repairs = sum(r.tagged.repairs for r in chosen)
        if repairs:
            meta["tag_repairs"] = repairs
        return example_at(
            first.where,
            id=f"favabench/{first.index}",
            dataset=self.name,
            task="open_qa",
            question=first.row.prompt,
            response=first.row.output,
            hallu_spans=[list(s) for s in spans],
            annotations=readings,
            meta=meta,
        )


def _first(span_lists: list[list[Span]]) -> list[Span]:
    """The spans of the first list (the response's first other fitting row), none without any."""
    return span_lists[0] if span_lists else []


@dataclass
class _Read:
    """One row as read: its position and parsed tags; its spans on `output` are aligned on first use."""

    index: int
    where: str
    row: FavaRow
    tagged: Tagged

    @cached_property
    def fits(self) -> bool:
        """Whether the tagged text is the output up to whitespace and `</s>` artefacts (asked several times a row)."""
        return _comparable(self.tagged.clean) == _comparable(self.row.output)

    @cached_property
    def spans(self) -> list[tuple[int, int, str]] | None:
        """The spans on `output`; None when they cannot be placed there."""
        return spans_on_output(self.tagged, self.row.output)


@adapter("favabench")
def favabench(
    duplicates: str = FIRST_MATCHING, keep_untagged: bool = True, exclude_types: tuple[str, ...] = ()
) -> Adapter:
    """FAVABench (FAVA human annotations), open-domain QA: tagged error spans of ChatGPT/Llama-2 answers."""
    return FavaAdapter(duplicates=duplicates, keep_untagged=keep_untagged, exclude_types=exclude_types)
