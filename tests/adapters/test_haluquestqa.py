"""HaluQuestQA adapter: one example per answer, factuality spans placed by text, on invented and real files."""

from __future__ import annotations

import csv
import hashlib
import re
from collections import Counter
from pathlib import Path

import pytest

from shambench.adapters.haluquestqa import AMBIGUOUS, FILE, LENGTHS, NOT_FOUND, UNPLACED
from shambench.data.adapter import adapters
from shambench.data.benchmark import load_benchmark
from shambench.errors import SourceError
from tests.conftest import require_shared

# The released header: a leading unnamed index column, then 42 named ones.
HEADER = [
    "",
    "source_file",
    "annotator",
    "question_text",
    "ans1_text",
    "ans2_text",
    "factuality_span",
    "factuality_reason",
    "irrelevance_span",
    "irrelevance_reason",
    "incomplete_ans_span",
    "incomplete_ans_reason",
    "ques_misconception_span",
    "ques_misconception_reason",
    "ans_preference",
    "ans_preference_reason",
    "ans1_label",
    "ans2_label",
    "ques_start",
    "ans_start",
    "reference_example_span",
    "reference_example_reason",
    "reference_example_helpful",
    "ques_misconception_label",
    "factuality_label",
    "irrelevance_label",
    "incomplete_ans_label",
    "reference_example_label",
    "category",
    *(f"{aspect}_{who}_score" for aspect in ("factuality", "relevance", "completeness", "reference",
                                              "ans_preference", "overall", "ques_misconception")
      for who in ("model", "human")),
]  # fmt: skip
HUMAN = "Light scatters off air.\nBlue scatters most."
MODEL = "The sky is blue because of Rayleigh scattering, discovered by Newton."
ROWS = [
    {  # "Blue scatters most" is quoted in lower case (normalized); "discovered by Newton" verbatim.
        "question_text": 'Why is the sky "blue"?',
        "ans1_text": HUMAN,
        "ans2_text": MODEL,
        "ans1_label": "human_answer",
        "ans2_label": "model_answer",
        "factuality_span": "['discovered by Newton', 'blue scatters most']",
        "factuality_reason": "['It was Rayleigh.', 'All colours scatter.']",
        "factuality_label": "['answer2', 'answer1']",
        "irrelevance_span": "['Light scatters off air.']",  # another aspect: never gold
        "irrelevance_label": "['answer1']",
    },
    {"ans1_label": "model_answer", "ans2_label": "human_answer"},  # no factuality span: both answers clean
    {  # "It is" occurs twice in answer 1; answer 2's span names the answer instead of quoting it.
        "ans1_text": "It is hot. It is cold.",
        "factuality_span": "['It is', 'ANSWER2']",
        "factuality_label": "['answer1', 'answer2']",
    },
    {"factuality_span": "['one', 'two']", "factuality_label": "['answer1']"},  # lists of different lengths
]


def _write(tmp_path: Path, rows: list[dict[str, str]], header: list[str] = HEADER) -> Path:
    """`HaluQuestQA.csv` as released: pandas' tab-separated output, minimal quoting, the index column first."""
    folder = tmp_path / "haluquestqa"
    folder.mkdir()
    defaults = {
        "annotator": "annotator-a",
        "question_text": "A question?",
        "ans1_text": "First reply.",
        "ans2_text": "Second reply.",
        "ans1_label": "human_answer",
        "ans2_label": "model_answer",
        "category": "physics",
    }
    with (folder / FILE).open("w", encoding="utf-8", newline="") as fh:
        writer = csv.writer(fh, delimiter="\t", lineterminator="\n")
        writer.writerow(header)
        for i, row in enumerate(rows):
            fields = {**defaults, "": str(i), "source_file": f"row-{i}.txt", **row}
            writer.writerow([fields.get(column, "") for column in header])
    return tmp_path


