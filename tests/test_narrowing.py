"""A plugin's result may only lose keys and list items: `narrows` against hostile candidates (hypothesis)."""

from __future__ import annotations

import itertools
import json
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.plugins.narrowing import is_arguments, narrows

SCALARS = st.none() | st.booleans() | st.integers(-3, 3) | st.floats(-3, 3, allow_nan=False) | st.text(max_size=3)
KEYS = st.text(alphabet="abcdef", min_size=1, max_size=2)
JSON = st.recursive(SCALARS, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(KEYS, inner, max_size=4),
                    max_leaves=14)


def reference(original: Any, candidate: Any) -> bool:
    """The rule by brute force: some choice of kept keys and kept list positions makes the candidate."""
    if type(candidate) is not type(original):
        return False
    if isinstance(original, dict):
        return set(candidate) <= set(original) and all(reference(original[k], v) for k, v in candidate.items())
    if isinstance(original, list):
        return any(all(reference(original[i], item) for i, item in zip(kept, candidate, strict=True))
                   for kept in itertools.combinations(range(len(original)), len(candidate)))
    return bool(candidate == original) and repr(candidate) == repr(original)  # 0.0 and -0.0 are written apart


def narrowing(draw: st.DrawFn, original: Any) -> Any:
    """A true narrowing of `original`: keys and items dropped at random, at every depth."""
    if isinstance(original, dict):
        kept = draw(st.lists(st.sampled_from(sorted(original)), unique=True)) if original else []
        return {key: narrowing(draw, original[key]) for key in kept}
    if isinstance(original, list):
        kept = sorted(draw(st.sets(st.integers(0, len(original) - 1)))) if original else []
        return [narrowing(draw, original[i]) for i in kept]
    return original


def hostile(draw: st.DrawFn, value: Any) -> Any:
    """`value` with one widening or change somewhere inside it (at a depth the draw picks)."""
    if isinstance(value, dict | list) and value and draw(st.booleans()):
        if isinstance(value, dict):
            key = draw(st.sampled_from(sorted(value)))
            return {**value, key: hostile(draw, value[key])}
        at = draw(st.integers(0, len(value) - 1))
        return [*value[:at], hostile(draw, value[at]), *value[at + 1:]]
    return draw(st.sampled_from(_MUTATIONS))(draw, value)


def _added_key(draw: st.DrawFn, value: Any) -> Any:
    return {**value, draw(KEYS): draw(JSON)} if isinstance(value, dict) else [value]


def _added_item(draw: st.DrawFn, value: Any) -> Any:
    if not isinstance(value, list):
        return {"x": value}
    at = draw(st.integers(0, len(value)))
    return [*value[:at], draw(JSON), *value[at:]]


def _duplicated(draw: st.DrawFn, value: Any) -> Any:
    if not isinstance(value, list) or not value:
        return [value, value]
    at = draw(st.integers(0, len(value) - 1))
    return [*value[:at + 1], value[at], *value[at + 1:]]


def _reordered(draw: st.DrawFn, value: Any) -> Any:
    if isinstance(value, list) and len(value) > 1:
        return list(reversed(value))
    return draw(JSON)


def _changed(draw: st.DrawFn, value: Any) -> Any:
    return draw(JSON.filter(lambda other: not (type(other) is type(value) and other == value)))


def _type_changed(draw: st.DrawFn, value: Any) -> Any:
    swaps = {bool: int, int: float, float: str, str: lambda v: [v], type(None): lambda v: False,
             list: tuple, dict: lambda v: list(v.values())}
    return swaps[type(value)](value)  # type: ignore[operator]


def _nested(draw: st.DrawFn, value: Any) -> Any:
    return draw(st.sampled_from([[value], {"deeper": value}, [[value]]]))


_MUTATIONS = [_added_key, _added_item, _duplicated, _reordered, _changed, _type_changed, _nested]


@st.composite
def originals_and_narrowings(draw: st.DrawFn) -> tuple[Any, Any]:
    original = draw(JSON)
    return original, narrowing(draw, original)


@st.composite
def originals_and_hostile(draw: st.DrawFn) -> tuple[Any, Any]:
    original = draw(JSON)
    return original, hostile(draw, narrowing(draw, original))


@given(originals_and_narrowings())
@settings(max_examples=400)
def test_a_true_narrowing_always_passes(case: tuple[Any, Any]) -> None:
    original, candidate = case
    assert narrows(original, candidate)


