"""The leaderboard data model and the JSON Schemas exported next to it.

`results.schema.json` describes a run's `results.json` (`shambench.scoring.results.Results`) and `leaderboard.schema.json`
the built `leaderboard.json` (`Leaderboard` below). Both are committed in `leaderboard/`; a test checks that they
match the models, so regenerate them with `shambench leaderboard schema` after changing either.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from shambench.io import write_atomic
from shambench.reporting.ranks import RankStability
from shambench.schema import Model, Name
from shambench.scoring.metrics import EMPTY_RULE_SENTENCE
from shambench.scoring.results import SCHEMA_VERSION, RunInfo

LEADERBOARD_VERSION = "2.0"
SCHEMA_DIR = Path(__file__).resolve().parent
RESULTS_SCHEMA = "results.schema.json"
LEADERBOARD_SCHEMA = "leaderboard.schema.json"
DRAFT = "https://json-schema.org/draft/2020-12/schema"

# The paper's task order; tasks it does not know (e.g. step-level sets) follow alphabetically.
TASK_ORDER = ("open_qa", "context_qa", "data2txt", "open_bio", "summ", "mt")


Standing = Literal["ranked", "reference", "partial", "incomplete", "reported"]


class Cell(Model):
    """One score of an entry: F1 and, where known, precision, recall, its 95% interval and the example count; at span
    level also the registered metrics' views (`shambench.scoring.measures`), a view beyond the two below as a further
    key."""

    model_config = ConfigDict(extra="allow")

    f1: float
    """Per-example F1 averaged over the group's examples (for `overall`: the mean over tasks)."""
    f1_with_gold: float | None = None
    """Span level: per-example token F1 over the examples with a gold span only (for `overall`: the mean over
    tasks); None where not known."""
    f1_pooled: float | None = None
    """Span level: token F1 pooled over all tokens of the group (for `overall`: the mean over tasks); None where
    not known."""
    precision: float | None = None
    """Precision under the same convention; None where the paper does not print it."""
    recall: float | None = None
    """Recall under the same convention; None where the paper does not print it."""
    ci: tuple[float, float] | None = None
    """Seeded percentile-bootstrap 95% interval of F1; None for reported rows."""
    n: int | None = None
    """Examples in the group."""

    def view(self, key: str) -> float | None:
        """A span view's figure (a registered metric's, `shambench.scoring.measures`); None where not known."""
        return getattr(self, key, None)


class Level(Model):
    """An entry's scores at one level: span (token F1) or sentence."""

    overall: Cell | None = None
    """Unweighted mean over the tasks (step-level tasks excluded); None when no such task was scored."""
    overall_std: float | None = None
    """Population standard deviation (ddof=0) of the task F1s."""
    overall_tasks: list[str] = Field(default_factory=list)
    """The tasks that entered the overall mean (fewer than the board's columns when a run lacks some)."""
    tasks: dict[str, Cell] = Field(default_factory=dict)
    """Per task."""
    datasets: dict[str, Cell] = Field(default_factory=dict)
    """Per partition, keyed `task/dataset`."""


class Coverage(Model):
    """How much of its selected data a run predicted: what `complete` is decided from."""

    total: int
    """Examples the run selected and scored."""
    predicted: int
    """Examples with a usable prediction."""
    failed: int
    """Examples whose prediction carries a detector error (scored as empty)."""
    missing: int
    """Examples with no prediction at all (scored as empty)."""


