"""home_assistant.list_entities: the current state of the entities the household allowed, all or a filtered few."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from console_ha.capabilities.area_lookup import (
    AREAS_KNOWN_SCHEMA,
    area_names,
    areas_if_known,
    read_areas,
    say_if_areas_unknown,
)
from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, ReadNotes
from console_ha.capabilities.cards import Card, leaves_device, names_listed, quoted, sentences, unended
from console_ha.capabilities.entity_budget import (
    CAP_LEVELS,
    FIT_BYTES,
    MAX_RESULT_BYTES,
    SCAN_CHARS,
    cut,
    json_size,
    listed,
)
from console_ha.capabilities.narrow import ENTITY_SCHEMA, narrow_state
from console_ha.capabilities.spec import ENTITY_ID_SCHEMA, TIMESTAMP_SCHEMA, Bounds, Capability
from console_ha.deadline import Deadline
from console_ha.folding import fold
from console_ha.ha.areas import REGISTRY_COMMANDS, AreaIndex
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import ALL_ENTITIES_MAX_BYTES, HomeAssistantClient
from console_ha.language import N_, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.timestamps import utc_z
from console_ha.words import KIND_NAMES, kind_name

NAME = "home_assistant.list_entities"
MAX_LIMIT = 500
# The longest area or name the model may ask for: longer than any household's, short enough for a card.
MAX_FILTER_CHARS = 100
MAX_DOMAIN_CHARS = 64
# How much of a filter's text a card shows (bytes, cut as a result's text is, controls and bidi dropped).
CARD_FILTER_BYTES = 120


@dataclass(frozen=True)
class Filters:
    """The arguments, folded once: which allowlisted entities a read answers with."""

    domain: str | None
    area: str | None
    name: str | None

    @classmethod
    def of(cls, arguments: Mapping[str, Any]) -> Filters:
        def folded(key: str) -> str | None:
            value = arguments.get(key)
            return fold(value) if isinstance(value, str) else None
        return cls(folded("domain"), folded("area"), folded("name"))

    def keeps(self, entity_id: str, name: str, areas: AreaIndex | None, area_ids: frozenset[str]) -> bool:
        """Whether the entity passes every filter given (each on its own: domain, area, name)."""
        if self.domain is not None and fold(entity_id[:entity_id.index(".")]) != self.domain:
            return False
        if self.area is not None and (areas is None or areas.placements.get(entity_id) not in area_ids):
            return False
        # A name matches the friendly name, or the entity id read as words ("living room" in
        # sensor.living_room_temperature), anywhere in it. A name is looked at as far as a result reads it
        # (SCAN_CHARS): a megabyte-long one costs no more than a long one.
        # A name the folding leaves nothing of (combining marks alone) matches nothing: "" is in every name,
        # and a filter that keeps everything is what the schema's "not only spaces" refuses.
        return (self.name is None or bool(self.name) and (self.name in fold(name[:SCAN_CHARS])
                                                          or self.name in fold(entity_id.replace("_", " "))))


def selection(config: HomeAssistantConfig, arguments: Mapping[str, Any], areas: AreaIndex | None) -> list[str]:
    """The allowlisted entities the filters keep, in the allowlist's order, before the limit.

    One rule for the read and its card: a name is matched against the name the household saved (the
    picker's) and the id in words, which the card knows before anything is read. Without `areas`, an area
    filter keeps nothing.
    """
    filters = Filters.of(arguments)
    area_ids = areas.named(arguments["area"]) if areas is not None and filters.area is not None else frozenset()
    return [e for e in config.allowlisted_entities if filters.keeps(e, config.display_name(e), areas, area_ids)]


def execute(client: HomeAssistantClient, config: HomeAssistantConfig, arguments: Mapping[str, Any],
            deadline: Deadline, now: datetime, notes: ReadNotes | None = None) -> dict[str, Any]:
    """The current state of the allowlisted entities the filters keep, each with its area, and how many matched."""
    wanted = set(config.allowlisted_entities)
    states = client.states(timeout=deadline.remaining(), max_bytes=ALL_ENTITIES_MAX_BYTES)
    deadline.remaining()  # parsing a large body takes time too: past the bound is a timeout, not a result
    found: dict[str, Mapping[str, Any]] = {}
    for state in states:
        entity_id = state.get("entity_id")
        if entity_id in wanted:
            found[entity_id] = state
    if notes is not None:
        notes.memory.remember(client.cache_key, found.values(), wanted)  # the next cards' words for these
    # An area filter needs the areas; without one, a Home Assistant that cannot tell them still answers.
    areas = read_areas(client, deadline, notes) if "area" in arguments else areas_if_known(client, deadline, notes)
    # Every area of Home Assistant the words name; only allowlisted entities are then looked up in them, so
    # an area without one is never told apart from an area that does not exist.
    selected = selection(config, arguments, areas)
    if "area" in arguments and notes is not None and notes.card_areas is not None:
        # The household allowed the devices its card named by the rooms it knew: a device moved into the room
        # since is not read (never named), one moved out is not either (no longer in the room).
        allowed = set(named_by_card(config, arguments, notes.card_areas))
        selected = [e for e in selected if e in allowed]
    # The limit counts the selection as the card names it (allowlist order, gone entities included), so the
    # answer tells of no entity the card did not name.
    limit = _limit(arguments)
    named = selected[:limit] if limit is not None else selected
    shown = [e for e in named if e in found]
    missing = [e for e in named if e not in found]
    return _fitted(found, shown, missing, sum(e in found for e in selected), areas, now)


def _fitted(found: Mapping[str, Mapping[str, Any]], shown: list[str], missing: list[str], total: int,
            areas: AreaIndex | None, now: datetime) -> dict[str, Any]:
    """The result, names and states cut no further than it needs: the roomiest level that fits."""
    result: dict[str, Any] = {}
    # The tightest always fits an allowlist a save accepted (entity_budget.check_fits).
    area_of = area_names(areas)
    for caps in CAP_LEVELS:
        result = {
            "entities": [listed(narrow_state(found[e], caps), area_of(e), caps) for e in shown],
            "missing_entities": missing,
            "total": total,
            "retrieved_at": utc_z(now),
        }
        say_if_areas_unknown(result, areas)
        if json_size(result) <= FIT_BYTES:  # with room for the instance's id the executor adds
            break
    # Still too large only for an allowlist saved before saves were checked; stage 6 refuses it.
    return result


def named_by_card(config: HomeAssistantConfig, arguments: Mapping[str, Any], areas: AreaIndex | None) -> list[str]:
    """The devices a card names as read, given the areas it knows: the selection, to the limit."""
    selected = selection(config, arguments, areas)
    limit = _limit(arguments)
    return selected[:limit] if limit is not None else selected


def _limit(arguments: Mapping[str, Any]) -> int | None:
    """The limit as a whole number: JSON Schema's "integer" also takes 2.0, which no slice or card should show."""
    return int(arguments["limit"]) if "limit" in arguments else None


# --- the card's words: whole sentences, each with named placeholders, translated in the catalogs --------------
CARD_TITLE = N_("Read your Home Assistant devices?")
READS_NONE = N_("None of the devices you allowed is one the assistant asked for, so no device's state is read.")
ASKED_AREA = N_("It asked for those in the area {area}.")
ASKED_KIND = N_("It asked for those of the kind {kind}.")
ASKED_NAME = N_("It asked for those whose name contains {name}.")
ASKED_LIMIT = N_("It asked for at most {limit}.")
# How many names a card lists; past this it says how many, and gives these as examples.
MAX_NAMED = 12
CARD_NAME_BYTES = 120


def _quoted(value: str) -> Words:
    return quoted(cut(value, CARD_FILTER_BYTES))


def kind_words(domain: str) -> Words:
    """The kind asked for in the picker's words ("Lights"); the model's own words, quoted, for no known kind."""
    folded = fold(domain)
    return quoted(kind_name(folded)) if folded in KIND_NAMES else _quoted(domain)


def named(config: HomeAssistantConfig, entities: list[str]) -> str:
    """The first MAX_NAMED of `entities` by the names the household knows them by, in the language's list (a
    name's own "." or "?" is left out: the list goes on or ends the card's sentence)."""
    return names_listed([unended(cut(config.display_name(e), CARD_NAME_BYTES)) for e in entities[:MAX_NAMED]])


def _in_unknown_area(config: HomeAssistantConfig, area: str, candidates: list[str]) -> Words:
    """An area filter while the Console holds no areas: the card names only what the other filters keep."""
    names, count = named(config, candidates), len(candidates)
    if count <= MAX_NAMED:
        return Words.counted(
            "The assistant wants to read the current state of the devices you allowed that are in the area {area}. "
            "The Console does not know yet which rooms your devices are in: Home Assistant tells it when this is "
            "read, and only those in that area are read, from among this {count} device: {names}.",
            "The assistant wants to read the current state of the devices you allowed that are in the area {area}. "
            "The Console does not know yet which rooms your devices are in: Home Assistant tells it when this is "
            "read, and only those in that area are read, from among these {count}: {names}.",
            count, area=_quoted(area), names=names)
    return Words.counted(
        "The assistant wants to read the current state of the devices you allowed that are in the area {area}. "
        "The Console does not know yet which rooms your devices are in: Home Assistant tells it when this is read, "
        "and only those in that area are read, from among {count} of them, such as {names}.",
        "The assistant wants to read the current state of the devices you allowed that are in the area {area}. "
        "The Console does not know yet which rooms your devices are in: Home Assistant tells it when this is read, "
        "and only those in that area are read, from among {count} of them, such as {names}.",
        count, area=_quoted(area), names=names)


def _reads(config: HomeAssistantConfig, read: list[str], everything: bool) -> Words:
    """The sentence naming the devices read: all the allowed ones, or some; named, or some named as examples."""
    count, names = len(read), named(config, read)
    if not read:
        return Words(READS_NONE)
    if everything and count == 1:
        return Words("The assistant wants to read the current state of the one device you allowed: {names}.",
                     names=names)
    if everything and count == 2:
        return Words("The assistant wants to read the current state of both devices you allowed: {names}.",
                     names=names)
    if everything:
        if count <= MAX_NAMED:
            return Words.counted("The assistant wants to read the current state of all {count} device you allowed: "
                                 "{names}.",
                                 "The assistant wants to read the current state of all {count} devices you allowed: "
                                 "{names}.", count, names=names)
        return Words.counted("The assistant wants to read the current state of all {count} device you allowed, among "
                             "them {names}.",
                             "The assistant wants to read the current state of all {count} devices you allowed, "
                             "among them {names}.", count, names=names)
    if count <= MAX_NAMED:
        return Words.counted("The assistant wants to read the current state of {count} of the devices you allowed: "
                             "{names}.",
                             "The assistant wants to read the current state of {count} of the devices you allowed: "
                             "{names}.", count, names=names)
    return Words.counted("The assistant wants to read the current state of {count} of the devices you allowed, "
                         "among them {names}.",
                         "The assistant wants to read the current state of {count} of the devices you allowed, "
                         "among them {names}.", count, names=names)


def _what_is_read(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts) -> list[Words]:
    """The sentence of which devices are read; for unknown areas, it says the area itself."""
    if "area" in arguments and facts.areas is None:
        # What the other filters keep, and the limit, can only narrow these: none outside them is read.
        candidates = selection(config, {k: v for k, v in arguments.items() if k != "area"}, None)
        if not candidates:
            return [Words(READS_NONE), Words(ASKED_AREA, area=_quoted(arguments["area"]))]
        return [_in_unknown_area(config, arguments["area"], candidates)]
    sentences = [_reads(config, named_by_card(config, arguments, facts.areas), not arguments)]
    if "area" in arguments:
        sentences.append(Words(ASKED_AREA, area=_quoted(arguments["area"])))
    return sentences


def card(config: HomeAssistantConfig, arguments: Mapping[str, Any], facts: CardFacts = NOTHING_KNOWN) -> Card:
    """Which of the allowed devices are read (named, and only those the filters keep), and where it goes."""
    said = _what_is_read(config, arguments, facts)
    if "domain" in arguments:
        said.append(Words(ASKED_KIND, kind=kind_words(arguments["domain"])))
    if "name" in arguments:
        said.append(Words(ASKED_NAME, name=_quoted(arguments["name"])))
    if "limit" in arguments:
        said.append(Words(ASKED_LIMIT, limit=_limit(arguments)))
    return Card(title=Words(CARD_TITLE), body=sentences(*said, leaves_device(config)))


def binds(config: HomeAssistantConfig) -> Mapping[str, Any]:
    """The card names the allowed entities the filters keep, by their saved names: approved was a read of those."""
    return {"entities": sorted(config.allowlisted_entities),
            "names": {e: config.display_name(e) for e in sorted(config.allowlisted_entities)}}


CAPABILITY = Capability(
    name=NAME,
    description=(
        "Read the current state of the Home Assistant entities the household has allowed the assistant "
        "to see: all of them, or only those of one domain (light, sensor...), in one area (a room, by its "
        "name) or whose name contains some words; case and accents are ignored. Each entity comes with its "
        "area; `total` says how many matched before `limit`. An area or domain with no allowed entity gives "
        "an empty list. Each read asks the household for approval first. A name or state too long for the "
        "result is cut and ends in \u2026."
    ),
    arguments_schema={
        "type": "object",
        "properties": {
            # Each text filter holds something besides spaces: a name of spaces would match every entity.
            "domain": {"type": "string", "minLength": 1, "maxLength": MAX_DOMAIN_CHARS, "pattern": r"\S",
                       "description": "Only entities of this domain, such as light or sensor"},
            "area": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_CHARS, "pattern": r"\S",
                     "description": "Only entities in this area: its name, id or alias, such as Kitchen"},
            "name": {"type": "string", "minLength": 1, "maxLength": MAX_FILTER_CHARS, "pattern": r"\S",
                     "description": "Only entities whose name or id contains these words"},
            "limit": {"type": "integer", "minimum": 1, "maximum": MAX_LIMIT,
                      "description": "At most this many entities"},
        },
        "additionalProperties": False,
    },
    argument_messages={
        "domain": f"domain must be a domain such as light or sensor, at most {MAX_DOMAIN_CHARS} characters.",
        "area": f"area must be an area's name, id or alias, 1 to {MAX_FILTER_CHARS} characters, not only spaces.",
        "name": f"name must be 1 to {MAX_FILTER_CHARS} characters of an entity's name, not only spaces.",
        "limit": f"limit must be a whole number from 1 to {MAX_LIMIT}.",
    },
    result_schema={
        "type": "object",
        "required": ["entities", "missing_entities", "total", "retrieved_at"],
        "additionalProperties": False,
        "properties": {
            "entities": {"type": "array", "items": ENTITY_SCHEMA},
            # allowlisted entities Home Assistant no longer has (those the filters and the limit keep)
            "missing_entities": {"type": "array", "items": ENTITY_ID_SCHEMA},
            # how many allowlisted entities matched, before the limit
            "total": {"type": "integer", "minimum": 0},
            # there, false, only when Home Assistant could not say which areas entities are in
            "areas_known": AREAS_KNOWN_SCHEMA,
            "retrieved_at": TIMESTAMP_SCHEMA,
        },
    },
    bounds=Bounds(timeout_seconds=8, max_result_bytes=MAX_RESULT_BYTES),
    execute=execute,
    card=card,
    binds=binds,
    activity_words=Words("Current state of your devices"),
    prompt_summary="what devices are doing now, with their areas; filter by domain, area or name.",
    # Every state, and the three registry lists that place entities in areas (one round, kept a minute).
    reads=Reads(paths=("/api/states",), commands=REGISTRY_COMMANDS),
)
