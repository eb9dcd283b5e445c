"""Calling the household's hook implementations one at a time, each within its own deadline.

Not `pm.hook.name(...)`: pluggy's own call runs every implementation on the caller's thread, stops at the
first one that raises (the others never run) and has no deadline, so one slow or broken plugin would hold
or end a read. Here each implementation runs on a worker thread of `console_ha/deadline.py` with 1 s; one
that raises or is late is skipped, and the caller gets a `Skipped` to record in Activity.
"""

from __future__ import annotations

import copy
import logging
import os
import threading
from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any, Literal

from pluggy import HookImpl

from console_ha.deadline import Deadline, DeadlinePassed
from console_ha.plugins.plugin_registry import Plugins

log = logging.getLogger(__name__)

HOOK_SECONDS = 1.0  # the contract's: a hook that takes longer is skipped


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
              seconds: float = HOOK_SECONDS) -> HookCall:
    """Call every enabled implementation of `hook` with the `arguments` it declares; nothing when there is none."""
    outcome = HookCall()
    for impl in plugins.implementations(hook):
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
    if OVERDUE.holds(impl):
        # Not called again while a call given up on still runs: one that never returns would hold one more
        # thread, and the read one more second, each time.
        log.warning("the plugin %s has not yet ended a call in %s it was late for; skipped", impl.plugin_name, hook)
        return Skipped(impl.plugin_name, hook, "late")
    given = {name: copy.deepcopy(arguments[name]) for name in impl.argnames}
    call = _Call()

    def run() -> object:
        try:
            return impl.function(**given)
        except BaseException as err:  # any kind: see `_Raised`
            return _Raised(type(err).__name__)
        finally:
            OVERDUE.ended(impl, call)

    try:
        answered = Deadline(seconds).call(run, abandon=_ignore)
    except DeadlinePassed:
        OVERDUE.given_up(impl, call)
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
    """One call of an implementation: whether it has ended, and whether its caller gave up on it (`_Overdue`)."""

    def __init__(self) -> None:
        self.ended = False
        self.given_up = False


class _Overdue:
    """The implementations with a call their caller gave up on (late) that is still running, by how many.

    Python cannot stop a thread: each such call keeps its worker thread until the plugin returns. While one
    runs, the implementation is skipped at once, so a plugin that never returns holds one thread, not one per
    read. Once it ends, the implementation is called again.
    """

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """Start afresh (a forked child runs none of its parent's threads)."""
        self._lock = threading.Lock()
        self._running: Counter[HookImpl] = Counter()  # a HookImpl is hashed by identity

    def holds(self, impl: HookImpl) -> bool:
        """Whether a call of `impl` given up on still runs."""
        with self._lock:
            return self._running[impl] > 0

    def given_up(self, impl: HookImpl, call: _Call) -> None:
        """Its caller gave up on `call` at its deadline: counted until it ends (unless it just has)."""
        with self._lock:
            if not call.ended:
                call.given_up = True
                self._running[impl] += 1

    def ended(self, impl: HookImpl, call: _Call) -> None:
        """`call` returned or raised, on time or not."""
        with self._lock:
            call.ended = True
            if call.given_up:
                self._running[impl] -= 1
                if self._running[impl] <= 0:
                    del self._running[impl]


# The process's: the calls given up on run on threads of the process's `deadline.WORKERS`.
OVERDUE = _Overdue()
os.register_at_fork(after_in_child=OVERDUE.forget)


def _ignore(_value: object) -> None:
    """What a late implementation returns when it ends is dropped: its answer came too late to count."""
