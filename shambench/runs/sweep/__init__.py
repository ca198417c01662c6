"""Sweeps: a grid of detectors (with parameters) × datasets, each cell an ordinary run directory.

The driver (the process running `shambench sweep`) plans the cells and sends the computing to a backend: worker
processes on this machine (`LocalBackend`) or a Dask distributed cluster (`DaskBackend`). The driver loads each
dataset once, has the workers segment its responses (each text once in the whole sweep) and shares the examples
with their segmentations, so workers need neither the data directory nor a second tokenisation. Worker tasks
return values only: the journal lines of a shard of a cell's examples, or a cell's scores from its journal text.
Every file (config.json, predictions.jsonl, results.json, sweep.json) is written by the driver alone, so two
workers never write the same file, and a worker that dies loses only the task it was running, which is sent
again (at most `retries` more times; after that the cell is reported as failed and its journal keeps what did
arrive).

A cell whose results.json exists and whose journal holds a successful prediction for every example is skipped;
any other cell resumes as `shambench eval --resume` does: only examples without a successful prediction run.
"""

from shambench.runs.sweep.backends import Backend, DaskBackend, LocalBackend, TaskFailure, make_backend, run_tasks
from shambench.runs.sweep.driver import CellReport, SweepReport, run_sweep
from shambench.runs.sweep.grid import (
    SUMMARY,
    Cell,
    DataItem,
    DetectorGrid,
    SweepPlan,
    SweepSpec,
    cell_label,
    plan_sweep,
    read_spec,
)

__all__ = [
    "SUMMARY",
    "Backend",
    "Cell",
    "CellReport",
    "DaskBackend",
    "DataItem",
    "DetectorGrid",
    "LocalBackend",
    "SweepPlan",
    "SweepReport",
    "SweepSpec",
    "TaskFailure",
    "cell_label",
    "make_backend",
    "plan_sweep",
    "read_spec",
    "run_sweep",
    "run_tasks",
]
