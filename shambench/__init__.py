"""shambench: measure how well hallucination detectors localise errors (SHAM-Bench and step-level math sets).

The public API, in the order of the pipeline:

    load_benchmark, Example            the data: adapters turn each released corpus into Examples
    Detector, detector, Monitor        detectors: a class with `detect` (or `predict`) and a registered factory
    evaluate, RunSpec                  a run: a detector over a benchmark into a run directory, scored
    agreement                          the human ceiling: one annotator against the others, per partition
    score, Scorer, Results             scoring predictions against examples
    runs_df, samples_df                run folders as pandas DataFrames (`Results.to_pandas()` for one run)
    Adapter, adapter, LoadResult       a new corpus, as a plugin
    ContextProvider, context_provider  evidence for open-domain examples, as a plugin
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from shambench.data.adapter import Adapter, LoadResult, adapter
    from shambench.data.benchmark import Benchmark, load_benchmark
    from shambench.data.context import ContextProvider, context_provider
    from shambench.detection.detector import Detector, Monitor, detector
    from shambench.reporting.frames import runs_df, samples_df
    from shambench.runs.agreement import agreement
    from shambench.runs.evaluate import evaluate
    from shambench.runs.spec import RunSpec
    from shambench.schema import Example, Prediction, SoftSpan, Span, Step
    from shambench.scoring.results import Results
    from shambench.scoring.scorer import Scorer, score

# Each public name -> the module that defines it. They are imported on first use (PEP 562), so that
# `shambench --help` or `import shambench.schema` does not pay for numpy, spaCy and the scorer.
_EXPORTS = {
    "Adapter": "shambench.data.adapter",
    "LoadResult": "shambench.data.adapter",
    "adapter": "shambench.data.adapter",
    "Benchmark": "shambench.data.benchmark",
    "load_benchmark": "shambench.data.benchmark",
    "ContextProvider": "shambench.data.context",
    "context_provider": "shambench.data.context",
    "Detector": "shambench.detection.detector",
    "Monitor": "shambench.detection.detector",
    "detector": "shambench.detection.detector",
    "runs_df": "shambench.reporting.frames",
    "samples_df": "shambench.reporting.frames",
    "agreement": "shambench.runs.agreement",
    "evaluate": "shambench.runs.evaluate",
    "RunSpec": "shambench.runs.spec",
    "Example": "shambench.schema",
    "Prediction": "shambench.schema",
    "SoftSpan": "shambench.schema",
    "Span": "shambench.schema",
    "Step": "shambench.schema",
    "Results": "shambench.scoring.results",
    "Scorer": "shambench.scoring.scorer",
    "score": "shambench.scoring.scorer",
}


def __getattr__(name: str) -> Any:
    if name == "__version__":
        from shambench.provenance import shambench_version

        value: Any = shambench_version()
    elif name in _EXPORTS:
        value = getattr(importlib.import_module(_EXPORTS[name]), name)
    else:
        raise AttributeError(f"module 'shambench' has no attribute {name!r}")
    globals()[name] = value
    return value


def __dir__() -> list[str]:
    return sorted([*globals(), *_EXPORTS, "__version__"])


__all__ = [
    "Adapter",
    "Benchmark",
    "ContextProvider",
    "Detector",
    "Example",
    "LoadResult",
    "Monitor",
    "Prediction",
    "Results",
    "RunSpec",
    "Scorer",
    "SoftSpan",
    "Span",
    "Step",
    "__version__",
    "adapter",
    "agreement",
    "context_provider",
    "detector",
    "evaluate",
    "load_benchmark",
    "runs_df",
    "samples_df",
    "score",
]
