"""Math-Shepherd (Wang et al. 2024): GSM8K and MATH solutions with automatic per-step `+`/`-` labels (Monte-Carlo
rollout estimates: a step is `+` when some sampled continuation from it reaches the right answer).

Two released formats are read:

- raw (`peiyi9979/Math-Shepherd`, and openr's 7-row sample): `{input, label, task}`, where `ки` ends each step in
  `input` and `label` is the same text with each marker replaced by one `+` or `-` character;
- TRL's (`trl-lib/math_shepherd`, Parquet): `{prompt, completions: [str], labels: [bool]}`.

A raw row is converted as TRL's script does: markers become one character so that `input` and `label` align, the
text before the first marker splits into question and "Step 1: ..." on `Step 1:`, else `step 1:`, else the first
`?`; the other pieces, stripped, are steps 2..n. Rows whose prompt starts with one of TRL's twelve prefixes
(where an annotation leaked into the prompt and TRL drops the first label) are dropped and counted.

The response is the steps joined with one newline; every step labelled `-` is a gold span (labels need not be
monotone). Splits: `test` and `train` are TRL's (`data/<split>-*.parquet`), `train` falls back to the raw
`math-shepherd.jsonl`, and `sample` is openr's 7-row file, a loader check rather than a benchmark.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from pydantic import ConfigDict

from shambench.adapters._released import example_at, jsonl_rows, parquet_rows
from shambench.data.adapter import Adapter, HubFiles, LoadResult, RemoteFile, adapter
from shambench.data.steps import step_fields
from shambench.errors import SourceError
from shambench.schema import Example, Model, Name

TASK = "math_step"
SEPARATOR = "\n"
MARKER = "ки"
# One character standing for the two-character marker, so that `input` and `label` line up (TRL's choice).
PLACEHOLDER = "ⶻ"
RAW_FILE = "math-shepherd.jsonl"
SAMPLE_FILE = "samples_math-shepherd.openr.jsonl"
# The dataset, suite and command-line name (one spelling for all three).
NAME = "math-shepherd"
# trl-lib/math_shepherd at the commit whose data/ holds test-00000-of-00001.parquet (9.6 MB).
TRL_COMMIT = "004d0e7dc9249b4af58ce41e58b7d2fef184dade"
RAW_EXPECTED = "Math-Shepherd JSON lines with input (steps ending in ки) and label (+/- in place of each ки)"
TRL_EXPECTED = "TRL's Math-Shepherd rows with prompt, completions (list of steps) and labels (list of booleans)"
LEAKED_PREFIXES = (
    "Mr. Rocky",
    "Parker",
    "What is the smallest positive",
    " The Myth",
    "Let $\\mathbf{a}$",
    "Find the arithmetic",
    "Determine an ordered pair",
    "Determine the ordered pair",
    "At the Quill and Scroll stationery",
    "Round to the nearest",
    "Calculate $\\sqrt{10p}",
    "Simplify $\\sqrt{28x}",
)
LEAKED = "annotation leaked into the prompt (TRL's twelve prefixes)"


class RawRow(Model):
    """One raw Math-Shepherd line."""

    model_config = ConfigDict(extra="ignore")

    input: str
    """Question and steps, each step ending in `ки`."""
    label: str
    """The same text with `+` or `-` in place of each marker."""
    task: Name = ""
    """`GSM8K` or `MATH`."""


class TrlRow(Model):
    """One row of TRL's conversion."""

    model_config = ConfigDict(extra="ignore")

    prompt: str
    """The question."""
    completions: list[str]
    """The steps."""
    labels: list[bool]
    """True for a `+` step."""


def _split_first(piece: str) -> tuple[str, str]:
    """Question and first step of the text before the first marker."""
    for cue in ("Step 1:", "step 1:"):
        if cue in piece:
            question, rest = piece.split(cue, 1)
            return question, "Step 1:" + rest
    if "?" in piece:
        question, rest = piece.split("?", 1)
        return question + "?", "Step 1:" + rest
    raise ValueError("no `Step 1:` and no `?` to split the question from the first step")


def raw_steps(row: RawRow) -> tuple[str, list[str], list[int]]:
    """Question, steps and 1/0 labels of a raw row; ValueError when the row is not in the released format."""
    text = row.input.replace(MARKER, PLACEHOLDER)
    if len(text) != len(row.label):
        raise ValueError(f"input has {len(text)} characters after marking steps but label has {len(row.label)}")
    marks = [i for i, ch in enumerate(text) if ch == PLACEHOLDER]
    if not marks:
        raise ValueError(f"no {MARKER} step marker in input")
    bad = sorted({row.label[i] for i in marks} - {"+", "-"})
    if bad:
        raise ValueError(f"label has {bad} where a marker is, expected + or -")
    pieces = text.split(PLACEHOLDER)
    if pieces[-1].strip():
        raise ValueError("text after the last step marker")
    question, first = _split_first(pieces[0])
    steps = [first.strip()] + [p.strip() for p in pieces[1:-1]]
    return question.strip(), steps, [int(row.label[i] == "+") for i in marks]


