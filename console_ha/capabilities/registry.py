"""The two Home Assistant capabilities as RFC-0018 registers them: schemas, classification, bounds."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

DEFAULT_MAX_RESULT_BYTES = 64 * 1024
LIST_ENTITIES = "home_assistant.list_entities"
GET_HISTORY = "home_assistant.get_history"
PERIODS = ("hour", "day", "week")
# A get_history result names at most this many states (the ones with the most time); the rest are summed.
MAX_REPORTED_STATES = 10


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

# What each field of a get_history result means, in one line each: the result schema's descriptions and
# the system prompt's lines both come from here, so a small model reads `seconds_in_state` the same way
# wherever it looks.
HISTORY_FIELD_MEANINGS: dict[str, str] = {
    "initial_state": "the state already in force when the period began (not a change); null if none was recorded",
    "changes": "up to 50 changes, oldest first, spread over the period; the first and last change always included",
    "total_changes": "how many times the state changed in the period (truncated is true when over 50)",
    "seconds_in_state": "seconds spent in that state within the period; the state in force now counts up to now",
    "times_changed_to": "how many times it changed into that state within the period",
    "last_changed_to": "when it last changed into that state; null means it was already in it when the period began",
    "other_states": f"states not named (only the {MAX_REPORTED_STATES} with the most time are), added together",
    "min_at": "when the lowest value was first reached (the period's start if it was already that low)",
    "max_at": "when the highest value was first reached (the period's start if it was already that high)",
    "mean": "the time-weighted average; time unavailable or unknown is left out",
}
_STATE_TIME = {
    "type": "object",
    "required": ["seconds_in_state", "times_changed_to", "last_changed_to"],
    "properties": {
        "seconds_in_state": {"type": "integer", "minimum": 0,
                             "description": HISTORY_FIELD_MEANINGS["seconds_in_state"]},
        "times_changed_to": {"type": "integer", "minimum": 0,
                             "description": HISTORY_FIELD_MEANINGS["times_changed_to"]},
        "last_changed_to": {**_TIMESTAMP, "type": ["string", "null"],
                            "description": HISTORY_FIELD_MEANINGS["last_changed_to"]},
    },
    "additionalProperties": False,
}
_NUMERIC_SUMMARY = {
    "type": "object",
    "required": ["kind", "min", "min_at", "max", "max_at", "mean", "first", "last", "unit"],
    "properties": {
        "kind": {"const": "numeric"},
        "min": {"type": "number"},
        "min_at": {**_TIMESTAMP, "description": HISTORY_FIELD_MEANINGS["min_at"]},
        "max": {"type": "number"},
        "max_at": {**_TIMESTAMP, "description": HISTORY_FIELD_MEANINGS["max_at"]},
        "mean": {"type": ["number", "null"], "description": HISTORY_FIELD_MEANINGS["mean"]},
        "first": {"type": "number"},
        "last": {"type": "number"},
        "unit": {"type": ["string", "null"]},
    },
    "additionalProperties": False,
}
_STATES_SUMMARY = {
    "type": "object",
    "required": ["kind", "states"],
    "properties": {
        "kind": {"const": "states"},
        # Named states, the most time first.
        "states": {"type": "object", "maxProperties": MAX_REPORTED_STATES, "additionalProperties": _STATE_TIME},
        "other_states": {
            "type": "object",
            "description": HISTORY_FIELD_MEANINGS["other_states"],
            "required": ["states", "seconds_in_state", "times_changed_to"],
            "properties": {
                "states": {"type": "integer", "minimum": 1},
                "seconds_in_state": {"type": "integer", "minimum": 0},
                "times_changed_to": {"type": "integer", "minimum": 0},
            },
            "additionalProperties": False,
        },
    },
    "additionalProperties": False,
}

GET_HISTORY_CAPABILITY = Capability(
    name=GET_HISTORY,
    description=(
        "Read how one allowed Home Assistant entity changed over the past hour, day or week: "
        "up to 50 changes spread over the period, the total number of changes, and a summary "
        "(for numbers: minimum and maximum with when they were reached, time-weighted mean; otherwise, "
        "for each state: seconds spent in it, times it changed to it, when it last did). Answers "
        "\"how long was it on\" and \"when did it last change\". Each read asks the household for approval first."
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
            "initial_state": {
                "type": ["object", "null"],
                "description": HISTORY_FIELD_MEANINGS["initial_state"],
                "required": ["state", "since"],
                "properties": {"state": {"type": "string"}, "since": _TIMESTAMP},
            },
            "changes": {
                "type": "array",
                "maxItems": 50,
                "description": HISTORY_FIELD_MEANINGS["changes"],
                "items": {
                    "type": "object",
                    "required": ["state", "changed_at"],
                    "properties": {"state": {"type": "string"}, "changed_at": _TIMESTAMP},
                },
            },
            "total_changes": {"type": "integer", "minimum": 0, "description": HISTORY_FIELD_MEANINGS["total_changes"]},
            "truncated": {"type": "boolean"},
            "summary": {"oneOf": [_NUMERIC_SUMMARY, _STATES_SUMMARY]},
            "retrieved_at": _TIMESTAMP,
        },
    },
    bounds=Bounds(timeout_seconds=10),
)

REGISTRY: dict[str, Capability] = {
    capability.name: capability for capability in (LIST_ENTITIES_CAPABILITY, GET_HISTORY_CAPABILITY)
}
