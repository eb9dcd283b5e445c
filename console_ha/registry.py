"""The two Home Assistant capabilities as RFC-0018 registers them: schemas, classification, bounds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_RESULT_BYTES = 64 * 1024
LIST_ENTITIES = "home_assistant.list_entities"
GET_HISTORY = "home_assistant.get_history"
PERIODS = ("hour", "day", "week")


@dataclass(frozen=True)
class Classification:
    """RFC-0003's confirmation model keys: side effect × network → confirmation."""

    side_effect: str = "read_only"
    network: str = "external"
    confirmation: str = "required"

    def to_dict(self) -> dict[str, str]:
        return {"side_effect": self.side_effect, "network": self.network, "confirmation": self.confirmation}


@dataclass(frozen=True)
class Bounds:
    """How long an invocation may take, how large its result may be, how often per turn."""

    timeout_seconds: float
    max_result_bytes: int = DEFAULT_MAX_RESULT_BYTES
    max_invocations_per_turn: int = 1


@dataclass(frozen=True)
class TextCaps:
    """The most bytes (compact UTF-8 JSON, escapes included) a result's name, state and unit may take."""

    name: int
    state: int
    unit: int


# list_entities' text bounds, roomiest to tightest: it uses the roomiest level whose result fits its
# 64 KiB, and a save guarantees the tightest (entity_budget.py). 32 bytes of state keep a timestamp
# state ("2026-11-30T10:00:00+00:00") whole.
LIST_ENTITIES_TEXT_CAPS: tuple[TextCaps, ...] = (TextCaps(96, 64, 16), TextCaps(48, 48, 12), TextCaps(24, 32, 8))


@dataclass(frozen=True)
class Capability:
    """A registered capability: what the model is told, and what the executor enforces."""

    name: str
    description: str
    arguments_schema: dict[str, Any]
    result_schema: dict[str, Any]
    bounds: Bounds
    classification: Classification = field(default_factory=Classification)


_TIMESTAMP = {"type": "string", "format": "date-time"}
_ROOMY = LIST_ENTITIES_TEXT_CAPS[0]
_ENTITY_ID = {"type": "string", "pattern": r"^[a-z0-9_]+\.[a-z0-9_]+$", "maxLength": 255}

LIST_ENTITIES_CAPABILITY = Capability(
    name=LIST_ENTITIES,
    description=(
        "Read the current state of every Home Assistant entity the household has allowed the "
        "assistant to see. Takes no arguments. Each read asks the household for approval first. "
        "A name or state too long for the result is cut and ends in \u2026."
    ),
    arguments_schema={"type": "object", "properties": {}, "additionalProperties": False},
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
                        "entity_id": _ENTITY_ID,
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
            "missing_entities": {"type": "array", "items": _ENTITY_ID},
            "retrieved_at": _TIMESTAMP,
        },
    },
    bounds=Bounds(timeout_seconds=8),
)

GET_HISTORY_CAPABILITY = Capability(
    name=GET_HISTORY,
    description=(
        "Read how one allowed Home Assistant entity changed over the past hour, day or week: "
        "up to 50 changes spread over the period, the total number of changes, and a summary "
        "(minimum, maximum, time-weighted mean for numbers; how often it changed to each state "
        "otherwise). Each read asks the household for approval first."
    ),
    arguments_schema={
        "type": "object",
        "required": ["entity_id", "period"],
        "properties": {
            "entity_id": {**_ENTITY_ID, "description": "An allowed entity id, such as sensor.living_room_temperature"},
            "period": {"type": "string", "enum": list(PERIODS)},
        },
        "additionalProperties": False,
    },
    result_schema={
        "type": "object",
        "required": ["entity_id", "period", "changes", "total_changes", "truncated", "retrieved_at"],
        "properties": {
            "entity_id": {"type": "string"},
            "friendly_name": {"type": "string"},
            "period": {"type": "string", "enum": list(PERIODS)},
            "start": _TIMESTAMP,
            "end": _TIMESTAMP,
            "initial_state": {"type": ["object", "null"]},
            "changes": {
                "type": "array",
                "maxItems": 50,
                "items": {
                    "type": "object",
                    "required": ["state", "changed_at"],
                    "properties": {"state": {"type": "string"}, "changed_at": _TIMESTAMP},
                },
            },
            "total_changes": {"type": "integer", "minimum": 0},
            "truncated": {"type": "boolean"},
            "summary": {"type": "object"},
            "retrieved_at": _TIMESTAMP,
        },
    },
    bounds=Bounds(timeout_seconds=10),
)

REGISTRY: dict[str, Capability] = {
    capability.name: capability for capability in (LIST_ENTITIES_CAPABILITY, GET_HISTORY_CAPABILITY)
}
