"""home_assistant.list_areas: the areas that hold allowed entities, how many each, and how many are unavailable."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from datetime import datetime
from typing import Any

from console_ha.capabilities.area_lookup import read_areas
from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, sentences
from console_ha.capabilities.entity_budget import CAP_LEVELS, cut, json_size
from console_ha.capabilities.spec import TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.deadline import Deadline
from console_ha.ha.areas import REGISTRY_COMMANDS
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import ALL_ENTITIES_MAX_BYTES, UNAVAILABLE_STATES, HomeAssistantClient
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z

NAME = "home_assistant.list_areas"
# A small model reads this before it filters list_entities by area: a few lines, never more than 8 KiB.
MAX_RESULT_BYTES = 8 * 1024
# An area's name is cut as list_entities cuts it: whole to the roomiest level's bytes, then the tightest's.
AREA_NAME_CAPS = tuple(dict.fromkeys(caps.area for caps in CAP_LEVELS))


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """Per area holding allowlisted entities Home Assistant reports: how many, and how many unavailable."""
    wanted = set(config.allowlisted_entities)
    states = client.states(timeout=deadline.remaining(), max_bytes=ALL_ENTITIES_MAX_BYTES)
    deadline.remaining()
    unavailable: dict[str, bool] = {}
    for state in states:
        entity_id = state.get("entity_id")
        if entity_id in wanted:
            unavailable[entity_id] = state.get("state") in UNAVAILABLE_STATES
    areas = read_areas(client, deadline, notes)
    # Keyed by area id (two areas may share a name cut short); None for entities in no area.
    held: Counter[str | None] = Counter()
    down: Counter[str | None] = Counter()
    for entity_id, is_down in unavailable.items():
        area = areas.area_of(entity_id)
        key = area.area_id if area is not None else None
        held[key] += 1
        down[key] += is_down
    # The fullest areas first (ties by name), the line for no area last: if the bound cuts, it cuts the smallest.
    placed = sorted((k for k in held if k is not None), key=lambda k: (-held[k], areas.areas[k].name.casefold(), k))
    result: dict[str, Any] = {}
    for cap in AREA_NAME_CAPS:
        lines = [{"area": cut(areas.areas[k].name, cap), "entities": held[k], "unavailable": down[k]} for k in placed]
        nowhere = [{"area": None, "entities": held[None], "unavailable": down[None]}] if None in held else []
        result = {"areas": lines + nowhere, "retrieved_at": utc_z(now)}
        if json_size(result) <= MAX_RESULT_BYTES:
            return result
    # More areas than 8 KiB can name even cut short (hundreds): the smallest go, and the result says how many.
    # The most lines that fit, found by halving: each line kept adds more bytes than a digit of the count
    # left out can take away, so the size grows with the lines kept. Dropping one line at a time re-measured
    # the whole result per line, about 2,000 times for a full allowlist: seconds past the 8 s bound.
    def trimmed(kept: int) -> dict[str, Any]:
        return {"areas": lines[:kept] + nowhere, "areas_left_out": len(lines) - kept, "retrieved_at": utc_z(now)}

    low, high = 0, len(lines) - 1  # `trimmed(low)` fits (no line at all is a few dozen bytes); all of them did not
    while low < high:
        middle = (low + high + 1) // 2
        if json_size(trimmed(middle)) <= MAX_RESULT_BYTES:
            low = middle
        else:
            high = middle - 1
    return trimmed(low)


CARD_TITLE = N_("Read the areas of your Home Assistant devices?")


def counts_words(count: int) -> Words:
    """What the read counts over the `count` allowed devices (one device has one area, so its own sentence)."""
    if count == 1:
        return Words("The assistant wants to know which area the one device you allowed is in, and whether it is "
                     "unavailable. Nothing about other devices or areas is read into the answer.")
    return Words.counted("The assistant wants to know which areas the {count} device you allowed is in, and how "
                         "many in each are unavailable. Nothing about other devices or areas is read into the answer.",
                         "The assistant wants to know which areas the {count} devices you allowed are in, and how "
                         "many in each are unavailable. Nothing about other devices or areas is read into the answer.",
                         count)


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """Which devices' areas will be counted, and where the request goes."""
    wants = counts_words(len(config.allowlisted_entities))
    return Card(title=Words(CARD_TITLE), body=sentences(wants, leaves_device(config)))


def binds(config: HomeAssistantConfig) -> Mapping[str, Any]:
    """The card counts the allowed entities: approved was a count over exactly those."""
    return {"entities": sorted(config.allowlisted_entities)}


CAPABILITY = Capability(
    name=NAME,
    description=(
        "List the areas (rooms) of Home Assistant that hold entities the household has allowed the assistant "
        "to see: for each, how many allowed entities it holds and how many of them are unavailable, the "
        "fullest first; a last line with area null counts allowed entities in no area. Takes no arguments. "
        "Use an area's name as list_entities' area filter. Each read asks the household for approval first."
    ),
    arguments_schema={"type": "object", "properties": {}, "additionalProperties": False},
    argument_messages={},
    result_schema={
        "type": "object",
        "required": ["areas", "retrieved_at"],
        "additionalProperties": False,
        "properties": {
            "areas": {
                "type": "array",
                "items": {
                    "type": "object",
                    "required": ["area", "entities", "unavailable"],
                    "additionalProperties": False,
                    "properties": {
                        # the area's name (cut, ending in …, past its bound); null: entities in no area
                        "area": {"type": ["string", "null"], "maxLength": AREA_NAME_CAPS[0]},
                        "entities": {"type": "integer", "minimum": 1},
                        "unavailable": {"type": "integer", "minimum": 0},
                    },
                },
            },
            # there only when more areas than the bound can name were left out (the smallest)
            "areas_left_out": {"type": "integer", "minimum": 1},
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
    },
    bounds=Bounds(timeout_seconds=8, max_result_bytes=MAX_RESULT_BYTES),
    execute=execute,
    card=card,
    binds=binds,
    activity_words=Words("Areas of your devices"),
    prompt_summary="the rooms (areas) holding devices, with how many and how many unavailable.",
    # Every state (to count the unavailable), and the three registry lists that place entities in areas.
    reads=Reads(paths=("/api/states",), commands=REGISTRY_COMMANDS),
)
