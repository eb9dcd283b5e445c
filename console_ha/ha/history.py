"""One entity's history from Home Assistant: asked over the WebSocket or REST, read as it streams, digested.

The pieces: `json_stream` reads the answer as it arrives, `history_rows` decodes each layout's rows and
`history_digest` folds them into 50 points and a summary.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

import ijson

from console_ha.errors import HABadResponse, HANotFound
from console_ha.ha.addresses import is_entity_id
from console_ha.ha.history_digest import DEFAULT_MAX_CHANGES, MAX_CHANGES, MAX_REPORTED_STATES, Digester
from console_ha.ha.history_result import (
    Change,
    HistoryDigest,
    InitialState,
    NumericSummary,
    OtherStates,
    StatesSummary,
    StateTime,
)
from console_ha.ha.history_rows import Row, invalid_json, rest_rows, ws_row_batches
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.websocket import HISTORY_COMMAND, HomeAssistantWebSocket
from console_ha.timestamps import utc_z_exact

__all__ = [
    "DEFAULT_MAX_CHANGES", "MAX_CHANGES", "MAX_REPORTED_STATES", "Change", "HistoryDigest", "InitialState",
    "NumericSummary", "OtherStates", "Row", "StateTime", "StatesSummary", "fetch_history", "fetch_history_ws",
    "history_command", "history_params",
]


def history_params(entity_id: str, *, start: datetime, end: datetime) -> tuple[str, dict[str, str]]:
    """The REST path and query string for one entity's minimal history in [start, end)."""
    if not is_entity_id(entity_id):
        raise ValueError("entity_id must look like domain.object_id")
    return f"/api/history/period/{utc_z_exact(start)}", {
        "filter_entity_id": entity_id,
        "end_time": utc_z_exact(end),
        "minimal_response": "",
        "no_attributes": "",
    }


def history_command(entity_id: str, *, start: datetime, end: datetime) -> dict[str, Any]:
    """The WebSocket command for the same history as history_params asks of REST."""
    if not is_entity_id(entity_id):
        raise ValueError("entity_id must look like domain.object_id")
    return {"type": HISTORY_COMMAND, "start_time": utc_z_exact(start), "end_time": utc_z_exact(end),
            "entity_ids": [entity_id], "minimal_response": True, "no_attributes": True}


def fetch_history(client: HomeAssistantClient, entity_id: str, *, start: datetime, end: datetime,
                  timeout: float, max_bytes: int, max_changes: int = DEFAULT_MAX_CHANGES,
                  unit: str | None = None) -> HistoryDigest:
    """Ask Home Assistant's REST API for one entity's history in [start, end) and digest it as it streams in."""
    path, params = history_params(entity_id, start=start, end=end)
    digester = Digester(start=start, end=end, max_changes=max_changes, unit=unit)
    failure: HABadResponse | None = None
    try:
        with client.stream(path, params=params, timeout=timeout, max_bytes=max_bytes) as body:
            digester.add(rest_rows(body, entity_id))
    except HANotFound:
        return Digester(start=start, end=end, max_changes=max_changes, unit=unit).finish()
    except ijson.JSONError:
        failure = invalid_json()
    if failure is not None:
        raise failure  # outside the except block: ijson's error quotes the body, which is household data
    return digester.finish()


def fetch_history_ws(connection: HomeAssistantWebSocket, entity_id: str, *, start: datetime, end: datetime,
                     max_changes: int = DEFAULT_MAX_CHANGES, unit: str | None = None) -> HistoryDigest:
    """The same digest from one request/response over Home Assistant's WebSocket (compressed rows)."""
    command = history_command(entity_id, start=start, end=end)
    digester = Digester(start=start, end=end, max_changes=max_changes, unit=unit)
    failure: HABadResponse | None = None
    try:
        message_id, chunks = connection.stream(command)
        for rows in ws_row_batches(chunks, entity_id, message_id):
            digester.add(rows)
    except ijson.JSONError:
        failure = invalid_json()
    if failure is not None:
        raise failure  # outside the except block, as above
    return digester.finish()
