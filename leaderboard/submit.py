"""Leaderboard submissions: a predictions file is checked as a whole, scored, and kept as a run directory.

A submission is all or nothing: every problem found is reported at once, and nothing is written unless there
are none. An accepted one becomes a run directory (config.json, predictions.jsonl, results.json, written in a
temporary folder and renamed into place) that `shambench leaderboard build`, `shambench score` and
`shambench compare` read like any other run.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Container, Iterator, Sequence
from contextlib import contextmanager, nullcontext, suppress
from pathlib import Path
from typing import Any

from pydantic import ConfigDict, Field, ValidationError

import shambench.fs as fs
from shambench.errors import DataError, SubmissionError
from shambench.io import iter_lines, parse_json_line, write_json, write_jsonl
from shambench.leaderboard.build import load_leaderboard, run_entry, with_entry, write_site
from shambench.leaderboard.schema import Leaderboard
from shambench.records import parse_record
from shambench.registry import name_problem
from shambench.reporting.runfolders import display_path
from shambench.runs.files import CONFIG, JOURNAL, PER_EXAMPLE, RESULTS
from shambench.runs.rundir import RunConfig, load_config, new_run_dir, stamped_config
from shambench.runs.scoring import run_info
from shambench.runs.selection import select_examples
from shambench.runs.spec import Selection
from shambench.schema import Model, Name, Prediction
from shambench.scoring.corpus import Corpus
from shambench.scoring.scorer import Scorer
from shambench.structured import yaml_file


class SubmissionMeta(Model):
    """What a submitter says about the system (the `--meta` JSON or YAML file)."""

    model_config = ConfigDict(extra="forbid")

    family: Name = "submission"
    """Detector family (`prompted`, `token-classifier`, `nli`, ...)."""
    params: dict[str, Any] = Field(default_factory=dict)
    """Parameters that define the system's output (model, threshold, ...)."""
    prompt_hash: str | None = None
    """Hash of the prompt template, for prompted systems."""
    authors: str | list[str] | None = None
    """Who built the system."""
    description: str | None = None
    """One paragraph on how the system works."""
    url: str | None = None
    """Paper or code."""

    def about(self) -> dict[str, Any]:
        """The free-form facts kept in the run's `meta`."""
        return self.model_dump(include={"authors", "description", "url"}, exclude_none=True)


def _field_errors(err: ValidationError) -> list[str]:
    return [f"{'.'.join(str(x) for x in e['loc']) or 'record'}: {e['msg']}" for e in err.errors()]


def read_meta(path: str | Path | None) -> tuple[SubmissionMeta, list[str]]:
    """The submission's metadata, and the problems with its file (none when no file is given)."""
    if path is None:
        return SubmissionMeta(), []
    path = Path(path)
    try:
        data = yaml_file(path, "the submission's meta file (JSON or YAML)", named=True)
    except DataError as err:
        return SubmissionMeta(), [str(err)]
    try:
        return SubmissionMeta.model_validate(data or {}), []
    except ValidationError as err:
        return SubmissionMeta(), [f"{path}: {p}" for p in _field_errors(err)]


MAX_LISTED_IDS = 20
"""How many missing ids a rejection lists by name (the count is always given)."""


def _line_problems(
    lineno: int, line: bytes, scorer: Scorer, first_line: dict[str, int]
) -> tuple[Prediction | None, list[str]]:
    """The prediction on one line, or None, and what is wrong with the line (the checks of
    `shambench.records`, then the ones that need the examples)."""
    try:
        obj = parse_json_line(line)
    except ValueError as err:
        return None, [f"line {lineno}: {err}"]
    pid = obj.get("id") if isinstance(obj, dict) else None
    # The id is claimed before the rest is checked, so that a malformed line counts as given, not as missing.
    if isinstance(pid, str):
        if pid not in scorer.index:
            return None, [f"line {lineno}: id {pid!r} is not an example of the selected test data"]
        if pid in first_line:
            return None, [f"line {lineno}: id {pid!r} was already given on line {first_line[pid]}"]
        first_line[pid] = lineno
    try:
        pred = parse_record(obj, Prediction)
        pred.check_inside(scorer.response_length(pred.id))
    except ValueError as err:
        return None, [f"line {lineno}: {err}"]
    n_units = len(scorer.units_of(pred.id))
    if pred.sentence_labels is not None and len(pred.sentence_labels) != n_units:
        return None, [
            f"line {lineno}: id {pred.id!r} has {len(pred.sentence_labels)} sentence_labels for {n_units} sentence units"
        ]
    return pred, []


def missing_problem(missing: Sequence[str], total: int, unpredicted: Sequence[str] = ()) -> str:
    """The problem of ids without a prediction: their count, at most `MAX_LISTED_IDS` of them by name, and the
    datasets `unpredicted` of which no example has one (a file that covers only some sources)."""
    shown = ", ".join(map(repr, missing[:MAX_LISTED_IDS]))
    more = f", and {len(missing) - MAX_LISTED_IDS} more" if len(missing) > MAX_LISTED_IDS else ""
    whole = (
        f"; none at all for {', '.join(unpredicted)} (to submit the others alone, select them with --datasets)"
        if unpredicted
        else ""
    )
    return f"no prediction for {len(missing)} of the {total} test ids: {shown}{more}{whole}"


def unpredicted_datasets(corpus: Corpus, predicted: Container[str]) -> list[str]:
    """The datasets of `corpus` none of whose examples is in `predicted`."""
    hit = {int(corpus.dataset_code[i]) for i, example_id in enumerate(corpus.ids) if example_id in predicted}
    return [name for code, name in enumerate(corpus.datasets) if code not in hit]


