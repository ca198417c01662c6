"""Building the leaderboard: run results and the paper's reported scores → `leaderboard.json` and `index.html`."""

from __future__ import annotations

import json
import math
import stat
from collections import defaultdict
from collections.abc import Iterable, Sequence
from pathlib import Path
from typing import Any

from pydantic import Field, ValidationError

import shambench.fs as fs
from shambench.errors import DataError
from shambench.io import Journal, write_atomic, write_json
from shambench.leaderboard.errortypes import type_cells
from shambench.leaderboard.ranks import with_stability
from shambench.leaderboard.schema import (
    TASK_ORDER,
    AgreementCell,
    Cell,
    Coverage,
    Entry,
    HumanCell,
    HumanReference,
    Leaderboard,
    Level,
)
from shambench.provenance import now_iso, shambench_version
from shambench.reporting.naming import run_name
from shambench.reporting.runfolders import display_path, run_folders
from shambench.runs.files import JOURNAL
from shambench.schema import Example, Model, Prediction
from shambench.scoring.agreement import LIKE_FOR_LIKE
from shambench.scoring.extended import kept_apart
from shambench.scoring.measures import Metric, figure_of, registered
from shambench.scoring.results import PRF, GroupScores, Results, RunInfo

SITE_JSON = "leaderboard.json"
SITE_HTML = "index.html"
# The figures of the paper's tables (a copy of ../shared/data/sham_bench_reported/reported_f1.json, which names
# its source), shipped with the package so that a board builds from any folder.
DEFAULT_REPORTED = Path(__file__).resolve().parent / "reported_f1.json"


class ReportedScores(Model):
    """One detector at one level in `reported_f1.json`."""

    tasks: dict[str, float]
    """Per-task F1."""
    overall: float
    """Mean over the six tasks."""
    overall_std: float | None = None
    """Population standard deviation over the tasks."""
    datasets: dict[str, float] = Field(default_factory=dict)
    """Per-partition F1, keyed `task/dataset`."""


class ReportedFile(Model):
    """The layout of `reported_f1.json`: the paper's F1 per detector, span and sentence level."""

    source: str
    """Citation of the tables the numbers come from."""
    conventions: str = ""
    """The paper's averaging conventions."""
    span_level: dict[str, ReportedScores]
    """Span-level (token) F1 per detector."""
    sentence_level: dict[str, ReportedScores] = Field(default_factory=dict)
    """Sentence-level F1 per detector."""


# The largest run files a build reads: a results file is a few hundred kB; a journal holds one line per example.
MAX_RESULTS_BYTES = 64 * 2**20
MAX_JOURNAL_BYTES = 4 * 2**30


def checked_file(path: Path, limit: int) -> Path:
    """`path`, when it is a regular file of at most `limit` bytes: a device, FIFO or folder named like a run file
    is never opened (reading it would never end); DataError otherwise."""
    try:
        info = path.stat()
    except OSError as err:
        raise DataError(f"{display_path(path)}: cannot be read ({err.strerror})") from None
    if not stat.S_ISREG(info.st_mode):
        raise DataError(f"{display_path(path)}: not a regular file")
    if info.st_size > limit:
        raise DataError(f"{display_path(path)}: {info.st_size} bytes, more than a run file holds ({limit})")
    return path


def load_results(path: Path) -> Results:
    """A `results.json` validated against the results schema; DataError names the file and the field."""
    try:
        return Results.model_validate_json(fs.read_input(checked_file(path, MAX_RESULTS_BYTES)))
    except ValidationError as err:
        first = err.errors()[0]
        where = ".".join(str(x) for x in first["loc"]) or "file"
        raise DataError(f"{display_path(path)}: not a shambench results file ({where}: {first['msg']})") from None


def board_views() -> dict[str, Metric]:
    """The registered metrics the board shows beside the span F1, by their key in a span cell."""
    return {m.board.key: m for m in registered() if m.board}


def _cell(group: GroupScores, level: str) -> Cell:
    prf: PRF = getattr(group, level)
    views = {}
    if level == "token":
        views = {key: figure_of(group, m) for key, m in board_views().items()}
    return Cell(f1=prf.f1, precision=prf.precision, recall=prf.recall, ci=prf.ci, n=group.n, **views)


