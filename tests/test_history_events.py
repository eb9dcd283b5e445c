"""The one event walk that reads history rows, REST and WebSocket: the rows it gives and the answers it refuses."""

from __future__ import annotations

import io
import json
from typing import Any

import ijson
import pytest

from console_ha.errors import HABadResponse
from console_ha.ha import history_rows

ENTITY = "sensor.x"
T0 = "2025-04-01T00:00:00+00:00"
T0_MICROS = 1_743_465_600_000_000
OTHER_ENTITY = "Home Assistant answered with the history of another entity."
MALFORMED = "Home Assistant's history had a row without a state or a valid time."
WRONG_SHAPE = "Home Assistant answered the history request with something other than a history."


def rest(body: Any) -> list[history_rows.Row]:
    return list(history_rows.rest_rows(io.BytesIO(json.dumps(body).encode()), ENTITY))


def ws(rows: Any, **envelope: Any) -> list[history_rows.Row]:
    message = {"id": 1, "type": "result", "success": True, "result": {ENTITY: rows}} | envelope
    return list(history_rows.ws_rows(ijson.basic_parse(io.BytesIO(json.dumps(message).encode()), use_float=True),
                                 ENTITY, 1))


@pytest.mark.parametrize(("body", "rows"), [
    ([[{"entity_id": ENTITY, "state": "on", "last_changed": T0, "attributes": {"a": [1, {"b": None}]}},
       {"state": "off", "last_changed": "2025-04-01T02:00:00+02:00"}]], [(T0_MICROS, "on"), (T0_MICROS, "off")]),
    ([[{"state": "on", "last_changed": "x", "last_changed": T0}]], [(T0_MICROS, "on")]),  # noqa: F601 (the last wins)
    ([[]], []),
    ([], []),
], ids=["rows-and-attributes", "repeated-key", "no-rows", "no-entity"])
def test_rest_rows(body: Any, rows: list[history_rows.Row]) -> None:
    assert rest(body) == rows


@pytest.mark.parametrize(("body", "message"), [
    ([[{"entity_id": "sensor.y", "state": "on", "last_changed": T0}]], OTHER_ENTITY),
    ([[{"entity_id": None, "state": "on", "last_changed": T0}]], OTHER_ENTITY),
    ([[{"state": "on", "": T0}]], MALFORMED),  # "" is a key like any other, never the time
    ([[{"state": "on", "last_changed": "2025-04-01T00:00:00"}]], MALFORMED),  # no offset
    ([[{"state": "on", "last_changed": 1743465600}]], MALFORMED),
    ([[{"state": 1, "last_changed": T0}]], MALFORMED),
    ([[{"state": {"on": 1}, "last_changed": T0}]], MALFORMED),
    ([[["on", T0]]], MALFORMED),
    ([["on"]], MALFORMED),
    ([[[[[[[[{}]]]]]]]], MALFORMED),
    ({"sensor.x": []}, WRONG_SHAPE),
    ([{"state": "on"}], WRONG_SHAPE),
    ([1], WRONG_SHAPE),
    (1, WRONG_SHAPE),
], ids=["other-entity", "null-entity", "empty-key", "naive-time", "number-time", "number-state", "object-state",
        "row-list", "row-string", "too-deep", "body-object", "list-of-rows", "list-of-numbers", "number"])
def test_rest_refusals(body: Any, message: str) -> None:
    with pytest.raises(HABadResponse) as caught:
        rest(body)
    assert caught.value.message == message


@pytest.mark.parametrize(("rows", "expected"), [
    ([{"s": "on", "lu": 1743465600}, {"s": "off", "lu": 1743465601.5, "lc": 1743465600.25}],
     [(T0_MICROS, "on"), (T0_MICROS + 250_000, "off")]),
    ([{"s": "on", "lc": None, "lu": 1743465600}], [(T0_MICROS, "on")]),  # a null `lc` falls back to `lu`
    ([{"s": "on", "lu": 1743465600, "": "sensor.y", "a": {"b": 1}}], [(T0_MICROS, "on")]),
    ([], []),
], ids=["lu-and-lc", "null-lc", "unknown-keys", "no-rows"])
def test_websocket_rows(rows: Any, expected: list[history_rows.Row]) -> None:
    assert ws(rows) == expected


@pytest.mark.parametrize(("rows", "envelope", "message"), [
    ([{"s": "on", "lu": True}], {}, MALFORMED),  # a bool is not a time
    ([{"s": "on", "lu": "1743465600"}], {}, MALFORMED),
    ([{"s": "on"}], {}, MALFORMED),
    ([{"s": None, "lu": 1743465600}], {}, MALFORMED),
    ([{"s": "on", "lu": 1743465600, "a": {"b": {"c": {"d": {}}}}}], {}, MALFORMED),  # too deep
    ([{"s": "on", "lu": 1743465600, "a": {"b": [1]}}], {}, WRONG_SHAPE),  # a value below the attributes
    (["on"], {}, WRONG_SHAPE),
    ([], {"id": 2}, WRONG_SHAPE),
    ([], {"type": "event"}, WRONG_SHAPE),
    ([], {"result": {ENTITY: [], "count": 1}}, WRONG_SHAPE),
    ([], {"result": {"sensor.y": []}}, OTHER_ENTITY),
    ([], {"result": [[]]}, WRONG_SHAPE),
], ids=["bool-time", "text-time", "no-time", "null-state", "too-deep", "below-attributes", "row-string", "other-id",
        "not-a-result",
        "value-in-result", "other-entity", "result-list"])
def test_websocket_refusals(rows: Any, envelope: dict[str, Any], message: str) -> None:
    with pytest.raises(HABadResponse) as caught:
        ws(rows, **envelope)
    assert caught.value.message == message


def test_a_failed_command_is_read_to_its_error_code() -> None:
    message = {"id": 1, "type": "result", "success": False, "error": {"code": "unknown_error", "message": "x"}}
    with pytest.raises(HABadResponse) as caught:
        list(history_rows.ws_rows(ijson.basic_parse(io.BytesIO(json.dumps(message).encode())), ENTITY, 1))
    assert caught.value.detail["reason"] == "command_failed"


@pytest.mark.parametrize("stamp", [1.7e308, -1.7e308, 1e303], ids=["largest-float", "most-negative", "1e303"])
def test_a_time_too_large_for_microseconds_is_a_malformed_row_on_both_websocket_paths(stamp: float) -> None:
    """A hostile or broken answer's time whose microseconds overflow a float is a bad row (HA_BAD_RESPONSE),
    not an OverflowError that the executor can only report as the Console's own INTERNAL_ERROR."""
    rows = [{"s": "on", "lu": 1743465600}, {"s": "off", "lu": stamp}]
    with pytest.raises(HABadResponse) as caught:
        ws(rows)
    assert caught.value.message == MALFORMED
    compact = json.dumps({"id": 1, "type": "result", "success": True, "result": {ENTITY: rows}},
                         separators=(",", ":")).encode()
    with pytest.raises(HABadResponse) as caught:
        for _ in history_rows.ws_row_batches(iter([compact]), ENTITY, 1):
            pass
    assert caught.value.message == MALFORMED
