"""Clocks a test moves itself, and how long a test waits for what must happen before it calls it hung.

A test that proves a bound reads the bound off an injected clock, never off the machine's: a loaded machine
is slow, never wrong. What stays on real time is a liveness guard (`PATIENCE`), far past any bound it guards.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable

# How long a test waits for something that must happen (a thread to end, an answer to come) before it fails.
# Never a bound on how fast: every bound under test is at least ten times shorter, or read off a test's clock.
PATIENCE = 30.0


class ClockReadings:
    """A monotonic clock that gives `readings` in turn, then keeps giving the last one."""

    def __init__(self, readings: Iterable[float]) -> None:
        self._readings = list(readings)
        self.reads = 0

    def __call__(self) -> float:
        reading = self._readings[min(self.reads, len(self._readings) - 1)]
        self.reads += 1
        return reading


def wait_for(condition: Callable[[], object], what: str = "the condition", seconds: float = PATIENCE) -> None:
    """Wait for what must happen (patience, not a bound: a loaded machine is slow, never wrong); fail the test
    naming `what` when it never does."""
    end = time.monotonic() + seconds
    while not condition():
        assert time.monotonic() < end, f"{what} never held"
        time.sleep(0.01)
