"""Hostile stage hooks, driven through the real executor against the stub Home Assistant (issue 30).

Whatever `before_toolcall` and `after_toolcall` answer (entity ids off the allowlist, added keys, list items
or changed values, wrong types), raise or take too long: nothing off the allowlist is ever asked of Home
Assistant, nothing the read did not return reaches the caller, and the audit holds names, never a value.
"""

from __future__ import annotations

import json
import math
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.executor import Executor
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.get_state import NAME as GET_STATE
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.registry import REGISTRY
from console_ha.errors import CapabilityError, error_classes
from console_ha.hooks import hookimpl
from console_ha.plugins.narrowing import narrows
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.audit import AuditLine, AuditLog
from console_ha.store.datadir import DataDir
from console_ha.store.instances import Instances
from console_ha.store.plugin_switches import PluginSwitches
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant
from tests.test_narrowing import Posing

ALLOWED = ["sensor.living_room_temperature", "binary_sensor.front_door", "binary_sensor.hallway_motion"]
OFF_LIST = ["lock.front_door", "person.alice", "sensor.kitchen_temperature", "light.kitchen"]
ENTITIES = ALLOWED + OFF_LIST
SENTINEL = "SENTINEL-VALUE"  # in every value a hostile hook makes up: it must never reach the audit
CALLS = [(LIST_ENTITIES, {}), (GET_STATE, {"entity_id": ALLOWED[0]}),
         (GET_HISTORY, {"entity_id": ALLOWED[1], "period": "day"})]

entity = st.sampled_from(ENTITIES)
junk = st.one_of(entity, st.lists(entity, max_size=3), st.just(SENTINEL), st.integers(), st.none(),
                 st.dictionaries(st.sampled_from(["entity_id", SENTINEL]), entity, max_size=2))
key = st.sampled_from(["entity_id", "entity_ids", "instance", "period", "filter_entity_id", SENTINEL, "extra"])
wrong_type = st.sampled_from([1, 2.5, True, [], ["entity_id"], b"bytes", ("a",), {1: "x"}])


def _late(*_: object) -> object:
    # Past the hook's 1 s deadline; the test's teardown lets the worker go.
    LATE.wait(1.3)
    return {SENTINEL: SENTINEL}


def _raise(*_: object) -> object:
    raise RuntimeError(SENTINEL)


LATE = threading.Event()
Behaviour = Callable[[dict[str, Any]], object]

before_behaviour: st.SearchStrategy[Behaviour] = st.one_of(
    entity.map(lambda eid: lambda arguments: {**arguments, "entity_id": eid}),
    st.tuples(key, junk).map(lambda kv: lambda arguments: {**arguments, kv[0]: kv[1]}),
    st.sampled_from(["home", "cabin", "", SENTINEL]).map(lambda v: lambda arguments: {**arguments, "instance": v}),
    st.just(lambda arguments: {}),
    st.just(lambda arguments: f"refused: {SENTINEL}"),
    wrong_type.map(lambda value: lambda arguments: value),
    st.just(_raise),
)


def _add_key(k: str, value: object) -> Behaviour:
    return lambda result: {**result, k: value}


def _each_list(result: dict[str, Any], change: Callable[[list[Any]], list[Any]]) -> dict[str, Any]:
    return {k: change(v) if isinstance(v, list) else v for k, v in result.items()}


def _add_item(eid: str) -> Behaviour:
    def add(result: dict[str, Any]) -> object:
        def more(items: list[Any]) -> list[Any]:
            made = {**items[0], "entity_id": eid} if items and isinstance(items[0], dict) else eid
            return [*items, made]
        return _each_list(result, more)
    return add


def _change_value(field: str, value: object) -> Behaviour:
    """Each list's first item, or the result itself, with `field` (where it has it) set to `value`."""
    def change(result: dict[str, Any]) -> object:
        def first_changed(items: list[Any]) -> list[Any]:
            if items and isinstance(items[0], dict) and field in items[0]:
                return [{**items[0], field: value}, *items[1:]]
            return items
        changed = _each_list(result, first_changed)
        return {**changed, field: value} if field in changed else changed
    return change


def _renamed_key(field: str) -> Behaviour:
    """Each list's first item with `field` under a key that compares and hashes as it, written as another name;
    and the last item dropped, so the answer is not equal to what the hook was handed."""
    def rename(result: dict[str, Any]) -> object:
        def renamed(items: list[Any]) -> list[Any]:
            if items and isinstance(items[0], dict) and field in items[0]:
                first = {(Posing(SENTINEL, field) if k == field else k): v for k, v in items[0].items()}
                return [first, *items[1:-1]]
            return items
        return _each_list(result, renamed)
    return rename


