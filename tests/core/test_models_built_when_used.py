"""Every pydantic model of the package (the core's and the plugins', walked from the package, so a model added later
is covered) derives from `shambench.schema.Model`, and it and every module-level type adapter is built the first
time it is used (`BUILT_WHEN_USED`), not when its module is imported: a command imports many models it never
validates."""

from __future__ import annotations

import importlib
import subprocess
import sys

from pydantic import TypeAdapter

from shambench.schema import Model
from tests.core.test_names import models


def test_every_model_of_the_package_is_built_when_used():
    walked = models()
    assert len(walked) > 100  # the walk finds the models (the core's, the plugins', the leaderboard's)
    assert [f"{cls.__module__}.{cls.__qualname__}" for cls in walked if not issubclass(cls, Model)] == []
    eager = [f"{cls.__module__}.{cls.__qualname__}" for cls in walked if not cls.model_config.get("defer_build")]
    assert eager == []  # a model's own config adds to Model's, keeping it


def test_module_level_type_adapters_are_built_when_used():
    adapters = {
        f"{module}.{name}": value
        for module in ("shambench.schema", "shambench.data.hub")
        for name, value in vars(importlib.import_module(module)).items()
        if isinstance(value, TypeAdapter)
    }
    assert set(adapters) == {"shambench.schema._SPAN_LIST", "shambench.data.hub._ENTRIES"}
    assert all(adapter._config and adapter._config.get("defer_build") for adapter in adapters.values())


def test_a_model_is_built_by_its_first_use_not_by_its_import():
    # A fresh process: this one's tests have used the models already.
    code = (
        "import shambench.scoring.scorer, shambench.scoring.results as r, shambench.schema as s\n"
        "print(r.Results.__pydantic_complete__, s.Example.__pydantic_complete__)\n"
        "e = s.Example(id='a', task='qa', dataset='d', response='abc', hallu_spans=[{'start': 0, 'end': 1}])\n"
        "print(s.Example.__pydantic_complete__, e.hallu_spans[0].end)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert done.stdout.split() == ["False", "False", "True", "1"]
