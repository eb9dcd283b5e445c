"""Few tests bound real time, and each says why: a bound is read off a clock the test moves (issue 27).

An assertion bounds real time when it compares a difference of clock readings (`time.monotonic()`,
`time.perf_counter()`, `time.time()`) or a duration (`took`, `elapsed`, `duration`) with something. Waiting
for what must happen (`while time.monotonic() < deadline`) is patience, not a bound, and is not counted.
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

TESTS = Path(__file__).resolve().parent
MOST = 10
WHY = "# Real time:"
CLOCK_READINGS = {"monotonic", "monotonic_ns", "perf_counter", "perf_counter_ns", "time"}
CLOCK_MODULES = {"time", "clock"}  # `import time as clock` reads the same clock
DURATIONS = {"took", "elapsed", "duration"}


def _reads_a_clock(node: ast.AST) -> bool:
    return (isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
            and node.func.attr in CLOCK_READINGS and isinstance(node.func.value, ast.Name)
            and node.func.value.id in CLOCK_MODULES)


def _is_a_duration(node: ast.AST) -> bool:
    if isinstance(node, ast.BinOp) and isinstance(node.op, ast.Sub):
        return any(_reads_a_clock(inner) for inner in ast.walk(node))
    return isinstance(node, ast.Name) and node.id in DURATIONS


def bounds_real_time(test: ast.expr) -> bool:
    """Whether an assertion's expression compares a duration of real time with anything."""
    return any(isinstance(node, ast.Compare) and any(_is_a_duration(inner) for inner in ast.walk(node))
               for node in ast.walk(test))


def real_time_bounds(source: str) -> list[tuple[int, bool]]:
    """Each assertion of `source` that bounds real time: its line, and whether the line above says why."""
    lines = source.splitlines()
    found = []
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Assert) and bounds_real_time(node.test):
            above = lines[node.lineno - 2].strip() if node.lineno > 1 else ""
            found.append((node.lineno, above.startswith(WHY)))
    return sorted(found)


def _every_bound() -> dict[str, list[tuple[int, bool]]]:
    found = {}
    for path in sorted(TESTS.rglob("*.py")):
        bounds = real_time_bounds(path.read_text(encoding="utf-8"))
        if bounds:
            found[path.relative_to(TESTS).as_posix()] = bounds
    return found


def test_at_most_ten_assertions_bound_real_time_and_each_says_why() -> None:
    found = _every_bound()
    explained = [f"{name}:{line}" for name, bounds in found.items() for line, why in bounds if why]
    unexplained = [f"{name}:{line}" for name, bounds in found.items() for line, why in bounds if not why]
    assert unexplained == [], (
        f"these assertions bound real time: move the bound onto a clock the test hands the code, or tell it by "
        f"order; where it must stay real time, say why on the line above ({WHY} ...): {unexplained}")
    assert len(explained) <= MOST, f"{len(explained)} assertions bound real time, at most {MOST} may: {explained}"


@pytest.mark.parametrize(("source", "expected"), [
    ("started = time.monotonic()\nassert time.monotonic() - started < 1\n", [(2, False)]),
    ("# Real time: a real socket\nassert time.perf_counter() - began < 0.5 + MARGIN\n", [(2, True)]),
    ("assert max(took) < WITHIN_SECONDS, took\n", [(1, False)]),
    ("assert 0.25 < clock.monotonic() - started < 2\n", [(1, False)]),
    ("assert ok and time.time() - asked <= 5\n", [(1, False)]),
    # Patience and clocks a test moves are no bounds of real time.
    ("assert time.monotonic() < deadline, 'never came'\n", []),
    ("assert deadline.left() == pytest.approx(-0.05)\n", []),
    ("assert fake() - start == 3600\n", []),
    ("assert took\n", []),
])
def test_what_counts_as_a_bound_of_real_time(source: str, expected: list[tuple[int, bool]]) -> None:
    assert real_time_bounds(source) == expected
