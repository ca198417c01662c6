"""Building the leaderboard: run results and the paper's reported scores → `leaderboard.json` and `index.html`."""

from __future__ import annotations

import os
from collections.abc import Iterable, Sequence
from pathlib import Path

from pydantic import BaseModel, Field, ValidationError

from shambench.io import DataError, Journal, write_atomic, write_json
from shambench.leaderboard.schema import TASK_ORDER, Cell, Entry, Leaderboard, Level
from shambench.provenance import now_iso, shambench_version
from shambench.results import PRF, GroupScores, Results
from shambench.runner import RESULTS

SITE_JSON = "leaderboard.json"
SITE_HTML = "index.html"
# Relative to the current directory, as `shambench leaderboard build` is run from the checkout's root.
DEFAULT_REPORTED = Path("..", "shared", "data", "sham_bench_reported", "reported_f1.json")


class ReportedScores(BaseModel):
    """One detector at one level in `reported_f1.json`."""

    tasks: dict[str, float]
    """Per-task F1."""
    overall: float
    """Mean over the six tasks."""
    overall_std: float | None = None
    """Population standard deviation over the tasks."""
    datasets: dict[str, float] = Field(default_factory=dict)
    """Per-partition F1, keyed `task/dataset`."""


class ReportedFile(BaseModel):
    """The layout of `reported_f1.json`: the paper's F1 per detector, span and sentence level."""

    source: str
    """Citation of the tables the numbers come from."""
    conventions: str = ""
    """The paper's averaging conventions."""
    span_level: dict[str, ReportedScores]
    """Span-level (token) F1 per detector."""
    sentence_level: dict[str, ReportedScores] = Field(default_factory=dict)
    """Sentence-level F1 per detector."""


def find_results(paths: Iterable[str | Path]) -> list[Path]:
    """Every `results.json` in the given run directories or folders of them (searched recursively), sorted."""
    found: set[Path] = set()
    for path in map(Path, paths):
        if not path.exists():
            raise DataError(f"{path}: no such run directory or folder")
        hits = [path] if path.is_file() else list(path.rglob(RESULTS))
        if not hits:
            raise DataError(f"{path}: no {RESULTS} found (is it a scored run directory, or a folder of them?)")
        found.update(hits)
    return sorted(found)


def load_results(path: Path) -> Results:
    """A `results.json` validated against the results schema; DataError names the file and the field."""
    try:
        return Results.model_validate_json(path.read_bytes())
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "file"
        raise DataError(f"{path}: not a shambench results file ({where}: {first['msg']})") from None


def _cell(prf: PRF, n: int) -> Cell:
    return Cell(f1=prf.f1, precision=prf.precision, recall=prf.recall, ci=prf.ci, n=n)


def _level(results: Results, level: str) -> Level:
    def cells(groups: dict[str, GroupScores]) -> dict[str, Cell]:
        return {name: _cell(getattr(g, level), g.n) for name, g in groups.items()}

    overall = None
    if results.overall is not None:
        o = getattr(results.overall, level)
        n = sum(results.tasks[t].n for t in results.overall.tasks)
        overall = Cell(f1=o.f1, precision=o.precision, recall=o.recall, ci=o.ci, n=n)
    return Level(
        overall=overall,
        overall_std=getattr(results.overall, level).std if results.overall else None,
        overall_tasks=results.overall.tasks if results.overall else [],
        tasks=cells(results.tasks),
        datasets=cells(results.datasets),
    )


def display_path(path: Path) -> str:
    """`path` relative to the current directory when it lies below it, else as given (no home or machine paths)."""
    try:
        return Path(os.path.relpath(path.resolve(), Path.cwd())).as_posix()
    except ValueError:
        return path.as_posix()


def run_entry(results: Results, source: str) -> Entry:
    """The leaderboard row of a scored run."""
    run = results.run
    # A public page should not reveal where files lay on the machine that ran it: keep file names only.
    public_run = run.model_copy(
        update={
            "examples_file": Path(run.examples_file).name if run.examples_file else None,
            "predictions_file": Path(run.predictions_file).name if run.predictions_file else None,
            "run_dir": None,
        }
    )
    return Entry(
        id="run",
        name=run.detector or Path(source).name,
        kind="reproduced",
        origin=run.origin,
        family=run.family,
        params=run.params,
        span=_level(results, "token"),
        sentence=_level(results, "sentence"),
        n_examples=results.n_examples,
        missing_predictions=results.missing_predictions,
        source=source,
        scored_at=results.created_at,
        shambench_version=results.shambench_version,
        git_commit=results.git_commit,
        conventions=results.conventions,
        run=public_run,
    )