def _mean_over(cells: Sequence[Cell], view: str) -> float | None:
    """The unweighted mean of a view over the overall's tasks, as the headline's overall is; None when a task
    lacks it (e.g. a run scored before the view existed)."""
    values = [getattr(c, view) for c in cells]
    return None if not values or None in values else sum(values) / len(values)


def _level(results: Results, level: str) -> Level:
    def cells(groups: dict[str, GroupScores]) -> dict[str, Cell]:
        return {name: _cell(g, level) for name, g in groups.items()}

    tasks = cells(results.tasks)
    overall = None
    if results.overall is not None:
        o = getattr(results.overall, level)
        n = sum(results.tasks[t].n for t in results.overall.tasks)
        in_overall = [tasks[t] for t in results.overall.tasks]
        views = {}
        if level == "token":
            views = {v: _mean_over(in_overall, v) for v in board_views()}
        overall = Cell(f1=o.f1, precision=o.precision, recall=o.recall, ci=o.ci, n=n, **views)
    # The extended suite's added partitions are not the board's data (they have their own view, extended.html).
    paper = {name: g for name, g in results.partitions.items() if not kept_apart(name)}
    return Level(
        overall=overall,
        overall_std=getattr(results.overall, level).std if results.overall else None,
        overall_tasks=results.overall.tasks if results.overall else [],
        tasks=tasks,
        datasets=cells(paper),
    )


def incomplete_because(results: Results) -> list[str]:
    """Why a scored run is not complete: not the test split, a `--limit`, failed or missing predictions."""
    return selection_reasons(results.run) + coverage_reasons(results)


def selection_reasons(run: RunInfo) -> list[str]:
    """Why a run's data is not the whole test split: another split, a `--limit`, or data changed since the run."""
    reasons = []
    if run.data_changed is not None:
        reasons.append(f"scored on data changed since the run ({', '.join(run.data_changed) or 'which part: unknown'})")
    if run.split not in ("test", None) or (run.split is None and run.examples_file is None):
        reasons.append(f"{run.split or 'unknown'} split, not test")
    if run.limit is not None:
        reasons.append(f"--limit {run.limit} (first {run.limit} examples per partition)")
    return reasons


def coverage_reasons(results: Results) -> list[str]:
    """Failed predictions and examples without one."""
    reasons = []
    failed = results.failed_predictions
    missing = results.missing_predictions - failed
    if failed:
        reasons.append(f"{failed} failed prediction(s)")
    if missing:
        reasons.append(f"{missing} example(s) without a prediction")
    return reasons


def coverage(results: Results) -> Coverage:
    """Predicted, failed, missing and total examples of a scored run."""
    failed = results.failed_predictions
    return Coverage(
        total=results.n_examples,
        predicted=results.n_examples - results.missing_predictions,
        failed=failed,
        missing=results.missing_predictions - failed,
    )


def is_reference(results: Results) -> bool:
    """True for runs of a detector registered as a reference baseline (`@detector(name, reference=True)`)."""
    from shambench.detection.detector import detectors
    from shambench.errors import UnknownPluginError

    run = results.run
    if run.origin != "run" or not run.detector:
        return False
    try:
        return bool(detectors.get(run.detector.partition(":")[0]).info.get("reference"))
    except UnknownPluginError:
        return False


def agreement_cells(results: Results) -> dict[str, AgreementCell]:
    """Per partition with annotators, the run's like-for-like span F1 beside one annotator's (`groups.agreement`)."""
    group = results.groups.agreement
    if group is None:
        return {}
    return {
        name: AgreementCell(
            items=p.items,
            f1=p.detector.token.f1,
            ci=p.detector.token.ci,
            human_f1=p.human.token.f1,
            human_ci=p.human.token.ci,
            gap=p.gap["token_f1"],
            alt_passed=p.alternative.passed if p.alternative else None,
            alt_omega=p.alternative.omega if p.alternative else None,
        )
        for name, p in group.partitions.items()
    }


