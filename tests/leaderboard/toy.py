"""Three invented examples and hand-scored run directories over them, shared by the leaderboard and compare tests.

Tokens (spaCy rule-based, whitespace excluded) and sentences of the responses:
  q1  "The tower is 320 metres tall."   7 tokens (The tower is 320 metres tall .), 1 sentence; gold [13, 16) = "320"
  q2  "Paris is in France."             5 tokens, 1 sentence; no gold
  s1  "Bob bought pears. He ate them."  8 tokens (Bob bought pears . He ate them .), 2 sentences; gold [11, 16)

Span-level (token) F1 per example of the three canned runs, and the task means (context_qa = q1, q2; summ = s1):
  exact  q1 1, q2 1, s1 1                               context_qa 1,     summ 1      overall 1
  none   q1 0, q2 1 (nothing vs nothing), s1 0           context_qa 0.5,   summ 0      overall 0.25
  all    q1 P=1/7 R=1 -> 2/8 = 0.25; q2 0 (no gold);    context_qa 0.125, summ 2/9   overall (0.125 + 2/9) / 2
         s1 P=1/8 R=1 -> 2/9
Sentence level:
  exact  1, 1, 1                                         overall 1
  none   0, 1, 0                                         overall 0.25
  all    q1 1; q2 0; s1 P=1/2 R=1 -> 2/3                 context_qa 0.5, summ 2/3    overall (0.5 + 2/3) / 2
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

from shambench.detection.detector import Detector
from shambench.io import Journal, write_json
from shambench.runs.files import CONFIG, JOURNAL
from shambench.runs.rundir import detector_config
from shambench.runs.runner import run_predictions
from shambench.runs.scoring import run_results
from shambench.runs.selection import select_examples
from shambench.runs.spec import Scoring, Selection
from shambench.schema import Example, Prediction, Span

EXAMPLES = [
    {
        "id": "q1",
        "dataset": "toyqa",
        "task": "context_qa",
        "context": "The tower is 300 metres tall.",
        "question": "How tall is the tower?",
        "response": "The tower is 320 metres tall.",
        "hallu_spans": [[13, 16]],
    },
    {
        "id": "q2",
        "dataset": "toyqa",
        "task": "context_qa",
        "context": "Paris is the capital of France.",
        "question": "Where is Paris?",
        "response": "Paris is in France.",
        "hallu_spans": [],
    },
    {
        "id": "s1",
        "dataset": "toysum",
        "task": "summ",
        "context": "Bob bought apples and ate them.",
        "response": "Bob bought pears. He ate them.",
        "hallu_spans": [[11, 16]],
    },
]

# id -> predicted spans of each canned run.
RUNS = {
    "exact": {"q1": [[13, 16]], "q2": [], "s1": [[11, 16]]},
    "none": {"q1": [], "q2": [], "s1": []},
    "all": {"q1": [[0, 29]], "q2": [[0, 19]], "s1": [[0, 30]]},
}
SPAN_OVERALL = {"exact": 1.0, "none": 0.25, "all": (0.125 + 2 / 9) / 2}
SENTENCE_OVERALL = {"exact": 1.0, "none": 0.25, "all": (0.5 + 2 / 3) / 2}


def write_examples(path: Path, rows: Iterable[dict] = EXAMPLES) -> Path:
    """Write the examples as an EXAMPLES JSONL file."""
    path.write_text("".join(json.dumps(r) + "\n" for r in rows), encoding="utf-8")
    return path


def write_annotated(path: Path, items: int = 30) -> tuple[Path, dict[str, list[list[int]]]]:
    """An EXAMPLES file of `items` copies of s1's response, each read by annotators a, b and c who all marked
    "pears" [11, 16) (golds by majority, leave one out: each annotator matches the others, F1 1); and the spans
    of a run that predicts "pears" on each. Thirty items are what the alternative annotator test asks for."""
    from shambench.io import write_jsonl
    from shambench.schema import Annotations, marked_by_more_than

    marked = {name: [Span(start=11, end=16)] for name in "abc"}
    annotations = Annotations.leave_one_out(marked, lambda lists: marked_by_more_than(lists, 0.5), "majority")
    rows = [
        Example(
            id=f"a{k:02d}",
            task="summ",
            dataset="toysum",
            response=EXAMPLES[2]["response"],
            hallu_spans=marked["a"],
            annotations=annotations,
        )
        for k in range(items)
    ]
    write_jsonl(path, rows)
    return path, {row.id: [[11, 16]] for row in rows}


def predictions(run: str) -> list[Prediction]:
    """The canned predictions of a run."""
    return [Prediction(id=i, spans=spans) for i, spans in RUNS[run].items()]


class Canned(Detector):
    """Returns fixed spans per id, so that a run directory goes through the real eval path."""

    family = "test"

    def __init__(self, spans: dict[str, list[list[int]]]):
        self.spans = spans

    def predict(self, examples: Sequence[Example], monitor=None) -> Iterator[Prediction]:
        for ex in examples:
            yield Prediction(id=ex.id, spans=[Span(start=s, end=e) for s, e in self.spans.get(ex.id, [])])


def run_detector(run_dir: Path, examples_file: Path, detector: Detector, limit: int | None = None) -> Path:
    """A scored run directory (config, journal, results) of `detector` over the examples file."""
    examples, selection = select_examples(Selection(examples_file=examples_file, limit=limit))
    run_dir.mkdir(parents=True)
    write_json(run_dir / CONFIG, detector_config(detector, examples, selection))
    run_predictions(detector, examples, Journal(run_dir / JOURNAL))
    run_results(run_dir, examples, Scoring(n_resamples=50))
    return run_dir


def make_run(
    run_dir: Path,
    examples_file: Path,
    name: str,
    spans: dict[str, list[list[int]]] | None = None,
    limit: int | None = None,
) -> Path:
    """A scored run directory of a canned detector named `name` (at most `limit` examples per partition)."""
    detector = Canned(RUNS[name] if spans is None else spans)
    detector.name = name
    return run_detector(run_dir, examples_file, detector, limit)
