"""shambench: measure how well hallucination detectors localise errors (SHAM-Bench and step-level math sets).

The public API, in the order of the pipeline:

    load_benchmark, Example            the data: adapters turn each released corpus into Examples
    Detector, detector, Monitor        detectors: a class with `detect` (or `predict`) and a registered factory
    evaluate                           a run: a detector over a benchmark into a run directory, scored
    score, Scorer, Results             scoring predictions against examples
    runs_df, samples_df                run folders as pandas DataFrames (`Results.to_pandas()` for one run)
    Adapter, adapter, LoadResult       a new corpus, as a plugin
    ContextProvider, context_provider  evidence for open-domain examples, as a plugin
"""

from shambench.data.adapter import Adapter, LoadResult, adapter
from shambench.data.benchmark import Benchmark, load_benchmark
from shambench.data.context import ContextProvider, context_provider
from shambench.detection.detector import Detector, Monitor, detector
from shambench.provenance import shambench_version
from shambench.reporting.frames import runs_df, samples_df
from shambench.runs.evaluate import evaluate
from shambench.schema import Example, Prediction, SoftSpan, Span, Step
from shambench.scoring.results import Results
from shambench.scoring.scorer import Scorer, score

__version__ = shambench_version()

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
    "Scorer",
    "SoftSpan",
    "Span",
    "Step",
    "__version__",
    "adapter",
    "context_provider",
    "detector",
    "evaluate",
    "load_benchmark",
    "runs_df",
    "samples_df",
    "score",
]
