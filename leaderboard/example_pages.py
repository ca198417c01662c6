"""The leaderboard's example pages: every example of a row's run with gold and predicted spans."""

from __future__ import annotations

from pathlib import Path

from shambench.io import Journal, write_atomic
from shambench.leaderboard.schema import Leaderboard


def with_example_pages(board: Leaderboard, out_dir: str | Path) -> Leaderboard:
    """Write `examples/<row id>.html` (the `shambench show --html` view, in pages of `PER_PAGE`:
    `<row id>-2.html`, ...) for every reproduced row whose run directory is at hand, and link each from its
    row."""
    from shambench.reporting.highlight import PER_PAGE, paginated
    from shambench.runs.files import JOURNAL
    from shambench.runs.rundir import load_config, run_examples
    from shambench.runs.scoring import example_scores

    entries = []
    for entry in board.entries:
        run_dir = Path(entry.source)
        if (run_dir / JOURNAL).exists():
            link = f"examples/{entry.id}.html"
            examples = run_examples(load_config(run_dir))
            predictions = Journal(run_dir / JOURNAL).read()
            scores = example_scores(run_dir)
            title = f"{entry.name}: examples"
            # Pages of PER_PAGE linking each other, as `shambench show --html` writes them: a whole board's run
            # in one file is megabytes a browser lays out at once.
            for name, page in paginated(title, examples, predictions, scores, f"{entry.id}.html", PER_PAGE).items():
                write_atomic(Path(out_dir) / "examples" / name, page, Path(out_dir).absolute().parent)
            entry = entry.model_copy(update={"examples_page": link})
        entries.append(entry)
    return board.model_copy(update={"entries": entries})
