"""RAGTruth (Niu et al., ACL 2024): word-level hallucination spans in RAG answers, data-to-text and news summaries.

Three released layouts are read; for each split the first one present wins:

1. the official release (`response.jsonl` + `source_info.jsonl`, ParticleMedia/RAGTruth `dataset/`): responses of
   the asked `split` are kept and those whose `quality` is not `good` are dropped and counted (as the authors' own
   `prepare_dataset.py` filters them);
2. `test` only: the complete official test split as Microsoft's ConstrainedReasoner republished it
   (`constrainedreasoner_test/RAGTruth_responselevel_test.tsv` + `groundingsources/<source_id>.txt`, 2,675 good
   responses of 450 sources);
3. `train` only: FaithJudge's per-source files (`faithjudge_eval_data/*.jsonl`) minus the sources of the test
   split. FaithJudge drops the response ids, so these ids are `ragtruth/<source_id>-<model>`.

Every other id is `ragtruth/<response id>`, the same in layouts 1 and 2. All four label types (Evident/Subtle
Conflict, Evident/Subtle Baseless Info) are hallucinations, `implicit_true` ones included; each label becomes a span
whose `label` is its type, and overlapping spans merge. A response is dropped, and counted, when a label's offsets
fall outside it or do not frame the label's own `text`, or when its source record is missing or malformed.

`question` and `context` are the source record made readable (stripped; a data-to-text record as indented lines);
`meta["reference"]` keeps the source as the authors' baseline puts it in its prompt (`baseline_reference`).
"""

from __future__ import annotations

import json
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, ValidationError

import shambench.fs as fs
from shambench.adapters._released import csv_rows, jsonl_rows, source_file, validated
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.data.formats import PredictionsFormat, PredictionsRead, predictions_format
from shambench.errors import DataError, SourceError
from shambench.io import iter_lines, parse_json_line, validation_message
from shambench.schema import Example, Model, Name, Prediction, Span
from shambench.sources import PAPER_SOURCE, PublishedCount
from shambench.structured import json_value, literal_value

TASKS = {"QA": "context_qa", "Summary": "summ", "Data2txt": "data2txt"}
"""RAGTruth `task_type` → shambench task."""

OFFICIAL_RESPONSES = "response.jsonl"
OFFICIAL_SOURCES = "source_info.jsonl"
CR_TABLE = "constrainedreasoner_test/RAGTruth_responselevel_test.tsv"
CR_SOURCES = "constrainedreasoner_test/groundingsources"
FAITHJUDGE_FILES = {
    "QA": "faithjudge_eval_data/ragtruth_qa.jsonl",
    "Summary": "faithjudge_eval_data/ragtruth_summary.jsonl",
    "Data2txt": "faithjudge_eval_data/ragtruth_data2txt.jsonl",
}

_CR_COLUMNS = ("id", "EncounterID", "model", "temperature", "labels", "split", "quality", "response", "task_type")
_EXPECTED_RESPONSES = "RAGTruth response lines with id, source_id, model, labels, split, quality and response"
_EXPECTED_SOURCES = "RAGTruth source lines with source_id, task_type and source_info"
_EXPECTED_CR = f"ConstrainedReasoner's tab-separated columns {', '.join(_CR_COLUMNS)}"
_EXPECTED_FAITHJUDGE = "FaithJudge source lines with source_id, source and responses (model, labels, response)"
_COMMIT = "c103204b9ce28d6bbad859304bf30de72b8ed8fe"
_RAW = f"https://raw.githubusercontent.com/ParticleMedia/RAGTruth/{_COMMIT}/dataset"


LABEL_TYPES = ("Evident Conflict", "Subtle Conflict", "Evident Baseless Info", "Subtle Baseless Info")
"""RAGTruth's label types, each span's error type as released."""