@given(originals_and_hostile())
@settings(max_examples=1500, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_a_hostile_candidate_passes_only_when_it_is_still_a_true_narrowing(case: tuple[Any, Any]) -> None:
    """A changed candidate can happen to be a narrowing still (an added item equal to one dropped): the
    brute-force rule says which; `narrows` agrees with it on every one."""
    original, candidate = case
    assert narrows(original, candidate) == reference(original, candidate)


@given(JSON, st.data())
@settings(max_examples=400, suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much])
def test_a_widening_at_the_top_never_passes(original: Any, data: st.DataObject) -> None:
    """Nothing can make these a narrowing: another type, more nesting, a changed scalar, a key the original lacks."""
    scalar = not isinstance(original, dict | list)
    mutation = data.draw(st.sampled_from([_type_changed, _nested, *([_changed] if scalar else [])]))
    assert not narrows(original, mutation(data.draw, original))
    if isinstance(original, dict):
        key = data.draw(KEYS.filter(lambda k: k not in original))
        assert not narrows(original, {**original, key: None})


@pytest.mark.parametrize(("original", "candidate", "expected"), [
    (1, True, False), (True, 1, False), (1, 1.0, False), (1.0, 1, False), (0, False, False), ("1", 1, False),
    (None, "", False), (None, None, True),
    ({"a": 1, "b": [1, 2]}, {"b": [2]}, True),
    ({"a": 1}, {"a": 1, "b": 2}, False),
    ([1, 2, 3], [1, 3], True), ([1, 2, 3], [3, 1], False), ([1, 2], [1, 1], False), ([1], [1, 1], False),
    ([{"a": 1, "b": 2}, {"a": 1}], [{"a": 1}, {"a": 1, "b": 2}], False),
    ([{"a": 1, "b": 2}, {"a": 1}], [{"a": 1}, {"a": 1}], True),
    ([[1, 2]], [[2, 1]], False), ({"a": [1]}, {"a": (1,)}, False), ([1], (1,), False),
    (0.0, -0.0, False), (-0.0, 0.0, False), ({"t": [0.0]}, {"t": [-0.0]}, False), (-0.0, -0.0, True),
], ids=repr)
def test_the_rule_on_cases_written_out(original: Any, candidate: Any, expected: bool) -> None:
    assert narrows(original, candidate) is expected


def test_a_subclass_answering_equal_to_everything_is_refused() -> None:
    class Agreeable(dict):  # type: ignore[type-arg]
        def __eq__(self, other: object) -> bool:
            return True

        __hash__ = None  # type: ignore[assignment]

    assert not narrows({"a": 1}, Agreeable(a=1, secret=2))


class Posing(str):
    """Text that compares and hashes as `posing_as`, but is written (JSON, an f-string) as its own text."""

    def __new__(cls, text: str, posing_as: str) -> Posing:
        posing = super().__new__(cls, text)
        posing.posing_as = posing_as  # type: ignore[attr-defined]
        return posing

    def __eq__(self, other: object) -> bool:
        return other == self.posing_as  # type: ignore[attr-defined,no-any-return]

    def __ne__(self, other: object) -> bool:
        return not self == other

    def __hash__(self) -> int:
        return hash(self.posing_as)  # type: ignore[attr-defined]

    def __reduce_ex__(self, protocol: object) -> tuple[type[Posing], tuple[str, str]]:
        return Posing, (str.__str__(self), self.posing_as)  # type: ignore[attr-defined]


def test_a_key_posing_as_one_of_the_originals_is_refused() -> None:
    """A str subclass equal to `state` (and of its hash) is found in the original, but JSON writes its own text:
    the field would reach the model renamed."""
    renamed = {Posing("secret_state", "state"): "on"}
    assert renamed == {"state": "on"} and json.dumps(renamed) == '{"secret_state": "on"}'
    assert not narrows({"state": "on", "area": None}, renamed)
    assert narrows({"state": "on", "area": None}, {"state": "on"})


@pytest.mark.parametrize(("value", "expected"), [
    ({"entity_id": "sensor.kitchen"}, True), ({}, True), ({1: "x"}, False), ([("entity_id", "x")], False),
    ("no reads at night", False), (None, False),
    ({"entity_id": Posing("lock.front_door", "sensor.kitchen")}, False),
    ({"entity_ids": ["sensor.kitchen", Posing("lock.front_door", "sensor.kitchen")]}, False),
    ({"filter": {"area": Posing("x", "y")}}, False), ({"limit": float("nan")}, False), ({"limit": (1,)}, False),
    ({"a": {"b": [1, 2.5, None, True, "c"]}}, True), ({"a": {1: "x"}}, False),
])
def test_arguments_a_hook_returns_are_a_dict_with_text_keys(value: object, expected: bool) -> None:
    assert is_arguments(value) is expected


def test_a_hostile_answer_to_a_large_result_is_judged_at_once() -> None:
    """Each original item is compared with one candidate item at most: a reversed 5000-item list costs 5000
    comparisons (a search over every choice of kept items would not end)."""
    original = [{"entity_id": f"sensor.s{i}", "state": str(i)} for i in range(5000)]
    assert not narrows(original, original[::-1])
    assert narrows(original, original[::2])
