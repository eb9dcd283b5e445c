"""One Home Assistant state as a result carries it: RFC-0018's fields, each text bounded, no raw attributes."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from console_ha.capabilities.entity_budget import CAP_LEVELS, TextCaps, entry
from console_ha.ha.rest_client import UNAVAILABLE_STATES


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