def _example(where: str, ident: str, split: str, question: str, steps: list[str], labels: list[int], meta) -> Example:
    return example_at(
        where,
        id=ident,
        dataset=NAME,
        task=TASK,
        split=split,
        question=question,
        **step_fields(steps, labels, SEPARATOR),
        meta=meta,
    )


class MathShepherdAdapter(Adapter):
    """Reads Math-Shepherd in its raw or TRL format."""

    name = NAME
    folder = "math_shepherd"  # the folder name of the released copies (and of ../shared/data)
    suite = "math-shepherd"
    step_level = True
    # Its steps are also scored by character, as the SOPO kit scores them.
    char_level = True
    tasks = (TASK,)
    splits = ("test", "train", "sample")
    license = "not stated on the dataset card (openr's sample: MIT)"
    homepage = "https://huggingface.co/datasets/peiyi9979/Math-Shepherd"
    revision = f"trl-lib/math_shepherd@{TRL_COMMIT[:7]} (TRL's 95/5 split, seed 42); openr@c327792 for the sample"
    citation = "Wang et al. 2024. Math-Shepherd: Verify and Reinforce LLMs Step-by-step without Human Annotations. ACL."
    remote_files = (
        HubFiles(repo_id="trl-lib/math_shepherd", revision=TRL_COMMIT, files=("data/test-*.parquet",)),
        RemoteFile(
            url="https://raw.githubusercontent.com/openreasoner/openr/c32779289ff25218c76425a9024f09c8853035a4/"
            "preprocess/tests/samples_math-shepherd.jsonl",
            path=SAMPLE_FILE,
            sha256="b3552efa664e0ea1da56b4da3291a33b18160110ddbd1a40e26e9021e3e0fdee",
        ),
    )

    def _trl_files(self, data_dir: Path, split: str) -> list[Path]:
        return sorted((self.root(data_dir) / "data").glob(f"{split}-*.parquet"))

    def available(self, data_dir: Path) -> bool:
        root = self.root(data_dir)
        trl = any(self._trl_files(data_dir, s) for s in ("test", "train"))
        return trl or (root / RAW_FILE).is_file() or (root / SAMPLE_FILE).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        root = self.root(data_dir)
        trl = self._trl_files(data_dir, split) if split != "sample" else []
        if trl:
            return self._load_trl(root, trl, split)
        raw = root / (SAMPLE_FILE if split == "sample" else RAW_FILE)
        if split == "test" or not raw.is_file():
            wanted = f"data/{split}-*.parquet" + ("" if split == "test" else f" or {raw.name}")
            hint = " (only openr's 7-row sample is here: pass --split sample)" if (root / SAMPLE_FILE).is_file() else ""
            raise SourceError(f"{root}: no {wanted} for the {split!r} split{hint}")
        return self._load_raw(root, raw, split)

    def _load_raw(self, root: Path, path: Path, split: str) -> LoadResult:
        dropped: Counter[str] = Counter()
        examples = []
        for index, (where, row) in enumerate(jsonl_rows(path, RawRow, RAW_EXPECTED)):
            if row.input.startswith(LEAKED_PREFIXES):
                dropped[LEAKED] += 1
                continue
            try:
                question, steps, labels = raw_steps(row)
            except ValueError as err:
                raise SourceError(f"{where}: {err} (expected {RAW_EXPECTED})") from None
            meta = {"source_task": row.task, "line": index}
            examples.append(_example(where, f"{NAME}/{split}/{index}", split, question, steps, labels, meta))
        return LoadResult(examples=examples, dropped=dict(dropped), files=[path.name])

    def _load_trl(self, root: Path, paths: list[Path], split: str) -> LoadResult:
        examples: list[Example] = []
        for path in paths:
            for where, row in parquet_rows(path, TrlRow, TRL_EXPECTED):
                if len(row.completions) != len(row.labels) or not row.completions:
                    raise SourceError(
                        f"{where}: {len(row.completions)} completions but {len(row.labels)} labels "
                        f"(expected {TRL_EXPECTED}, one label per step)"
                    )
                ident = f"{NAME}/{split}/{len(examples)}"
                labels = [int(v) for v in row.labels]
                examples.append(_example(where, ident, split, row.prompt.strip(), row.completions, labels, {}))
        return LoadResult(examples=examples, files=[str(p.relative_to(root)) for p in paths])


@adapter(NAME)
def math_shepherd() -> Adapter:
    """Math-Shepherd: automatic +/- labels per step of GSM8K/MATH solutions (raw or TRL format)."""
    return MathShepherdAdapter()
