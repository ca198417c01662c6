"""Finding the runs below the folders given: every `results.json`, and every run folder passed over with the reason.

The folders given are taken as named (a link given is followed once, as the root of the search); below them no
link is followed, as the filesystem gate never follows one below its root: a linked run folder is listed among
those passed over, never opened, so that no run is left out unsaid. A folder is a run folder when it holds a
`results.json`, or a `config.json` beside a journal (a run not finished or not scored).
"""

from __future__ import annotations

import os
from collections.abc import Iterable
from pathlib import Path

from pydantic import Field

from shambench.errors import DataError
from shambench.runs.files import CONFIG, JOURNAL, RESULTS
from shambench.schema import Model

LINKED_FOLDER = "a symbolic link: run folders are opened, never followed"
"""Why a linked folder below the folders given is passed over."""
LINKED_RESULTS = f"its {RESULTS} is a symbolic link: run files are opened, never followed"
"""Why a run folder whose results file is a link is passed over."""
UNSCORED = f"no {RESULTS}: the run was not finished or not scored"
"""Why a run folder without results (interrupted, left to a batch or never scored) is passed over."""


class RunFolders(Model):
    """The runs found below some folders, and the run folders passed over."""

    results: list[Path] = Field(default_factory=list)
    """Every `results.json` found, sorted."""
    skipped: dict[str, str] = Field(default_factory=dict)
    """Each folder passed over (as `display_path` shows it), with the reason."""


def display_path(path: Path) -> str:
    """`path` relative to the current directory when it lies below it, else as given (no home or machine paths);
    a link is shown as named, not where it points."""
    try:
        return Path(os.path.relpath(os.path.abspath(path), Path.cwd())).as_posix()
    except ValueError:
        return path.as_posix()


def walk_runs(root: Path) -> RunFolders:
    """The runs at or below the folder `root` (which may be a link) and the run folders passed over there: links
    below it, folders that cannot be read, runs without results."""
    results, skipped = [], {}

    def unreadable(err: OSError) -> None:
        skipped[display_path(Path(err.filename or root))] = f"cannot be read ({err.strerror})"

    for folder, subfolders, files in os.walk(root, onerror=unreadable):
        here = Path(folder)
        skipped |= {display_path(here / d): LINKED_FOLDER for d in subfolders if (here / d).is_symlink()}
        if RESULTS in files:
            if (here / RESULTS).is_symlink():
                skipped[display_path(here)] = LINKED_RESULTS
            else:
                results.append(here / RESULTS)
        elif CONFIG in files and JOURNAL in files:
            skipped[display_path(here)] = UNSCORED
    return RunFolders(results=sorted(results), skipped=dict(sorted(skipped.items())))


def run_folders(paths: Iterable[str | Path]) -> RunFolders:
    """Every `results.json` in the given run folders or folders of them (searched below, never through a link),
    and every run folder passed over with the reason; DataError for a path that does not exist or holds no run."""
    results: set[Path] = set()
    skipped: dict[str, str] = {}
    for path in map(Path, paths):
        if not path.exists():
            raise DataError(f"{path}: no such run directory or folder")
        if path.is_file():
            results.add(path)
            continue
        found = walk_runs(path)
        if not found.results:
            raise DataError(f"{path}: no {RESULTS} found ({nothing_found_because(found.skipped)})")
        results.update(found.results)
        skipped |= found.skipped
    return RunFolders(results=sorted(results), skipped=dict(sorted(skipped.items())))


def nothing_found_because(skipped: dict[str, str]) -> str:
    """Why a folder holds no run to read: the run folders passed over there, or what it should be."""
    if not skipped:
        return "is it a scored run directory, or a folder of them?"
    where, why = next(iter(skipped.items()))
    more = len(skipped) - 1
    return f"{where}: {why}" + (f"; {more} more run folder{'s' if more > 1 else ''} passed over" if more else "")
