"""One Home Assistant state as a result carries it: RFC-0018's fields, each text bounded, no raw attributes.

`entity_state` reads one entity's own state, holding Home Assistant to that entity; `narrow_state` makes the fields,
and `ENTITY_SCHEMA` declares them with the entity's area, as a read that lists an entity returns it
(list_entities' items, get_state's own fields): declared here once, beside the code that makes them, so no read
borrows another's result schema.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from console_ha.capabilities.entity_budget import CAP_LEVELS, TextCaps, entry
from console_ha.capabilities.spec import ENTITY_ID_SCHEMA
from console_ha.deadline import Deadline
from console_ha.errors import HABadResponse
from console_ha.ha.rest_client import UNAVAILABLE_STATES, HomeAssistantClient

# The roomiest caps: what a result's text is cut to at most (a tighter level only cuts further).
_ROOMY = CAP_LEVELS[0]

ENTITY_SCHEMA: dict[str, Any] = {
    "type": "object",
    "required": ["entity_id", "friendly_name", "domain", "state", "unit_of_measurement",
                 "last_changed", "unavailable", "area"],
    "additionalProperties": False,
    "properties": {
        "entity_id": ENTITY_ID_SCHEMA,
        # Bytes bound the text; a character is at least one, so they bound its length too.
        # Text that was cut ends in "…".
        "friendly_name": {"type": "string", "maxLength": _ROOMY.name},
        "domain": {"type": "string", "pattern": r"^[a-z0-9_]+$"},
        "state": {"type": "string", "maxLength": _ROOMY.state},
        "unit_of_measurement": {"type": ["string", "null"], "maxLength": _ROOMY.unit},
        # to the second, in UTC; null when Home Assistant's state carries no readable time
        "last_changed": {"type": ["string", "null"], "format": "date-time",
                         "pattern": r"^\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ$"},
        "unavailable": {"type": "boolean"},
        # the name of the entity's area (its own before its device's); null for none
        "area": {"type": ["string", "null"], "maxLength": _ROOMY.area},
    },
}


def entity_state(client: HomeAssistantClient, entity_id: str, deadline: Deadline) -> dict[str, Any]:
    """One GET /api/states/<id>: the entity's state (a 404 for one Home Assistant lacks), and none other's."""
    state = client.state(entity_id, timeout=deadline.remaining())
    if state.get("entity_id") != entity_id:
        raise HABadResponse("Home Assistant answered for a different entity.")
    return state


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
