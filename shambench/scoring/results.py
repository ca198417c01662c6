"""The versioned results schema: what `shambench score` and `shambench eval` write to `results.json`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from pydantic import BaseModel, ConfigDict, Field, SerializerFunctionWrapHandler, model_serializer, model_validator

from shambench.documented import DOCUMENTED
from shambench.schema import Model, Name
from shambench.scoring.agreement import AgreementGroup
from shambench.scoring.steps import MathGroup
from shambench.scoring.typed import TypesGroup
from shambench.selection_fields import Recorded

if TYPE_CHECKING:
    import pandas as pd

SCHEMA_VERSION = "2.0"
"""2.0: `datasets` (keyed by partition) is named `partitions`, and `groups` is typed. Files of 1.x are read (their
`datasets` become `partitions`) and are 2.0 once read."""


class _Documented(Model):
    """Base of the results models: the docstring under each field becomes its description in the JSON Schema.

    NaN and infinity are refused: every number in results.json is a finite number, and a field that may be
    absent says so with `| None` (null) in its type."""

    model_config = DOCUMENTED | ConfigDict(allow_inf_nan=False)


class PRF(_Documented):
    """Precision, recall and F1 under one convention, with an optional bootstrap interval on F1."""

    precision: float
    """Precision (per-example mean, or pooled, as the enclosing key says)."""
    recall: float
    """Recall under the same convention."""
    f1: float
    """F1 under the same convention."""
    ci: tuple[float, float] | None = None
    """Seeded percentile-bootstrap 95% interval of F1 over examples; None for pooled figures."""


class ExampleScores(_Documented):
    """One example's own scores: a line of a run's `per_example.jsonl` (`shambench score --per-example`)."""

    id: Name
    """The example id."""
    dataset: Name
    """Its dataset."""
    task: Name
    """Its task (the partition is `task/dataset`)."""
    status: str
    """`predicted`, `failed` (the detector recorded an error) or `missing` (no prediction): both scored as empty."""
    token: PRF
    """Token-level precision, recall and F1 of this example (no interval)."""
    sentence: PRF
    """Sentence-unit precision, recall and F1 of this example."""
    iou: float | None = None
    """Mu-SHROOM IoU of this example; None without gold soft labels."""
    cor: float | None = None
    """Mu-SHROOM Cor of this example; None without gold soft labels."""


class MushroomScores(_Documented):
    """Mu-SHROOM (SemEval-2025 Task 3) official per-item scores, averaged over items that carry soft labels."""

    iou: float
    """Mean character IoU of hard labels; 1.0 for an item where both are empty."""
    cor: float
    """Mean Spearman correlation of per-character soft probabilities (official constant-vector rule)."""
    n: int
    """Number of items with soft labels that entered the means."""


class ThresholdFree(_Documented):
    """Ranking metrics over tokens, from detector scores (a token's score is the max over ranges it overlaps)."""

    auprc: float | None
    """Average precision over all tokens of the group (pooled); None when only one class is present."""
    auroc: float | None
    """Area under the ROC curve over the same tokens; None when only one class is present."""
    n_tokens: int
    """Number of tokens ranked."""


class GroupScores(_Documented):
    """All metrics of one partition (`task/dataset`) or one task: the counts, then every registered metric's figure
    (`shambench.scoring.measures`); a metric registered beyond the built-in ones below is kept as a further key."""

    model_config = DOCUMENTED | ConfigDict(allow_inf_nan=False, extra="allow")

    n: int
    """Number of examples scored."""
    n_with_gold: int
    """Examples with at least one gold hallucinated span."""
    missing_predictions: int = 0
    """Examples without a prediction (or whose prediction failed), scored as predicting nothing."""
    failed_predictions: int = 0
    """Of those, how many carry a detector error (the rest have no prediction at all)."""
    token: PRF
    """Per-example token P/R/F1, averaged over examples (the SHAM-Bench headline)."""
    sentence: PRF
    """Per-example sentence-unit P/R/F1, averaged over examples."""
    token_with_gold: PRF | None = None
    """Per-example token P/R/F1 averaged over the examples with a gold span only (predicting nothing scores 0);
    None when the group has no such example."""
    token_pooled: PRF
    """Micro token P/R/F1 pooled over all tokens of the group (LettuceDetect's convention)."""
    char_pooled: PRF
    """Micro character P/R/F1 pooled over all characters (RAGTruth/LettuceDetect "span level")."""
    mushroom: MushroomScores | None = None
    """IoU/Cor, when the group's examples carry soft labels."""
    threshold_free: ThresholdFree | None = None
    """AUPRC/AUROC, when predictions carry scores."""


class OverallLevel(_Documented):
    """The unweighted mean over tasks of one level's per-task scores."""

    f1: float
    """Mean of the task F1s."""
    std: float
    """Population standard deviation (ddof=0) of the task F1s."""
    precision: float
    """Mean of the task precisions."""
    recall: float
    """Mean of the task recalls."""
    ci: tuple[float, float] | None = None
    """95% interval from the tasks' bootstrap replicates (resampled independently within each task)."""


class Overall(_Documented):
    """SHAM-Bench overall scores: unweighted over tasks, step-level (math) tasks excluded."""

    tasks: list[Name]
    """The tasks that entered the mean."""
    token: OverallLevel
    """Span (token) level."""
    sentence: OverallLevel
    """Sentence level."""


class RunInfo(_Documented, Recorded):
    """What was scored and how it was produced; every field is optional because a bare predictions file has none."""

    # Extra keys are kept (and allowed by the exported schema) so that plugins can record more.
    model_config = ConfigDict(extra="allow")

    detector: Name | None = None
    """Detector spec (`NAME` or `NAME:ARG`), or the submission name."""
    family: Name | None = None
    """Detector family (`baseline`, `prompted`, `token-classifier`, ...)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Detector parameters that define its output (no secrets)."""
    prompt_hash: str | None = None
    """Hash of the prompt template, when the detector records one (in its params or every prediction's meta)."""
    served_model: str | None = None
    """The model name the server reported answering with (API-backed detectors; several are joined by `, `)."""
    structured_mode: str | None = None
    """The structured-output mode the server answered in (`json_schema`, `json_object+schema`, `json_object` or
    `prompt`; API-backed detectors asking for JSON, as negotiated or forced; several are joined by `, `)."""
    origin: str = "run"
    """`run` (shambench eval), `submission` (leaderboard submit) or `predictions` (shambench score --predictions)."""
    split: Name | None = None
    """Split of the adapters' data."""
    predictions_file: str | None = None
    """PRED JSONL file that was scored, for `shambench score --predictions`."""
    predictions_format: str | None = None
    """The released format the predictions file was read in (e.g. `mushroom`); None for shambench's own."""
    skipped_ranges: dict[str, int] = Field(default_factory=dict)
    """Ranges of the predictions file left out as its format's own scorer leaves them out, by reason."""
    context_provenance: dict[str, dict[str, Any]] = Field(default_factory=dict)
    """Per partition: provider, parameters, how many examples got evidence, and a hash of that evidence."""
    dropped_rows: dict[str, dict[str, int]] = Field(default_factory=dict)
    """Per dataset, the source rows its adapter dropped (reason -> count), which no score includes."""
    examples_hash: str | None = None
    """SHA-256 over the examples the run was made on (see `shambench.runs.rundir.examples_hash`)."""
    data_changed: list[str] | None = None
    """The parts of the examples that changed since the run was made, when it was rescored anyway on the changed
    data (`score RUN_DIR --accept-changed-data`): its numbers are then not the run's, and no board ranks it."""
    dataset_revisions: dict[str, str] = Field(default_factory=dict)
    """Per dataset, the released revision its adapter reads (commit, version or date)."""
    dataset_counts: dict[str, int] = Field(default_factory=dict)
    """Per dataset, how many examples were scored."""
    run_dir: str | None = None
    """The run directory, as given."""
    started_at: str | None = None
    """UTC time the run was created, ISO 8601."""
    finished_at: str | None = None
    """UTC time the run was scored, ISO 8601."""
    packages: dict[str, str] = Field(default_factory=dict)
    """Versions of score-relevant libraries when the run was created."""
    meta: dict[str, Any] = Field(default_factory=dict)
    """Free-form facts about the system, e.g. a submission's authors, description and URL."""
    usage: dict[str, float] = Field(default_factory=dict)
    """Token and cost totals summed over the predictions' `meta.usage` (e.g. input_tokens, output_tokens)."""
    cost_usd: float | None = None
    """Total cost in US dollars, when the detector reports one (`cost_usd` or `cost` in `meta.usage`)."""


SHARED_TASK_CONVENTION = (
    "per language: Mu-SHROOM official IoU and Cor (mean over items, official scorer rules, from the predicted "
    "probabilities as read: see mushroom_probabilities for a submission file) and per-example token and sentence "
    "F1 (SHAM-Bench convention); overall: unweighted mean over languages"
)


class LanguageScores(Model):
    """The shared task's figures and the span F1s of one language."""

    n: int
    """Items scored."""
    iou: float
    """Official character IoU, mean over items."""
    cor: float
    """Official Cor (Spearman of soft labels, constant-vector rule), mean over items."""
    token_f1: float
    """Per-example token F1, mean over items."""
    sentence_f1: float
    """Per-example sentence F1, mean over items."""


class SharedTaskView(Model):
    """Per language scores and their mean over languages."""

    convention: str = SHARED_TASK_CONVENTION
    """How the figures are computed."""
    languages: dict[str, LanguageScores]
    """Per language code, in alphabetical order."""
    overall: LanguageScores
    """Unweighted mean over languages (`n` is the total item count)."""


MULTILINGUAL = "open_qa_multilingual"
"""The extended view's group of the Mu-SHROOM language partitions."""
EXTENDED_CONVENTION = (
    "per group: per-example P/R/F1 averaged over its examples, a group being a task with every partition of the "
    "run, the extended suite's added ones included, except the Mu-SHROOM language partitions, which form the group "
    f"{MULTILINGUAL}; overall: unweighted mean over the groups, population std; never part of the paper's overall"
)


class ExtendedView(Model):
    """The extended suite's scores: per group and their overall, apart from the paper's."""

    convention: str = EXTENDED_CONVENTION
    """How the figures are computed."""
    groups: dict[str, GroupScores]
    """Per group (a task, or `open_qa_multilingual`), all metrics over its examples."""
    partitions: dict[str, list[str]]
    """Per group, the `task/dataset` partitions it holds."""
    overall: Overall
    """Unweighted mean over the groups (`Overall.tasks` lists them)."""


class ResultGroups(_Documented):
    """Result groups kept apart from the SHAM-Bench overall, each present only when the run has its examples.
    Further groups (a newer shambench's, a plugin's) are kept as they are read."""

    model_config = ConfigDict(extra="allow")

    math: MathGroup | None = None
    """Step-level (math) verification metrics (`shambench.scoring.steps`)."""
    mushroom: SharedTaskView | None = None
    """The Mu-SHROOM shared task's per-language view (`shambench.scoring.shared_task`)."""
    agreement: AgreementGroup | None = None
    """The detector against the leave-one-out golds beside the human figures (`shambench.scoring.agreement`)."""
    extended: ExtendedView | None = None
    """The extended suite's per-group scores and overall, apart from the paper's (`shambench.scoring.extended`)."""
    types: TypesGroup | None = None
    """Per error type recall, and typed P/R/F1 for typed predictions, of the datasets whose gold spans carry types
    (`shambench.scoring.typed`)."""

    @model_serializer(mode="wrap")
    def _present_only(self, handler: SerializerFunctionWrapHandler) -> dict[str, Any]:
        # An absent group is left out of results.json rather than written as null.
        return {k: v for k, v in handler(self).items() if v is not None}


class Results(_Documented):
    """One scored run."""

    # `results.run = {...}` is validated into a RunInfo.
    model_config = ConfigDict(validate_assignment=True)

    schema_version: str = SCHEMA_VERSION
    """Version of this schema; bumped on any incompatible change."""
    shambench_version: str
    """Version of shambench that scored the run."""
    git_commit: str | None = None
    """Commit of the shambench checkout, when it is one."""
    created_at: str
    """UTC time of scoring, ISO 8601."""
    conventions: dict[str, str]
    """How every number was computed: averaging, tokenizer, sentence splitter, empty-example rule, bootstrap."""
    n_examples: int
    """Examples scored."""
    missing_predictions: int
    """Examples with no usable prediction (absent or failed), scored as empty."""
    failed_predictions: int = 0
    """Of those, how many carry a detector error."""
    partitions: dict[str, GroupScores]
    """Per partition, keyed `task/dataset` (`datasets` before schema 2.0)."""
    tasks: dict[str, GroupScores]
    """Per task."""
    overall: Overall | None
    """Mean over tasks; None when only step-level tasks were scored."""
    segmentation: dict[str, str] = Field(default_factory=dict)
    """Per partition (`task/dataset`), the token and sentence convention of its language (`shambench.scoring.text`)."""
    groups: ResultGroups = Field(default_factory=ResultGroups)
    """Result groups kept apart from the overall: `math` (step-level verification), `mushroom` (shared task),
    `agreement` (against the annotators)."""
    run: RunInfo = Field(default_factory=RunInfo)
    """Run metadata: detector name, family, parameters, prompt hash, data selection, usage, cost, timings."""

    @model_validator(mode="before")
    @classmethod
    def _read_schema_1(cls, data: Any) -> Any:
        """A 1.x file: its per-partition `datasets` are the `partitions` of 2.0."""
        if isinstance(data, dict) and "datasets" in data and "partitions" not in data:
            data = {k: v for k, v in data.items() if k != "datasets"} | {"partitions": data["datasets"]}
            data["schema_version"] = SCHEMA_VERSION
        return data

    def to_pandas(self) -> pd.DataFrame:
        """One row per partition, per task and the overall, with flat metric columns (`token_f1`, ...)."""
        return results_frame(self)


def group_row(level: str, name: str, scores: GroupScores) -> dict[str, Any]:
    """The flat record of one scored group."""
    row: dict[str, Any] = {
        "level": level,
        "name": name,
        "n": scores.n,
        "n_with_gold": scores.n_with_gold,
        "missing_predictions": scores.missing_predictions,
    }
    for key in ("token", "sentence", "token_pooled", "char_pooled"):
        prf = getattr(scores, key)
        row |= {f"{key}_precision": prf.precision, f"{key}_recall": prf.recall, f"{key}_f1": prf.f1}
        if prf.ci is not None:
            row |= {f"{key}_ci_low": prf.ci[0], f"{key}_ci_high": prf.ci[1]}
    if scores.mushroom is not None:
        row |= {"iou": scores.mushroom.iou, "cor": scores.mushroom.cor}
    if scores.threshold_free is not None:
        row |= {"auprc": scores.threshold_free.auprc, "auroc": scores.threshold_free.auroc}
    for name, value in (scores.model_extra or {}).items():
        # A metric registered beyond the built-in ones: its numbers, prefixed with its name.
        fields = value.model_dump() if isinstance(value, BaseModel) else value if isinstance(value, dict) else {}
        row |= {f"{name}_{k}": v for k, v in fields.items() if isinstance(v, int | float)}
    return row


def results_frame(results: Results) -> pd.DataFrame:
    """One row per partition (`level="partition"`), per task (`"task"`) and the overall (`"overall"`)."""
    import pandas as pd

    rows = [group_row("partition", name, g) for name, g in sorted(results.partitions.items())]
    rows += [group_row("task", name, g) for name, g in sorted(results.tasks.items())]
    if results.overall is not None:
        o = results.overall
        rows.append(
            {
                "level": "overall",
                "name": f"overall ({len(o.tasks)} task{'' if len(o.tasks) == 1 else 's'})",
                "n": results.n_examples,
                "missing_predictions": results.missing_predictions,
                "token_precision": o.token.precision,
                "token_recall": o.token.recall,
                "token_f1": o.token.f1,
                "token_std": o.token.std,
                "sentence_precision": o.sentence.precision,
                "sentence_recall": o.sentence.recall,
                "sentence_f1": o.sentence.f1,
                "sentence_std": o.sentence.std,
            }
        )
    return pd.DataFrame(rows)