def load_reported(path: str | Path) -> ReportedFile:
    """The paper's reported scores; DataError names the file and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: reported scores not found (pass --reported FILE, or --no-reported)")
    try:
        return ReportedFile.model_validate_json(path.read_bytes())
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "file"
        raise DataError(f"{path}: not a reported-scores file ({where}: {first['msg']})") from None


def _reported_level(scores: ReportedScores | None) -> Level:
    if scores is None:
        return Level()
    return Level(
        overall=Cell(f1=scores.overall),
        overall_std=scores.overall_std,
        overall_tasks=list(scores.tasks),
        tasks={t: Cell(f1=v) for t, v in scores.tasks.items()},
        datasets={d: Cell(f1=v) for d, v in scores.datasets.items()},
    )


def reported_entries(reported: ReportedFile) -> list[Entry]:
    """One row per detector of the paper, ordered by its reported overall span F1."""
    rows = [
        Entry(
            id="paper",
            name=name,
            kind="reported",
            origin="paper",
            span=_reported_level(span),
            sentence=_reported_level(reported.sentence_level.get(name)),
            source=reported.source,
            conventions={"reported": reported.conventions} if reported.conventions else {},
        )
        for name, span in reported.span_level.items()
    ]
    ranked = sorted(rows, key=_rank_key)
    return [e.model_copy(update={"id": f"paper-{i}"}) for i, e in enumerate(ranked, start=1)]


def _rank_key(entry: Entry) -> tuple:
    span = entry.span.overall.f1 if entry.span.overall else float("-inf")
    sentence = entry.sentence.overall.f1 if entry.sentence.overall else float("-inf")
    return (-span, -sentence, entry.name)


def ranked(entries: Sequence[Entry]) -> list[Entry]:
    """Reproduced rows ordered by overall span F1 (ties: sentence F1, then name), with ranks and anchors."""
    ordered = sorted(entries, key=_rank_key)
    return [e.model_copy(update={"rank": i, "id": f"run-{i}"}) for i, e in enumerate(ordered, start=1)]


def ordered_tasks(names: Iterable[str]) -> list[str]:
    """Task names in the paper's order, others after it alphabetically."""
    names = set(names)
    known = [t for t in TASK_ORDER if t in names]
    return known + sorted(names - set(known))


def _columns(entries: Sequence[Entry]) -> tuple[list[str], list[str]]:
    tasks = ordered_tasks(t for e in entries for lvl in (e.span, e.sentence) for t in lvl.tasks)
    datasets = {d for e in entries for lvl in (e.span, e.sentence) for d in lvl.datasets}
    order = {t: i for i, t in enumerate(tasks)}
    return tasks, sorted(datasets, key=lambda d: (order.get(d.split("/")[0], len(order)), d))


def assemble(entries: Sequence[Entry], paper: Sequence[Entry] = (), reported_source: str | None = None) -> Leaderboard:
    """The leaderboard of reproduced rows (ranked) plus the paper's rows kept in their own list."""
    tasks, datasets = _columns([*entries, *paper])
    return Leaderboard(
        generated_at=now_iso(),
        shambench_version=shambench_version(),
        tasks=tasks,
        datasets=datasets,
        entries=ranked(entries),
        reported=list(paper),
        reported_source=reported_source,
    )


def build(run_paths: Sequence[str | Path], reported_path: str | Path | None) -> Leaderboard:
    """The leaderboard of every run found under `run_paths`, plus the reported rows when a file is given."""
    entries = [run_entry(load_results(p), display_path(p.parent)) for p in find_results(run_paths)]
    if reported_path is None:
        return assemble(entries)
    reported = load_reported(reported_path)
    return assemble(entries, reported_entries(reported), reported.source)


def with_entry(board: Leaderboard, entry: Entry) -> Leaderboard:
    """The board with one more reproduced row, re-ranked; the reported rows stay as they were."""
    return assemble([*board.entries, entry], board.reported, board.reported_source)


def load_leaderboard(site_dir: str | Path) -> Leaderboard:
    """A built site's `leaderboard.json`; DataError when it is missing or not a leaderboard."""
    path = Path(site_dir) / SITE_JSON
    if not path.is_file():
        raise DataError(f"{path}: not found (build the site first with `shambench leaderboard build`)")
    try:
        return Leaderboard.model_validate_json(path.read_bytes())
    except ValidationError as err:
        raise DataError(f"{path}: not a leaderboard ({err.errors()[0]['msg']})") from None


def with_example_pages(board: Leaderboard, out_dir: str | Path) -> Leaderboard:
    """Write `examples/<row id>.html` (the `shambench show --html` view) for every reproduced row whose run
    directory is at hand, and link each from its row."""
    from shambench.highlight import examples_page
    from shambench.runner import JOURNAL, examples_of, load_config

    entries = []
    for entry in board.entries:
        run_dir = Path(entry.source)
        if (run_dir / JOURNAL).exists():
            link = f"examples/{entry.id}.html"
            examples = examples_of(load_config(run_dir))
            page = examples_page(f"{entry.name}: examples", examples, Journal(run_dir / JOURNAL).read())
            write_atomic(Path(out_dir) / link, page)
            entry = entry.model_copy(update={"examples_page": link})
        entries.append(entry)
    return board.model_copy(update={"entries": entries})


def write_site(board: Leaderboard, out_dir: str | Path) -> tuple[Path, Path]:
    """Write `leaderboard.json` and the self-contained `index.html` (each atomically); returns both paths."""
    from shambench.leaderboard.page import render

    out = Path(out_dir)
    html = render(board)
    write_json(out / SITE_JSON, board)
    write_atomic(out / SITE_HTML, html)
    return out / SITE_JSON, out / SITE_HTML