class Entry(Model):
    """One row of the leaderboard: a reproduced run (or submission), or a score reported in the paper."""

    id: Name
    """Stable anchor of the row within the page (`run-3`, `paper-1`)."""
    name: Name
    """Detector or submission name, shown as text."""
    kind: Literal["reproduced", "reported"]
    """`reproduced`: scored here from predictions; `reported`: copied from the SHAM-Bench paper, not re-run."""
    origin: str
    """`run`, `submission` or `predictions` for reproduced rows; `paper` for reported ones."""
    rank: int | None = None
    """Position by overall span F1 among the complete, non-reference rows that cover the board's partitions
    (1 = best); None for every other row."""
    complete: bool = False
    """True when every example of every partition the row reports was predicted without failure, on the test
    split, with no `--limit`; False for incomplete runs and for reported rows (not run here)."""
    incomplete_because: list[str] = Field(default_factory=list)
    """Why the row is not complete (empty when it is)."""
    reference: bool = False
    """A reference baseline (`none`, `all`, `random`, or a detector registered with `reference=True`): shown as a
    labelled line, never ranked."""
    standing: Standing = "ranked"
    """Where the row stands: `ranked`; `reference`; `partial` (complete but not over the board's partitions and
    counts); `incomplete`; `reported` (the paper's rows)."""
    coverage: Coverage | None = None
    """Predicted, failed, missing and total examples of a reproduced row."""
    runs: int = 1
    """Run directories merged into the row (a sweep's cells of one configuration over several datasets)."""
    family: Name | None = None
    """Detector family."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Detector parameters."""
    span: Level
    """Span-level (token F1) scores."""
    sentence: Level
    """Sentence-level scores."""
    n_examples: int | None = None
    """Examples scored."""
    missing_predictions: int | None = None
    """Examples without a usable prediction, scored as empty."""
    source: str
    """Where the row comes from: the run directory, or the paper's tables."""
    scored_at: str | None = None
    """UTC time of scoring."""
    shambench_version: str | None = None
    """shambench version that scored the run."""
    git_commit: str | None = None
    """Commit of the checkout that scored the run."""
    conventions: dict[str, str] = Field(default_factory=dict)
    """How the row's numbers were computed (copied from its results, or the paper's stated conventions)."""
    run: RunInfo | None = None
    """Run metadata (provenance, usage, cost) of reproduced rows, with local file paths cut to file names."""
    examples_page: str | None = None
    """Link, relative to the page, to this run's examples with gold and predicted spans (`--example-pages`)."""
    agreement: dict[str, AgreementCell] = Field(default_factory=dict)
    """Per partition with annotators, the like-for-like span F1 and its gap to one annotator (empty for reported
    rows and for runs without such partitions)."""
    types: dict[str, dict[str, TypeCell]] = Field(default_factory=dict)
    """Per source whose gold spans carry error types (RAGTruth, FAVABench, FaithBench, FELM), per type, the share
    of its gold the entry finds (empty for reported rows and for runs without such sources)."""


HUMAN_NAME = "human (one annotator vs the others)"


class AgreementCell(Model):
    """One entry on one partition with annotators: its like-for-like span F1 beside the human figure."""

    items: int
    """Items with at least two annotators."""
    f1: float
    """The detector's per-example token F1 against each leave-one-out gold (mean over an item's golds, then
    over items): `groups.agreement` of its results."""
    ci: tuple[float, float]
    """Its 95% bootstrap interval over items."""
    human_f1: float
    """One annotator against the others on the same items (the human reference)."""
    human_ci: tuple[float, float]
    """Its 95% bootstrap interval over items."""
    gap: float
    """`f1 - human_f1`: below zero, the detector is below one annotator."""
    alt_passed: bool | None = None
    """The alternative annotator test's verdict (omega >= 0.5); None when no annotator was tested."""
    alt_omega: float | None = None
    """Its winning rate: the share of tested annotators the detector can replace."""


class TypeCell(Model):
    """One entry on one gold error type of one source (`groups.types` of its results)."""

    gold_chars: int
    """Gold characters of the type (whitespace left out)."""
    char_recall: float
    """Share of them the entry's spans cover, pooled over the source's examples."""
    char_ci: tuple[float, float] | None = None
    """Its 95% bootstrap interval over examples."""
    token_recall: float
    """Share of the type's gold tokens the entry's spans overlap."""
    token_ci: tuple[float, float] | None = None
    """Its 95% bootstrap interval over examples."""
    typed_f1: float | None = None
    """Type-aware character F1 of the entry's spans labelled with the type; None when its spans carry no labels."""


class HumanCell(Model):
    """The human reference on one partition."""

    items: int
    """Items with at least two annotators."""
    f1: float
    """One annotator against the gold the source's rule builds from the others: per-example token F1, mean over
    an item's annotators, then over items."""
    ci: tuple[float, float]
    """95% bootstrap interval over items."""