def check_predictions(path: str | Path, scorer: Scorer) -> tuple[list[Prediction], list[str]]:
    """The valid predictions of a submission file and every problem with it (one entry per problem)."""
    predictions: list[Prediction] = []
    problems: list[str] = []
    first_line: dict[str, int] = {}
    try:
        lines = list(iter_lines(path))
    except DataError as err:
        return [], [str(err)]
    for lineno, line in lines:
        pred, line_problems = _line_problems(lineno, line, scorer, first_line)
        problems.extend(line_problems)
        if pred is not None:
            predictions.append(pred)
    missing = [i for i in scorer.corpus.ids if i not in first_line]
    if missing:
        problems.append(missing_problem(missing, len(scorer.corpus), unpredicted_datasets(scorer.corpus, first_line)))
    return predictions, problems


def name_problems(name: str, runs_dir: Path, board: Leaderboard | None) -> list[str]:
    """Why `name` cannot be used: empty, or already taken by a submission in `runs_dir` or a row of the board."""
    if problem := name_problem(name):
        return [f"--name {name!r} {problem}"]
    problems = []
    # Names that differ only in case or inner spacing would be told apart by no reader of the page.
    same = _folded(name)
    if board is not None and any(_folded(e.name) == same for e in board.entries):
        problems.append(f"the leaderboard already has a row named {name!r}")
    taken = runs_dir.is_dir() and any(
        (c := load_config(p.parent)).origin == "submission" and _folded(c.detector or "") == same
        for p in runs_dir.rglob(CONFIG)
    )
    if taken:
        problems.append(f"{runs_dir} already holds a submission named {name!r}")
    return problems


def _folded(name: str) -> str:
    return " ".join(name.split()).casefold()


@contextmanager
def site_lock(site_dir: str | Path) -> Iterator[None]:
    """Hold the site's lock for a read-modify-write of its board: an exclusive `flock` on the site folder itself
    (opened without following a link; no lock file is left in the site), so concurrent submits to one site take
    turns and each reads the board the previous one wrote."""
    site = Path(site_dir)
    load_leaderboard(site)  # a missing or broken site is refused before anything waits on it
    try:
        fd = os.open(site, os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW)
    except OSError as err:
        raise DataError(f"{site}: cannot lock the site ({err.strerror})") from None
    try:
        fcntl.flock(fd, fcntl.LOCK_EX)
        yield
    finally:
        os.close(fd)  # closing releases the lock


def _write_run(run_dir: Path, config: RunConfig, predictions: Sequence[Prediction], results, per_example) -> None:
    """Create the run directory whole: written in a temporary sibling, then renamed into place."""
    root = run_dir.absolute().parent.parent  # the runs folder is not followed either
    tmp = fs.new_dir(run_dir.parent, root, prefix=f".{run_dir.name}.")
    try:
        write_json(tmp / CONFIG, config, root)  # first: the mark `remove_tree` below looks for
        write_jsonl(tmp / JOURNAL, predictions, root)
        write_jsonl(tmp / PER_EXAMPLE, per_example, root)
        write_json(tmp / RESULTS, results, root)
        fs.rename(tmp, run_dir, root)
    except BaseException:
        with suppress(OSError):
            fs.remove_tree(tmp, root, CONFIG) or fs.remove_empty_dir(tmp, root)
        raise


def submit(
    predictions_path: str | Path,
    name: str,
    *,
    meta_file: str | Path | None = None,
    selection: Selection,
    runs_dir: str | Path,
    site_dir: str | Path | None = None,
    n_resamples: int = 1000,
    seed: int = 0,
) -> Path:
    """Check, score and add a submission; returns its run directory. SubmissionError lists every problem. With a
    site, the whole submission holds the site's lock (`site_lock`): a concurrent one waits, then sees this row."""
    with site_lock(site_dir) if site_dir else nullcontext():
        return _submit(predictions_path, name, meta_file, selection, Path(runs_dir), site_dir, n_resamples, seed)


def _submit(
    predictions_path: str | Path,
    name: str,
    meta_file: str | Path | None,
    selection: Selection,
    runs_dir: Path,
    site_dir: str | Path | None,
    n_resamples: int,
    seed: int,
) -> Path:
    examples, chosen = select_examples(selection)
    board = load_leaderboard(site_dir) if site_dir else None
    scorer = Scorer(examples, n_resamples=n_resamples, seed=seed)
    meta, meta_problems = read_meta(meta_file)
    predictions, problems = check_predictions(predictions_path, scorer)
    problems = name_problems(name, Path(runs_dir), board) + meta_problems + problems
    if problems:
        raise SubmissionError(str(predictions_path), problems)
    params = {**meta.params, **({"prompt_hash": meta.prompt_hash} if meta.prompt_hash else {})}
    config = stamped_config(name, meta.family, params, examples, origin="submission", meta=meta.about(), **chosen)
    run_dir = new_run_dir(runs_dir, name)
    results, per_example = scorer.score_with_examples(predictions)
    results.run = run_info(config, run_dir, examples, predictions)
    results.run.finished_at = results.created_at
    _write_run(run_dir, config, predictions, results, per_example)
    if board is not None and site_dir:  # board is loaded only when site_dir is given
        write_site(with_entry(board, run_entry(results, display_path(run_dir))), site_dir)
    return run_dir
