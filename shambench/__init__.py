"""shambench: measure how well hallucination detectors localise errors (SHAM-Bench and step-level math sets)."""

from shambench.benchmark import Benchmark, load_benchmark
from shambench.provenance import shambench_version
from shambench.results import Results
from shambench.schema import Example, Prediction, SoftSpan, Span, Step
from shambench.scorer import Scorer, score

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