class Label(Model):
    """One released hallucination label of a response."""

    model_config = ConfigDict(extra="ignore")

    start: int
    """Offset of the first character in the response."""
    end: int
    """Offset one past the last character."""
    text: str | None = None
    """The labelled characters, as the annotators' tool recorded them."""
    label_type: str
    """Evident Conflict, Subtle Conflict, Evident Baseless Info or Subtle Baseless Info."""


class ResponseRow(Model):
    """One annotated response (a line of `response.jsonl`, or its equivalent in the other layouts)."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True, protected_namespaces=())

    id: Name
    """Response id (FaithJudge rows: `<source_id>-<model>`)."""
    source_id: Name
    """Id of the grounding source the response was generated from."""
    model: str
    """The generating LLM, e.g. `gpt-4-0613`."""
    temperature: float | None = None
    """Sampling temperature, when the layout records it."""
    labels: list[Label]
    """The hallucination labels."""
    split: Name
    """`train` or `test`."""
    quality: str = "good"
    """`good`, or the quality issue (`incorrect_refusal`, `truncated`)."""
    response: str
    """The model output the labels index into."""


class SourceRow(Model):
    """One line of `source_info.jsonl`: the grounding record shared by a source's responses."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)

    source_id: Name
    """Id of the source."""
    task_type: str
    """`QA`, `Summary` or `Data2txt`."""
    source_info: str | dict[str, Any]
    """QA: `{question, passages}`; Summary: the article; Data2txt: the Yelp business record."""


class FaithJudgeResponse(Model):
    """One response inside a FaithJudge source line."""

    model_config = ConfigDict(extra="ignore", protected_namespaces=())

    model: str
    """The generating LLM."""
    labels: list[Label]
    """The hallucination labels."""
    response: str
    """The model output."""


class FaithJudgeSource(Model):
    """One line of a FaithJudge file: a source with its responses."""

    model_config = ConfigDict(extra="ignore", coerce_numbers_to_str=True)

    source_id: Name
    """RAGTruth source id."""
    source: str | dict[str, Any]
    """The grounding record, shaped as `SourceRow.source_info`."""
    responses: list[FaithJudgeResponse]
    """The source's good-quality responses."""


class RAGTruthAdapter(Adapter):
    """RAGTruth's test split (QA, data-to-text, summarisation), and its train split for the dev set."""

    name = "ragtruth"
    tasks = ("context_qa", "data2txt", "summ")
    published_counts = {
        "context_qa/ragtruth": PublishedCount(count=875, source=PAPER_SOURCE),
        "data2txt/ragtruth": PublishedCount(count=900, source=PAPER_SOURCE),
        "summ/ragtruth": PublishedCount(count=900, source=PAPER_SOURCE),
    }
    span_types = LABEL_TYPES
    splits = ("test", "train")
    license = "MIT"
    homepage = "https://github.com/ParticleMedia/RAGTruth"
    revision = (
        f"ParticleMedia/RAGTruth@{_COMMIT}; test copy microsoft/ConstrainedReasoner@"
        "f691037901698474e5c38edca5b16431a68d11ec; train copy vectara/FaithJudge@ca35eb45d0d32cffd5ddc2d6513c4e8342cb9f5d"
    )
    citation = (
        "Cheng Niu, Yuanhao Wu, Juno Zhu, Siliang Xu, Kashun Shum, Randy Zhong, Juntong Song, Tong Zhang. "
        "RAGTruth: A Hallucination Corpus for Developing Trustworthy Retrieval-Augmented Language Models. ACL 2024."
    )
    # No offline copy of the official files exists to compute a SHA-256 from; the public tree at the commit lists
    # their git blob ids.
    remote_files = (
        RemoteFile(
            url=f"{_RAW}/{OFFICIAL_RESPONSES}",
            path=OFFICIAL_RESPONSES,
            git_blob="f9ae5913fb9976684f3e13be3cd3465062db54cc",
        ),
        RemoteFile(
            url=f"{_RAW}/{OFFICIAL_SOURCES}", path=OFFICIAL_SOURCES, git_blob="119277774009f110aa58596b93f9512f62594a89"
        ),
    )

    def available(self, data_dir: Path) -> bool:
        root = self.root(data_dir)
        return _has_official(root) or ((root / CR_TABLE).is_file() and (root / CR_SOURCES).is_dir())

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        root = self.root(data_dir)
        if _has_official(root):
            return _official_load(root, split)
        if split == "test":
            return _constrainedreasoner_load(root)
        return _faithjudge_train_load(root)


