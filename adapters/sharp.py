"""SHARP: GSM8K and MATH solutions by open 7B models, with step labels and the exact erroneous fragments marked by
a teacher model (Hugging Face `ZaandaTeika/SHARP`, gated: accept its conditions and log in to download).

Four configs, each with `train` and `test` Parquet splits, read in pairs joined by position (row i of a step
config and row i of its SPAN config are the same solution):

- step view `SHARP-GSM8K`, `SHARP-Math`: `{question, steps: [str], step_labels: [int]}`, 1 sound and 0
  hallucinated, each row cut after its first 0;
- span view `SHARP-GSM8K-SPAN`, `SHARP-Math-SPAN`: `{question, model_answer, hallucination_annotation}`, the
  untruncated solution as blank-line-separated steps (a string or a list of step strings) and the same text with
  erroneous fragments wrapped in `<HAL>...</HAL>`.

The response is the span view's steps joined with a blank line; the steps take the step view's labels by position
and the steps after a row's first 0 are unlabelled (None); the gold spans are the HAL fragments located in the
clean text. The card's known defects are handled and counted (per row in `meta["defects"]`, totals in the log):

- `crlf right`: a LaTeX `\\right` decoded as carriage return + `ight`, restored in every text field;
- `placeholder`: an error-free row whose annotation (or answer) is the literal `No hallucinations`: no span, and
  the answer taken from the step view when it is the placeholder;
- `whitespace reflow`: stripping the tags gives the answer only up to whitespace: spans moved through the
  alignment of non-whitespace characters.

Rows are dropped, counted by reason, when the views disagree beyond that (more labelled steps than answer steps,
or an annotation that differs from the answer in more than whitespace).
"""

from __future__ import annotations

import logging
import re
from collections import Counter
from pathlib import Path

from pydantic import ConfigDict

from shambench.adapters._released import data_rows, example_at, split_files
from shambench.data.adapter import Adapter, HubFiles, LoadResult, adapter
from shambench.data.steps import step_fields
from shambench.errors import SourceError
from shambench.schema import Example, Model

log = logging.getLogger(__name__)

TASK = "math_step"
SEPARATOR = "\n\n"
PARTS = {"gsm8k": "SHARP-GSM8K", "math": "SHARP-Math"}
BLANK_LINE = re.compile(r"\n[ \t]*\n")
HAL_TAG = re.compile(r"</?HAL>")
# "\right" whose "\r" was decoded as an escape: a carriage return followed by "ight".
CR_RIGHT = re.compile("\right")
PLACEHOLDER = "No hallucinations"
STEP_EXPECTED = "SHARP step-view rows with question, steps and step_labels"
SPAN_EXPECTED = "SHARP span-view rows with question, model_answer and hallucination_annotation"
UNEVEN = "step view has not one label per step"
MORE_LABELS = "step view has more labelled steps than the answer has steps"
NOT_ANSWER = "annotation differs from the answer beyond whitespace"


class StepRow(Model):
    """A step-view row."""

    model_config = ConfigDict(extra="ignore")

    question: str
    """The problem."""
    steps: list[str]
    """Solution steps up to and including the first hallucinated one."""
    step_labels: list[int]
    """1 sound, 0 hallucinated."""


class SpanRow(Model):
    """A span-view row."""

    model_config = ConfigDict(extra="ignore")

    question: str
    """The problem."""
    model_answer: str | list[str]
    """The untruncated solution (blank-line-separated steps, or their list)."""
    hallucination_annotation: str | list[str]
    """The solution with `<HAL>...</HAL>` around erroneous fragments."""


def as_steps(value: str | list[str]) -> list[str]:
    """Step strings of a field given as one blank-line-separated string or as a list."""
    parts = value if isinstance(value, list) else BLANK_LINE.split(value)
    return [p.strip() for p in parts if p.strip()]


def restore_right(text: str) -> str:
    """The text with every carriage return + `ight` turned back into `\\right`."""
    return CR_RIGHT.sub(lambda _: "\\right", text)


def hal_spans(annotated: str) -> tuple[str, list[tuple[int, int]]]:
    """The clean text and the `(start, end)` of each HAL fragment in it; an unclosed tag runs to the end."""
    clean, spans, opened, pos = [], [], None, 0
    length = 0
    for m in HAL_TAG.finditer(annotated):
        clean.append(annotated[pos : m.start()])
        length += m.start() - pos
        pos = m.end()
        if m.group() == "<HAL>" and opened is None:
            opened = length
        elif m.group() == "</HAL>" and opened is not None:
            spans.append((opened, length))
            opened = None
    clean.append(annotated[pos:])
    length += len(annotated) - pos
    if opened is not None:
        spans.append((opened, length))
    return "".join(clean), [(s, e) for s, e in spans if e > s]


def moved_spans(clean: str, answer: str, spans: list[tuple[int, int]]) -> list[tuple[int, int]] | None:
    """Spans of `clean` moved onto `answer` through their non-whitespace characters; None when the two texts
    differ beyond whitespace. Spans covering only whitespace vanish."""
    src = [i for i, ch in enumerate(clean) if not ch.isspace()]
    dst = [i for i, ch in enumerate(answer) if not ch.isspace()]
    if [clean[i] for i in src] != [answer[i] for i in dst]:
        return None
    rank = {pos: k for k, pos in enumerate(src)}
    out = []
    for start, end in spans:
        inside = [rank[i] for i in range(start, end) if i in rank]
        if inside:
            out.append((dst[inside[0]], dst[inside[-1]] + 1))
    return out


