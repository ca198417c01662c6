"""The plugin registry: "did you mean", built-ins winning clashes, entry points scanned only on a miss."""

from __future__ import annotations

from importlib import metadata

import pytest

from shambench import registry
from shambench.data.adapter import adapters
from shambench.data.formats import formats
from shambench.detection.detector import create_detector, detectors
from shambench.errors import NameClashError, ParameterError, UnknownPluginError

GROUP = "shambench.detectors"


def extra_detector():
    """A detector factory that only an entry point names."""
    return create_detector("none")


def test_unknown_name_suggests_close_names():
    with pytest.raises(UnknownPluginError) as err:
        detectors.get("overlapp")
    assert str(err.value) == "unknown detector 'overlapp'; did you mean 'overlap'? (see `shambench list detectors`)"
    with pytest.raises(UnknownPluginError) as err:
        detectors.get("qqqqqqqqq")
    assert "did you mean" not in str(err.value)


@pytest.fixture
def scans(monkeypatch):
    """Fake installed entry points (one clashing with the built-in `none`); counts how often they are listed."""
    detectors.get("none")  # built-ins loaded before the snapshot
    monkeypatch.setattr(detectors, "_entries", dict(detectors._entries))
    monkeypatch.setattr(detectors, "_entry_points_loaded", False)
    monkeypatch.setattr(detectors, "_broken", {})
    points = [
        # Never loaded: the built-in `none` wins before the entry point's module would be imported.
        metadata.EntryPoint("none", "no_such_module_anywhere:factory", GROUP),
        metadata.EntryPoint("extra", f"{__name__}:extra_detector", GROUP),
        metadata.EntryPoint("broken", "no_such_module_anywhere:factory", GROUP),
    ]
    calls = []

    def entry_points(**params):
        calls.append(params)
        return metadata.EntryPoints(points).select(**params)

    monkeypatch.setattr(registry.metadata, "entry_points", entry_points)
    monkeypatch.setattr(registry, "_installed", {})  # nothing listed yet in this process
    return calls


def test_entry_points_are_scanned_only_on_a_miss(scans):
    assert detectors.get("none").origin == "shambench.detectors.baselines"
    assert detectors.get("overlap").name == "overlap"
    assert scans == []  # built-in names never list entry points
    assert detectors.get("extra").origin == f"{__name__}:extra_detector"
    assert scans == [{}]  # every group in one listing
    detectors.get("extra")
    with pytest.raises(UnknownPluginError, match="did you mean 'extra'"):
        detectors.get("extr")
    detectors.entries()
    assert scans == [{}]  # listed once per process


def test_the_registries_share_one_listing_per_sys_path(scans, monkeypatch, tmp_path):
    for reg in (adapters, formats):
        reg.entries()  # built-ins loaded before the snapshot
        monkeypatch.setattr(reg, "_entries", dict(reg._entries))
        monkeypatch.setattr(reg, "_entry_points_loaded", False)
    assert detectors.get("extra").origin == f"{__name__}:extra_detector"
    assert "extra" not in {e.name for e in adapters.entries()} | {e.name for e in formats.entries()}
    assert scans == [{}]  # the sources' and the formats' registries read the detectors' listing
    monkeypatch.syspath_prepend(str(tmp_path))  # where a package may be installed that was not listed
    monkeypatch.setattr(detectors, "_entry_points_loaded", False)
    detectors.entries()
    assert scans == [{}, {}]


def test_a_broken_plugin_is_reported_by_name_and_spares_the_others(scans):
    assert "broken" not in {e.name for e in detectors.entries()}
    with pytest.raises(UnknownPluginError) as err:
        detectors.get("broken")
    assert str(err.value) == (
        "detector 'broken' is installed but failed to load "
        "(no_such_module_anywhere:factory: ModuleNotFoundError: No module named 'no_such_module_anywhere')"
    )
    assert detectors.get("extra").origin == f"{__name__}:extra_detector"


def test_builtins_win_name_clashes(scans):
    names = {e.name: e.origin for e in detectors.entries()}
    assert names["none"] == "shambench.detectors.baselines"
    assert names["extra"] == f"{__name__}:extra_detector"
    # A direct registration from outside shambench cannot replace a built-in either.
    detectors.add("none", extra_detector, "impostor", "someone.else")
    assert detectors.get("none").origin == "shambench.detectors.baselines"


def test_two_builtins_of_one_name_are_an_error(scans):
    builtin = detectors.get("none")
    with pytest.raises(NameClashError) as err:
        detectors.add("none", extra_detector, "a second none", "shambench.detectors.other")
    assert str(err.value) == (
        "detector 'none' is registered twice among the built-ins: by shambench.detectors.baselines:"
        f"{builtin.factory.__qualname__} and shambench.detectors.other:extra_detector"
    )
    # The same factory again (its module imported twice) is no clash, and the first registration stands.
    detectors.add("none", builtin.factory, builtin.description, builtin.origin)
    assert detectors.get("none").factory is builtin.factory


def test_every_builtin_registry_loads_without_a_clash():
    from shambench.data.adapter import adapters
    from shambench.data.context import providers
    from shambench.detection.detector import optimizers, trainers

    for reg in (detectors, adapters, providers, optimizers, trainers):
        assert reg.entries(), reg.kind


def test_create_detector_passes_name_and_argument():
    det = create_detector("random", rate=0.5, seed=3)
    assert det.name == "random"
    assert det.params() == {"rate": 0.5, "seed": 3}
    with pytest.raises(ParameterError, match=r"^detector 'random': rate must be in \[0, 1\], got 2.0$"):
        create_detector("random", rate=2)


def test_only_canonical_names_are_registered_or_found():
    from shambench.detection.detector import detectors
    from shambench.errors import UnknownPluginError

    with pytest.raises(
        UnknownPluginError,
        match=r"detector name 'overlap ' has leading or trailing whitespace; did you mean 'overlap'\?",
    ):
        detectors.get("overlap ")
    with pytest.raises(UnknownPluginError, match="contains control characters"):
        detectors.get("over\x1b[0mlap")
    for bad in ("", " padded", "tab\there", "esc\x1b[31m"):
        with pytest.raises(ValueError, match="cannot register detector"):
            detectors.add(bad, lambda: None, "", "tests")
    assert detectors.get("overlap").name == "overlap"
