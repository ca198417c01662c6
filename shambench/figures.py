"""PNG figures of runs (matplotlib, headless): rate histograms, per-task F1 bars, precision/recall scatter."""

from __future__ import annotations

import math
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from shambench.analysis import RunAnalysis
from shambench.results import Results


def _pyplot() -> Any:
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def _save(fig: Any, path: Path) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=110, bbox_inches="tight")
    _pyplot().close(fig)
    return path


def rate_histograms(analysis: RunAnalysis, path: Path) -> Path:
    """Per partition, histograms of per-example hallucinated-token rates: gold against predicted."""
    plt = _pyplot()
    names = list(analysis.datasets)
    cols = min(3, max(1, len(names)))
    rows = math.ceil(len(names) / cols) or 1
    fig, axes = plt.subplots(rows, cols, figsize=(4.2 * cols, 3.2 * rows), squeeze=False)
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
    axes.flat[0].legend(fontsize=8)
    fig.suptitle(f"Per-example hallucination rates: {analysis.detector}")
    return _save(fig, path)


def f1_bars(runs: Sequence[tuple[str, Results]], path: Path, level: str = "token") -> Path:
    """Per-task F1 of each run, with 95% bootstrap intervals as error bars."""
    plt = _pyplot()
    tasks = sorted({t for _, r in runs for t in r.tasks})
    fig, ax = plt.subplots(figsize=(max(6.0, 1.3 * len(tasks) * max(1, len(runs)) ** 0.5), 3.8))
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
    ax.set_ylabel(f"{level} F1 (per-example mean)")
    ax.legend(fontsize=8)
    return _save(fig, path)


def pr_scatter(runs: Sequence[tuple[str, Results]], path: Path) -> Path:
    """Token precision against recall, one point per run and task."""
    plt = _pyplot()
    fig, ax = plt.subplots(figsize=(5.2, 4.6))
    for name, res in runs:
        ps = [g.token.precision for g in res.tasks.values()]
        rs = [g.token.recall for g in res.tasks.values()]
        ax.scatter(rs, ps, label=name)
        for task, r, p in zip(res.tasks, rs, ps):
            ax.annotate(task, (r, p), fontsize=7, xytext=(3, 3), textcoords="offset points")
    ax.set_xlim(0, 1)
    ax.set_ylim(0, 1)
    ax.set_xlabel("token recall (per-example mean)")
    ax.set_ylabel("token precision (per-example mean)")
    ax.legend(fontsize=8)
    return _save(fig, path)
