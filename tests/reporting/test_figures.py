"""The analysis PNGs: legend names, iso-F1 curves, "span F1" naming, and titles that do not overlap."""

from __future__ import annotations

from pathlib import Path

import pytest

from shambench.reporting import figures
from shambench.reporting.analysis import analyse
from shambench.schema import Example
from shambench.scoring.scorer import Scorer
from tests.leaderboard.toy import EXAMPLES, predictions


@pytest.fixture
def kept(monkeypatch) -> list:
    """The figures drawn, captured before they are saved and closed."""
    drawn = []

    def save(fig, path: Path, root: Path | None) -> Path:
        fig.canvas.draw()
        drawn.append(fig)
        return path

    monkeypatch.setattr(figures, "_save", save)
    yield drawn
    plt = figures._pyplot()
    for fig in drawn:
        plt.close(fig)


def _runs():
    examples = [Example.model_validate(e) for e in EXAMPLES]
    scorer = Scorer(examples, n_resamples=20)
    return examples, [(name, scorer.score(predictions(name))) for name in ("exact", "all")]


def test_run_labels_name_the_directory_only_where_detectors_repeat():
    dirs = [Path("runs/overlap"), Path("runs/a/none"), Path("runs/b/none"), Path("runs/x")]
    assert figures.run_labels(["overlap", "none", "none", "random"], dirs) == [
        "overlap",
        "none (a/none)",
        "none (b/none)",
        "random",
    ]
    assert figures.run_labels(["none", "none"], [Path("r1"), Path("r2")]) == ["none (r1)", "none (r2)"]


def test_pr_scatter_has_iso_f1_curves_and_span_naming(kept, tmp_path):
    _, runs = _runs()
    figures.pr_scatter(runs, tmp_path / "pr.png")
    ax = kept[0].axes[0]
    assert ax.get_xlabel() == "span recall (per-example mean)"
    assert ax.get_ylabel() == "span precision (per-example mean)"
    # two legends: the runs (kept as an artist) and the tasks; no task name is written at a point
    runs_legend = next(a for a in ax.artists if a.get_title().get_text() == "run")
    assert [t.get_text() for t in runs_legend.get_texts()] == ["exact", "all"]
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["context_qa", "summ"]
    assert not [t for t in ax.texts if not t.get_text().startswith("F1=")]
    markers = {tuple(c.get_paths()[0].vertices.round(3).flatten()) for c in ax.collections}
    assert len(markers) == 2  # one marker shape per task
    iso = [t.get_text() for t in ax.texts if t.get_text().startswith("F1=")]
    assert iso == ["F1=0.2", "F1=0.4", "F1=0.6", "F1=0.8"]
    # Each curve holds precision = f·r / (2r - f): at recall 1, F1 0.4 needs precision 0.4 / 1.6 = 0.25.
    curve = [line for line in ax.lines if line.get_color() == "0.8"][1]
    assert curve.get_ydata()[-1] == pytest.approx(0.25)


def test_f1_bars_say_span_f1(kept, tmp_path):
    _, runs = _runs()
    figures.f1_bars(runs, tmp_path / "bars.png")
    ax = kept[0].axes[0]
    assert ax.get_ylabel() == "span F1 (per-example mean)"
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["exact", "all"]


def test_rate_histogram_titles_do_not_overlap(kept, tmp_path):
    examples, _ = _runs()
    preds = {p.id: p for p in predictions("all")}
    figures.rate_histograms(analyse(examples, preds, "runs/all", "all"), tmp_path / "rates.png")
    fig = kept[0]
    renderer = fig.canvas.get_renderer()
    boxes = [fig._suptitle.get_window_extent(renderer)]
    for ax in fig.axes:
        if ax.get_visible() and ax.axison:
            boxes += [ax.title.get_window_extent(renderer), ax.xaxis.label.get_window_extent(renderer)]
    assert len(boxes) == 1 + 2 * 2  # two partitions: toyqa and toysum
    for i, a in enumerate(boxes):
        for b in boxes[i + 1 :]:
            assert not a.overlaps(b), (a, b)
    assert len(fig.legends) == 1 and [t.get_text() for t in fig.legends[0].get_texts()] == ["gold", "predicted"]
