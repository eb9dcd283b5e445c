"""home_assistant.get_forecast: an allowed weather entity's daily or hourly forecast, with its units.

Home Assistant 2025.4.4 gives a forecast through a service call (`weather.get_forecasts`), which a read-only
client never makes, or through the WebSocket subscription `weather/subscribe_forecast`: the Console takes
its first event and unsubscribes at once (`HomeAssistantWebSocket.first_event`). Before it, the units are the
entity's own attributes (GET /api/states/{entity_id}), as Home Assistant's frontend shows them; each entry's
time is written in Home Assistant's time zone, `/api/config`'s as the kept client last read it
(`HomeAssistantClient.kept_config`, asked again only when it has none from the last 5 minutes).
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from datetime import datetime, tzinfo
from typing import Any

from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, sentences
from console_ha.capabilities.plain_text import HOUSEHOLD_TEXT_CHARS, household_text
from console_ha.capabilities.read_arguments import Argument, declared, entity
from console_ha.capabilities.spec import TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.capabilities.time_zone import household_zone
from console_ha.deadline import Deadline
from console_ha.errors import HABadResponse, HANotFound
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.websocket import FORECAST_COMMAND, UNSUBSCRIBE_COMMAND
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

NAME = "home_assistant.get_forecast"
# The one kind of entity it reads: offered only while one is allowlisted (`Capability.answers_for`).
DOMAIN = "weather"
# What the model may ask for: the most entries kept (8 days, 48 hours) and the card's whole title.
KINDS: dict[str, tuple[int, str]] = {
    "daily": (8, N_("See the daily forecast of {name}?")),
    "hourly": (48, N_("See the hourly forecast of {name}?")),
}
_NAMES = list(KINDS)
READS_FORECAST = N_("The assistant wants to read the forecast of {name} ({entity_id}): the expected weather, "
                    "temperatures, rain and wind.")
# A forecast of a few hundred entries is tens of kilobytes; the event is parsed whole.
MAX_FORECAST_BYTES = 1024 * 1024
# The numbers an entry may carry besides its temperature, when Home Assistant gives them.
OPTIONAL_NUMBERS = ("templow", "precipitation", "precipitation_probability", "wind_speed")
# The entity's unit attributes (weather/__init__.py's state attributes) and the result's names for them.
UNIT_ATTRIBUTES = {"temperature": "temperature_unit", "precipitation": "precipitation_unit",
                   "wind_speed": "wind_speed_unit"}
_MAX_TIME_CHARS = 40


def _number(value: object) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool) and math.isfinite(value)


def entry_of(item: object, zone: tzinfo) -> dict[str, Any]:
    """One of Home Assistant's forecast entries as the result lists it, its time in the household's zone."""
    if not isinstance(item, dict) or not isinstance(item.get("datetime"), str):
        raise wrong_shape()
    text = item["datetime"]
    try:
        moment = datetime.fromisoformat(text) if len(text) <= _MAX_TIME_CHARS else None
    except ValueError:
        moment = None
    temperature = item.get("temperature")
    if moment is None or moment.tzinfo is None or not (temperature is None or _number(temperature)):
        raise wrong_shape()
    try:
        local = moment.astimezone(zone)
    except OverflowError:
        raise wrong_shape() from None  # year 9999 behind a negative offset: past what a datetime holds
    entry: dict[str, Any] = {"datetime": local.isoformat(timespec="seconds"),
                             "condition": household_text(item.get("condition")), "temperature": temperature}
    for key in OPTIONAL_NUMBERS:
        value = item.get(key)
        if value is not None and not _number(value):
            raise wrong_shape()
        if value is not None:
            entry[key] = value
    return entry


def units_of(state: Mapping[str, Any]) -> dict[str, str | None]:
    """The entity's temperature, precipitation and wind speed units, each None when missing or not plain."""
    attributes = state.get("attributes")
    attributes = attributes if isinstance(attributes, Mapping) else {}
    return {name: household_text(attributes.get(key)) for name, key in UNIT_ATTRIBUTES.items()}


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """The first forecast Home Assistant pushes for the entity, at most 8 days or 48 hours, with its units."""
    entity_id, kind = arguments["entity_id"], arguments["kind"]
    units = units_of(client.state(entity_id, timeout=deadline.remaining()))
    zone = household_zone(client.kept_config(timeout=deadline.remaining()))
    try:
        with client.websocket(timeout=deadline.remaining(), max_bytes=MAX_FORECAST_BYTES) as connection:
            event = connection.first_event({"type": FORECAST_COMMAND, "entity_id": entity_id,
                                            "forecast_type": kind})
    except HABadResponse as err:
        if err.detail.get("reason") != "command_failed":
            raise
        # `invalid_entity_id` or `forecast_not_supported` (weather/websocket_api.py): no such forecast here.
        raise HANotFound(f"Home Assistant has no {kind} forecast for {entity_id}.", entity_id=entity_id) from None
    forecast = event.get("forecast") if isinstance(event, dict) and event.get("type") == kind else False
    if forecast is None:
        forecast = []  # the entity has no forecast at the moment
    if not isinstance(forecast, list):
        raise wrong_shape()
    return {"entity_id": entity_id, "kind": kind, "time_zone": zone.key, "unit": units,
            "forecast": [entry_of(item, zone) for item in forecast[:KINDS[kind][0]]],
            "retrieved_at": utc_z(now)}


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """Which weather entity, which forecast, and where the request goes."""
    entity_id = arguments["entity_id"]
    name = config.display_name(entity_id)
    wants = Words(READS_FORECAST, name=name, entity_id=entity_id)
    return Card(title=Words(KINDS[arguments["kind"]][1], name=name), body=sentences(wants, leaves_device(config)))


