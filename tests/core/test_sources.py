"""Sources declare themselves: the core reads their adapters' declarations and names no corpus of its own."""

from __future__ import annotations

import ast
import re
from pathlib import Path

import pytest
from rich.console import Console

from shambench import sources
from shambench.data.adapter import Adapter, LoadResult
from shambench.reporting.tables import print_results
from shambench.schema import Example, Prediction, SoftSpan, Span
from shambench.scoring.results import Results
from shambench.scoring.scorer import score
from shambench.sources import PAPER_SOURCE, PublishedCount, SharedTask

REPO = Path(__file__).resolve().parents[2]
# The core's folders (the plugins, `adapters/` and `detectors/`, are where sources and detectors name themselves).
CORE = (REPO / "shambench", REPO / "leaderboard")
PLUGIN_FOLDERS = (REPO / "shambench" / "data" / "providers",)
# (file, name): why the core may spell a source's name there.
ALLOWED = {
    ("leaderboard/mushroom.py", "mushroom"): "the Mu-SHROOM shared task's own board page (mushroom.html), reading "
    "the view its source declares",
    ("shambench/cli/score.py", "mushroom"): "an example in --format's help text",
    ("shambench/runs/spec.py", "math-shepherd"): "sopo_compat is Math-Shepherd's SOPO kit rule (to be declared by the "
    "adapter)",
    ("shambench/scoring/measures.py", "mushroom"): "the results key of the official IoU/Cor metric (schema 2.0's "
    "`GroupScores.mushroom`, kept for the files already written)",
}

# Files written from others, which the scan reads instead: path -> where from.
WRITTEN_FROM = {
    "shambench/cli/option_table.py": "RunSpec's fields (`python -m shambench.cli.options`): its help strings are the "
    "fields' docstrings, its flags and defaults their declarations, in shambench/runs/spec.py and "
    "shambench/selection_fields.py",
}


def docstrings(tree: ast.AST) -> set[int]:
    """The ids of the string constants that are docstrings (of modules, classes, functions and attributes)."""
    found = set()
    for node in ast.walk(tree):
        body = getattr(node, "body", None)
        if not isinstance(body, list):
            continue
        if isinstance(node, ast.Module | ast.ClassDef | ast.FunctionDef | ast.AsyncFunctionDef) and body:
            first = body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                found.add(id(first.value))
        for a, b in zip(body, body[1:]):
            if (
                isinstance(a, ast.Assign | ast.AnnAssign)
                and isinstance(b, ast.Expr)
                and isinstance(b.value, ast.Constant)
            ):
                found.add(id(b.value))
    return found


def named_sources(source: str, names: list[str]) -> list[tuple[int, str]]:
    """(line, name) of every string literal (not a docstring) that spells a source's name as a word of its own."""
    pattern = re.compile(r"(?<![A-Za-z0-9_])(" + "|".join(map(re.escape, names)) + r")(?![A-Za-z0-9_])")
    tree = ast.parse(source)
    skip = docstrings(tree)
    return [
        (node.lineno, match.group(1))
        for node in ast.walk(tree)
        if isinstance(node, ast.Constant) and isinstance(node.value, str) and id(node) not in skip
        for match in pattern.finditer(node.value)
    ]


def test_the_scan_finds_a_name_in_a_literal_and_not_in_a_docstring():
    source = '"""About ragtruth."""\nX = "summ/ragtruth"\nY = "ragtruthy"\nZ = "mushroom-"\n'
    assert named_sources(source, ["ragtruth", "mushroom"]) == [(2, "ragtruth"), (4, "mushroom")]


def test_the_core_spells_no_registered_source_name():
    names = sorted((s.name for s in sources.sources()), key=len, reverse=True)
    assert "ragtruth" in names and "mushroom-multilingual" in names
    found = {}
    for folder in CORE:
        for path in sorted(folder.rglob("*.py")):
            if any(path.is_relative_to(p) for p in PLUGIN_FOLDERS):
                continue
            where = path.relative_to(REPO).as_posix()
            if where in WRITTEN_FROM:
                continue
            for line, name in named_sources(path.read_text(encoding="utf-8"), names):
                if (where, name) not in ALLOWED:
                    found.setdefault(f"{where}:{line}", name)
    assert found == {}, "the core names sources; declare it in the adapter instead (shambench.sources)"
    assert all((REPO / path).is_file() for path in WRITTEN_FROM)