def test_each_answer_is_an_example_with_its_factuality_spans(tmp_path):
    result = adapters.create("haluquestqa").load(_write(tmp_path, ROWS))
    by_id = {ex.id: ex for ex in result.examples}
    assert list(by_id) == [
        "haluquestqa/row-0/1",
        "haluquestqa/row-0/2",
        "haluquestqa/row-1/1",
        "haluquestqa/row-1/2",
        "haluquestqa/row-2/1",
    ]
    human, model = by_id["haluquestqa/row-0/1"], by_id["haluquestqa/row-0/2"]
    assert (human.partition, human.question, human.context) == (
        "open_qa_long/haluquestqa",
        'Why is the sky "blue"?',
        "",
    )
    # "Light scatters off air.\n" is 24 characters; "The sky is blue because of Rayleigh scattering, " 48.
    assert [(s.start, s.end) for s in human.hallu_spans] == [(24, 42)]
    assert [(s.start, s.end) for s in model.hallu_spans] == [(48, 68)]
    assert human.meta == {"author": "human", "category": "physics", "annotator": "annotator-a", "answer": 1}
    assert model.meta["author"] == "model"
    assert [by_id[f"haluquestqa/row-1/{n}"].meta["author"] for n in (1, 2)] == ["model", "human"]
    assert by_id["haluquestqa/row-1/1"].hallu_spans == []
    # The repeated "It is" goes to its first occurrence, as a detector's string would.
    assert [(s.start, s.end) for s in by_id["haluquestqa/row-2/1"].hallu_spans] == [(0, 5)]
    assert result.dropped == {UNPLACED: 1, LENGTHS: 2}
    assert result.spans == {
        "placed: exact": 1,
        "placed: normalized": 1,
        f"ambiguous: {AMBIGUOUS}": 1,
        f"unplaced: {NOT_FOUND}": 1,
    }


@pytest.mark.parametrize(
    ("row", "message"),
    [
        ({"factuality_span": "['unclosed", "factuality_label": "['answer1']"}, "factuality_span is not a Python list"),
        ({"factuality_span": "['x']", "factuality_label": "['answer3']"}, "factuality_label names 'answer3'"),
        ({"ans2_label": "robot_answer"}, "ans2_label is 'robot_answer', expected human_answer or model_answer"),
    ],
)
def test_malformed_rows_are_refused_with_file_and_line(tmp_path, row, message):
    data = _write(tmp_path, [row])
    with pytest.raises(SourceError, match=re.escape(f"{FILE}:2: {message}")):
        adapters.create("haluquestqa").load(data)


def test_a_header_without_the_answers_is_refused(tmp_path):
    data = _write(tmp_path, ROWS[:1], [c for c in HEADER if c != "ans2_text"])
    with pytest.raises(SourceError, match=r"header lacks column\(s\) ans2_text"):
        adapters.create("haluquestqa").load(data)


def test_the_dev_set_is_five_answers_drawn_from_test(tmp_path):
    rows = [{"factuality_span": "['First']", "factuality_label": "['answer1']"}] * 4
    dev = load_benchmark("haluquestqa", "dev", _write(tmp_path, rows)).examples
    assert len(dev) == 5 and {ex.split for ex in dev} == {"dev"}
    assert {ex.meta["source_split"] for ex in dev} == {"test"}


@pytest.fixture(scope="module")
def real():
    return adapters.create("haluquestqa").load(require_shared("haluquestqa").parent)


def test_real_counts(real):
    # 698 rows x 2 answers, less the answer whose only factuality span reads "ANSWER1".
    assert len(real.examples) == 1395 and len({ex.id for ex in real.examples}) == 1395
    assert real.dropped == {UNPLACED: 1}
    # SOURCE.md: 283 factuality spans, 173 verbatim (one of which repeats in its answer).
    assert real.spans == {
        "placed: exact": 172,
        "placed: normalized": 107,
        "placed: fuzzy": 2,
        f"ambiguous: {AMBIGUOUS}": 1,
        f"unplaced: {NOT_FOUND}": 1,
    }
    assert Counter(ex.meta["author"] for ex in real.examples) == {"model": 698, "human": 697}
    with_span = Counter(ex.meta["author"] for ex in real.examples if ex.hallu_spans)
    assert with_span == {"human": 148, "model": 87}
    assert sum(len(ex.hallu_spans) for ex in real.examples) == 281
    assert Counter(ex.meta["category"] for ex in real.examples if ex.meta["answer"] == 2) == {
        "technology": 110,
        "economics": 110,
        "biology": 110,
        "chemistry": 96,
        "physics": 94,
        "history": 92,
        "law": 86,
    }
    assert all(ex.question and not ex.context for ex in real.examples)


def test_the_download_is_the_pinned_release_file():
    [remote] = adapters.create("haluquestqa").remote_files
    assert remote.url == (
        "https://raw.githubusercontent.com/UKPLab/arxiv2024-lfqa-hallucination/"
        "198541af8d0a840dbd2ddec5e69d9ab9ac7324fc/src/data/HaluQuestQA.csv"
    )
    assert remote.path == FILE
    assert remote.sha256 == hashlib.sha256(require_shared("haluquestqa", FILE).read_bytes()).hexdigest()