@adapter("ragtruth")
def ragtruth() -> Adapter:
    """RAGTruth (Niu et al. 2024): context QA, data-to-text and news summaries by six LLMs, span labels."""
    return RAGTruthAdapter()


def _has_official(root: Path) -> bool:
    return (root / OFFICIAL_RESPONSES).is_file() and (root / OFFICIAL_SOURCES).is_file()


def _official_load(root: Path, split: str) -> LoadResult:
    sources_path = source_file(root, OFFICIAL_SOURCES, "ragtruth", _EXPECTED_SOURCES)
    sources = {row.source_id: row for _, row in jsonl_rows(sources_path, SourceRow, _EXPECTED_SOURCES)}
    responses_path = source_file(root, OFFICIAL_RESPONSES, "ragtruth", _EXPECTED_RESPONSES)
    dropped: Counter[str] = Counter()
    rows = []
    for _, row in jsonl_rows(responses_path, ResponseRow, _EXPECTED_RESPONSES):
        if row.split != split:
            continue
        if row.quality != "good":
            dropped[f"quality {row.quality} (not good)"] += 1
            continue
        rows.append((row, sources.get(row.source_id)))
    examples = _examples(rows, "official", dropped)
    return LoadResult(examples=examples, dropped=dict(dropped), files=[OFFICIAL_SOURCES, OFFICIAL_RESPONSES])


def _cr_rows(root: Path) -> Iterator[tuple[str, dict[str, str]]]:
    """`(file:line, row)` of ConstrainedReasoner's response table, a pandas-written TSV with quoted fields."""
    path = source_file(root, CR_TABLE, "ragtruth", _EXPECTED_CR)
    return csv_rows(path, _CR_COLUMNS, _EXPECTED_CR, delimiter="\t")


def _cr_response(where: str, row: dict[str, str]) -> ResponseRow:
    # The column holds the Python repr of the released label list (single quotes, True/False), not JSON.
    labels = literal_value(row["labels"], f"{where}: `labels`", "a Python list literal of labels", error=SourceError)
    fields = {**row, "source_id": row["EncounterID"], "labels": labels}
    return validated(ResponseRow, fields, where, _EXPECTED_CR)


def _cr_source(root: Path, source_id: str, task_type: str) -> SourceRow:
    path = source_file(root, f"{CR_SOURCES}/{source_id}.txt", "ragtruth", f"the grounding source of {source_id}")
    text = fs.read_input(path).decode("utf-8")
    if task_type == "Summary":
        return SourceRow(source_id=source_id, task_type=task_type, source_info=text)
    record = json_value(text, str(path), f"the {task_type} source record", error=SourceError)
    fields = {"source_id": source_id, "task_type": task_type, "source_info": record}
    return validated(SourceRow, fields, str(path), f"the {task_type} source record as a JSON object")


def _constrainedreasoner_load(root: Path) -> LoadResult:
    sources: dict[str, SourceRow] = {}
    rows: list[tuple[ResponseRow, SourceRow | None]] = []
    for where, raw in _cr_rows(root):
        row = _cr_response(where, raw)
        if row.source_id not in sources:
            sources[row.source_id] = _cr_source(root, row.source_id, raw["task_type"])
        rows.append((row, sources[row.source_id]))
    dropped: Counter[str] = Counter()
    examples = _examples(rows, "constrainedreasoner", dropped)
    return LoadResult(examples=examples, dropped=dict(dropped), files=[CR_TABLE, f"{CR_SOURCES}/*.txt"])


