"""A plugin whose `before_toolcall` is held until the test releases it, told by order, never by a stopwatch.

The hook's deadline is put past the test's patience (`hold_past_the_deadline`), so only the test's release can
end a held call: whatever else happens meanwhile happened while it was held, however slow the machine.
"""

from __future__ import annotations

import functools
import threading

import pytest

from console_ha.capabilities import executor
from console_ha.hooks import hookimpl
from console_ha.plugins.hook_calls import call_one

# How long the tests wait for what must happen (patience, not a bound: on time it comes at once).
PATIENCE = 10.0
# A held hook's deadline, and how long it waits for its release: past any patience of the tests.
HELD_SECONDS = 60.0


class Held:
    """Holds the first `before_toolcall` of `principal` until `release` is set; counts every call it is handed."""

    def __init__(self, principal: str) -> None:
        self.principal = principal
        self.entered = threading.Event()
        self.release = threading.Event()
        self.calls: list[str] = []

    @hookimpl
    def before_toolcall(self, principal):
        self.calls.append(principal)
        if principal == self.principal and not self.entered.is_set():
            self.entered.set()
            self.release.wait(HELD_SECONDS)


def hold_past_the_deadline(monkeypatch: pytest.MonkeyPatch) -> None:
    """The executor's hook calls with `HELD_SECONDS` instead of the contract's second."""
    monkeypatch.setattr(executor, "call_one", functools.partial(call_one, seconds=HELD_SECONDS))
