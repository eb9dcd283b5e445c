"""Calling the household's hook implementations one at a time, each within its own deadline.

Not `pm.hook.name(...)`: pluggy's own call runs every implementation on the caller's thread, stops at the
first one that raises (the others never run) and has no deadline, so one slow or broken plugin would hold
or end a read. Here each implementation runs on a worker thread of `console_ha/deadline.py` with 1 s; one
that raises or is late is skipped, and the caller gets a `Skipped` to record in Activity.

Python cannot stop a thread: a late implementation keeps its worker thread until it returns. So that a plugin
that never returns cannot take one thread per call without end, a plugin with MAX_LATE_CALLS calls still running
past their deadline is skipped at once (late, audited as any), on no new thread, until one of them ends.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections import Counter
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pluggy import HookImpl

from console_ha.deadline import Deadline, DeadlinePassed
from console_ha.plugins.plugin_registry import Plugins

log = logging.getLogger(__name__)

HOOK_SECONDS = 1.0  # the contract's: a hook that takes longer is skipped
# A plugin with this many calls still running past their deadline gets no new thread until one ends: skipped.
MAX_LATE_CALLS = 4


class _LateCalls:
    """The calls still running past their deadline, per plugin object (a module: one for every Console)."""

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """Start afresh (a forked child runs none of its parent's threads)."""
        self._lock = threading.Lock()
        self._running: Counter[int] = Counter()

    def stuck(self, plugin: object) -> bool:
        with self._lock:
            return self._running[id(plugin)] >= MAX_LATE_CALLS

    def count(self, plugin: object) -> int:
        with self._lock:
            return self._running[id(plugin)]

    def begin(self, plugin: object) -> None:
        with self._lock:
            self._running[id(plugin)] += 1

    def end(self, plugin: object) -> None:
        with self._lock:
            self._running[id(plugin)] -= 1
            if self._running[id(plugin)] <= 0:
                del self._running[id(plugin)]


LATE = _LateCalls()
os.register_at_fork(after_in_child=LATE.forget)


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Skipped:
    """One implementation that gave nothing: it raised, or was still running at its deadline."""

    plugin: str
    hook: str
    why: Literal["raised", "late"]


@dataclass(frozen=True)
class Answer:
    """What one plugin's implementation returned (never None: a None says nothing and is left out, as pluggy does)."""

    plugin: str
    value: object


@dataclass(frozen=True)
class HookCall:
    """Every answer, per plugin in pluggy's call order, and every implementation skipped."""

    answers: list[Answer] = field(default_factory=list)
    skipped: list[Skipped] = field(default_factory=list)


def call_each(plugins: Plugins, hook: str, arguments: Mapping[str, Any], *,
              seconds: float = HOOK_SECONDS, go_on: Callable[[], bool] = _always) -> HookCall:
    """Call every enabled implementation of `hook` with the `arguments` it declares; nothing when there is none.

    `go_on` is asked before each implementation: once it says no (its Console is closing), none is called more.
    """
    outcome = HookCall()
    for impl in plugins.implementations(hook):
        if not go_on():
            break
        answered = call_one(impl, hook, arguments, seconds=seconds)
        if isinstance(answered, Skipped):
            outcome.skipped.append(answered)
        elif answered is not None:
            outcome.answers.append(Answer(impl.plugin_name, answered))
    return outcome


def call_one(impl: HookImpl, hook: str, arguments: Mapping[str, Any], *,
             seconds: float = HOOK_SECONDS) -> object | Skipped:
    """One implementation's answer (None: it had nothing to say), or `Skipped` when it raised or was late.

    For a caller that chains a hook (each `after_toolcall` handed what the previous one left) with
    `Plugins.implementations`. The implementation gets its own deep copy of each argument it declares:
    changing what it was handed in place, now or from a thread it left running, changes nothing of the
    Console's.
    """
    if LATE.stuck(impl.plugin):
        log.warning("the plugin %s still runs %d calls past their deadline; %s skipped at once",
                    impl.plugin_name, MAX_LATE_CALLS, hook)
        return Skipped(impl.plugin_name, hook, "late")
    given = {name: copy.deepcopy(arguments[name]) for name in impl.argnames}
    call = _Call(impl.plugin)
    try:
        answered = Deadline(seconds).call(lambda: call.run(lambda: impl.function(**given)), abandon=_ignore)
    except DeadlinePassed:
        call.given_up()
        log.warning("the plugin %s took longer than %g s in %s; skipped", impl.plugin_name, seconds, hook)
        return Skipped(impl.plugin_name, hook, "late")
    if isinstance(answered, _Raised):
        log.warning("the plugin %s raised %s in %s; skipped", impl.plugin_name, answered.kind, hook)
        return Skipped(impl.plugin_name, hook, "raised")
    return answered


@dataclass(frozen=True)
class _Raised:
    """An implementation raised, whatever it raised: an Exception, and its own SystemExit, KeyboardInterrupt,
    GeneratorExit or bare BaseException too. Caught on the worker thread it ran on, where no signal is delivered:
    none of them is the Console's (a Ctrl-C reaches the main thread, and still ends a caller waiting there), and
    re-raised on the caller's thread they would end the request, or a server's worker, past every audit line."""

    kind: str  # the type's name, for the log; never the exception, which may hold what the plugin was handed


class _Call:
    """One implementation's call: counted among its plugin's late calls from its deadline until it ends."""

    def __init__(self, plugin: object) -> None:
        self._plugin = plugin
        self._lock = threading.Lock()
        self._ended = False
        self._late = False

    def run(self, function: Callable[[], object]) -> object:
        try:
            return function()
        except BaseException as err:  # any kind: see `_Raised`
            return _Raised(type(err).__name__)
        finally:
            with self._lock:
                self._ended = True
                if self._late:
                    LATE.end(self._plugin)

    def given_up(self) -> None:
        with self._lock:
            if not self._ended:
                self._late = True
                LATE.begin(self._plugin)


def _ignore(_value: object) -> None:
    """What a late implementation returns when it ends is dropped: its answer came too late to count."""