def human_reference(entries: Sequence[Entry]) -> HumanReference | None:
    """The human row of the board's reproduced rows: per partition, the figure of the complete rows (the same for
    every run over the same data; a row over other items of that partition is not taken)."""
    cells: dict[str, HumanCell] = {}
    for e in sorted(entries, key=lambda e: not e.complete):
        for name, c in e.agreement.items():
            cells.setdefault(name, HumanCell(items=c.items, f1=c.human_f1, ci=c.human_ci))
    if not cells:
        return None
    return HumanReference(convention=LIKE_FOR_LIKE, partitions=dict(sorted(cells.items())))


def run_entry(results: Results, source: str, reasons: Sequence[str] | None = None, runs: int = 1) -> Entry:
    """The leaderboard row of a scored run (`reasons`: why it is incomplete, when known better than its results
    say, as for merged sweep cells)."""
    run = results.run
    reasons = incomplete_because(results) if reasons is None else list(reasons)
    # A public page should not reveal where files lay on the machine that ran it: keep file names only.
    public_run = run.model_copy(
        update={
            "examples_file": Path(run.examples_file).name if run.examples_file else None,
            "predictions_file": Path(run.predictions_file).name if run.predictions_file else None,
            "served_model": public_model(run.served_model),
            "run_dir": None,
        }
    )
    return Entry(
        id="run",
        name=run_name(run) or Path(source).name,
        kind="reproduced",
        origin=run.origin,
        family=run.family,
        params=run.params,
        span=_level(results, "token"),
        sentence=_level(results, "sentence"),
        n_examples=results.n_examples,
        missing_predictions=results.missing_predictions,
        complete=not reasons,
        incomplete_because=reasons,
        reference=is_reference(results),
        coverage=coverage(results),
        runs=runs,
        source=source,
        scored_at=results.created_at,
        shambench_version=results.shambench_version,
        git_commit=results.git_commit,
        conventions=results.conventions,
        run=public_run,
        agreement=agreement_cells(results),
        types=type_cells(results),
    )


def public_model(served: str | None) -> str | None:
    """The served model names as a public page shows them: a model file's path (llama.cpp answers with the path
    it loaded) cut to the file's name."""
    if served is None:
        return None
    return ", ".join(Path(name).name if Path(name).is_absolute() else name for name in served.split(", "))


def load_reported(path: str | Path) -> ReportedFile:
    """The paper's reported scores; DataError names the file and what is wrong."""
    path = Path(path)
    if not path.is_file():
        raise DataError(f"{path}: reported scores not found (pass --reported FILE, or --no-reported)")
    try:
        return ReportedFile.model_validate_json(fs.read_input(path, named=True))
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
            standing="reported",
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


def board_partitions(entries: Sequence[Entry]) -> dict[str, int]:
    """The data a row must cover to be ranked: every partition of the complete rows, with its largest count."""
    partitions: dict[str, int] = {}
    for e in entries:
        if e.complete:
            for name, cell in e.span.datasets.items():
                partitions[name] = max(partitions.get(name, 0), cell.n or 0)
    return partitions


def standing(entry: Entry, partitions: dict[str, int]) -> str:
    """`incomplete`, `partial` (complete but not over the board's partitions and counts), `reference` or `ranked`."""
    if not entry.complete:
        return "incomplete"
    if {name: cell.n for name, cell in entry.span.datasets.items()} != partitions:
        return "partial"
    return "reference" if entry.reference else "ranked"


SECTIONS = ("ranked", "partial", "incomplete")


def ranked(entries: Sequence[Entry], partitions: dict[str, int]) -> list[Entry]:
    """Reproduced rows with their standing: ranked and reference rows by overall span F1 (ties: sentence F1, then
    name), ranks for the ranked ones only, then partial and incomplete rows; anchors `run-1`, `run-2`, ... in
    that order."""
    placed = [e.model_copy(update={"standing": standing(e, partitions)}) for e in entries]
    section = {"ranked": 0, "reference": 0, "partial": 1, "incomplete": 2}
    ordered = sorted(placed, key=lambda e: (section[e.standing], *_rank_key(e)))
    out, rank = [], 0
    for i, e in enumerate(ordered, start=1):
        rank += e.standing == "ranked"
        out.append(e.model_copy(update={"rank": rank if e.standing == "ranked" else None, "id": f"run-{i}"}))
    return out