class HumanReference(Model):
    """The `human (one annotator vs the others)` reference row: labelled, never ranked."""

    name: Name = HUMAN_NAME
    """The row's label."""
    convention: str
    """How the figures are computed (`groups.agreement` of the results)."""
    partitions: dict[str, HumanCell]
    """Per partition whose source releases its annotators."""


class Leaderboard(Model):
    """The built leaderboard: reproduced runs ranked by overall span F1, and the paper's rows kept apart."""

    schema_version: str = LEADERBOARD_VERSION
    """Version of this schema; bumped on any incompatible change."""
    results_schema_version: str = SCHEMA_VERSION
    """Version of the results schema the entries were read with."""
    generated_at: str
    """UTC time of the build, ISO 8601."""
    shambench_version: str
    """shambench version that built the page."""
    ranking: str = (
        "overall span-level (token) F1, descending; ties broken by sentence-level F1, then name; only complete, "
        "non-reference rows over all of the board's partitions are ranked"
    )
    """How `entries` are ordered and which get a rank."""
    empty_rule: str = EMPTY_RULE_SENTENCE
    """The empty-example rule of the headline metric, in one sentence."""
    partitions: dict[str, int] = Field(default_factory=dict)
    """The data a row must cover to be ranked: per partition, the examples of the complete rows (their largest
    count)."""
    none_scores: dict[str, float] | None = None
    """Overall span scores of the `none` baseline (nothing predicted) under each view (`f1`, `f1_with_gold`,
    `f1_pooled`), when the board holds a complete `none` row."""
    tasks: list[Name]
    """Task columns, in the paper's order."""
    datasets: list[Name]
    """Partition (`task/dataset`) columns."""
    entries: list[Entry]
    """Reproduced runs and submissions: ranked and reference rows by score, then partial, then incomplete ones."""
    reported: list[Entry] = Field(default_factory=list)
    """Scores reported in the SHAM-Bench paper (never ranked with, nor mixed into, the reproduced runs)."""
    reported_source: str | None = None
    """Citation of the reported scores."""
    human: HumanReference | None = None
    """One annotator against the others on the partitions whose sources release annotators (None without such
    partitions): a reference row, never ranked; each entry's `agreement` gives its gap to it."""
    stability: RankStability | None = None
    """The compared rows (ranked and reference) under every convention the board reports, with Kendall's tau,
    paired-bootstrap rank intervals and whether each order holds (`shambench.reporting.ranks`); None with fewer
    than two such rows, or for a board a submission was added to after its build."""
    skipped: dict[str, str] = Field(default_factory=dict)
    """Runs found but left off the board (unreadable, not a regular file, too large, or not re-scorable from
    their journal and examples), by run directory, with the reason."""


def json_schema(model: type[BaseModel], name: str, version: str) -> dict[str, Any]:
    """The model's JSON Schema (draft 2020-12), titled with its version."""
    schema = model.model_json_schema()
    return {"$schema": DRAFT, "$id": name, **schema, "title": f"{schema['title']} (schema version {version})"}


def schemas() -> dict[str, dict[str, Any]]:
    """File name → JSON Schema, for the results and the leaderboard."""
    from shambench.scoring.results import Results

    return {
        RESULTS_SCHEMA: json_schema(Results, RESULTS_SCHEMA, SCHEMA_VERSION),
        LEADERBOARD_SCHEMA: json_schema(Leaderboard, LEADERBOARD_SCHEMA, LEADERBOARD_VERSION),
    }


def schema_text(schema: dict[str, Any]) -> str:
    """The exact text a schema file holds."""
    return json.dumps(schema, indent=2, sort_keys=True) + "\n"


def export_schemas(out_dir: str | Path = SCHEMA_DIR) -> list[Path]:
    """Write the JSON Schemas into `out_dir` (atomically); returns the paths."""
    paths = []
    for name, schema in schemas().items():
        path = Path(out_dir) / name
        write_atomic(path, schema_text(schema))
        paths.append(path)
    return paths
