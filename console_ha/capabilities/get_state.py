"""home_assistant.get_state: one allowed entity now, with the few attributes that answer household questions."""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime
from typing import Any

from console_ha.capabilities.area_lookup import AREAS_KNOWN_SCHEMA, area_names, areas_if_known, say_if_areas_unknown
from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, sentences
from console_ha.capabilities.entity_budget import CAP_LEVELS, listed
from console_ha.capabilities.narrow import ENTITY_SCHEMA, entity_state, narrow_state
from console_ha.capabilities.plain_text import plain_value
from console_ha.capabilities.read_arguments import declared, entity
from console_ha.capabilities.spec import TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.deadline import Deadline
from console_ha.ha.areas import REGISTRY_COMMANDS
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

NAME = "home_assistant.get_state"

# The attributes a result may carry, per domain: keys that answer "how warm", "how bright", "how far
# open", "what is playing". Everything else Home Assistant sends is left behind, whatever it is called:
# an allowlist, because a denylist (entity_picture, access_token, stream URLs, ...) is only as good as
# the names someone thought of, and integrations invent new ones. docs/capabilities.md lists this table
# and a test holds the two together. A climate's hvac mode, a weather's condition, a lock's "locked"
# and a person's "home" are the entity's state itself, so they need no attribute. Positions
# (latitude/longitude), pictures and people's ids are never listed.
HOUSEHOLD_ATTRIBUTES: dict[str, tuple[str, ...]] = {
    # A unit is the entity's own field (unit_of_measurement), for every domain: not repeated here.
    "sensor": ("device_class", "state_class"),
    "binary_sensor": ("device_class",),
    "climate": ("current_temperature", "temperature", "target_temp_low", "target_temp_high", "hvac_action",
                "current_humidity", "humidity", "preset_mode", "fan_mode"),
    "water_heater": ("current_temperature", "temperature", "operation_mode"),
    "humidifier": ("current_humidity", "humidity", "mode", "action", "device_class"),
    "fan": ("percentage", "preset_mode", "oscillating", "direction"),
    "light": ("brightness", "color_temp_kelvin", "color_mode"),
    "cover": ("current_position", "current_tilt_position", "device_class"),
    "valve": ("current_position", "device_class"),
    "media_player": ("media_title", "media_artist", "media_album_name", "media_series_title", "volume_level",
                     "is_volume_muted", "source", "device_class"),
    "weather": ("temperature", "apparent_temperature", "humidity", "pressure", "wind_speed", "wind_bearing",
                "cloud_coverage", "uv_index", "temperature_unit", "pressure_unit", "wind_speed_unit"),
    "vacuum": ("battery_level", "status", "fan_speed"),
    "lawn_mower": ("activity",),
    "switch": ("device_class",),
    "event": ("event_type", "device_class"),
    "sun": ("next_rising", "next_setting", "elevation"),
    "timer": ("duration", "remaining", "finishes_at"),
    "counter": ("minimum", "maximum", "step"),
    "input_number": ("min", "max", "step"),
    "number": ("min", "max", "step", "device_class"),
    "update": ("installed_version", "latest_version", "title", "in_progress"),
}
# Longer text is dropped, not cut: a household answer is a word or a number, and a long value is more
# likely a blob (a base64 picture, a serialised object) than a title.
MAX_ATTRIBUTE_CHARS = 64


def household_attributes(state: Mapping[str, Any]) -> dict[str, Any]:
    """The listed attributes of `state`'s domain whose values are a plain number, truth value or short text."""
    attributes = state.get("attributes")
    if not isinstance(attributes, Mapping):
        return {}
    domain = str(state.get("entity_id", "")).partition(".")[0]
    kept: dict[str, Any] = {}
    for key in HOUSEHOLD_ATTRIBUTES.get(domain, ()):
        value = attributes.get(key)
        if plain_value(value, MAX_ATTRIBUTE_CHARS):
            kept[key] = value
    return kept


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """One GET /api/states/<id>: the entity as list_entities lists it, its area, and its household attributes."""
    entity_id = arguments["entity_id"]
    state = entity_state(client, entity_id, deadline)
    if notes is not None:
        notes.memory.remember(client.cache_key, [state], config.allowlisted_entities)  # the next card's words for it
    areas = areas_if_known(client, deadline, notes)
    result = {
        **listed(narrow_state(state), area_names(areas)(entity_id), CAP_LEVELS[0]),
        "attributes": household_attributes(state),
        "retrieved_at": utc_z(now),
    }
    return say_if_areas_unknown(result, areas)


