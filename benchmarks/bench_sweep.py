"""Speed-up of a sweep of the offline detectors over all available data, on 1 and on 2 local worker processes.

    .venv/bin/python benchmarks/bench_sweep.py [--data-dir ../shared/data] [--workers 1,2] [--limit N]

The sweep runs `none`, `all`, `random` (two rates) and `overlap` on every dataset whose files are present under
--data-dir (the math sets included), each cell a fresh run directory in a temporary folder, with the default
1,000 bootstrap resamples. Each timing covers the whole sweep as `shambench sweep` runs it: starting the worker
processes, loading the data on the driver, predicting and scoring on the workers, writing the run directories.
The speed-up of the last worker count over the first is compared with the target (at least 1.7x on 2 cores).
CPU seconds of the driver and of the workers are printed beside each timing, and a control (pure-Python busy
loops on the same worker counts) shows what speed-up the machine itself allows at that moment: when other
programs load it, no sweep can beat the control.
"""

from __future__ import annotations

import argparse
import os
import resource
import tempfile
import time
from pathlib import Path

from shambench.data.adapter import adapters
from shambench.data.benchmark import load_benchmark
from shambench.runs.sweep import LocalBackend, plan_sweep, run_sweep, run_tasks

TARGET_SPEEDUP = 1.7
DETECTORS = """\
detectors:
  - none
  - all
  - overlap
  - detector: random
    grid: {rate: [0.1, 0.3]}
"""


def available_datasets(data_dir: Path) -> list[str]:
    """Every dataset (any suite) whose test split loads from `data_dir`; the others are named and left out."""
    out = []
    for entry in adapters.entries():
        if not entry.factory().available(data_dir):
            continue
        errors = load_benchmark(entry.name, "test", data_dir).errors
        if errors:
            print(f"left out {entry.name}: {errors[entry.name]}")
        else:
            out.append(entry.name)
    return out


def write_spec(folder: Path, datasets: list[str], data_dir: Path, limit: int | None) -> Path:
    """A sweep file of the offline detectors over `datasets`, with its runs inside `folder`."""
    lines = [f"datasets: [{', '.join(datasets)}]", f"data_dir: {data_dir.resolve()}", "leaderboard: false"]
    if limit:
        lines.append(f"limit: {limit}")
    spec = folder / "sweep.yaml"
    spec.write_text("\n".join(lines) + "\n" + DETECTORS, encoding="utf-8")
    return spec


def cpu_seconds(who: int) -> float:
    """User plus system CPU seconds of this process (RUSAGE_SELF) or of its finished children."""
    usage = resource.getrusage(who)
    return usage.ru_utime + usage.ru_stime


def timed_sweep(datasets: list[str], data_dir: Path, limit: int | None, workers: int) -> dict[str, float]:
    """Wall and CPU seconds (driver, workers) of the whole sweep on `workers` processes, and what it made."""
    with tempfile.TemporaryDirectory(prefix="bench_sweep_") as tmp:
        plan = plan_sweep(write_spec(Path(tmp), datasets, data_dir, limit))
        cpu = cpu_seconds(resource.RUSAGE_SELF), cpu_seconds(resource.RUSAGE_CHILDREN)
        start = time.perf_counter()
        with LocalBackend(workers) as backend:  # leaving it joins the workers, so their CPU time is counted
            report = run_sweep(plan, backend)
        wall = time.perf_counter() - start
    failed = [f"{c.cell}: {c.error}" for c in report.failed]
    if failed:
        raise SystemExit("cells failed:\n" + "\n".join(failed))
    return {
        "wall": wall,
        "driver": cpu_seconds(resource.RUSAGE_SELF) - cpu[0],
        "workers": cpu_seconds(resource.RUSAGE_CHILDREN) - cpu[1],
        "cells": len(report.cells),
        "predicted": sum(c.predicted for c in report.cells),
    }


def busy(n: int) -> int:
    """Pure-Python CPU work for the control."""
    total = 0
    for i in range(n):
        total += i
    return total


def control_seconds(workers: int, tasks: int = 4, n: int = 20_000_000) -> float:
    """Wall seconds for `tasks` equal busy loops on `workers` processes (started beforehand, not timed)."""
    with LocalBackend(workers) as backend:
        list(run_tasks(backend, [(busy, (1,))] * workers, retries=0))
        start = time.perf_counter()
        list(run_tasks(backend, [(busy, (n,))] * tasks, retries=0))
        return time.perf_counter() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data-dir", type=Path, default=Path("..", "shared", "data"))
    parser.add_argument("--workers", default="1,2", help="Comma-separated worker counts to time, in order.")
    parser.add_argument("--limit", type=int, help="Use only the first N examples of each partition.")
    args = parser.parse_args()

    datasets = available_datasets(args.data_dir)
    if not datasets:
        raise SystemExit(f"no datasets found under {args.data_dir}")
    print(f"datasets: {', '.join(datasets)}")
    timings = {}
    for workers in (int(w) for w in args.workers.split(",")):
        t = timed_sweep(datasets, args.data_dir, args.limit, workers)
        timings[workers] = t["wall"]
        print(
            f"{workers} worker(s): {t['cells']:.0f} cells, {t['predicted']:.0f} predictions in {t['wall']:.1f} s"
            f" (CPU: driver {t['driver']:.1f} s, workers {t['workers']:.1f} s;"
            f" load average {os.getloadavg()[0]:.1f} on {os.cpu_count()} cores)"
        )
    first, last = next(iter(timings)), list(timings)[-1]
    if first != last:
        speedup = timings[first] / timings[last]
        verdict = "meets" if speedup >= TARGET_SPEEDUP else "misses"
        print(f"speed-up {first} -> {last} workers: {speedup:.2f}x ({verdict} the target of {TARGET_SPEEDUP}x)")
        control = control_seconds(first) / control_seconds(last)
        print(f"control (busy loops, same worker counts): {control:.2f}x, the most this machine allows right now")


if __name__ == "__main__":
    main()
