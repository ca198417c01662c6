"""shambench: measure how well hallucination detectors localise errors (SHAM-Bench and step-level math sets)."""

from shambench.data.benchmark import Benchmark, load_benchmark
from shambench.runs.provenance import shambench_version
from shambench.schema import Example, Prediction, SoftSpan, Span, Step
from shambench.scoring.results import Results
from shambench.scoring.scorer import Scorer, score

__version__ = shambench_version()

__all__ = [
    "Benchmark",
    "Example",
    "Prediction",
    "Results",
    "Scorer",
    "SoftSpan",
    "Span",
    "Step",
    "__version__",
    "load_benchmark",
    "score",
]