def none_scores(entries: Sequence[Entry]) -> dict[str, float] | None:
    """The overall span views of the board's `none` row on the board's data, when it has one."""
    for e in entries:
        if e.standing == "reference" and e.run and (e.run.detector or "") == "none" and e.span.overall:
            o = e.span.overall
            views = {"f1": o.f1, **{v: getattr(o, v, None) for v in board_views()}}
            return {k: v for k, v in views.items() if v is not None}
    return None


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
    partitions = board_partitions(entries)
    rows = ranked(entries, partitions)
    return Leaderboard(
        generated_at=now_iso(),
        shambench_version=shambench_version(),
        tasks=tasks,
        datasets=datasets,
        partitions=partitions,
        entries=rows,
        none_scores=none_scores(rows),
        reported=list(paper),
        reported_source=reported_source,
        human=human_reference(rows),
    )


def _config_key(results: Results) -> tuple[str, str, str]:
    run = results.run
    return run.origin, run.detector or "", json.dumps(run.params, sort_keys=True, default=str)


def configurations(found: Sequence[tuple[Path, Results]]) -> list[list[tuple[Path, Results]]]:
    """The runs grouped per detector configuration (origin, detector, parameters) when their partitions do not
    overlap, as a sweep's cells over several datasets; runs of one configuration on shared data stay apart."""
    by_key: dict[tuple[str, str, str], list[tuple[Path, Results]]] = defaultdict(list)
    for item in found:
        by_key[_config_key(item[1])].append(item)
    groups = []
    for members in by_key.values():
        names = [set(r.partitions) for _, r in members]
        disjoint = sum(map(len, names)) == len(set().union(*names))
        groups.extend([members] if disjoint else [[m] for m in members])
    return groups


def members_data(members: Sequence[tuple[Path, Results]]) -> tuple[list[Example], list[Prediction]]:
    """The examples (re-created from each run's config) and journalled predictions of a configuration's runs."""
    from shambench.runs.rundir import load_config, run_examples

    examples, predictions = [], []
    for path, _ in members:
        examples += run_examples(load_config(path.parent))
        predictions += list(Journal(checked_file(path.parent / JOURNAL, MAX_JOURNAL_BYTES)).read().values())
    return examples, predictions


def merged_results(members: Sequence[tuple[Path, Results]]) -> Results:
    """A configuration's runs (one or several) scored together from their journals and their examples (re-created
    from each run's config): every view, interval and task mean is then exactly what one run over all their data
    gives, whatever their `results.json` files say. DataError when a run's files cannot be read or its examples
    re-created."""
    from shambench.scoring.scorer import Scorer

    first = members[0][1].run
    examples, predictions = members_data(members)
    results = Scorer(examples).score(predictions)
    if len(members) == 1:
        results.run = first
        return results
    runs = [r.run for _, r in members]
    results.run = first.model_copy(
        update={
            "datasets": sorted({d for r in runs for d in (r.datasets or [])}) or None,
            "dataset_counts": {k: v for r in runs for k, v in r.dataset_counts.items()},
            "dataset_revisions": {k: v for r in runs for k, v in r.dataset_revisions.items()},
            "context_provenance": {k: v for r in runs for k, v in r.context_provenance.items()},
            "examples_hash": None,
            "examples_file": None,
            "run_dir": None,
        }
    )
    return results


def rescored_runs(run_paths: Sequence[str | Path], group: str) -> list[tuple[str, Results]]:
    """The runs under `run_paths` whose results hold the group `group` (a view with a page of its own), each with
    its directory and scored again from its journal and examples, as the board's rows are; a run that cannot be
    read or rescored is left out (the board's build lists it among the skipped)."""
    runs = []
    for path in run_folders(run_paths).results:
        try:
            claimed = load_results(path)
            if getattr(claimed.groups, group, None) is not None:
                runs.append((display_path(path.parent), merged_results([(path, claimed)])))
        except (DataError, OSError):
            continue
    return runs