# --- the card's words: one whole sentence per domain, saying what `household_attributes` keeps for it ---
# Each sentence names only what a read of that domain returns (its state, its area and its listed keys),
# so a thermometer is never asked about brightness. A test holds this table to HOUSEHOLD_ATTRIBUTES.
CARD_TITLE = N_("Read {name} now?")
PLAIN_STATE = N_("The assistant wants to read the current state of {name} ({entity_id}) and its room.")
DOMAIN_WORDS: dict[str, str] = {
    "sensor": N_("The assistant wants to read the current reading of {name} ({entity_id}) with its unit, its room, "
                  "and what kind of reading it is."),
    "binary_sensor": N_("The assistant wants to read whether {name} ({entity_id}) is on or off now, its room, and what "
                         "kind of sensor it is."),
    "climate": N_("The assistant wants to read what {name} ({entity_id}) is doing now, its room, the temperature "
                   "and humidity it measures and is set to, and its preset and fan modes."),
    "water_heater": N_("The assistant wants to read the current state of {name} ({entity_id}), its room, its "
                        "current and target temperature, and its mode."),
    "humidifier": N_("The assistant wants to read whether {name} ({entity_id}) is on now, its room, the humidity "
                      "it measures and is set to, and its mode."),
    "fan": N_("The assistant wants to read whether {name} ({entity_id}) is on now, its room, its speed and preset, "
               "and whether it oscillates."),
    "light": N_("The assistant wants to read whether {name} ({entity_id}) is on now, its room, and its brightness "
                 "and colour."),
    "cover": N_("The assistant wants to read whether {name} ({entity_id}) is open now, its room, its position and "
                 "tilt, and what kind of cover it is."),
    "valve": N_("The assistant wants to read whether {name} ({entity_id}) is open now, its room, its position, and "
                 "what kind of valve it is."),
    "media_player": N_("The assistant wants to read what {name} ({entity_id}) is doing now, its room, what it is "
                        "playing, its volume and its source."),
    "weather": N_("The assistant wants to read the weather now from {name} ({entity_id}), and its room: the "
                   "temperature, humidity, pressure, wind, cloud cover and UV index."),
    "vacuum": N_("The assistant wants to read what {name} ({entity_id}) is doing now, its room, its battery level "
                  "and its fan speed."),
    "lawn_mower": N_("The assistant wants to read what {name} ({entity_id}) is doing now, and its room."),
    "switch": N_("The assistant wants to read whether {name} ({entity_id}) is on now, its room, and what kind of "
                  "switch it is."),
    "event": N_("The assistant wants to read when {name} ({entity_id}) last fired, its room, and what kind of "
                 "event it was."),
    "sun": N_("The assistant wants to read whether the sun is up now ({name}, {entity_id}), how high it stands, "
               "and when it next rises and sets."),
    "timer": N_("The assistant wants to read whether {name} ({entity_id}) is running now, its room, how long it "
                 "runs, what remains and when it finishes."),
    "counter": N_("The assistant wants to read the count of {name} ({entity_id}) now, its room, and its lowest, "
                   "highest and step."),
    "input_number": N_("The assistant wants to read the value of {name} ({entity_id}) now, its room, and its "
                        "lowest, highest and step."),
    "number": N_("The assistant wants to read the value of {name} ({entity_id}) now, its room, its lowest, highest "
                  "and step, and what kind of number it is."),
    "update": N_("The assistant wants to read whether {name} ({entity_id}) has an update now, its room, the "
                  "version installed and the latest, and whether it is installing."),
}
# A sensor whose kind of reading the Console has seen (`CardMemory`): said as the household asks it.
SENSOR_WORDS: dict[str, str] = {
    "temperature": N_("The assistant wants to read how warm {name} ({entity_id}) says it is now, and its room."),
    "humidity": N_("The assistant wants to read how humid {name} ({entity_id}) says it is now, and its room."),
    "battery": N_("The assistant wants to read the battery level {name} ({entity_id}) reports now, and its room."),
    "power": N_("The assistant wants to read how much power {name} ({entity_id}) measures now, and its room."),
}
METER_NOW = N_("The assistant wants to read how much {name} ({entity_id}) has counted so far, and its room.")


def detail_words(entity_id: str, facts: CardFacts) -> str:
    """The sentence for what a read of `entity_id` returns, by its domain (and a sensor's kind, when seen)."""
    domain = entity_id.partition(".")[0]
    traits = facts.traits_for(entity_id)
    if domain == "sensor" and traits is not None:
        if traits.is_meter:
            return METER_NOW
        if traits.device_class in SENSOR_WORDS:
            return SENSOR_WORDS[traits.device_class]
    return DOMAIN_WORDS.get(domain, PLAIN_STATE)


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """Which device is read, what of it (in its domain's words), and where the request goes."""
    entity_id = arguments["entity_id"]
    name = config.display_name(entity_id)
    wants = Words(detail_words(entity_id, facts), name=name, entity_id=entity_id)
    return Card(title=Words(CARD_TITLE, name=name), body=sentences(wants, leaves_device(config)))


ARGUMENTS = declared(("entity_id",),
                     entity_id=entity("An allowed entity id, such as climate.living_room", "sensor.kitchen"))
_ALL_KEYS = sorted({key for keys in HOUSEHOLD_ATTRIBUTES.values() for key in keys})

CAPABILITY = Capability(
    name=NAME,
    description=(
        "Read one allowed Home Assistant entity now: its state, its area (room), and a few details that "
        "answer household questions (a thermostat's current and target temperature, a light's brightness, "
        "a cover's position, what a media player plays and its volume, the weather's temperature and "
        "humidity). Each read asks the household for approval first."
    ),
    arguments_schema=ARGUMENTS.schema,
    argument_messages=ARGUMENTS.messages,
    result_schema={
        "type": "object",
        "required": [*ENTITY_SCHEMA["required"], "attributes", "retrieved_at"],
        "additionalProperties": False,
        "properties": {
            **ENTITY_SCHEMA["properties"],
            "areas_known": AREAS_KNOWN_SCHEMA,
            "attributes": {
                "type": "object",
                "propertyNames": {"enum": _ALL_KEYS},
                "additionalProperties": {"anyOf": [
                    {"type": ["boolean", "number"]},
                    {"type": "string", "minLength": 1, "maxLength": MAX_ATTRIBUTE_CHARS},
                ]},
            },
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
    },
    bounds=Bounds(timeout_seconds=8),
    execute=execute,
    card=card,
    activity_words=Words("Current state of one device"),
    prompt_summary="one device now: state, area and details (temperatures, brightness, position).",
    # The entity's state, then the areas (kept per Home Assistant, or one registry round).
    reads=Reads(paths=("/api/states/{entity_id}",), commands=REGISTRY_COMMANDS),
)
