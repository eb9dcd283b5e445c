"""The areas a read places its entities in: the one call to the Console's area index, and the areas-optional rule.

The rule: a read that only names each entity's area answers even where Home Assistant cannot tell its areas
(no WebSocket through its proxy, say), with every area null and `areas_known` false; a read that needs the
areas (an area filter, list_areas) fails as the area index does. Every read reaches the index through
`read_areas`, so where the index is kept is this module's one line.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from console_ha.capabilities.card_facts import ReadNotes
from console_ha.deadline import Deadline
from console_ha.errors import HomeAssistantError
from console_ha.ha.areas import AreaIndex, area_index
from console_ha.ha.rest_client import HomeAssistantClient

# On a result: there, false, only when Home Assistant could not say which areas entities are in.
AREAS_KNOWN_SCHEMA: dict[str, Any] = {"const": False}


def read_areas(client: HomeAssistantClient, deadline: Deadline, notes: ReadNotes | None = None) -> AreaIndex:
    """The areas, kept or read once (one registry round), and kept for the rooms the next cards name."""
    index = area_index(client, timeout=deadline.remaining())
    if notes is not None:
        notes.memory.keep_areas(client.cache_key, index)
    return index


def areas_if_known(client: HomeAssistantClient, deadline: Deadline,
                   notes: ReadNotes | None = None) -> AreaIndex | None:
    """The areas, or None where Home Assistant cannot tell them: the read answers without them."""
    try:
        return read_areas(client, deadline, notes)
    except HomeAssistantError:
        return None


def area_names(areas: AreaIndex | None) -> Callable[[str], str | None]:
    """How a read names each entity's area: by the index (None for no area), or None for each when not known."""
    return _not_known if areas is None else areas.area_name


def _not_known(entity_id: str) -> None:
    return None


def say_if_areas_unknown(result: dict[str, Any], areas: AreaIndex | None) -> dict[str, Any]:
    """`result`, with `areas_known` false when the areas could not be read (a null area then says nothing)."""
    if areas is None:
        result["areas_known"] = False
    return result