def _faithjudge_train_load(root: Path) -> LoadResult:
    # The test split's sources are those of the complete test table; every other FaithJudge source is train.
    test_sources = {raw["EncounterID"] for _, raw in _cr_rows(root)}
    rows: list[tuple[ResponseRow, SourceRow | None]] = []
    for task_type, name in FAITHJUDGE_FILES.items():
        path = source_file(root, name, "ragtruth", _EXPECTED_FAITHJUDGE)
        for _, item in jsonl_rows(path, FaithJudgeSource, _EXPECTED_FAITHJUDGE):
            if item.source_id in test_sources:
                continue
            source = SourceRow(source_id=item.source_id, task_type=task_type, source_info=item.source)
            for resp in item.responses:
                row = ResponseRow(
                    id=f"{item.source_id}-{resp.model}",
                    source_id=item.source_id,
                    model=resp.model,
                    labels=resp.labels,
                    split="train",
                    response=resp.response,
                )
                rows.append((row, source))
    dropped: Counter[str] = Counter()
    examples = _examples(rows, "faithjudge", dropped)
    return LoadResult(examples=examples, dropped=dict(dropped), files=[CR_TABLE, *FAITHJUDGE_FILES.values()])


def _examples(rows: list[tuple[ResponseRow, SourceRow | None]], layout: str, dropped: Counter[str]) -> list[Example]:
    """Examples of the sound rows; each defective one is counted in `dropped` by its reason."""
    examples = []
    for row, source in rows:
        reason = "no source record for its source_id" if source is None else _defect(row, source)
        if reason:
            dropped[reason] += 1
            continue
        assert source is not None  # a missing source is a reason above
        question, context = _rendered(source)
        meta: dict[str, Any] = {
            "source_id": row.source_id,
            "model": row.model,
            "layout": layout,
            "reference": baseline_reference(source),
        }
        if row.temperature is not None:
            # ConstrainedReasoner's table has float artefacts (0.7000000000000001) that the release does not.
            meta["temperature"] = round(row.temperature, 4)
        examples.append(
            Example(
                id=f"ragtruth/{row.id}",
                dataset="ragtruth",
                task=TASKS[source.task_type],
                split=row.split,
                question=question,
                context=context,
                response=row.response,
                hallu_spans=label_spans(row.labels),
                meta=meta,
            )
        )
    return examples


def label_spans(labels: list[Label]) -> list[Span]:
    """Each label as a span of its type: all four types are hallucinations (gold and predicted alike)."""
    return [Span(start=lab.start, end=lab.end, label=lab.label_type) for lab in labels]


def _defect(row: ResponseRow, source: SourceRow) -> str | None:
    """Why a response cannot be used, or None when it is sound."""
    if source.task_type not in TASKS:
        return "unknown task_type"
    if not _well_shaped(source):
        return "source record not in its task's format"
    for lab in row.labels:
        if not 0 <= lab.start < lab.end <= len(row.response):
            return "label offsets outside the response"
        if lab.text is not None and row.response[lab.start : lab.end] != lab.text:
            return "label text differs from the response at its offsets"
    return None


def _well_shaped(source: SourceRow) -> bool:
    info = source.source_info
    if source.task_type == "QA":
        return (
            isinstance(info, dict) and isinstance(info.get("question"), str) and isinstance(info.get("passages"), str)
        )
    return isinstance(info, str) if source.task_type == "Summary" else isinstance(info, dict)


def _rendered(source: SourceRow) -> tuple[str, str]:
    """`(question, context)`: the QA question and passages, the article, or the data-to-text record as text."""
    info = source.source_info
    if isinstance(info, str):  # a Summary article (`_defect` matched the type to the task)
        return "", info.strip()
    if source.task_type == "QA":
        return info["question"].strip(), info["passages"].strip()
    return "", "\n".join(record_lines(info))


