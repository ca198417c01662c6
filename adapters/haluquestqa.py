"""HaluQuestQA (Sachdeva et al. 2024): expert error spans in long-form answers to ELI5-style questions.

Reads `HaluQuestQA.csv` (src/data of UKPLab/arxiv2024-lfqa-hallucination), tab-separated with a leading unnamed
index column and quoted multi-line fields. Each of its 698 rows is one question with two answers, `ans1_text` and
`ans2_text`, one written by a human and one by GPT-4 (`ans1_label` / `ans2_label`: `human_answer` or
`model_answer`), judged by one of 21 experts. Every answer is one example of `open_qa_long/haluquestqa`: the
question is `question`, there is no context (the task is open-domain, so context providers add evidence as for
Mu-SHROOM), and `meta["author"]` says `human` or `model`.

Of the five error aspects annotated, the gold spans are the `factuality` ones (the others are relevance,
completeness, references and misconceptions in the question): `factuality_span` lists quoted answer substrings
as a Python literal, `factuality_label` names the answer each belongs to (`answer1` / `answer2`). An answer
without a factuality span was judged free of factual errors. The quotes differ from the answers in case,
whitespace or punctuation, so each answer's spans are placed in list order as detector strings are placed
(`shambench.detection.locate`: exact, then ignoring case and whitespace, then fuzzily). Counted in
`LoadResult.spans`: placements by method, spans whose text occurs more than once in the answer (`ambiguous`, placed
at the first occurrence after the previous span) and spans that cannot be placed. An answer with a span that
cannot be placed is dropped, counted by reason, since its gold would be incomplete (one span reads `ANSWER1`,
naming the whole answer instead of quoting it). Ids are `haluquestqa/<source_file>/<1|2>`.
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

from shambench.adapters._released import csv_rows, example_at, placement_outcomes, source_file
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.detection.locate import Placement, locate
from shambench.errors import SourceError
from shambench.schema import Example
from shambench.sources import PublishedCount
from shambench.structured import literal_value

FILE = "HaluQuestQA.csv"
TASK = "open_qa_long"
EXPECTED = (
    "HaluQuestQA's tab-separated table with source_file, annotator, category, question_text, ans1_text, ans2_text, "
    "ans1_label, ans2_label, factuality_span and factuality_label (Python list literals, empty for none)"
)
_COLUMNS = (
    "source_file",
    "annotator",
    "category",
    "question_text",
    "ans1_text",
    "ans2_text",
    "ans1_label",
    "ans2_label",
    "factuality_span",
    "factuality_label",
)
_COMMIT = "198541af8d0a840dbd2ddec5e69d9ab9ac7324fc"
_RAW = f"https://raw.githubusercontent.com/UKPLab/arxiv2024-lfqa-hallucination/{_COMMIT}/src/data"
_AUTHORS = {"human_answer": "human", "model_answer": "model"}
_ANSWERS = ("answer1", "answer2")

LENGTHS = "factuality_span and factuality_label differ in length"
UNPLACED = "answer with a factuality span not found in it (its gold would be incomplete)"
NOT_FOUND = "not found in its answer"
AMBIGUOUS = "text occurs more than once in the answer (ignoring case and whitespace)"


class HaluQuestQAAdapter(Adapter):
    """Reads `HaluQuestQA.csv`: two answers per question, the factuality spans as gold."""

    name = "haluquestqa"
    tasks = (TASK,)
    suite = "extended"
    kept_apart = f"{TASK}/haluquestqa"
    published_counts = {
        f"{TASK}/haluquestqa": PublishedCount(
            count=1396,
            source='Sachdeva et al. 2024, arXiv:2407.11930, abstract: "698 QA pairs" (with "1.8k span-level error '
            'annotations for five different error types"); the data README (UKPLab/arxiv2024-lfqa-hallucination@198541a, '
            "src/data/README.md): each question has two answers, human and GPT-4, hence 1,396 answers, one example each",
        )
    }
    license = "CC BY-SA 4.0"
    homepage = "https://github.com/UKPLab/arxiv2024-lfqa-hallucination"
    revision = f"UKPLab/arxiv2024-lfqa-hallucination@{_COMMIT} (src/data/HaluQuestQA.csv)"
    citation = (
        "Rachneet Sachdeva, Yixiao Song, Mohit Iyyer, Iryna Gurevych. Localizing and Mitigating Errors in Long-form "
        "Question Answering. arXiv:2407.11930, 2024."
    )
    remote_files = (
        RemoteFile(
            url=f"{_RAW}/{FILE}", path=FILE, sha256="1008c3405526d3db7c0907c6313c9791f72dfc08c15817ea7e71c6c0540e9e75"
        ),
    )

    def available(self, data_dir: Path) -> bool:
        return (self.root(data_dir) / FILE).is_file()

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        path = source_file(self.root(data_dir), FILE, self.name, EXPECTED)
        examples: list[Example] = []
        dropped: Counter[str] = Counter()
        spans: Counter[str] = Counter()
        for where, row in csv_rows(path, _COLUMNS, EXPECTED, delimiter="\t"):
            quotes = _literal_list(where, row, "factuality_span")
            owners = _literal_list(where, row, "factuality_label")
            if len(quotes) != len(owners):
                dropped[LENGTHS] += 2
                continue
            for number, answer in enumerate(_ANSWERS, start=1):
                text = row[f"ans{number}_text"]
                placements = locate(text, [q for q, owner in zip(quotes, owners) if _owner(where, owner) == answer])
                spans.update(placement_outcomes(text, placements, NOT_FOUND, AMBIGUOUS))
                if not all(p.placed for p in placements):
                    dropped[UNPLACED] += 1
                    continue
                examples.append(_example(where, row, number, placements))
        return LoadResult(examples=examples, dropped=dict(dropped), files=[FILE], spans=dict(spans))


@adapter("haluquestqa")
def haluquestqa() -> Adapter:
    """HaluQuestQA (Sachdeva et al. 2024): human and GPT-4 long-form answers, factuality spans (suite `extended`)."""
    return HaluQuestQAAdapter()


def _literal_list(where: str, row: dict[str, str], column: str) -> list[str]:
    """A column holding a Python list literal of strings (empty text: no item)."""
    value = row[column].strip()
    if not value:
        return []
    try:
        items = literal_value(value, where, "a Python list literal")
    except ValueError:
        items = None
    if not isinstance(items, list) or not all(isinstance(item, str) for item in items):
        raise SourceError(f"{where}: {column} is not a Python list of strings: {value[:80]!r} (expected {EXPECTED})")
    return items


def _owner(where: str, owner: str) -> str:
    if owner not in _ANSWERS:
        raise SourceError(f"{where}: factuality_label names {owner!r}, expected answer1 or answer2")
    return owner


def _author(where: str, row: dict[str, str], number: int) -> str:
    label = row[f"ans{number}_label"]
    if label not in _AUTHORS:
        raise SourceError(f"{where}: ans{number}_label is {label!r}, expected human_answer or model_answer")
    return _AUTHORS[label]


def _example(where: str, row: dict[str, str], number: int, placements: list[Placement]) -> Example:
    return example_at(
        where,
        id=f"haluquestqa/{Path(row['source_file']).stem}/{number}",
        dataset="haluquestqa",
        task=TASK,
        question=row["question_text"],
        response=row[f"ans{number}_text"],
        hallu_spans=[p.as_span() for p in placements],
        meta={
            "author": _author(where, row, number),
            "category": row["category"],
            "annotator": row["annotator"],
            "answer": number,
        },
    )
