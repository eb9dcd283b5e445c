"""The plugins' worker (issue 30) is bounded and ends with its Console; a plugin that never returns cannot take a
thread per call without end. Told by order: each plugin here is held on an event the test releases."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any, TypeVar

import pytest

from console_ha.answers.card_events import StageHookRunner, Sweeper
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.console import Console, ConsoleOptions
from console_ha.deadline import Deadline
from console_ha.hooks import hookimpl
from console_ha.plugins import hook_calls
from console_ha.plugins.hook_calls import LATE, MAX_LATE_CALLS, Skipped, call_one
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.audit import AuditLog
from console_ha.store.plugin_switches import PluginSwitches
from tests.moving_clock import PATIENCE, wait_for
from tests.seed import seed_settings

T = TypeVar("T")
WORKER = "console-ha-plugins"
ENTITY = "sensor.living_room_temperature"


class Held:
    """after_output and on_card, each held until the test opens the gate; keeps what it was told, in order."""

    def __init__(self) -> None:
        self.gate = threading.Event()
        self.told: list[str] = []
        self._lock = threading.Lock()

    @hookimpl
    def after_output(self, reply):
        with self._lock:
            self.told.append(reply)
        self.gate.wait(PATIENCE)

    @hookimpl
    def on_card(self, event):
        with self._lock:
            self.told.append(event)
        self.gate.wait(PATIENCE)

    def seen(self) -> list[str]:
        with self._lock:
            return list(self.told)


def runner(data_dir: Any, *, hook_seconds: float = PATIENCE, max_waiting: int = 3, **given: object) -> StageHookRunner:
    plugins = Plugins(PluginSwitches(data_dir))
    for name, plugin in given.items():
        plugins.register(plugin, name)
    return StageHookRunner(plugins, AuditLog(data_dir), hook_seconds=hook_seconds, max_waiting=max_waiting)


def tell(hooks: StageHookRunner, reply: str) -> None:
    hooks.later("after_output", {"reply": reply, "principal": "household"})


def skipped_lines(data_dir: Any) -> list[tuple[str, str]]:
    return [(e["plugin"], e["hook"]) for e in AuditLog(data_dir).events() if e["event"] == "plugin_skipped"]


def workers() -> set[threading.Thread]:
    return {thread for thread in threading.enumerate() if thread.name == WORKER and thread.is_alive()}


def test_past_the_bound_events_are_dropped_and_each_run_of_drops_is_one_audit_line_per_plugin(data_dir):
    held, other = Held(), Held()
    hooks = runner(data_dir, held=held, other=other)
    other.gate.set()
    try:
        tell(hooks, "0")
        wait_for(lambda: held.seen() == ["0"], "the worker holding the first event")
        for reply in "123456789":  # 1-3 wait, 4-9 are one run of drops
            tell(hooks, reply)
        held.gate.set()
        hooks.settled()
        assert held.seen() == other.seen() == ["0", "1", "2", "3"]
        assert sorted(skipped_lines(data_dir)) == [("held", "after_output"), ("other", "after_output")]
        held.gate.clear()
        tell(hooks, "a")  # the bound has room again: told, and the next drops are a new run
        wait_for(lambda: held.seen()[-1:] == ["a"], "the worker holding the event after the run")
        for reply in "bcdef":
            tell(hooks, reply)
        held.gate.set()
        hooks.settled()
        assert held.seen()[4:] == ["a", "b", "c", "d"]
        assert len(skipped_lines(data_dir)) == 4
    finally:
        held.gate.set()
        hooks.close()


def test_close_drops_the_waiting_events_and_joins_the_worker(data_dir):
    held = Held()  # never let go: only its deadline ends its call
    hooks = runner(data_dir, hook_seconds=0.05, max_waiting=8, held=held)
    sweep_gate = threading.Event()
    before = workers()
    try:
        tell(hooks, "running")
        wait_for(lambda: held.seen() == ["running"], "the worker telling the first event")
        assert workers() - before
        # Then the worker is held between events (in a sweep), so the next two wait for it.
        hooks.watch(Sweeper(lambda: 0.0, lambda: 0.0, lambda: _hold(sweep_gate)))
        tell(hooks, "waiting 1")
        tell(hooks, "waiting 2")
        closer = threading.Thread(target=hooks.close)
        closer.start()
        hooks.settled(PATIENCE)  # returns once closed: the waiting events are gone
        sweep_gate.set()
        closer.join(PATIENCE)
        assert not closer.is_alive() and workers() - before == set()
        tell(hooks, "after close")
        assert held.seen() == ["running"]
        assert workers() - before == set()  # a closed runner makes no worker again
        assert skipped_lines(data_dir) == [("held", "after_output")]  # the running one, at its deadline
    finally:
        sweep_gate.set()
        held.gate.set()


def _hold(gate: threading.Event) -> None:
    gate.wait(PATIENCE)


def test_close_with_no_worker_and_twice_is_harmless(data_dir):
    hooks = runner(data_dir)
    hooks.close()
    hooks.close()


def test_console_close_ends_its_plugins_worker(data_dir, stub_ha, model):
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": [ENTITY]},
                  token=stub_ha.token)
    held = Held()
    held.gate.set()
    plugins = Plugins(PluginSwitches(data_dir))
    plugins.register(held, "held")
    console = Console.open(data_dir, ConsoleOptions(plugins=plugins))
    before = workers()
    try:
        console.household.ask("desk", GET_HISTORY, {"entity_id": ENTITY, "period": "day"})
        console.stage_hooks.settled()
        assert held.seen() == ["waiting"] and workers() - before
    finally:
        console.close()
    assert workers() - before == set()


class Stuck:
    """A plugin whose implementation never returns until the test lets it."""

    def __init__(self) -> None:
        self.gate = threading.Event()

    @hookimpl
    def before_toolcall(self, capability):
        self.gate.wait(PATIENCE)


def test_a_plugin_with_calls_still_running_past_their_deadline_is_skipped_at_once_on_no_new_thread(
        data_dir, monkeypatch: pytest.MonkeyPatch):
    stuck = Stuck()
    plugins = Plugins(PluginSwitches(data_dir))
    plugins.register(stuck, "stuck")
    (impl,) = plugins.implementations("before_toolcall")
    started: list[object] = []

    class Counted(Deadline):
        def call(self, call: Callable[[], T], abandon: Callable[[T], Any]) -> T:
            started.append(call)
            return super().call(call, abandon)

    monkeypatch.setattr(hook_calls, "Deadline", Counted)
    arguments = {"capability": "get_state"}
    try:
        for _ in range(MAX_LATE_CALLS):
            assert call_one(impl, "before_toolcall", arguments, seconds=0.01) == Skipped("stuck", "before_toolcall",
                                                                                       "late")
        assert LATE.count(stuck) == MAX_LATE_CALLS and len(started) == MAX_LATE_CALLS
        assert call_one(impl, "before_toolcall", arguments, seconds=PATIENCE) == Skipped("stuck", "before_toolcall",
                                                                                       "late")
        assert len(started) == MAX_LATE_CALLS  # skipped before any thread was asked for
    finally:
        stuck.gate.set()
    wait_for(lambda: LATE.count(stuck) == 0, "the stuck calls ending once let go")
    assert call_one(impl, "before_toolcall", arguments, seconds=PATIENCE) is None  # called again
    assert len(started) == MAX_LATE_CALLS + 1