class ToyCorpus(Adapter):
    """A corpus of a suite of its own, kept apart from the paper's tasks, with a shared task of its own."""

    name = "toy-corpus"
    tasks = ("summ",)
    suite = "toy"
    also_in = ("extended",)
    datasets = ("toy-*",)
    kept_apart = "the toy corpus"
    published_counts = {"summ/toy-a": PublishedCount(count=2, source="the toy paper, table 1")}
    shared_task = SharedTask(group="toy_task", title="Toy", row_prefix="toy-", metric="mushroom")

    def available(self, data_dir: Path) -> bool:
        return False

    def load(self, data_dir: Path, split: str = "test") -> LoadResult:
        return LoadResult(examples=[])


@pytest.fixture
def toy(monkeypatch):
    """The registry with the toy corpus registered beside the built-ins, as it was once the test ends."""
    sources.registry.entries()
    monkeypatch.setattr(sources.registry, "_entries", dict(sources.registry._entries))
    sources.registry.register("toy-corpus")(ToyCorpus)
    return ToyCorpus


def example(i: int, dataset: str, task: str = "summ") -> Example:
    soft = [SoftSpan(start=0, end=3, prob=0.8)]
    return Example(
        id=f"{dataset}-{i}",
        task=task,
        dataset=dataset,
        response="Cats sat.",
        hallu_spans=[Span(start=0, end=4)],
        soft_spans=soft if dataset.startswith("toy-") else None,
    )


def test_a_toy_source_in_a_new_suite_is_selected_grouped_and_counted_without_the_core(toy):
    assert sources.selections()["toy"] == "toy-corpus"
    assert sources.published_count("summ/toy-a") == PublishedCount(count=2, source="the toy paper, table 1")
    assert "summ/toy-a" not in sources.paper_counts() and sources.paper_counts()["summ/ragtruth"] == 900
    assert sources.source_of("toy-b").name == "toy-corpus" and sources.suite_of("toy-b") == "toy"
    assert sources.in_suite(sources.source_of("toy-a"), "extended")
    examples = [example(0, "ragtruth"), example(1, "ragtruth"), example(0, "toy-a"), example(0, "toy-b")]
    # The paper's summ example 0 is found whole, 1 not at all; toy-a found, toy-b missed.
    predictions = [Prediction(id=i, spans=[Span(start=0, end=4)]) for i in ("ragtruth-0", "toy-a-0")]
    results = score(examples, predictions, n_resamples=10)
    assert set(results.partitions) == {"summ/ragtruth", "summ/toy-a", "summ/toy-b"}
    assert results.tasks["summ"].n == 2 and results.tasks["summ"].token.f1 == 0.5
    assert results.overall.tasks == ["summ"]
    extended = results.groups.extended
    assert extended.partitions == {"summ": ["summ/ragtruth", "summ/toy-a", "summ/toy-b"]}
    assert extended.groups["summ"].n == 4 and extended.groups["summ"].token.f1 == 0.5
    assert "the toy corpus" in results.conventions["overall"]
    view = results.model_dump()["groups"]["toy_task"]
    assert set(view["languages"]) == {"a", "b"} and view["languages"]["a"]["iou"] == 1.0
    assert view["languages"]["b"]["iou"] == 0.0 and view["overall"]["iou"] == 0.5
    console = Console(width=200, record=True)
    print_results(Results.model_validate_json(results.model_dump_json()), console)
    assert "Toy shared-task view" in console.export_text()


def test_without_the_toy_its_datasets_are_the_papers_own_tasks():
    results = score([example(0, "toy-a")], [], n_resamples=10)
    assert results.tasks["summ"].n == 1 and results.groups.extended is None


def test_the_built_in_declarations():
    assert sources.selections() == {
        "extended": None,
        "hard2verify": "hard2verify",
        "math-shepherd": "math-shepherd",
        "mushroom": "mushroom-multilingual",
        "processbench": "processbench",
        "sharp": "sharp",
    }
    assert sources.step_suites() == {"processbench", "hard2verify", "sharp", "math-shepherd"}
    assert sources.char_level_suites() == {"math-shepherd"}
    assert sum(sources.paper_counts().values()) == 6461
    assert sources.published_count("summ/zhou") == PublishedCount(count=1995, source=PAPER_SOURCE)
    assert sources.source_of("mushroom").name == "mushroom"
    assert sources.source_of("mushroom-de").name == "mushroom-multilingual"
    assert sources.suite_of("processbench/gsm8k") == "processbench" and sources.suite_of("other/x") == "other"
