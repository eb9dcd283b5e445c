"""What the two capabilities do once approved: read Home Assistant and narrow what comes back."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from typing import Any

from console_ha.capabilities.entity_budget import CAP_LEVELS, TextCaps, entry, json_size
from console_ha.capabilities.registry import GET_HISTORY, LIST_ENTITIES, LIST_ENTITIES_CAPABILITY
from console_ha.deadline import Deadline
from console_ha.errors import HABadResponse
from console_ha.ha.client import UNAVAILABLE_STATES, HomeAssistantClient
from console_ha.ha.history import HistoryDigest, fetch_history, fetch_history_ws
from console_ha.ha.websocket import WebSocketUnsupported
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

# Home Assistant's own bodies may be far larger than a result; they are capped separately.
# 32 MiB is about 70,000 entities, ten times a large household's; parsing it costs a few hundred MiB.
MAX_STATES_BYTES = 32 * 1024 * 1024
MAX_STATE_BYTES = 1024 * 1024
MAX_HISTORY_BYTES = 512 * 1024 * 1024
PERIOD_LENGTHS = {"hour": timedelta(hours=1), "day": timedelta(days=1), "week": timedelta(weeks=1)}




def _text(value: object) -> str | None:
    return value if isinstance(value, str) else None


def narrow_state(state: Mapping[str, Any], caps: TextCaps = CAP_LEVELS[0]) -> dict[str, Any]:
    """The fields a conversation needs from one Home Assistant state, each within `caps`; no raw attributes."""
    attributes = state.get("attributes")
    if not isinstance(attributes, Mapping):
        attributes = {}
    value = str(state.get("state", ""))
    return entry(
        state["entity_id"],
        name=_text(attributes.get("friendly_name")),
        state=value,
        unit=_text(attributes.get("unit_of_measurement")),
        last_changed=state.get("last_changed"),
        unavailable=value in UNAVAILABLE_STATES,
        caps=caps,
    )


def list_entities(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
                  deadline: Deadline, now: datetime) -> dict[str, Any]:
    """The current state of every allowlisted entity, and which allowlisted ones Home Assistant lacks."""
    wanted = set(config.allowlisted_entities)
    states = client.states(timeout=deadline.remaining(), max_bytes=MAX_STATES_BYTES)
    deadline.remaining()  # parsing a large body takes time too: past the bound is a timeout, not a result
    found: dict[str, Mapping[str, Any]] = {}
    for state in states:
        entity_id = state.get("entity_id")
        if entity_id in wanted:
            found[entity_id] = state
    present = [e for e in config.allowlisted_entities if e in found]
    result: dict[str, Any] = {}
    # Names and states are cut no further than this result needs: the roomiest level that fits. The
    # tightest always fits an allowlist a save accepted (entity_budget.check_fits).
    for caps in CAP_LEVELS:
        result = {
            "entities": [narrow_state(found[e], caps) for e in present],
            "missing_entities": [e for e in config.allowlisted_entities if e not in found],
            "retrieved_at": utc_z(now),
        }
        if json_size(result) <= LIST_ENTITIES_CAPABILITY.bounds.max_result_bytes:
            break
    # Still too large only for an allowlist saved before saves were checked; stage 6 refuses it.
    return result


def get_history(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
                deadline: Deadline, now: datetime) -> dict[str, Any]:
    """Up to 50 changes of one allowlisted entity over the period, with totals, time in each state and a summary."""
    entity_id = arguments["entity_id"]
    period = arguments["period"]
    # The entity's own state gives its name and unit, and a 404 for an entity Home Assistant lacks.
    state = client.state(entity_id, timeout=deadline.remaining())
    if state.get("entity_id") != entity_id:
        raise HABadResponse("Home Assistant answered for a different entity.")
    current = narrow_state(state)
    end = now
    start = end - PERIOD_LENGTHS[period]
    digest = read_history(client, entity_id, start=start, end=end, deadline=deadline,
                          unit=current["unit_of_measurement"])
    return {
        "entity_id": entity_id,
        "friendly_name": current["friendly_name"],
        "period": period,
        **digest.to_result(),
        "retrieved_at": utc_z(now),
    }


def read_history(client: HomeAssistantClient, entity_id: str, *, start: datetime, end: datetime,
                 deadline: Deadline, unit: str | None) -> HistoryDigest:
    """The history over one WebSocket request/response; over REST where Home Assistant offers no WebSocket.

    The WebSocket's compressed rows are about half the bytes of REST's and carry epoch times, so the read
    is faster at both ends (docs/benchmarks.md). REST is asked only when the WebSocket is not there (the
    upgrade refused, or the command unknown): a timeout, a refused token or a bad answer is the answer.
    """
    try:
        with client.websocket(timeout=deadline.remaining(), max_bytes=MAX_HISTORY_BYTES) as connection:
            return fetch_history_ws(connection, entity_id, start=start, end=end, unit=unit)
    except WebSocketUnsupported:
        pass
    return fetch_history(client, entity_id, start=start, end=end, timeout=deadline.remaining(),
                         max_bytes=MAX_HISTORY_BYTES, unit=unit)


EXECUTE = {LIST_ENTITIES: list_entities, GET_HISTORY: get_history}
