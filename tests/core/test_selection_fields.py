"""A selection field (`examples_file`, `split`, `limit`, ...) is declared in at most three modules: the run's spec,
config.json and results.json inherit it from `shambench.selection_fields`; a module that declares one again is
found by walking every class body of the package."""

from __future__ import annotations

import ast
from collections import defaultdict
from pathlib import Path

from shambench.runs.rundir import RunConfig
from shambench.runs.spec import Selection
from shambench.scoring.results import RunInfo

REPO = Path(__file__).resolve().parents[2]
PACKAGE = ("shambench", "adapters", "detectors", "leaderboard")
MOST_MODULES = 3

OTHER_MEANINGS: dict[str, str] = {
    "shambench/schema.py:Example": "one example's own split and its evidence text",
    "shambench/data/context.py:ContextRecord": "the evidence text a provider fetched",
    "detectors/miprov2.py:Demo": "a demo's evidence text",
    "adapters/ragtruth.py:ResponseRow": "the split a source row belongs to",
    "shambench/data/adapter.py:Adapter": "a source's own dataset-name patterns and suite",
    "shambench/sources.py:Source": "a source's own dataset-name patterns",
    "shambench/data/download.py:Cap": "a download's byte limit",
    "shambench/data/benchmark.py:Benchmark": "what a load read (below runs: the data layer's result)",
    "shambench/data/stats.py:BenchmarkStats": "what `data stats` describes, as the load read it",
    "shambench/runs/sweep/grid.py:SweepSpec": "a grid axis: one cell per dataset",
    "shambench/runs/sweep/grid.py:SweepPlan": "the data folder a sweep plan resolved for all its cells",
    "shambench/data/formats.py:PredictionsRead": "the datasets a predictions file's ids name",
    "shambench/scoring/corpus.py:Corpus": "the datasets a scored corpus holds",
    "shambench/scoring/steps.py:MathGroup": "the datasets a result group covers",
    "shambench/scoring/steps.py:SuiteScores": "the datasets a result group covers",
    "shambench/scoring/typed.py:TypedGold": "the datasets a result group covers",
    "shambench/scoring/typed.py:TypesGroup": "the datasets a result group covers",
    "shambench/reporting/analysis.py:RunAnalysis": "the datasets an analysis covers",
    "leaderboard/schema.py:Leaderboard": "the datasets a board ranks on",
    "leaderboard/schema.py:Level": "the datasets a board level ranks on",
    "leaderboard/build.py:ReportedScores": "the datasets a paper's reported scores cover",
}
"""Classes whose field of a selection field's name is something else (`path:Class` -> what it is there)."""


def declarations(names: set[str], base: Path = REPO, roots: tuple[str, ...] = PACKAGE) -> dict[str, set[str]]:
    """Per field name, the `path:Class` of every class body under `roots` that declares it (annotated)."""
    found: dict[str, set[str]] = defaultdict(set)
    for root in roots:
        for path in sorted((base / root).rglob("*.py")):
            where = path.relative_to(base).as_posix()
            for node in ast.walk(ast.parse(path.read_text("utf-8"))):
                if not isinstance(node, ast.ClassDef):
                    continue
                for statement in node.body:
                    target = statement.target if isinstance(statement, ast.AnnAssign) else None
                    if isinstance(target, ast.Name) and target.id in names:
                        found[target.id].add(f"{where}:{node.name}")
    return found


def test_each_selection_field_is_declared_in_at_most_three_modules() -> None:
    found = declarations(set(Selection.model_fields))
    for name in Selection.model_fields:
        modules = {where.split(":")[0] for where in found[name] if where not in OTHER_MEANINGS}
        assert modules, name  # the walk sees the declaration itself
        assert len(modules) <= MOST_MODULES, f"{name} declared in {sorted(modules)}"


def test_other_meanings_name_classes_that_still_declare_one() -> None:
    found = declarations(set(Selection.model_fields))
    declaring = set().union(*found.values())
    assert set(OTHER_MEANINGS) <= declaring, set(OTHER_MEANINGS) - declaring


def test_a_new_module_declaring_one_is_counted(tmp_path: Path) -> None:
    (tmp_path / "pkg" / "sub").mkdir(parents=True)
    (tmp_path / "pkg" / "sub" / "later.py").write_text(
        "class Later:\n    limit: int = 3\n    other: str\n\n    def f(self):\n        split: str = 'x'\n"
    )
    assert declarations({"limit", "split"}, tmp_path, ("pkg",)) == {"limit": {"pkg/sub/later.py:Later"}}


def test_config_and_results_share_the_selections_declarations() -> None:
    for model, names in ((RunConfig, set(Selection.model_fields) - {"suite"}), (RunInfo, {"datasets", "limit"})):
        for name in names:
            mine, selections = model.model_fields[name], Selection.model_fields[name]
            assert mine.description == selections.description and mine.annotation == selections.annotation, name
    assert set(Selection.model_fields) - set(RunConfig.model_fields) == {"suite"}
    assert {"data_dir", "context_params", "suite"}.isdisjoint(RunInfo.model_fields)
