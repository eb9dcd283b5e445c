"""Each hook implementation is called alone, with the arguments it declares, within 1 s; a failure skips it."""

from __future__ import annotations

import inspect
import threading

import pytest

from console_ha.hooks import hookimpl
from console_ha.plugins.hook_calls import HOOK_SECONDS, MAX_LATE_CALLS, Answer, Skipped, call_each
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.datadir import DataDir
from console_ha.store.plugin_switches import PluginSwitches

ARGUMENTS = {"capability": "get_state", "arguments": {"entity_id": "sensor.kitchen"}, "principal": "household"}


def plugins_with(data_dir: DataDir, **given: object) -> Plugins:
    plugins = Plugins(PluginSwitches(data_dir))
    for name, plugin in given.items():
        plugins.register(plugin, name)
    return plugins


class Refuses:
    @hookimpl
    def before_toolcall(self, capability):
        return f"no {capability} at night"


class Raises:
    @hookimpl
    def before_toolcall(self, arguments):
        raise RuntimeError("a bug in the plugin")


class Exits:
    @hookimpl
    def before_toolcall(self, arguments):
        raise SystemExit(3)


class Late:
    def __init__(self) -> None:
        self.release = threading.Event()

    @hookimpl
    def before_toolcall(self, arguments):
        self.release.wait(5)
        return "too late to count"


class Quiet:
    @hookimpl
    def before_toolcall(self, principal):
        return None


def test_each_answer_comes_per_plugin_and_one_that_raises_does_not_stop_the_others(data_dir: DataDir) -> None:
    """pluggy's own call would stop at the raising one, and the plugin before it would never run."""
    plugins = plugins_with(data_dir, refuses=Refuses(), raises=Raises(), exits=Exits(), quiet=Quiet())
    outcome = call_each(plugins, "before_toolcall", ARGUMENTS)
    assert outcome.answers == [Answer("refuses", "no get_state at night")]
    assert outcome.skipped == [Skipped("exits", "before_toolcall", "raised"),
                               Skipped("raises", "before_toolcall", "raised")]


@pytest.mark.parametrize("kind", [KeyboardInterrupt, GeneratorExit, BaseException, SystemExit, RecursionError])
def test_an_implementation_raising_any_base_exception_is_skipped(data_dir: DataDir, kind: type[BaseException]) -> None:
    """Raised on its worker thread, never a signal: re-raised on the caller's it ended the read (or the server's
    worker) with no audit line."""

    class RaisesIt:
        @hookimpl
        def before_toolcall(self, arguments):
            raise kind()

    outcome = call_each(plugins_with(data_dir, refuses=Refuses(), raising=RaisesIt()), "before_toolcall", ARGUMENTS)
    assert outcome.skipped == [Skipped("raising", "before_toolcall", "raised")]
    assert outcome.answers == [Answer("refuses", "no get_state at night")]


def test_a_late_implementation_is_skipped_at_its_deadline_and_the_next_still_runs(data_dir: DataDir) -> None:
    late = Late()
    plugins = plugins_with(data_dir, refuses=Refuses(), late=late)
    outcome = call_each(plugins, "before_toolcall", ARGUMENTS, seconds=0.2)
    late.release.set()
    # The late one is held until released, so only the deadline can have ended its call: told by order.
    assert outcome.skipped == [Skipped("late", "before_toolcall", "late")]
    assert outcome.answers == [Answer("refuses", "no get_state at night")]


def test_a_plugin_that_never_returns_holds_a_bounded_number_of_threads_however_many_reads(data_dir: DataDir) -> None:
    """Each call given up on keeps its worker thread until the plugin returns: one that never returns, called
    again for each read, held one more thread (and the read one more deadline) each time."""
    entered: list[int] = []

    class Hangs:
        def __init__(self) -> None:
            self.release = threading.Event()

        @hookimpl
        def before_toolcall(self, arguments):
            entered.append(1)
            self.release.wait()

    hangs = Hangs()
    plugins = plugins_with(data_dir, refuses=Refuses(), hangs=hangs)
    threads = threading.active_count()
    try:
        outcomes = [call_each(plugins, "before_toolcall", ARGUMENTS, seconds=0.05) for _ in range(200)]
    finally:
        hangs.release.set()
    assert len(entered) == MAX_LATE_CALLS
    assert threading.active_count() <= threads + MAX_LATE_CALLS
    assert all(outcome.skipped == [Skipped("hangs", "before_toolcall", "late")] and
               outcome.answers == [Answer("refuses", "no get_state at night")] for outcome in outcomes)


def test_the_deadline_is_one_second_by_default(data_dir: DataDir) -> None:
    late = Late()
    plugins = plugins_with(data_dir, late=late)
    outcome = call_each(plugins, "before_toolcall", ARGUMENTS)
    late.release.set()
    assert outcome.skipped == [Skipped("late", "before_toolcall", "late")]
    assert inspect.signature(call_each).parameters["seconds"].default == HOOK_SECONDS == 1.0


def test_an_implementation_gets_only_the_arguments_it_declares_each_a_copy_of_its_own(data_dir: DataDir) -> None:
    """One that changes what it was handed in place changes nothing the caller holds."""
    seen: list[dict[str, object]] = []

    class Meddles:
        @hookimpl
        def before_toolcall(self, arguments):
            seen.append(dict(arguments))
            arguments["entity_id"] = "lock.front_door"

    given = {"capability": "get_state", "arguments": {"entity_id": "sensor.kitchen"}, "principal": "household"}
    call_each(plugins_with(data_dir, meddles=Meddles()), "before_toolcall", given)
    assert seen == [{"entity_id": "sensor.kitchen"}]
    assert given["arguments"] == {"entity_id": "sensor.kitchen"}


def test_a_plugin_turned_off_is_not_called(data_dir: DataDir) -> None:
    plugins = plugins_with(data_dir, refuses=Refuses(), raises=Raises())
    plugins.set_on("raises", False)
    outcome = call_each(plugins, "before_toolcall", ARGUMENTS)
    assert outcome.skipped == [] and outcome.answers == [Answer("refuses", "no get_state at night")]


@pytest.mark.parametrize("hook", ["on_input", "after_toolcall", "on_card"])
def test_with_no_plugin_a_hook_call_is_empty(data_dir: DataDir, hook: str) -> None:
    outcome = call_each(plugins_with(data_dir), hook, {})
    assert outcome.answers == [] and outcome.skipped == []
