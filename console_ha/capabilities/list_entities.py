"""home_assistant.list_entities: the current state of every entity the household allowed, in one read."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from console_ha.capabilities.cards import Card, leaves_device
from console_ha.capabilities.entity_budget import CAP_LEVELS, MAX_RESULT_BYTES, json_size
from console_ha.capabilities.narrow import narrow_state
from console_ha.capabilities.spec import ENTITY_ID_SCHEMA, TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.deadline import Deadline
from console_ha.ha.client import ALL_ENTITIES_MAX_BYTES, HomeAssistantClient
from console_ha.ha.reads import Reads
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

NAME = "home_assistant.list_entities"


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime) -> dict[str, Any]:
    """The current state of every allowlisted entity, and which allowlisted ones Home Assistant lacks."""
    wanted = set(config.allowlisted_entities)
    states = client.states(timeout=deadline.remaining(), max_bytes=ALL_ENTITIES_MAX_BYTES)
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
        if json_size(result) <= MAX_RESULT_BYTES:
            break
    # Still too large only for an allowlist saved before saves were checked; stage 6 refuses it.
    return result


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any]) -> Card:
    """How many of the allowed devices will be read, a few of them by name, and where the request goes."""
    count = len(config.allowlisted_entities)
    names = [config.display_name(e) for e in config.allowlisted_entities[:3]]
    devices = "device" if count == 1 else "devices"
    example = ""
    if names:
        more = ", and others" if count > len(names) else ""
        example = f" ({', '.join(names)}{more})"
    return Card(
        title="Read your Home Assistant devices?",
        body=(
            f"The assistant wants to read the current state of the {count} {devices} you allowed"
            f"{example}. {leaves_device(config)}"
        ),
    )


def binds(config: HomeAssistantConfig) -> Mapping[str, Any]:
    """The card counts and names the allowed entities: approved was a read of exactly those."""
    return {"entities": sorted(config.allowlisted_entities)}


_ROOMY = CAP_LEVELS[0]

CAPABILITY = Capability(
    name=NAME,
    description=(
        "Read the current state of every Home Assistant entity the household has allowed the "
        "assistant to see. Takes no arguments. Each read asks the household for approval first. "
        "A name or state too long for the result is cut and ends in \u2026."
    ),
    arguments_schema={"type": "object", "properties": {}, "additionalProperties": False},
    argument_messages={},
    result_schema={
        "type": "object",
        "required": ["entities", "missing_entities", "retrieved_at"],
        "additionalProperties": False,
        "properties": {
            "entities": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["entity_id", "friendly_name", "domain", "state", "unit_of_measurement",
                                 "last_changed", "unavailable"],
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
                    },
                },
            },
            # allowlisted entities Home Assistant no longer has
            "missing_entities": {"type": "array", "items": ENTITY_ID_SCHEMA},
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
    },
    bounds=Bounds(timeout_seconds=8, max_result_bytes=MAX_RESULT_BYTES),
    execute=execute,
    card=card,
    binds=binds,
    activity_words="Current state of your devices",
    prompt_summary="the current state of every device the household allowed you to see.",
    reads=Reads(paths=("/api/states",)),
)