class SharpAdapter(Adapter):
    """Reads SHARP's step and span views and joins them."""

    name = "sharp"
    suite = "sharp"
    datasets = ("sharp/*",)
    step_level = True
    tasks = (TASK,)
    splits = ("test", "train")
    license = "not stated on the dataset card (gated: accept the conditions on the hub)"
    homepage = "https://huggingface.co/datasets/ZaandaTeika/SHARP"
    # No commit of the repository is known here: the download takes main's, says so, and records it.
    revision = "ZaandaTeika/SHARP main (the commit downloaded is recorded beside the files)"
    citation = "SHARP: step-level hallucination annotations for mathematical reasoning (dataset card, ZaandaTeika)."
    # File names are not known here: the card and every data file are fetched as the hub lists them, and each
    # config's split is found through the card's `configs` (else `<config>/<split>-*`).
    remote_files = (
        HubFiles(
            repo_id="ZaandaTeika/SHARP", revision="", files=("README.md", "*.parquet", "*.json", "*.jsonl"), gated=True
        ),
    )

    def _files(self, data_dir: Path, config: str, split: str) -> list[Path]:
        return split_files(self.root(data_dir), split, config)

    def available(self, data_dir: Path) -> bool:
        return any(
            self._files(data_dir, base, "test") and self._files(data_dir, f"{base}-SPAN", "test")
            for base in PARTS.values()
        )

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        root = self.root(data_dir)
        examples: list[Example] = []
        dropped: Counter[str] = Counter()
        defects: Counter[str] = Counter()
        files: list[str] = []
        for part, base in PARTS.items():
            step_paths = self._files(data_dir, base, split)
            span_paths = self._files(data_dir, f"{base}-SPAN", split)
            if not step_paths and not span_paths:
                continue
            if not step_paths or not span_paths:
                missing = base if not step_paths else f"{base}-SPAN"
                raise SourceError(f"{root / missing}: no {split} data files (both views of {base} are needed)")
            steps = [r for p in step_paths for r in data_rows(p, StepRow, STEP_EXPECTED)]
            spans = [r for p in span_paths for r in data_rows(p, SpanRow, SPAN_EXPECTED)]
            if len(steps) != len(spans):
                raise SourceError(
                    f"{root / base}: {len(steps)} step-view rows but {len(spans)} span-view rows in {split} "
                    "(the views are joined by position)"
                )
            files += [str(p.relative_to(root)) for p in step_paths + span_paths]
            for index, ((where, step_row), (_, span_row)) in enumerate(zip(steps, spans)):
                found: list[str] = []
                ex = self._example(where, f"sharp/{part}/{split}/{index}", part, split, step_row, span_row, found)
                if isinstance(ex, str):
                    dropped[ex] += 1
                    continue
                defects.update(found)
                examples.append(ex)
        if not files:
            raise SourceError(
                f"{root}: no SHARP {split} data files (expected them where the card's configs say, or <config>/{split}-*)"
            )
        if defects:
            log.info("sharp %s: repaired card defects %s", split, dict(defects))
        return LoadResult(examples=examples, dropped=dict(dropped), files=files)

    def _example(
        self, where: str, ident: str, part: str, split: str, step_row: StepRow, span_row: SpanRow, found: list[str]
    ) -> Example | str:
        """The joined example, or the reason the row is dropped; repaired defects are appended to `found`."""
        if any(CR_RIGHT.search(t) for t in _texts(step_row, span_row)):
            found.append("crlf right")
        answer = [restore_right(s) for s in as_steps(span_row.model_answer)]
        annotation = SEPARATOR.join(restore_right(s) for s in as_steps(span_row.hallucination_annotation))
        if SEPARATOR.join(answer) == PLACEHOLDER:
            answer = [restore_right(s) for s in step_row.steps]
        if PLACEHOLDER in (SEPARATOR.join(as_steps(span_row.model_answer)), annotation):
            found.append("placeholder")
        if len(step_row.step_labels) != len(step_row.steps):
            return UNEVEN
        if len(step_row.step_labels) > len(answer):
            return MORE_LABELS
        labels = list(step_row.step_labels) + [None] * (len(answer) - len(step_row.step_labels))
        fields = step_fields(answer, labels, SEPARATOR)
        located: list[tuple[int, int]] | None = []
        if annotation != PLACEHOLDER:
            clean, raw = hal_spans(annotation)
            located = raw if clean == fields["response"] else moved_spans(clean, fields["response"], raw)
            if located is None:
                return NOT_ANSWER
            if clean != fields["response"]:
                found.append("whitespace reflow")
        fields["hallu_spans"] = [list(s) for s in located or []]
        return example_at(
            where,
            id=ident,
            dataset=f"sharp/{part}",
            task=TASK,
            split=split,
            question=restore_right(span_row.question),
            **fields,
            meta={"defects": found} if found else {},
        )


def _texts(step_row: StepRow, span_row: SpanRow) -> list[str]:
    fields = [span_row.question, step_row.question, *step_row.steps]
    for value in (span_row.model_answer, span_row.hallucination_annotation):
        fields += value if isinstance(value, list) else [value]
    return fields


@adapter("sharp")
def sharp() -> Adapter:
    """SHARP: step labels and HAL-marked fragments of 7B models' GSM8K and MATH solutions (step + span views)."""
    return SharpAdapter()
