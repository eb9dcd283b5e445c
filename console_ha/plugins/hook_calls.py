"""Calling the household's hook implementations one at a time, each within its own deadline.

Not `pm.hook.name(...)`: pluggy's own call runs every implementation on the caller's thread, stops at the
first one that raises (the others never run) and has no deadline, so one slow or broken plugin would hold
or end a read. Here each implementation runs on a worker thread of `console_ha/deadline.py` with 1 s; one
that raises or is late is skipped, and the caller gets a `Skipped` to record in Activity.
"""

from __future__ import annotations

import copy
import logging
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
    given = {name: copy.deepcopy(arguments[name]) for name in impl.argnames}

    def run() -> object:
        try:
            return impl.function(**given)
        except BaseException as err:  # any kind: see `_Raised`
            return _Raised(type(err).__name__)

    try:
        answered = Deadline(seconds).call(run, abandon=_ignore)
    except DeadlinePassed:
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


def _ignore(_value: object) -> None:
    """What a late implementation returns when it ends is dropped: its answer came too late to count."""
