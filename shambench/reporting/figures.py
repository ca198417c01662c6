"""PNG figures of runs (matplotlib, headless): rate histograms, per-task F1 bars, precision/recall scatter."""

from __future__ import annotations

import io
import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shambench.extras import import_extra
from shambench.io import write_atomic
from shambench.reporting.analysis import RunAnalysis
from shambench.scoring.results import Results

# What the tables call each level (token-level scores are the "span F1" of the tables and the leaderboard).
LEVEL_NAMES = {"token": "span", "sentence": "sentence"}


def run_labels(detectors: Sequence[str | None], run_dirs: Sequence[Path]) -> list[str]:
    """Legend names of runs: the detector, with the run directory only where two runs share a detector and the
    directory's name says something the detector's does not."""
    names = [d or p.name for d, p in zip(detectors, run_dirs)]
    labels = []
    for name, run_dir in zip(names, run_dirs):
        if names.count(name) == 1:
            labels.append(name)
        else:
            where = run_dir.name if run_dir.name != name else f"{run_dir.parent.name}/{run_dir.name}"
            labels.append(f"{name} ({where})")
    return labels


def _pyplot() -> Any:
    matplotlib = import_extra("matplotlib", "figures", "PNG figures (shambench.reporting.figures)")
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path, root: Path | None) -> Path:
    """Write the figure to `path`, confined to `root` (`shambench.io.write_atomic`; a figure's function takes it)."""
    # Rendered in memory, then written whole through the filesystem gate (matplotlib would follow a link).
    buffer = io.BytesIO()
    fig.savefig(buffer, format="png", dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    write_atomic(path, buffer.getvalue(), root)
    return path


def rate_histograms(analysis: RunAnalysis, path: Path, root: Path | None = None) -> Path:
    """Per partition, histograms of per-example hallucinated-token rates: gold against predicted."""
    plt = _pyplot()
    names = list(analysis.datasets)
    cols = min(3, max(1, len(names)))
    rows = math.ceil(len(names) / cols) or 1
    # constrained layout keeps the subplot titles, axis labels and the figure title from running into each other
    fig, axes = plt.subplots(rows, cols, figsize=(4.6 * cols, 3.4 * rows + 0.6), squeeze=False, layout="constrained")
    edges = analysis.rate_bins
    width = (edges[1] - edges[0]) * 0.42
    for ax, name in zip(axes.flat, names):
        g = analysis.datasets[name]
        left = edges[:-1]
        ax.bar([x + width * 0.05 for x in left], g.gold_rate_hist, width=width, align="edge", label="gold")
        ax.bar([x + width * 1.1 for x in left], g.pred_rate_hist, width=width, align="edge", label="predicted")
        ax.set_title(f"{name} (n={g.n_examples})", fontsize=9)
        ax.set_xlabel("hallucinated-token rate")
        ax.set_ylabel("examples")
    for ax in list(axes.flat)[len(names) :]:
        ax.axis("off")
    handles, labels = axes.flat[0].get_legend_handles_labels()
    fig.legend(handles, labels, loc="outside upper right", fontsize=8)
    fig.suptitle(f"Per-example hallucination rates: {analysis.detector}")
    return _save(fig, path, root)


def f1_bars(runs: Sequence[tuple[str, Results]], path: Path, level: str = "token", root: Path | None = None) -> Path:
    """Per-task F1 of each run, with 95% bootstrap intervals as error bars."""
    plt = _pyplot()
    tasks = sorted({t for _, r in runs for t in r.tasks})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(tasks) * max(1, len(runs)) ** 0.5), 4.2), layout="constrained")
    width = 0.8 / max(1, len(runs))
    for i, (name, res) in enumerate(runs):
        xs, ys, lo, hi = [], [], [], []
        for j, task in enumerate(tasks):
            if task not in res.tasks:
                continue
            prf = getattr(res.tasks[task], level)
            xs.append(j + i * width)
            ys.append(prf.f1)
            ci = prf.ci or (prf.f1, prf.f1)
            # float noise can put a percentile a hair on the wrong side of the mean
            lo.append(max(0.0, prf.f1 - ci[0]))
            hi.append(max(0.0, ci[1] - prf.f1))
        ax.bar(xs, ys, width=width, yerr=[lo, hi], capsize=3, label=name)
    ax.set_xticks([j + 0.4 - width / 2 for j in range(len(tasks))], tasks, rotation=20)
    ax.set_ylim(0, 1)
    ax.set_ylabel(f"{LEVEL_NAMES[level]} F1 (per-example mean)")
    ax.set_title(f"{LEVEL_NAMES[level].capitalize()} F1 per task, 95% bootstrap intervals", fontsize=10)
    ax.legend(fontsize=8, loc="upper left", bbox_to_anchor=(1.01, 1), borderaxespad=0)
    return _save(fig, path, root)


def _iso_f1(ax: Any) -> None:
    """Grey curves of constant F1 (0.2, ..., 0.8) on a recall × precision plane, labelled at their top end."""
    import numpy as np

    for f in (0.2, 0.4, 0.6, 0.8):
        recall = np.linspace(f / 2 + 1e-3, 1, 200)
        precision = f * recall / (2 * recall - f)
        keep = (precision >= 0) & (precision <= 1)
        ax.plot(recall[keep], precision[keep], color="0.8", lw=0.8, zorder=0)
        ax.annotate(f"F1={f:.1f}", (1, f / (2 - f)), fontsize=7, color="0.5", xytext=(2, 0), textcoords="offset points")


# One marker per task, so that points of nearby tasks are told apart without text labels that overlap.
TASK_MARKERS = ("o", "s", "^", "D", "v", "P", "X", "*", "<", ">")


def pr_scatter(runs: Sequence[tuple[str, Results]], path: Path, root: Path | None = None) -> Path:
    """Span (token) precision against recall, one point per run and task, over curves of constant F1: colour
    says the run, the marker the task (two legends)."""
    from matplotlib.lines import Line2D

    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(6.4, 5.0), layout="constrained")
    _iso_f1(ax)
    tasks = sorted({task for _, res in runs for task in res.tasks})
    marker = {task: TASK_MARKERS[i % len(TASK_MARKERS)] for i, task in enumerate(tasks)}
    colours = [f"C{i % 10}" for i in range(len(runs))]
    for (_, res), colour in zip(runs, colours):
        for task, g in res.tasks.items():
            ax.scatter(g.token.recall, g.token.precision, color=colour, marker=marker[task], s=36)
    run_handles = [Line2D([], [], color=c, marker="o", ls="", label=name) for (name, _), c in zip(runs, colours)]
    task_handles = [Line2D([], [], color="0.3", marker=marker[t], ls="", label=t) for t in tasks]
    first = ax.legend(handles=run_handles, title="run", fontsize=8, loc="upper left", bbox_to_anchor=(1.13, 1))
    ax.add_artist(first)
    ax.legend(handles=task_handles, title="task", fontsize=8, loc="lower left", bbox_to_anchor=(1.13, 0))
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("span recall (per-example mean)")
    ax.set_ylabel("span precision (per-example mean)")
    ax.set_title("Span precision against recall per task, with iso-F1 curves", fontsize=10)
    return _save(fig, path, root)
