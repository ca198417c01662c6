"""`shambench list ...` with installed plugins that fail while they are imported: each `list` command (enumerated
from the click group, so a new one is covered) shows the working plugins, one `skipped:` line per broken one, and
exits 0; the failures include a plugin that calls sys.exit() at import, which once took the whole CLI down."""

from __future__ import annotations

import sys
import textwrap
from importlib import metadata

import click
import pytest
from click.testing import CliRunner

from shambench import registry
from shambench.cli import main
from shambench.cli.listing import list_group
from shambench.data.adapter import adapters
from shambench.data.context import providers
from shambench.data.formats import formats
from shambench.detection.detector import detectors, optimizers, trainers

REGISTRIES = (detectors, adapters, formats, providers, optimizers, trainers)


def module_of(kind: str, reg: registry.Registry) -> str:
    """The module name of the broken plugin of one failure kind in one registry."""
    return f"broken_{kind}_{reg.kind}".replace("-", "_").replace(" ", "_")


# What a plugin module does when it is imported, and the one line its failure is reported as.
FAILURES = {
    "exits": ("import sys\nsys.exit(3)\n", "SystemExit: 3"),
    "raises": ("raise RuntimeError('no GPU here,\\n  try later')\n", "RuntimeError: no GPU here, try later"),
    "interrupts-generator": ("raise GeneratorExit('odd')\n", "GeneratorExit: odd"),
    "base-exception": ("class Odd(BaseException):\n    pass\nraise Odd('very')\n", "Odd: very"),
    # Describing the failure must not fail in turn: a message that raises gives way to the repr, then the type.
    "str-raises": (
        "class Nasty(Exception):\n    def __str__(self):\n        raise ValueError('str fails too')\nraise Nasty(1)\n",
        "Nasty: (its str() raised; repr: Nasty(1))",
    ),
    "str-and-repr-raise": (
        "class Nastier(Exception):\n    def __str__(self):\n        raise SystemExit(4)\n"
        "    __repr__ = __str__\nraise Nastier()\n",
        "Nastier: (its str() and repr() raised)",
    ),
}


@pytest.fixture
def broken_plugins(tmp_path, monkeypatch):
    """Every registry sees one installed plugin of each failure kind (module `broken_<kind>_<registry>`)."""
    monkeypatch.syspath_prepend(str(tmp_path))
    points = []
    for reg in REGISTRIES:
        reg.entries()  # built-ins loaded before the snapshot
        monkeypatch.setattr(reg, "_entries", dict(reg._entries))
        monkeypatch.setattr(reg, "_entry_points_loaded", False)
        monkeypatch.setattr(reg, "_broken", {})
        for kind, (body, _) in FAILURES.items():
            module = module_of(kind, reg)
            (tmp_path / f"{module}.py").write_text(textwrap.dedent(body))
            points.append(metadata.EntryPoint(f"broken-{kind}", f"{module}:factory", reg.group))
            monkeypatch.delitem(sys.modules, module, raising=False)
    # The registries' listing of installed plugins, not importlib.metadata's, which other libraries read too
    # (spaCy's catalogue: all groups, at import).
    monkeypatch.setattr(registry, "installed_entry_points", lambda group: [p for p in points if p.group == group])


def test_a_plugin_failing_at_import_in_any_way_is_recorded_on_one_line(broken_plugins):
    for reg in REGISTRIES:
        broken = reg.broken()
        assert set(broken) == {f"broken-{kind}" for kind in FAILURES}, reg.kind
        for kind, (_, reason) in FAILURES.items():
            module = module_of(kind, reg)
            assert broken[f"broken-{kind}"] == f"{module}:factory: {reason}"
        assert reg.entries(), reg.kind  # the built-ins are all still there


def test_keyboard_interrupt_at_import_is_not_swallowed(tmp_path, monkeypatch):
    monkeypatch.syspath_prepend(str(tmp_path))
    (tmp_path / "interrupting_plugin.py").write_text("raise KeyboardInterrupt\n")
    detectors.entries()
    monkeypatch.setattr(detectors, "_entries", dict(detectors._entries))
    monkeypatch.setattr(detectors, "_entry_points_loaded", False)
    monkeypatch.setattr(detectors, "_broken", {})
    point = metadata.EntryPoint("ctrl-c", "interrupting_plugin:factory", detectors.group)
    monkeypatch.setattr(registry, "installed_entry_points", lambda group: [point] if group == detectors.group else [])
    with pytest.raises(KeyboardInterrupt):
        detectors.entries()


@pytest.mark.parametrize("command", sorted(list_group.commands))
def test_every_list_command_works_and_names_each_broken_plugin(command, broken_plugins, tmp_path):
    sub = list_group.commands[command]
    args = ["list", command] + (["--data-dir", str(tmp_path)] if any(p.name == "data_dir" for p in sub.params) else [])
    result = CliRunner().invoke(main, args)
    assert result.exit_code == 0, result.output + result.stderr
    assert "Traceback" not in result.output + result.stderr
    reg = {"detectors": detectors, "datasets": adapters, "formats": formats, "providers": providers}[command]
    skipped = [line for line in result.stderr.splitlines() if line.startswith("skipped:")]
    assert skipped == [
        f"skipped: {reg.kind} 'broken-{kind}' failed to load: {module_of(kind, reg)}:factory: {reason}"
        for kind, (_, reason) in sorted(FAILURES.items())
    ]
    assert "broken-" not in result.stdout  # left out of the table


def test_the_list_group_has_the_commands_this_test_knows():
    # A new `list` command must be added to the mapping in the test above (its registry's broken plugins shown).
    assert isinstance(list_group, click.Group)
    assert set(list_group.commands) == {"detectors", "datasets", "formats", "providers"}


def test_eval_names_a_broken_plugin_in_one_line_and_runs_the_others(broken_plugins, tmp_path, monkeypatch):
    """The broken plugins are installed beside the built-ins: a run of a built-in detector is untouched by them,
    and a run of each broken one is one `error:` line saying why it failed to load, exit status 2."""
    from tests.cli.test_run_integrity import examples_file

    monkeypatch.setenv("SHAMBENCH_CACHE_DIR", str(tmp_path / "cache"))
    examples = str(examples_file(tmp_path / "ex.jsonl", 2))
    common = ["--examples", examples, "--no-progress", "--bootstrap", "10"]
    fine = CliRunner().invoke(main, ["eval", "--detector", "none", "--run-dir", str(tmp_path / "ok"), *common])
    assert fine.exit_code == 0 and "Traceback" not in fine.output, fine.output
    for kind, (_, reason) in FAILURES.items():
        run_dir = str(tmp_path / kind)
        res = CliRunner().invoke(main, ["eval", "--detector", f"broken-{kind}", "--run-dir", run_dir, *common])
        assert res.exit_code == 2 and "Traceback" not in res.output, res.output
        assert [line for line in res.stderr.splitlines() if line.startswith("error:")] == [
            f"error: detector 'broken-{kind}' is installed but failed to load "
            f"({module_of(kind, detectors)}:factory: {reason})"
        ]
