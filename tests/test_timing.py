"""No test depends on how fast the machine is: every test module is read for the ways one can.

A loaded two-core machine (CI, or eight people sharing one) runs a test several times slower than an idle one. A
test that waits for something waits for an event or a condition (`tests.run_helpers.wait_until`, a
`threading.Event`), never for a length of time, so no test function sleeps; no test asserts how long something
took, in either direction: a step that must end runs through `tests.run_helpers.unless_hung` (which fails saying
it hung), work that must stay small is counted (calls, comparisons), and a deadline or a pause of the API client
is checked on a clock the test moves (`tests.manual_clock`); and hypothesis neither sets a deadline per example
nor checks that data generation is quick.
"""

from __future__ import annotations

import ast
from pathlib import Path

from hypothesis import HealthCheck, settings

TESTS = Path(__file__).parent
CLOCKS = {"monotonic", "perf_counter", "time", "monotonic_ns", "perf_counter_ns", "time_ns"}


def python_files() -> list[Path]:
    """Every Python file under tests/ (helpers and servers included: they wait too)."""
    return sorted(p for p in TESTS.rglob("*.py") if "fixtures" not in p.parts)


def calls_a_clock(node: ast.AST) -> bool:
    """Whether an expression calls a clock (`time.monotonic()`, `time.perf_counter()`, ...)."""
    return any(
        isinstance(sub, ast.Call) and isinstance(sub.func, ast.Attribute) and sub.func.attr in CLOCKS
        for sub in ast.walk(node)
    )


def clock_readings(tree: ast.AST) -> set[str]:
    """Names a module gives readings of a clock: assigned one (`start = time.monotonic()`, `elapsed = ... - start`)
    or appended one (`ticks.append(time.perf_counter())`)."""
    names: set[str] = set()
    while (found := names.union(*(given_a_reading(node, names) for node in ast.walk(tree)))) != names:
        names = found
    return names


def given_a_reading(node: ast.AST, readings: set[str]) -> set[str]:
    """The names a statement or call gives a clock reading to, knowing the names that hold one already."""
    if isinstance(node, ast.Assign | ast.AnnAssign | ast.AugAssign) and node.value is not None:
        if not reads_a_clock(node.value, readings):
            return set()
        targets = node.targets if isinstance(node, ast.Assign) else [node.target]
        return {t.id for t in targets if isinstance(t, ast.Name)}
    appended = isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) and node.func.attr == "append"
    if appended and isinstance(node.func.value, ast.Name) and any(calls_a_clock(arg) for arg in node.args):
        return {node.func.value.id}
    return set()


def _uses(node: ast.AST, names: set[str]) -> bool:
    return any(isinstance(sub, ast.Name) and sub.id in names for sub in ast.walk(node))


def reads_a_clock(node: ast.AST, readings: set[str]) -> bool:
    """Whether an expression calls a clock or uses a name that holds a clock reading."""
    return calls_a_clock(node) or _uses(node, readings)


def timed_asserts(tree: ast.AST) -> list[int]:
    """Lines of asserts that compare a clock reading with anything (an elapsed time under or over a bound)."""
    readings = clock_readings(tree)
    return sorted(
        node.lineno
        for node in ast.walk(tree)
        if isinstance(node, ast.Assert)
        and any(isinstance(n, ast.Compare) and reads_a_clock(n, readings) for n in ast.walk(node.test))
    )


def sleeping_tests(tree: ast.AST) -> list[str]:
    """Test functions that sleep for a length of time (`sleep(0)`, a turn of the event loop, is no wait)."""
    found = []
    for test in ast.walk(tree):
        if not (isinstance(test, ast.FunctionDef | ast.AsyncFunctionDef) and test.name.startswith("test_")):
            continue
        for call in (n for n in ast.walk(test) if isinstance(n, ast.Call)):
            name = call.func.attr if isinstance(call.func, ast.Attribute) else getattr(call.func, "id", None)
            zero = bool(call.args) and isinstance(call.args[0], ast.Constant) and call.args[0].value == 0
            if name == "sleep" and not zero:
                found.append(f"{test.name} line {call.lineno}")
    return found


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


def test_no_test_asserts_how_long_something_took():
    found = {
        str(path.relative_to(TESTS)): lines
        for path in python_files()
        if (lines := timed_asserts(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert found == {}


def test_no_test_sleeps_to_wait():
    found = {
        str(path.relative_to(TESTS)): tests
        for path in python_files()
        if (tests := sleeping_tests(ast.parse(path.read_text(encoding="utf-8"))))
    }
    assert found == {}


def test_the_readers_find_what_they_look_for():
    """The checks above find the cases they are for (else an empty result would prove nothing)."""
    timed = ast.parse(
        "start = time.monotonic()\nassert time.monotonic() - start < 2.0\nassert 0.15 > max(ticks)\n"
        "assert time.monotonic() - start < 30\nassert time.monotonic() - start >= 0.6\nassert x < 0.5\n"
        "assert ok and time.perf_counter() - began <= 600\nelapsed = time.time() - start\nassert elapsed > 1\n"
        "ticks.append(time.perf_counter())\nbegin, cursor = 3, 0\nassert begin >= cursor\n"
    )
    assert timed_asserts(timed) == [2, 3, 4, 5, 7, 9]
    sleepy = ast.parse(
        "def test_a():\n    time.sleep(0.1)\ndef test_b():\n    async def go():\n        await asyncio.sleep(0)\n"
        "def helper():\n    time.sleep(0.02)\nasync def test_c():\n    await asyncio.sleep(delay)\n"
    )
    assert sleeping_tests(sleepy) == ["test_a line 2", "test_c line 9"]
    slow = ast.parse(
        "@settings(deadline=200)\ndef a(): ...\n@settings(suppress_health_check=[HealthCheck.filter_too_much])\n"
        "def b(): ...\n@settings(deadline=None, suppress_health_check=[HealthCheck.too_slow])\ndef c(): ...\n"
    )
    assert speed_checks(slow) == [
        "line 1: deadline=200",
        "line 3: suppress_health_check=[HealthCheck.filter_too_much] drops too_slow",
    ]
