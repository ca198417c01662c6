"""No test depends on how fast the machine is: every test module is read for the two ways one can.

A loaded two-core machine (CI, or eight people sharing one) runs a test several times slower than an idle one. A
test that waits for something waits for an event or a condition (`tests.run_helpers.wait_until`, a
`threading.Event`), never for a length of time; a bound on elapsed time is there only to stop a hang, so it is
generous (`HANG_BOUND` seconds at least); and hypothesis neither sets a deadline per example nor checks that data
generation is quick.
"""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import HealthCheck, settings

TESTS = Path(__file__).parent
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}
# Names tests give readings of a clock (a start time, a list of tick times).
READINGS = {"start", "started", "ticks", "elapsed", "began"}
# The least upper bound on elapsed seconds a test may assert: far above what any test here takes unloaded.
HANG_BOUND = 10


def python_files() -> list[Path]:
    """Every Python file under tests/ (helpers and servers included: they wait too)."""
    return sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.parts)


def reads_a_clock(node: ast.AST) -> bool:
    """Whether an expression calls a clock or uses a name that holds a clock reading."""
    for sub in ast.walk(node):
        if isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in CLOCKS:
            return True
        if isinstance(sub, ast.Name) and sub.id in READINGS:
            return True
    return False


def tight_bounds(tree: ast.AST) -> list[int]:
    """Lines of asserts that bound a clock reading from above by less than `HANG_BOUND` seconds."""
    lines = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Assert):
            continue
        for compare in (n for n in ast.walk(node.test) if isinstance(n, ast.Compare)):
            operands = [compare.left, *compare.comparators]
            for (left, right), op in zip(zip(operands, operands[1:], strict=False), compare.ops, strict=True):
                bound = (
                    right if isinstance(op, ast.Lt | ast.LtE) else left if isinstance(op, ast.Gt | ast.GtE) else None
                )
                reading = left if bound is right else right
                if (
                    isinstance(bound, ast.Constant)
                    and isinstance(bound.value, int | float)
                    and bound.value < HANG_BOUND
                    and reads_a_clock(reading)
                ):
                    lines.append(node.lineno)
    return lines


def settings_calls(tree: ast.AST) -> list[ast.Call]:
    """The calls of hypothesis's `settings(...)` in a module."""
    return [
        n
        for n in ast.walk(tree)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name | ast.Attribute)
        if (n.func.id if isinstance(n.func, ast.Name) else n.func.attr) == "settings"
    ]


def speed_checks(tree: ast.AST) -> list[str]:
    """What a module's hypothesis settings bring back of the profile's removed speed checks: a deadline other than
    None, or a list of suppressed health checks without `too_slow` (a per-test list replaces the profile's)."""
    found = []
    for call in settings_calls(tree):
        for kw in call.keywords:
            if kw.arg == "deadline" and not (isinstance(kw.value, ast.Constant) and kw.value.value is None):
                found.append(f"line {call.lineno}: deadline={ast.unparse(kw.value)}")
            if kw.arg == "suppress_health_check" and "too_slow" not in ast.unparse(kw.value):
                found.append(f"line {call.lineno}: suppress_health_check={ast.unparse(kw.value)} drops too_slow")
    return found


def test_the_profile_sets_no_deadline_no_speed_check_and_no_database():
    profile = settings.get_profile("shambench")
    assert settings.default is not None and settings.default.deadline is None
    assert profile.deadline is None and profile.database is None and profile.derandomize
    assert HealthCheck.too_slow in profile.suppress_health_check


def test_no_hypothesis_settings_bring_a_speed_check_back():
    found = {
        str(path.relative_to(TESTS)): checks
        for path in python_files()
        if (checks := speed_checks(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert found == {}


def test_no_test_bounds_elapsed_time_tightly():
    found = {
        str(path.relative_to(TESTS)): lines
        for path in python_files()
        if (lines := tight_bounds(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert found == {}


def test_the_readers_find_what_they_look_for():
    """The checks above find the cases they are for (else an empty result would prove nothing)."""
    tight = ast.parse(
        "start = time.monotonic()\nassert time.monotonic() - start < 2.0\nassert 0.15 > max(ticks)\n"
        "assert time.monotonic() - start < 30\nassert time.monotonic() - start >= 0.6\nassert x < 0.5\n"
    )
    assert tight_bounds(tight) == [2, 3]
    slow = ast.parse(
        "@settings(deadline=200)\ndef a(): ...\n@settings(suppress_health_check=[HealthCheck.filter_too_much])\n"
        "def b(): ...\n@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])\ndef c(): ...\n"
    )
    assert speed_checks(slow) == [
        "line 1: deadline=200",
        "line 3: suppress_health_check=[HealthCheck.filter_too_much] drops too_slow",
    ]
