"""Step-level examples: the fields an adapter builds from a solution's steps and their labels."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any


def step_fields(texts: Sequence[str], labels: Sequence[int | None], sep: str) -> dict[str, Any]:
    """`response`, `steps` and `hallu_spans` (the steps labelled 0) of step texts joined with `sep`."""
    bounds, pos = [], 0
    for i, text in enumerate(texts):
        pos += len(sep) if i else 0
        bounds.append((pos, pos + len(text)))
        pos += len(text)
    return {
        "response": sep.join(texts),
        "steps": [{"start": s, "end": e, "label": label} for (s, e), label in zip(bounds, labels)],
        "hallu_spans": [[s, e] for (s, e), label in zip(bounds, labels) if label == 0 and e > s],
    }