def wrong_shape() -> HABadResponse:
    return HABadResponse("Home Assistant answered the forecast request with something other than a forecast.",
                         reason="wrong_shape")


ARGUMENTS = declared(("entity_id", "kind"),
                     entity_id=entity("An allowed weather entity, such as weather.home", "weather.home", domain=DOMAIN),
                     kind=Argument({"type": "string", "enum": _NAMES}, f"must be {' or '.join(_NAMES)}."))
_NUMBER = {"type": "number"}
# A unit and a condition are both household_text: short plain words, or null.
_TEXT_OR_NULL = {"anyOf": [{"type": "string", "minLength": 1, "maxLength": HOUSEHOLD_TEXT_CHARS}, {"type": "null"}]}

CAPABILITY = Capability(
    name=NAME,
    description=(
        "Read one allowed weather entity's forecast, daily (up to 8 days) or hourly (up to 48 hours): "
        "condition, temperature, low, precipitation and its probability, wind speed, with units. Answers "
        "\"will it rain tomorrow\". Each read asks the household for approval first."
    ),
    arguments_schema=ARGUMENTS.schema,
    argument_messages=ARGUMENTS.messages,
    result_schema={
        "type": "object",
        "required": ["entity_id", "kind", "time_zone", "unit", "forecast", "retrieved_at"],
        "properties": {
            "entity_id": {"type": "string"},
            "kind": {"enum": _NAMES},
            "time_zone": {"type": "string"},
            "unit": {"type": "object", "required": list(UNIT_ATTRIBUTES),
                     "properties": {name: _TEXT_OR_NULL for name in UNIT_ATTRIBUTES}, "additionalProperties": False},
            "forecast": {"type": "array", "maxItems": max(most for most, _ in KINDS.values()), "items": {
                "type": "object",
                "required": ["datetime", "condition", "temperature"],
                "properties": {"datetime": TIMESTAMP_SCHEMA,
                               "condition": _TEXT_OR_NULL,
                               "temperature": {"type": ["number", "null"]},
                               **{key: _NUMBER for key in OPTIONAL_NUMBERS}},
                "additionalProperties": False,
            }},
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
        "additionalProperties": False,
    },
    bounds=Bounds(timeout_seconds=8),
    execute=execute,
    card=card,
    activity_words=Words("Weather forecast"),
    prompt_summary="a weather entity's daily or hourly forecast.",
    # The units (the entity's state), the time zone (kept), then on one WebSocket the subscription's first event.
    reads=Reads(paths=("/api/states/{entity_id}", "/api/config"), commands=(FORECAST_COMMAND, UNSUBSCRIBE_COMMAND)),
    answers_for=frozenset({DOMAIN}),
)
