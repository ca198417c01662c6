"""ProcessBench (Zheng et al. 2024, Qwen): 3,400 step-split solutions to competition maths with the index of the
earliest erroneous step (paragraph) annotated by experts, or -1 when every step is correct.

Reads the four released JSON arrays (`gsm8k.json`, `math.json`, `olympiadbench.json`, `omnimath.json`), each record
`{id, generator, problem, steps: [str], final_answer_correct, label}`. The response is the steps joined with a
blank line; steps before `label` are labelled correct (1), step `label` erroneous (0) and the steps after it are
unlabelled (None): the annotation stops at the first error. The gold span is the erroneous step. Ground truth is
`label`, never `final_answer_correct` (a right answer can follow a wrong step). Dataset names are
`processbench/<subset>`, so each subset is its own partition and row of the suite table.
"""

from __future__ import annotations

from pathlib import Path

from pydantic import ConfigDict, Field

from shambench.adapters._released import example_at, json_array_rows, source_file
from shambench.data.adapter import Adapter, LoadResult, RemoteFile, adapter
from shambench.data.steps import step_fields
from shambench.errors import SourceError
from shambench.schema import Model, Name

SUBSETS = ("gsm8k", "math", "olympiadbench", "omnimath")
SEPARATOR = "\n\n"
TASK = "math_step"
EXPECTED = "a JSON array of ProcessBench records with id, problem, steps and label"
COMMIT = "ee5ae00f2d32205df00655cf9ebbc3caddce0646"
SHA256 = {
    "gsm8k": "fb1c59dfd1e83e1c5a48dbe598db27e4bc0b8bc524a09445f2d4b69178f61349",
    "math": "520ae64463d6ceb4bf13af31693389a5d5b14934cdad3468193dea4a5ceb0414",
    "olympiadbench": "e9d801c9f3c03f949adbfa08e90cb21ad85c0b9224bc5e98326f8215c218aa55",
    "omnimath": "e8d7cf4512c82168dae2fe48b1718069a3002e7910af1d180a27ee0d9948ba47",
}


class ProcessBenchRow(Model):
    """One ProcessBench record."""

    model_config = ConfigDict(extra="ignore")

    id: Name
    """`<subset>-<i>`."""
    generator: str = ""
    """The model that wrote the solution."""
    problem: str
    """The maths problem."""
    steps: list[str] = Field(min_length=1)
    """The solution, split into paragraphs."""
    final_answer_correct: bool | None = None
    """Whether the final answer is right (not the ground truth of this benchmark)."""
    label: int = Field(ge=-1)
    """0-based index of the earliest erroneous step, or -1."""


def step_labels(n_steps: int, label: int) -> list[int | None]:
    """Correct before `label`, erroneous at it, unlabelled after it; all correct when `label` is -1."""
    if label < 0:
        return [1] * n_steps
    return [1] * label + [0] + [None] * (n_steps - label - 1)


class ProcessBenchAdapter(Adapter):
    """Reads ProcessBench's four subset files."""

    name = "processbench"
    suite = "processbench"
    datasets = ("processbench/*",)
    step_level = True
    tasks = (TASK,)
    license = "Apache-2.0 (Hugging Face dataset card)"
    homepage = "https://github.com/QwenLM/ProcessBench"
    revision = f"QwenLM/ProcessBench@{COMMIT[:7]} (dataset/, 2024-12-10; the copy later moved to Qwen/ProcessBench)"
    citation = (
        "Zheng et al. 2024. ProcessBench: Identifying Process Errors in Mathematical Reasoning. arXiv:2412.06559."
    )
    # The GitHub copy pinned here is the one whose counts the paper and TRL's script report; the Hugging Face copy
    # later received a "fix annotation" commit to math.json.
    remote_files = tuple(
        RemoteFile(
            url=f"https://raw.githubusercontent.com/QwenLM/ProcessBench/{COMMIT}/dataset/{subset}.json",
            path=f"{subset}.json",
            sha256=SHA256[subset],
        )
        for subset in SUBSETS
    )

    def available(self, data_dir: Path) -> bool:
        return all((self.root(data_dir) / f"{s}.json").is_file() for s in SUBSETS)

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        self.check_split(split)
        examples = []
        for subset in SUBSETS:
            path = source_file(self.root(data_dir), f"{subset}.json", self.name, EXPECTED)
            for where, row in json_array_rows(path, ProcessBenchRow, EXPECTED):
                if row.label >= len(row.steps):
                    raise SourceError(f"{where}: label {row.label} but only {len(row.steps)} steps")
                examples.append(
                    example_at(
                        where,
                        id=f"processbench/{row.id}",
                        dataset=f"processbench/{subset}",
                        task=TASK,
                        question=row.problem,
                        **step_fields(row.steps, step_labels(len(row.steps), row.label), SEPARATOR),
                        meta={"generator": row.generator, "final_answer_correct": row.final_answer_correct},
                    )
                )
        return LoadResult(examples=examples, files=[f"{s}.json" for s in SUBSETS])


@adapter("processbench")
def processbench() -> Adapter:
    """ProcessBench: first erroneous step of GSM8K, MATH, OlympiadBench and Omni-MATH solutions (4 subsets)."""
    return ProcessBenchAdapter()
