"""One entity's logbook from Home Assistant: one `logbook/get_events` request, its entries read as they stream.

Home Assistant 2025.4.4 answers with one result message, `{"id", "type": "result", "success", "result":
[entry, ...]}`, each entry a flat object (`when` in epoch seconds, then `state` for a state change, or
`name`/`message`/`domain` for an event, and the context fields the logbook adds: `context_user_id`,
`context_event_type`, `context_domain`, `context_service`, `context_entity_id`, ...). The entries' keys vary
with their kind, so no fixed boundary can cut the array for orjson as history's compact rows are cut: the
answer goes through `json_stream.parse_events` (ijson's events, no prefixes kept, never held whole).
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime
from typing import Any

import ijson

from console_ha.errors import HABadResponse
from console_ha.ha.addresses import is_entity_id
from console_ha.ha.json_stream import parse_events
from console_ha.ha.websocket import LOGBOOK_COMMAND, HomeAssistantWebSocket, command_failed
from console_ha.timestamps import utc_z_exact

# The fields of an entry the Console reads; every other field (icons, context names and messages, which
# may name anything in the house) is dropped as it arrives and never kept.
ENTRY_FIELDS = frozenset({
    "when", "state", "entity_id", "domain", "message",
    "context_user_id", "context_event_type", "context_domain", "context_service", "context_entity_id",
    "context_name",
})
# The message, its result list, an entry, and room for a value an integration nests inside an entry.
MAX_DEPTH = 6
_ENTRY_DEPTH = 3


def logbook_command(entity_id: str, *, start: datetime, end: datetime) -> dict[str, Any]:
    """The WebSocket command for one entity's logbook in [start, end)."""
    if not is_entity_id(entity_id):
        raise ValueError("entity_id must look like domain.object_id")
    return {"type": LOGBOOK_COMMAND, "start_time": utc_z_exact(start), "end_time": utc_z_exact(end),
            "entity_ids": [entity_id]}


def fetch_logbook_ws(connection: HomeAssistantWebSocket, entity_id: str, *, start: datetime,
                     end: datetime) -> Iterator[dict[str, Any]]:
    """The entries of one entity's logbook, in Home Assistant's (time) order, each holding ENTRY_FIELDS only.

    A generator: the answer is read as the caller takes entries. The envelope (id, success) is checked when
    the message ends; an error answer raises the error its code names.
    """
    message_id, chunks = connection.stream(logbook_command(entity_id, start=start, end=end))
    failure: HABadResponse | None = None
    try:
        yield from _entries(parse_events(chunks), message_id)
    except ijson.JSONError:
        failure = invalid_json()
    if failure is not None:
        raise failure  # outside the except block: ijson's error quotes the answer, which is household data


def _entries(events: Iterator[tuple[str, Any]], message_id: int) -> Iterator[dict[str, Any]]:
    """The walk over the answer's parser events: plain values of each entry kept, the envelope checked."""
    depth = 0
    key = ""
    section = ""
    envelope: dict[str, Any] = {}
    error: dict[str, Any] = {}
    entry: dict[str, Any] = {}
    for event, item in events:
        if event == "map_key":
            key = item
        elif event in ("start_map", "start_array"):
            depth += 1
            if depth > MAX_DEPTH:
                raise wrong_shape()
            if depth == 1 and event != "start_map":
                raise wrong_shape()
            if depth == 2:
                section = key
                if (section, event) not in (("result", "start_array"), ("error", "start_map")):
                    raise wrong_shape()
            elif depth == _ENTRY_DEPTH and section == "result":
                if event != "start_map":
                    raise wrong_shape()
                entry = {}
        elif event in ("end_map", "end_array"):
            if depth == _ENTRY_DEPTH and section == "result":
                yield entry
            depth -= 1
        elif depth == 1:
            envelope[key] = item
        elif depth == 2 and section == "error":
            error[key] = item
        elif depth == _ENTRY_DEPTH and section == "result":
            if key in ENTRY_FIELDS:
                entry[key] = item
        elif depth < _ENTRY_DEPTH:
            raise wrong_shape()  # a plain value where the list or an entry belongs
        # Deeper: a value nested inside an entry, which the Console does not read.
    if envelope.get("id") != message_id or envelope.get("type") != "result":
        raise wrong_shape()
    if envelope.get("success") is not True:
        raise command_failed(str(error.get("code", "")))


def invalid_json() -> HABadResponse:
    return HABadResponse("Home Assistant's logbook could not be read as JSON.", reason="invalid_json")


def wrong_shape() -> HABadResponse:
    return HABadResponse("Home Assistant answered the logbook request with something other than a logbook.",
                         reason="wrong_shape")


def malformed() -> HABadResponse:
    return HABadResponse("Home Assistant's logbook had an entry without a valid time.", reason="wrong_shape")
