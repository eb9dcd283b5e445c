"""home_assistant.get_history: how one allowed entity changed over the past hour, day or week."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, sentences
from console_ha.capabilities.narrow import entity_state, narrow_state
from console_ha.capabilities.read_arguments import choice, entity, entity_and_period
from console_ha.capabilities.recent_periods import ONE_OF_THE_RECENT_PERIODS, RECENT_PERIODS
from console_ha.capabilities.spec import TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.deadline import Deadline
from console_ha.ha.history import MAX_CHANGES, MAX_REPORTED_STATES, HistoryDigest, fetch_history, fetch_history_ws
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.websocket import HISTORY_COMMAND, WebSocketUnsupported
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

NAME = "home_assistant.get_history"
# Home Assistant's history of a week may be far larger than the result; it is streamed and capped.
MAX_HISTORY_BYTES = 512 * 1024 * 1024
ARGUMENTS = entity_and_period(entity("An allowed entity id, such as sensor.living_room_temperature", "sensor.kitchen"),
                              RECENT_PERIODS)

# What each field of a result means, in one line each: the result schema's descriptions and the system
# prompt's lines both come from here, so a small model reads `seconds_in_state` the same way wherever it
# looks.
HISTORY_FIELD_MEANINGS: dict[str, str] = {
    "initial_state": "the state when the period began (not a change); null if none recorded",
    "changes": f"up to {MAX_CHANGES}, oldest first, spread over the period; the first and last always kept",
    "total_changes": f"changes in the whole period (truncated: over {MAX_CHANGES})",
    "seconds_in_state": "seconds in that state in the period; the state now counts up to now",
    "times_changed_to": "changes into that state in the period",
    "last_changed_to": "the last change into that state; null: already in it when the period began",
    "other_states": f"the states not named (only {MAX_REPORTED_STATES} are), added together",
    "min_at": "when the lowest value was first reached",
    "max_at": "when the highest value was first reached",
    "mean": "time-weighted; unavailable or unknown time left out",
}


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """Up to MAX_CHANGES changes of one allowlisted entity over the period: totals, time in each state, a summary."""
    entity_id = arguments["entity_id"]
    period = arguments["period"]
    # The entity's own state gives its name and unit, and a 404 for an entity Home Assistant lacks.
    state = entity_state(client, entity_id, deadline)
    current = narrow_state(state)
    end = now
    start = end - RECENT_PERIODS[period].length
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


# --- the card's words: a number's history has lowest and highest values, an on/off one has time in each state ---
CARD_TITLE = N_("Read the history of {name}?")
# Domains whose state may be a number: their history is summed up as numbers when every state is one.
NUMBER_DOMAINS = frozenset({"sensor", "number", "input_number", "counter"})
NUMBER_HISTORY = N_("The assistant wants to read how {name} ({entity_id}) changed over {period}: when it "
                    "changed, and its lowest and highest values, or how long it was in each state if its states are "
                    "not numbers.")
STATE_HISTORY = N_("The assistant wants to read how {name} ({entity_id}) changed over {period}: when it changed, "
                   "and how long it was in each state.")


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """Which device, over which period, what the household lets the assistant learn, and where it goes."""
    entity_id = arguments["entity_id"]
    name = config.display_name(entity_id)
    words = NUMBER_HISTORY if entity_id.partition(".")[0] in NUMBER_DOMAINS else STATE_HISTORY
    wants = Words(words, name=name, entity_id=entity_id, period=Words(RECENT_PERIODS[arguments["period"]].words))
    return Card(title=Words(CARD_TITLE, name=name), body=sentences(wants, leaves_device(config)))


_STATE_TIME = {
    "type": "object",
    "required": ["seconds_in_state", "times_changed_to", "last_changed_to"],
    "properties": {
        "seconds_in_state": {"type": "integer", "minimum": 0,
                             "description": HISTORY_FIELD_MEANINGS["seconds_in_state"]},
        "times_changed_to": {"type": "integer", "minimum": 0,
                             "description": HISTORY_FIELD_MEANINGS["times_changed_to"]},
        "last_changed_to": {**TIMESTAMP_SCHEMA, "type": ["string", "null"],
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
        "min_at": {**TIMESTAMP_SCHEMA, "description": HISTORY_FIELD_MEANINGS["min_at"]},
        "max": {"type": "number"},
        "max_at": {**TIMESTAMP_SCHEMA, "description": HISTORY_FIELD_MEANINGS["max_at"]},
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

CAPABILITY = Capability(
    name=NAME,
    description=(
        f"Read how one allowed Home Assistant entity changed over the past {ONE_OF_THE_RECENT_PERIODS}: "
        f"up to {MAX_CHANGES} changes spread over the period, the total number of changes, and a summary "
        "(for numbers: minimum and maximum with when they were reached, time-weighted mean; otherwise, "
        "for each state: seconds spent in it, times it changed to it, when it last did). Answers "
        "\"how long was it on\" and \"when did it last change\". Each read asks the household for approval first."
    ),
    arguments_schema=ARGUMENTS.schema,
    argument_messages=ARGUMENTS.messages,
    result_schema={
        "type": "object",
        "required": ["entity_id", "period", "changes", "total_changes", "truncated", "retrieved_at"],
        "properties": {
            "entity_id": {"type": "string"},
            "friendly_name": {"type": "string"},
            "period": choice(RECENT_PERIODS).schema,
            "start": TIMESTAMP_SCHEMA,
            "end": TIMESTAMP_SCHEMA,
            "initial_state": {
                "type": ["object", "null"],
                "description": HISTORY_FIELD_MEANINGS["initial_state"],
                "required": ["state", "since"],
                "properties": {"state": {"type": "string"}, "since": TIMESTAMP_SCHEMA},
            },
            "changes": {
                "type": "array",
                "maxItems": MAX_CHANGES,
                "description": HISTORY_FIELD_MEANINGS["changes"],
                "items": {
                    "type": "object",
                    "required": ["state", "changed_at"],
                    "properties": {"state": {"type": "string"}, "changed_at": TIMESTAMP_SCHEMA},
                },
            },
            "total_changes": {"type": "integer", "minimum": 0, "description": HISTORY_FIELD_MEANINGS["total_changes"]},
            "truncated": {"type": "boolean"},
            "summary": {"oneOf": [_NUMERIC_SUMMARY, _STATES_SUMMARY]},
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
    },
    bounds=Bounds(timeout_seconds=10),
    execute=execute,
    card=card,
    activity_words=Words("History of one device"),
    prompt_summary=f"how one device changed over the past {ONE_OF_THE_RECENT_PERIODS}.",
    # The entity's state (its name, unit, and a 404 for one gone), then its history: over the WebSocket,
    # or REST's where Home Assistant offers no WebSocket.
    reads=Reads(paths=("/api/states/{entity_id}", "/api/history/period/{start}"), commands=(HISTORY_COMMAND,)),
    result_meanings=HISTORY_FIELD_MEANINGS,
)
