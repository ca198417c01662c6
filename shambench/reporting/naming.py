"""What a run is called wherever it is shown: a board row, `analyze`, `compare` and `show`.

A run is named by its detector, and an API detector's run by the model it asked for as well (`openai:smollm2`):
one detector name (`openai`) runs any model, so the name alone does not say what ran. The model named is the one
the run asked for, not the name the server answered under (`served_model`, recorded beside it in config.json and
results.json): the requested name is what the user chose and what tells one configuration from another, while
the served name changes under it (OpenAI answers `gpt-4o` as a dated snapshot) or is a file path on the machine
that served it (llama.cpp), which a public board does not show. A detector whose name already fixes its model (a
preset such as `gpt5mini`, run with the preset's own model) or whose spec names it (`NAME:MODEL`) keeps its name,
and so does a submission: its name is the one its submitter gave.
"""

from __future__ import annotations

from typing import overload

from shambench.llm.presets import presets
from shambench.runs.rundir import RunConfig
from shambench.scoring.results import RunInfo


@overload
def run_name(run: RunConfig) -> str: ...
@overload
def run_name(run: RunInfo) -> str | None: ...
def run_name(run: RunInfo | RunConfig) -> str | None:
    """The name of a run (None when it records no detector, as a bare predictions file): its detector, followed by
    `:MODEL` when the run (of `shambench eval`) asked a model its detector's spec does not already name."""
    model = run.params.get("model")
    if run.origin != "run" or not run.detector or not isinstance(model, str) or not model:
        return run.detector
    name, _, arg = run.detector.partition(":")
    if model in (arg, fixed_model(name)):  # the spec's argument (`NAME:MODEL`) or the preset already says it
        return run.detector
    return f"{run.detector}:{model}"


def fixed_model(detector: str) -> str | None:
    """The model a detector's name fixes: a model preset's own (`shambench/llm/presets.yaml`); None for any other
    detector, and for a preset that leaves the model to the user (`openai`)."""
    preset = presets().get(detector)
    return preset.model if preset is not None else None
