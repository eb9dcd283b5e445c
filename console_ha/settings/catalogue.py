"""The entity catalogue the picker shows: Home Assistant's states narrowed, with areas, sensitivity and cost.

Plain functions over plain data, so the picker's rules can be read (and benchmarked) apart from any
request: which entities are sensitive, what each entry holds, which allowlisted entities have gone, and
which are new since the allowlist was last saved.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from typing import Any

import orjson

from console_ha.capabilities.entity_budget import BUDGET_BYTES, entity_cost
from console_ha.ha.addresses import ENTITY_ID_RE
from console_ha.ha.areas import REGISTRY_COMMANDS
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import UNAVAILABLE_STATES
from console_ha.secret import Secret
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.review import Review
from console_ha.timestamps import utc_z_now
from console_ha.words import kind_name

# What the picker reads from Home Assistant: every state, and the registries that place entities in areas.
PICKER_READS = Reads(paths=("/api/states",), commands=REGISTRY_COMMANDS)

# Entities that reveal where people are, whether the home is open, or what it looks like inside; and
# (issue 28) calendars and to-do lists, which hold personal appointments and lists.
SENSITIVE_DOMAINS = frozenset({"lock", "alarm_control_panel", "camera", "person", "device_tracker", "cover",
                               "calendar", "todo"})
SENSITIVE_BINARY_SENSOR_CLASSES = frozenset(
    {"door", "garage_door", "window", "opening", "lock", "presence", "occupancy"}
)


def is_sensitive(domain: str, attributes: Mapping[str, Any]) -> bool:
    """Whether an entity reveals presence, access to the home, images of it, or personal appointments and lists."""
    if domain in SENSITIVE_DOMAINS:
        return True
    return domain == "binary_sensor" and attributes.get("device_class") in SENSITIVE_BINARY_SENSOR_CLASSES


def narrow_states(
    states: Iterable[Mapping[str, Any]], config: HomeAssistantConfig, areas: Mapping[str, str] | None
) -> list[dict[str, Any]]:
    """Each state as the picker's entry, sorted by entity_id."""
    # The hot loop of the picker (thousands of entities): names bound locally, one dict per entity.
    allowlisted = set(config.allowlisted_entities)
    areas = areas or {}
    valid = ENTITY_ID_RE.fullmatch
    entries: dict[str, dict[str, Any]] = {}
    for item in states:
        entity_id = item["entity_id"]
        if entity_id in entries or not valid(entity_id):
            continue
        attributes = item.get("attributes")
        if not isinstance(attributes, dict):
            attributes = {}
        name = attributes.get("friendly_name")
        domain = entity_id[: entity_id.index(".")]
        state = item["state"]
        entries[entity_id] = {
            "entity_id": entity_id,
            "friendly_name": name if name and isinstance(name, str) else config.display_name(entity_id),
            "domain": domain,
            "state": state,
            "unavailable": state in UNAVAILABLE_STATES,
            "allowlisted": entity_id in allowlisted,
            "area": areas.get(entity_id),
            "sensitive": is_sensitive(domain, attributes),
            "cost": entity_cost(entity_id),
        }
    return [entries[entity_id] for entity_id in sorted(entries)]


def missing_entities(entries: Iterable[Mapping[str, Any]], config: HomeAssistantConfig) -> list[dict[str, Any]]:
    """The allowlisted ids Home Assistant no longer reports, so the household can see and drop them."""
    reported = {entry["entity_id"] for entry in entries}
    return [
        {
            "entity_id": entity_id,
            "friendly_name": config.display_name(entity_id),
            "domain": entity_id.partition(".")[0],
            "sensitive": is_sensitive(entity_id.partition(".")[0], {}),
            "cost": entity_cost(entity_id),
        }
        for entity_id in config.allowlisted_entities
        if entity_id not in reported
    ]


def catalogue_json(states: Iterable[Mapping[str, Any]], config: HomeAssistantConfig,
                   areas: Mapping[str, str] | None, review: Review | None) -> bytes:
    """The picker's whole answer as JSON: the entities, the missing ones, the new ones, and the budget."""
    narrowed = narrow_states(states, config, areas)
    body = {
        "entities": narrowed,
        "missing": missing_entities(narrowed, config),
        # Entities Home Assistant has gained since the allowlist was last saved: only told, never chosen.
        "new_entities": review.new_since(e["entity_id"] for e in narrowed) if review else [],
        "reviewed_at": review.reviewed_at if review else None,
        "areas_known": areas is not None,
        # The household's name for each kind present (`words.KIND_NAMES`): the script shows these, and has
        # no table of its own.
        "kinds": {domain: kind_name(domain) for domain in {entry["domain"] for entry in narrowed}},
        "retrieved_at": utc_z_now(),
        # What the allowlist may cost in all: the sum of its entities' `cost` must stay within it.
        "budget_bytes": BUDGET_BYTES,
    }
    # orjson, unsorted and compact: this is the one large answer, and speed is its point.
    return orjson.dumps(body)


def holds_token(payload: bytes, token: Secret) -> bool:
    """Whether a JSON answer holds `token` anywhere, as it stands inside a JSON string."""
    # A `"` or `\` in the token (printable ASCII, so accepted) comes out escaped, and a scan for the raw
    # token would miss it.
    return orjson.dumps(token.reveal())[1:-1] in payload