DISAGREES = "results.json disagrees with its journal"
"""How a row's reasons start when a run's results file does not say what its journal and examples give."""


def _f1_disagreements(where: str, name: str, claimed: Any, rescored: Any) -> list[str]:
    """Where a group's span or sentence F1 in `results.json` is not its rescoring's (partitions, tasks, the
    overall all carry `token` and `sentence`)."""
    return [
        f"{DISAGREES} ({where}): {name} {what} {a:.3f} there, {b:.3f} from the journal"
        for what, a, b in (
            ("span F1", claimed.token.f1, rescored.token.f1),
            ("sentence F1", claimed.sentence.f1, rescored.sentence.f1),
        )
        if not math.isclose(a, b, rel_tol=1e-9, abs_tol=1e-12)
    ]


def _summary_disagreements(path: Path, claimed: Results, rescored: Results) -> list[str]:
    """Where one run's task and overall figures differ from its rescoring (a merged row's are its own)."""
    where = display_path(path)
    pairs: list[tuple[str, Any, Any]] = [(f"task {t}", claimed.tasks[t], rescored.tasks.get(t)) for t in claimed.tasks]
    if claimed.overall is not None or rescored.overall is not None:
        pairs.append(("overall", claimed.overall, rescored.overall))
    found = []
    for name, mine, theirs in pairs:
        if mine is None or theirs is None:
            found.append(f"{DISAGREES} ({where}): {name} is there in only one of results.json and its journal")
        else:
            found += _f1_disagreements(where, name, mine, theirs)
    return found


def disagreements(members: Sequence[tuple[Path, Results]], rescored: Results) -> list[str]:
    """Where the runs' `results.json` files differ from their rescoring: a partition's span or sentence F1 or
    count, the examples or the predictions counted (a doctored file, or a journal edited since)."""
    found = []
    for path, claimed in members:
        where = display_path(path)
        for name, group in claimed.partitions.items():
            if name not in rescored.partitions:
                found.append(f"{DISAGREES} ({where}): partition {name} is not in its data")
                continue
            mine = rescored.partitions[name]
            found += _f1_disagreements(where, name, group, mine)
            if group.n != mine.n:
                found.append(f"{DISAGREES} ({where}): {name} has {group.n} examples there, {mine.n} in its data")
    if len(members) == 1:
        found += _summary_disagreements(*members[0], rescored)
    claimed_counts = {
        "examples": sum(r.n_examples for _, r in members),
        "examples without a prediction": sum(r.missing_predictions for _, r in members),
        "failed predictions": sum(r.failed_predictions for _, r in members),
    }
    counts = {
        "examples": rescored.n_examples,
        "examples without a prediction": rescored.missing_predictions,
        "failed predictions": rescored.failed_predictions,
    }
    found += [
        f"{DISAGREES}: {claimed_counts[k]} {k} there, {counts[k]} from the journal"
        for k in counts
        if claimed_counts[k] != counts[k]
    ]
    return found


def configuration_entry(members: Sequence[tuple[Path, Results]]) -> Entry:
    """The row of one configuration (one run, or several over disjoint data merged), scored from the runs'
    journals and examples; incomplete when their results files disagree with that. DataError when it cannot be
    scored so."""
    rescored = merged_results(members)
    reasons = [reason for _, r in members for reason in selection_reasons(r.run)]
    reasons += coverage_reasons(rescored) + disagreements(members, rescored)
    source = ", ".join(display_path(p.parent) for p, _ in members)
    return run_entry(rescored, source, list(dict.fromkeys(reasons)), runs=len(members))


def _param_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True, default=str)


