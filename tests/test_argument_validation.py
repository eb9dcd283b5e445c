"""Stage 2 runs the declared arguments schema (jsonschema), and answers in the same words as the rules it replaced."""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any

import pytest
from hypothesis import assume, given, settings
from hypothesis import strategies as st

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.spec import SchemaValidator, ecma_pattern
from console_ha.capabilities.stages import validate
from console_ha.errors import CapabilityError
from console_ha.unknown_keys import first_unknown

ENTITY_ID = re.compile(r"[a-z0-9_]+\.[a-z0-9_]+")
LIST_FILTERS = frozenset(REGISTRY[LIST_ENTITIES].arguments_schema["properties"])


def hand_written(name: str, arguments: object) -> tuple[str, Any]:
    """Stage 2 as it was written by hand before the schema ran it: ("ok", canonical) or ("refused", words)."""
    if arguments is None:
        arguments = {}
    if not isinstance(arguments, Mapping):
        return "refused", "Arguments must be an object."
    allowed = ["entity_id", "period"] if name == GET_HISTORY else []
    unexpected = first_unknown(arguments, allowed)
    if unexpected is not None:
        return "refused", f"Unexpected argument: {unexpected}."
    if name != GET_HISTORY:
        return "ok", {}
    entity_id, period = arguments.get("entity_id"), arguments.get("period")
    if not (isinstance(entity_id, str) and len(entity_id) <= 255 and ENTITY_ID.fullmatch(entity_id)):
        return "refused", "entity_id must look like domain.object_id, such as sensor.kitchen."
    if period not in ("hour", "day", "week"):
        return "refused", "period must be one of hour, day or week."
    return "ok", {"entity_id": entity_id, "period": period}


def by_the_schema(name: str, arguments: object) -> tuple[str, Any]:
    try:
        return "ok", validate(REGISTRY[name], arguments)
    except CapabilityError as err:
        assert (err.code, err.stage) == ("INVALID_ARGUMENTS", 2)
        return "refused", err.message


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.floats(allow_nan=False) | st.text(max_size=20),
    lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=8), inner, max_size=3),
    max_leaves=8,
)
entity_ids = st.one_of(
    st.sampled_from(["sensor.kitchen", "sensor.x\n", "Sensor.X", "sensor", "a.b.c", "sensor.x ", "\nsensor.x",
                     "sensor.k\u00fcche", "s." + "x" * 253, "s." + "x" * 254]),
    st.from_regex(r"\A[a-z0-9_.\n$]{0,12}\Z"),
    json_values,
)
periods = st.one_of(st.sampled_from(["hour", "day", "week", "Day", "day\n", "month", ""]), json_values)
argument_sets = st.one_of(
    json_values,
    st.fixed_dictionaries({}, optional={"entity_id": entity_ids, "period": periods,
                                        "start": json_values, "z" * 70: json_values}),
)


@settings(max_examples=600, deadline=None)
@given(name=st.sampled_from([LIST_ENTITIES, GET_HISTORY]), arguments=argument_sets)
def test_the_schema_refuses_and_accepts_exactly_as_the_hand_written_rules_did(name: str, arguments: object) -> None:
    """Same verdict, same canonical arguments, same words, for anything a model may send.

    The hand-written rules knew list_entities without arguments; its filters (issue 18) came with the schema
    alone, so arguments naming one of them have no hand-written verdict to compare with (their own tests are in
    tests/test_list_entities_filters.py).
    """
    assume(not (name == LIST_ENTITIES and isinstance(arguments, Mapping) and set(arguments) & LIST_FILTERS))
    assert by_the_schema(name, arguments) == hand_written(name, arguments)


BAD_ENTITY_ID = "entity_id must look like domain.object_id, such as sensor.kitchen."


@pytest.mark.parametrize(("arguments", "words"), [
    ({"entity_id": "sensor.x\n", "period": "day"}, BAD_ENTITY_ID),
    ({"entity_id": "sensor.x", "period": "day\n"}, "period must be one of hour, day or week."),
    ({"period": "month"}, BAD_ENTITY_ID),
    ({"entity_id": "sensor.x"}, "period must be one of hour, day or week."),
    ({"entity_id": 3, "period": "year", "start": 1}, "Unexpected argument: start."),
])
def test_the_first_fault_in_the_schemas_order_is_the_one_named(arguments: dict[str, Any], words: str) -> None:
    """A trailing newline is not an entity id (ECMA-262's `$`, not Python's); unknown keys come first."""
    assert by_the_schema(GET_HISTORY, arguments) == ("refused", words)


@pytest.mark.parametrize(("pattern", "python"), [
    (r"^[a-z]+$", r"^[a-z]+\Z"),
    (r"^a\$b$", r"^a\$b\Z"),
    (r"^[$]x$", r"^[$]x\Z"),
    (r"^[\]$]$", r"^[\]$]\Z"),
    (r"^(a|b$)c$", r"^(a|b\Z)c\Z"),
    (r"^\\$", r"^\\\Z"),
])
def test_a_pattern_ends_where_ecma_262_says(pattern: str, python: str) -> None:
    assert ecma_pattern(pattern) == python


def test_the_schema_checker_uses_ecma_262_dollar_everywhere() -> None:
    checker = SchemaValidator({"type": "string", "pattern": "^ab$"})
    assert checker.is_valid("ab") and not checker.is_valid("ab\n") and not checker.is_valid("abc")