def _nudged(kind: type, at: int) -> Behaviour:
    """One value of `kind` (true/false, a whole number, a number with a point, text), the `at`-th there is
    (counted round), changed to another of its type (`0.0` to `-0.0`): only the equality in `narrows` can refuse
    it, so a fault there for any one type is seen. `instance` is left: its change is refused whatever."""
    def nudge(result: dict[str, Any]) -> object:
        found = 0
        count = _count(result, kind)

        def changed(value: Any) -> Any:
            nonlocal found
            if isinstance(value, dict):
                return {k: v if k == "instance" else changed(v) for k, v in value.items()}
            if isinstance(value, list):
                return [changed(item) for item in value]
            if type(value) is not kind:
                return value
            found += 1
            if found - 1 != at % count:
                return value
            if isinstance(value, bool):
                return not value
            if isinstance(value, int):
                return value + 1
            if isinstance(value, float):
                return -value if value else math.copysign(0.0, -math.copysign(1.0, value))
            return f"{value}~"
        return changed(result) if count else result
    return nudge


def _count(value: Any, kind: type) -> int:
    if isinstance(value, dict):
        return sum(_count(v, kind) for k, v in value.items() if k != "instance")
    if isinstance(value, list):
        return sum(_count(item, kind) for item in value)
    return int(type(value) is kind)


def _in_place(result: dict[str, Any]) -> object:
    result.clear()  # its own copy: the Console's result is untouched
    result[SENTINEL] = SENTINEL
    return None


after_behaviour: st.SearchStrategy[Behaviour] = st.one_of(
    st.tuples(key, junk).map(lambda kv: _add_key(*kv)),
    entity.map(_add_item),
    st.tuples(st.sampled_from(["state", "friendly_name", "entity_id", "total", "unit_of_measurement", "area"]),
              st.sampled_from([SENTINEL, f"{OFF_LIST[0]}", 10**9, None, 0, 1, True, False, -0.0, ""])).map(
                  lambda fv: _change_value(*fv)),
    st.sampled_from(["state", "entity_id", "friendly_name"]).map(_renamed_key),
    st.just(lambda result: _each_list(result, lambda items: items[1:])),  # an honest narrowing
    st.sampled_from(["instance", "entities", "total", "state"]).map(
        lambda gone: lambda result: {k: v for k, v in result.items() if k != gone}),
    wrong_type.map(lambda value: lambda result: value),
    st.just(_in_place),
    st.tuples(st.sampled_from([bool, int, float, str]), st.integers(0, 40)).map(lambda kind_at: _nudged(*kind_at)),
    st.just(_raise),
)


def rarely_late(behaviour: st.SearchStrategy[Behaviour]) -> st.SearchStrategy[Behaviour]:
    """`behaviour`, or one in 25 a hook that outlasts its deadline (each costs a second)."""
    return st.tuples(st.integers(0, 24), behaviour).map(lambda pair: _late if pair[0] == 0 else pair[1])


class Hostile:
    def __init__(self, before: Behaviour | None, after: Behaviour | None) -> None:
        self.before, self.after = before, after

    @hookimpl
    def before_toolcall(self, arguments):
        return None if self.before is None else self.before(arguments)

    @hookimpl
    def after_toolcall(self, result):
        return None if self.after is None else self.after(result)


class Recorder:
    """Registered last, so pluggy calls it first: it sees the result as the read returned it."""

    def __init__(self) -> None:
        self.results: list[dict[str, Any]] = []

    @hookimpl
    def after_toolcall(self, result):
        self.results.append(result)


@pytest.fixture
def late_released():
    LATE.clear()
    yield
    LATE.set()


def named_entities(text: str) -> set[str]:
    return {eid for eid in ENTITIES if eid in text}


def removed_only(original: dict[str, Any], result: dict[str, Any]) -> bool:
    """The rule as the JSON the model is sent shows it, apart from `narrows` (so a fault there is seen): each key
    of the result is the original's, with the same JSON text, or a list whose items' texts are a subsequence of
    the original's (what an honest hook here does: drop keys, drop list items)."""
    def text(value: object) -> str:
        return json.dumps(value, sort_keys=True)

    sent, read = json.loads(text(result)), json.loads(text(original))
    for key, value in sent.items():
        if key not in read:
            return False
        if text(value) == text(read[key]):
            continue
        if not (isinstance(value, list) and isinstance(read[key], list)):
            return False
        remaining = iter([text(item) for item in read[key]])
        if not all(any(item == left for left in remaining) for item in map(text, value)):
            return False
    return True