def named(entries: Sequence[Entry]) -> list[Entry]:
    """Rows of one detector told apart: each named by the parameters whose values differ between them (e.g.
    `random rate=0.3`), and rows still alike by their data."""
    by_name: dict[str, list[Entry]] = defaultdict(list)
    for e in entries:
        by_name[e.name].append(e)
    out = []
    for e in entries:
        alike = by_name[e.name]
        keys = sorted({k for other in alike for k in {*other.params, *e.params}})
        varying = [k for k in keys if len({_param_text(o.params.get(k)) for o in alike}) > 1]
        name = " ".join([e.name, *(f"{k}={_param_text(e.params[k])}" for k in varying if k in e.params)])
        out.append(e.model_copy(update={"name": name}))
    groups: dict[str, list[Entry]] = defaultdict(list)
    for e in out:
        groups[e.name].append(e)
    return [
        e.model_copy(update={"name": f"{e.name} ({_told_apart(e, groups[e.name])})"}) if len(groups[e.name]) > 1 else e
        for e in out
    ]


def _told_apart(entry: Entry, alike: Sequence[Entry]) -> str:
    """What tells a row from others of the same name: its run directory's name, else its partitions."""
    folders = [Path(e.source.split(", ")[0]).name for e in alike]
    folder = Path(entry.source.split(", ")[0]).name
    return folder if folders.count(folder) == 1 else ", ".join(sorted(entry.span.datasets))


def build(run_paths: Sequence[str | Path], reported_path: str | Path | None) -> Leaderboard:
    """The leaderboard of every run found under `run_paths` (a configuration's runs over disjoint data merged into
    one row), plus the reported rows when a file is given."""
    folders = run_folders(run_paths)
    found, skipped = [], dict(folders.skipped)
    for path in folders.results:
        try:
            found.append((path, load_results(path)))
        except DataError as err:
            skipped[display_path(path.parent)] = str(err)
    # A run of none of the board's partitions (only Mu-SHROOM's languages, say) is on its own page only.
    found = [(p, r) for p, r in found if any(not kept_apart(name) for name in r.partitions)]
    entries, members_of = [], {}
    for members in configurations(found):
        try:
            entries.append(configuration_entry(members))
            members_of[entries[-1].source] = members
        except (DataError, OSError) as err:
            # One bad run costs its own row only; the reason is kept on the board and printed by the build.
            why = str(err) if isinstance(err, DataError) else f"cannot be read ({err})"
            skipped |= {display_path(p.parent): f"not rescored from its journal: {why}" for p, _ in members}
    entries = named(entries)
    reported = load_reported(reported_path) if reported_path is not None else None
    board = assemble(entries, reported_entries(reported), reported.source) if reported else assemble(entries)
    board = with_stability(board, lambda entry: members_data(members_of[entry.source]))
    return board.model_copy(update={"skipped": skipped})


def with_entry(board: Leaderboard, entry: Entry) -> Leaderboard:
    """The board with one more reproduced row, re-ranked; the reported rows stay as they were."""
    return assemble([*board.entries, entry], board.reported, board.reported_source)


def load_leaderboard(site_dir: str | Path) -> Leaderboard:
    """A built site's `leaderboard.json`; DataError when it is missing or not a leaderboard."""
    path = Path(site_dir) / SITE_JSON
    if not path.is_file():
        raise DataError(f"{path}: not found (build the site first with `shambench leaderboard build`)")
    try:
        return Leaderboard.model_validate_json(fs.read_input(path))
    except ValidationError as err:
        raise DataError(f"{path}: not a leaderboard ({err.errors()[0]['msg']})") from None


def write_site(board: Leaderboard, out_dir: str | Path) -> tuple[Path, Path]:
    """Write `leaderboard.json` and the self-contained `index.html` (each atomically); returns both paths."""
    from shambench.leaderboard.page import render

    out = Path(out_dir)
    html = render(board)
    write_json(out / SITE_JSON, board)
    write_atomic(out / SITE_HTML, html)
    return out / SITE_JSON, out / SITE_HTML


def runs_site(runs: Path) -> Path:
    """Build the leaderboard site of every run under `runs` into `runs/leaderboard`; the path of its JSON."""
    reported = DEFAULT_REPORTED if DEFAULT_REPORTED.is_file() else None
    json_path, _ = write_site(build([runs], reported), runs / "leaderboard")
    return json_path