def baseline_reference(source: SourceRow) -> str:
    """The `{reference}` of RAGTruth's baseline prompt, as `get_json_data` in `baseline/prepare_dataset.py`
    (ParticleMedia/RAGTruth c103204) builds it: the QA passages and the Summary article as released (unstripped),
    and `str()` of a data-to-text record, a Python dict repr (`{'name': 'Cafe', ...}`).

    The script reads `source_info.jsonl` with pandas, whose JSON parser reads floats less precisely than `json`;
    their reprs agree on every data-to-text record of the test split (checked in the tagger's tests)."""
    info = source.source_info
    if source.task_type == "QA":
        assert isinstance(info, dict)  # `_defect` matched the record's shape to its task
        return str(info["passages"])
    return info if isinstance(info, str) else str(info)


def record_lines(value: dict[str, Any] | list[Any], depth: int = 0) -> list[str]:
    """A JSON record as indented `key: value` lines, list items numbered `[1]`, `[2]`, in the record's key order."""
    pad = "  " * depth
    items = value.items() if isinstance(value, dict) else ((f"[{i}]", v) for i, v in enumerate(value, start=1))
    lines = []
    for key, item in items:
        if isinstance(item, dict | list) and item:
            lines.append(f"{pad}{key}:")
            lines.extend(record_lines(item, depth + 1))
        else:
            lines.append(f"{pad}{key}: {item if isinstance(item, str) else json.dumps(item)}")
    return lines


LABEL_FORMAT_EXPECTED = (
    'a line in RAGTruth\'s label format: an object with the response id and labels [{"start", "end", "label_type"}, '
    "...] (response.jsonl's own keys; others are ignored)"
)
LABEL_FORMAT_READING = (
    "predictions in RAGTruth's label format (response.jsonl lines): id is the RAGTruth response id (example "
    "ragtruth/<id>); each label's [start, end) is a predicted span of its label_type, all four types hallucinations "
    "as in the gold; a label's text is not compared (the offsets are the prediction)"
)


class LabelledResponse(Model):
    """A predictions line in RAGTruth's label format: a response id and its labels."""

    model_config = ConfigDict(extra="ignore")

    id: Name
    """The RAGTruth response id (a string, as response.jsonl writes it)."""
    labels: list[Label]
    """The predicted hallucination labels, as `response.jsonl` writes the gold ones."""


class RAGTruthLabels(PredictionsFormat):
    """Predictions written as RAGTruth writes its labels: `response.jsonl` lines with the response `id` and
    `labels`; the examples are `ragtruth/<id>`."""

    name = "ragtruth-labels"
    source = "ragtruth"

    def recognises(self, first: dict[str, Any]) -> bool:
        return "id" in first and isinstance(first.get("labels"), list)

    def read(self, path: Path, exact_floats: bool = False) -> PredictionsRead:
        # exact_floats: RAGTruth labels hold only integer offsets and strings.
        predictions = []
        for lineno, raw in iter_lines(path):
            try:
                row = LabelledResponse.model_validate(parse_json_line(raw), strict=True)  # 3.0 or "3" is no offset
                predictions.append((lineno, Prediction(id=f"ragtruth/{row.id}", spans=label_spans(row.labels))))
            except ValidationError as err:
                raise DataError(
                    f"{path}:{lineno}: {validation_message(err)} (expected {LABEL_FORMAT_EXPECTED})"
                ) from None
            except ValueError as err:
                raise DataError(f"{path}:{lineno}: {err} (expected {LABEL_FORMAT_EXPECTED})") from None
        return PredictionsRead(
            predictions=predictions, datasets=["ragtruth"], conventions={"ragtruth_labels": LABEL_FORMAT_READING}
        )


@predictions_format("ragtruth-labels")
def ragtruth_labels() -> PredictionsFormat:
    """Predictions in RAGTruth's own label format (response.jsonl lines: id, labels with start, end, label_type)."""
    return RAGTruthLabels()