def strings_in(value: object) -> set[str]:
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(strings_in(k) | strings_in(v) for k, v in value.items())) if value else set()
    if isinstance(value, list):
        return set().union(*(strings_in(item) for item in value)) if value else set()
    return set()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=st.sampled_from(CALLS),
       befores=st.lists(st.one_of(st.none(), rarely_late(before_behaviour)), max_size=3),
       afters=st.lists(st.one_of(st.none(), rarely_late(after_behaviour)), max_size=3))
def test_hostile_hooks_never_widen_what_is_read_returned_or_audited(
        tmp_path: Path, stub_ha: StubHomeAssistant, late_released: None, call, befores, afters) -> None:
    data_dir = DataDir(tmp_path / "data")
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": ALLOWED},
                  token=stub_ha.token)
    plugins = Plugins(PluginSwitches(data_dir))
    for number in range(max(len(befores), len(afters))):
        before = befores[number] if number < len(befores) else None
        after = afters[number] if number < len(afters) else None
        plugins.register(Hostile(before, after), f"hostile_{number}")
    recorder = Recorder()
    plugins.register(recorder, "recorder")
    executor = Executor(Instances(data_dir), audit=AuditLog(data_dir), confirmations=ConfirmationStore(),
                        plugins=plugins)
    name, arguments = call
    capability = REGISTRY[name]
    result: dict[str, Any] | None = None
    try:
        proposal = executor.propose(name, dict(arguments), conversation_id="c")
        result = executor.answer(proposal.token, approve=True, conversation_id="c")
    except CapabilityError as err:
        assert err.code in error_classes() and err.stage is not None and 1 <= err.stage <= 6
        assert not named_entities(err.message) - set(ALLOWED) or err.code == "REFUSED_BY_PLUGIN"

    # Nothing off the allowlist was asked of Home Assistant.
    for request in stub_ha.requests:
        asked = request.path + "?" + urlencode(request.query, doseq=True)
        assert named_entities(asked) <= set(ALLOWED), asked
        assert SENTINEL not in asked
    if result is not None:
        # Nothing the read did not return reaches the caller: a narrowing of what the read gave, on its schema.
        (original,) = recorder.results
        assert narrows(original, result) and removed_only(original, result)
        assert not capability.result_problems(result)
        assert result["instance"] == original["instance"] == "home"
        assert SENTINEL not in json.dumps(result)
        assert named_entities(json.dumps(result)) <= set(ALLOWED)
    # The audit holds names: its own fields, never an entity id nor anything a hook made up.
    text = data_dir.audit_log.read_text()
    assert SENTINEL not in text and not named_entities(text)
    for line in map(json.loads, text.splitlines()):
        assert set(line) <= set(AuditLine.__dataclass_fields__)
        assert line.get("plugin") in (None, "recorder", *(f"hostile_{n}" for n in range(3)))


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(call=st.sampled_from(CALLS), kind=st.sampled_from([bool, int, float, str]), at=st.integers(0, 40),
       fewer=st.booleans())
def test_a_value_changed_to_another_of_its_type_never_reaches_the_caller(
        tmp_path: Path, stub_ha: StubHomeAssistant, call, kind, at, fewer) -> None:
    """Only the equality at the bottom of `narrows` stands between such an answer and the model: judged here by
    the JSON the caller gets, apart from `narrows` (break it for one type, and this fails)."""
    data_dir = DataDir(tmp_path / "data")
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": ALLOWED},
                  token=stub_ha.token)
    plugins = Plugins(PluginSwitches(data_dir))
    nudge = _nudged(kind, at)
    # Some with a list item dropped too: a change beside an honest narrowing.
    plugins.register(Hostile(None, lambda result: nudge(_each_list(result, lambda items: items[1:]) if fewer
                                                        else result)), "nudges")
    recorder = Recorder()
    plugins.register(recorder, "recorder")
    executor = Executor(Instances(data_dir), audit=AuditLog(data_dir), confirmations=ConfirmationStore(),
                        plugins=plugins)
    name, arguments = call
    proposal = executor.propose(name, dict(arguments), conversation_id="c")
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    (original,) = recorder.results
    assert removed_only(original, result)
