"""`run_name`: a run is named by its detector, and by the model it asked for when its detector's name does not fix
one."""

from __future__ import annotations

import pytest

from shambench.reporting.naming import fixed_model, run_name
from shambench.scoring.results import RunInfo


@pytest.mark.parametrize(
    ("detector", "params", "origin", "name"),
    [
        ("openai", {"model": "smollm2", "base_url": "http://127.0.0.1:8080/v1"}, "run", "openai:smollm2"),
        # a preset run with its own model keeps its name; with another model, that model is named
        ("gpt5mini", {"model": "gpt-5-mini"}, "run", "gpt5mini"),
        ("gpt5mini", {"model": "gpt-5"}, "run", "gpt5mini:gpt-5"),
        # a spec whose argument is the model already names it
        ("tagger:org/m1", {"model": "org/m1"}, "run", "tagger:org/m1"),
        # no model among the parameters: the detector alone
        ("random", {"rate": 0.3}, "run", "random"),
        ("none", {}, "run", "none"),
        # a detector not registered here (a plugin not installed) is named by the model it records
        ("my-plugin", {"model": "m1"}, "run", "my-plugin:m1"),
        # a submission is called what its submitter called it
        ("mine", {"model": "tiny"}, "submission", "mine"),
        (None, {"model": "tiny"}, "predictions", None),
        ("openai", {"model": ""}, "run", "openai"),
    ],
)
def test_run_name(detector, params, origin, name):
    assert run_name(RunInfo(detector=detector, params=params, origin=origin)) == name


def test_the_served_model_does_not_rename_a_run():
    # the name is the model asked for; the server's own name for it is recorded beside it
    run = RunInfo(detector="openai", params={"model": "gpt-4o"}, served_model="gpt-4o-2024-08-06")
    assert run_name(run) == "openai:gpt-4o"


def test_fixed_model_is_a_presets_own():
    assert fixed_model("gpt5mini") == "gpt-5-mini"
    assert fixed_model("qwen3-4b") == "Qwen/Qwen3-4B"
    assert fixed_model("none") is None and fixed_model("not-registered") is None
    # `openai` fixes none: the user gives the model
    assert fixed_model("openai") is None
