"""A card names exactly what its read returns: for every read and every kind of the picker, over mixed rooms.

What a call reads is found by running the capability itself against the stub Home Assistant with the same
allowlist and areas (list_entities), or from what the capability declares it reads (`entities_named`, for
the reads of one entity); never by writing the filter's rule again here.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, CardMemory, ReadNotes, Traits
from console_ha.capabilities.cards import quoted
from console_ha.capabilities.list_entities import CAPABILITY as LIST_ENTITIES
from console_ha.capabilities.list_entities import MAX_NAMED
from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.spec import Capability
from console_ha.capabilities.stages import validate
from console_ha.deadline import Deadline
from console_ha.ha.areas import build_area_index
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.language import ENGLISH, Language, by_code
from console_ha.secret import Secret
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from console_ha.words import KIND_NAMES, kind_name
from tests.executors import executor_over
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
DOMAINS = sorted(KIND_NAMES)
# Three rooms (one found through its alias) and no room at all, for every kind of the picker.
ROOMS = {"kitchen": "Kitchen", "living_room": "Living room", "bedroom": "Bedroom", None: "nowhere"}
AREAS = [{"area_id": "kitchen", "name": "Kitchen", "aliases": ["Cooking corner"]},
         {"area_id": "living_room", "name": "Living room", "aliases": ["Lounge"]},
         {"area_id": "bedroom", "name": "Bedroom", "aliases": []}]


def _entities() -> list[tuple[str, str | None, str]]:
    """(entity_id, area_id, saved name) for each kind in each room; each name carries a tag no other holds."""
    made = []
    for index, (domain, area) in enumerate((d, a) for d in DOMAINS for a in ROOMS):
        made.append((f"{domain}.{area or 'outside'}_{index:03d}", area, f"{ROOMS[area]} thing #{index:03d}"))
    return made


ENTITIES = _entities()
# Allowed but gone from Home Assistant: the read answers them as missing, and the card may name them.
GONE = [("light.gone_999", "kitchen", "Kitchen thing #999")]
ALLOWED = tuple(e for e, _, _ in [*ENTITIES, *GONE])
NAMES = {e: name for e, _, name in [*ENTITIES, *GONE]}
TAG = re.compile(r"#(\d{3})")
BY_TAG = {TAG.search(name).group(1): e for e, name in NAMES.items()}  # type: ignore[union-attr]
PLACED = [{"entity_id": e, "area_id": a, "device_id": None} for e, a, _ in [*ENTITIES, *GONE]]
REGISTRIES = {"config/area_registry/list": AREAS, "config/entity_registry/list": PLACED,
              "config/device_registry/list": []}
INDEX = build_area_index(AREAS, PLACED, [])
# Issue 26: a card names the same devices in every language the household may read it in.
LANGUAGES = [pytest.param(ENGLISH, id="en"), pytest.param(by_code("fr"), id="fr"),
             pytest.param(by_code("zh-Hans"), id="zh-Hans")]


def shown(words: str, language: Language) -> str:
    """A card's words as the household reads them in `language` (a Words below; English as it is)."""
    return words.in_language(language) if hasattr(words, "in_language") else words


@pytest.fixture(scope="module")
def home() -> Iterator[StubHomeAssistant]:
    """A stub with every allowed entity (but the gone one), its registries placing them in rooms."""
    with StubHomeAssistant() as stub:
        stub.states = [{"entity_id": e, "state": "on", "attributes": {"friendly_name": f"HA's own {n}"},
                        "last_changed": "2026-12-01T11:00:00+00:00"} for e, _, n in ENTITIES]
        stub.registries = REGISTRIES
        yield stub


def config_for(stub: StubHomeAssistant) -> HomeAssistantConfig:
    return HomeAssistantConfig(enabled=True, base_url=stub.base_url, allowlisted_entities=ALLOWED,
                               entity_names=NAMES)


def named_in(text: str) -> set[str]:
    """The allowed entities a card's words name, by the tag in each saved name, or by their id."""
    return {BY_TAG[tag] for tag in TAG.findall(text)} | {e for e in ALLOWED if e in text}


def listed(stub: StubHomeAssistant, arguments: dict[str, Any]) -> set[str]:
    """What list_entities answers about: its entities, and the allowed ones it reports gone."""
    with HomeAssistantClient(stub.base_url, Secret(stub.token), reads=LIST_ENTITIES.reads) as client:
        result = LIST_ENTITIES.execute(client, config_for(stub), validate(LIST_ENTITIES, arguments), Deadline(8), NOW)
    return {e["entity_id"] for e in result["entities"]} | set(result["missing_entities"])


FILTERS: list[dict[str, Any]] = [
           {"domain": "{domain}"}, {"domain": "{domain}", "area": "Kitchen"}, {"domain": "{domain}", "area": "lounge"},
           {"domain": "{domain}", "name": "bedroom"}, {"domain": "{domain}", "area": "kitchen", "name": "thing"},
           {"domain": "{domain}", "limit": 2}]


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("domain", DOMAINS)
def test_a_filtered_list_card_names_exactly_what_the_read_returns(
        home: StubHomeAssistant, domain: str, language: Language) -> None:
    """With the areas held, the card names the devices the read answers with, every one and no other."""
    config = config_for(home)
    for shape in FILTERS:
        arguments = {k: v.format(domain=domain) if isinstance(v, str) else v for k, v in shape.items()}
        body = shown(LIST_ENTITIES.card(config, arguments, CardFacts(areas=INDEX)).body, language)
        read = listed(home, arguments)
        assert named_in(body) == read, (arguments, body)
        # The picker's words for the kind, quoted as the language quotes; never the domain's id.
        assert shown(quoted(kind_name(domain)), language) in body and f"“{domain}”" not in body
        assert f"“{KIND_NAMES[domain]}”" in body or language is not ENGLISH


@pytest.mark.parametrize("arguments", [{"area": "Kitchen"}, {"area": "Cooking corner", "name": "thing"},
                                       {"name": "living room"}, {"area": "No such room"}, {"limit": 3},
                                       {"area": "bedroom", "limit": 1}])
def test_across_kinds_the_card_names_nothing_the_read_does_not_return(
        home: StubHomeAssistant, arguments: dict[str, Any]) -> None:
    body = LIST_ENTITIES.card(config_for(home), arguments, CardFacts(areas=INDEX)).body
    read = listed(home, arguments)
    assert named_in(body) <= read
    if len(read) <= MAX_NAMED:
        assert named_in(body) == read


@pytest.mark.parametrize("domain", ["light", "sensor", "climate"])
def test_without_areas_the_card_says_so_and_names_only_what_the_other_filters_keep(
        home: StubHomeAssistant, domain: str) -> None:
    arguments = {"domain": domain, "area": "Kitchen"}
    body = LIST_ENTITIES.card(config_for(home), arguments, NOTHING_KNOWN).body
    assert "does not know yet which rooms your devices are in" in body
    assert "only those in that area are read" in body
    # What the read would answer without the room, run by the capability itself: the card names only those.
    assert named_in(body) <= listed(home, {"domain": domain})
    assert listed(home, arguments) <= named_in(body)


def test_the_issue_s_kitchen_lights_card_names_no_device_of_another_room() -> None:
    """Issue 25: "…of the 5 devices you allowed (Living room temperature, Living room ceiling, Kitchen …)"."""
    allowed = ("sensor.living_room_temperature", "light.living_room_ceiling", "sensor.kitchen_temperature",
               "light.kitchen_ceiling", "light.kitchen_counter")
    placed = [{"entity_id": e, "area_id": "kitchen" if "kitchen" in e else "living_room", "device_id": None}
              for e in allowed]
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123", allowlisted_entities=allowed)
    card = LIST_ENTITIES.card(config, {"area": "Kitchen", "domain": "light"},
                              CardFacts(areas=build_area_index(AREAS, placed, [])))
    assert card.body.startswith("The assistant wants to read the current state of 2 of the devices you allowed: "
                                "Kitchen ceiling, Kitchen counter.")
    assert "Living room" not in card.body and "Kitchen temperature" not in card.body
    assert "It asked for those of the kind “Lights”." in card.body and "“light”" not in card.body


def test_a_list_card_with_nothing_kept_names_nothing() -> None:
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123",
                                 allowlisted_entities=("light.hall", "sensor.attic"))
    body = LIST_ENTITIES.card(config, {"domain": "lock"}).body
    assert body.startswith("None of the devices you allowed is one the assistant asked for")
    assert "Hall" not in body and "Attic" not in body


# --- the reads of one entity, and the reads that name none --------------------------------------------------

def arguments_for(capability: Capability, entity_id: str) -> dict[str, Any]:
    """Valid arguments naming `entity_id` wherever the capability takes an entity (the first choice elsewhere)."""
    arguments: dict[str, Any] = {}
    for name, schema in capability.arguments_schema["properties"].items():
        if name in capability.entity_arguments:
            arguments[name] = entity_id
        elif name in capability.arguments_schema.get("required", []):
            arguments[name] = schema["enum"][0] if "enum" in schema else schema["examples"][0]
    return arguments


@pytest.mark.parametrize("language", LANGUAGES)
@pytest.mark.parametrize("capability", [c for c in REGISTRY.values() if c is not LIST_ENTITIES], ids=lambda c: c.name)
def test_every_other_read_s_card_names_only_the_entity_it_reads(capability: Capability, language: Language) -> None:
    """For each kind: a read of one entity names that one only; a search or a count names none."""
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123", allowlisted_entities=ALLOWED,
                                 entity_names=NAMES)
    facts = CardFacts(areas=INDEX, traits={e: Traits("temperature", "measurement") for e in ALLOWED})
    # A read that answers for some kinds only (a calendar's, issue 28) refuses any other at stage 2.
    for domain in (d for d in DOMAINS if capability.answers_for is None or d in capability.answers_for):
        entity = next(e for e in ALLOWED if e.startswith(f"{domain}."))
        arguments = validate(capability, arguments_for(capability, entity))
        reads = set(capability.entities_named(arguments))
        for known in (facts, NOTHING_KNOWN):
            card = capability.card(config, arguments, known)
            words = f"{shown(card.title, language)} {shown(card.body, language)}"
            assert named_in(words) == reads, (capability.name, domain)


def test_a_list_read_remembers_each_device_s_kind_for_the_next_card(home: StubHomeAssistant) -> None:
    """Nothing is asked of Home Assistant for a card: what it knows of a kind comes from a read already made."""
    memory = CardMemory()
    sensor = next(e for e in ALLOWED if e.startswith("sensor."))
    home.set_state(sensor, "1234", {"device_class": "energy", "state_class": "total_increasing"})
    with HomeAssistantClient(home.base_url, Secret(home.token), reads=LIST_ENTITIES.reads) as client:
        LIST_ENTITIES.execute(client, config_for(home), {"domain": "sensor"}, Deadline(8), NOW, ReadNotes(memory))
        key = client.cache_key
    seen = memory.facts(key).traits_for(sensor)
    assert seen == Traits("energy", "total_increasing") and seen.is_meter
    assert memory.facts(("http://elsewhere:8123", "x", "")) == NOTHING_KNOWN


# --- between the card and the read: the read names nothing the card did not ------------------------------

def test_a_device_moved_into_the_room_after_the_card_is_not_read(data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    """The card named the Kitchen's devices by the rooms it knew; one moved in before the read is not read (the
    household never saw it named), and one moved out is not either (no longer in the Kitchen)."""
    allowed = ["light.living_room", "light.bedroom", "sensor.living_room_temperature"]
    stub_ha.serve_registries({"light.living_room": "Kitchen", "light.bedroom": "Bedroom",
                              "sensor.living_room_temperature": "Kitchen"})
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": allowed},
                  token=stub_ha.token)
    executor = executor_over(data_dir)
    first = executor.propose(LIST_ENTITIES.name, {"area": "Kitchen"}, conversation_id="c")
    executor.answer(first.token, approve=True, conversation_id="c")  # the rooms are known from here on
    card = executor.propose(LIST_ENTITIES.name, {"area": "Kitchen"}, conversation_id="c")
    assert card.card.body.startswith("The assistant wants to read the current state of 2 of the devices you "
                                     "allowed: Living room, Living room temperature.")
    stub_ha.serve_registries({"light.living_room": "Kitchen", "light.bedroom": "Kitchen",
                              "sensor.living_room_temperature": "Bedroom"})
    # The executor's clients are made for one read each (no Console keeps their areas): this read reads the rooms.
    result = executor.answer(card.token, approve=True, conversation_id="c")
    assert [e["entity_id"] for e in result["entities"]] == ["light.living_room"]
    assert result["total"] == 1 and result["missing_entities"] == []


# --- any allowlist, rooms, names and filters: the card names what the read returns ---------------------------

# Saved names hold no control or format characters (store/config.py drops them); anything else may be there:
# accents, RTL letters, quotes, "?", HTML. No "#" or digit, so the tag that starts each name stays its own.
NAME_TEXT = st.text(st.characters(blacklist_categories=("Cc", "Cf", "Cs", "Nd"), blacklist_characters="#"),
                    min_size=1, max_size=60).filter(lambda text: text.strip() != "")
ROOM_WORDS = st.sampled_from(["Kitchen", "KÜCHE", "kitchen ", "Cooking corner", "lounge", "Living room", "bedroom",
                              "No such room", "Bedroom‏"])
PICKED = st.lists(st.integers(0, len(ENTITIES) - 1), min_size=1, max_size=40, unique=True)


@st.composite
def homes(draw: st.DrawFn) -> tuple[HomeAssistantConfig, list[dict[str, Any]], dict[str, Any]]:
    """An allowlist with odd names placed in rooms (one gone from Home Assistant, maybe), and filters for it."""
    picked = [ENTITIES[i] for i in draw(PICKED)]
    gone = draw(st.booleans())
    names = {e: f"#{TAG.search(n).group(1)} {draw(NAME_TEXT)}" for e, _, n in picked}  # type: ignore[union-attr]
    rooms = {e: draw(st.sampled_from(list(ROOMS))) for e, _, _ in picked}
    allowed = [e for e, _, _ in picked] + (["light.gone_999"] if gone else [])
    names.update({"light.gone_999": "#999 gone"} if gone else {})
    config = HomeAssistantConfig(enabled=True, base_url="http://127.0.0.1:1", allowlisted_entities=tuple(allowed),
                                 entity_names=names)
    placed = [{"entity_id": e, "area_id": rooms.get(e, "kitchen"), "device_id": None} for e in allowed
              if rooms.get(e, "kitchen") is not None]
    arguments: dict[str, Any] = {}
    if draw(st.booleans()):
        arguments["domain"] = draw(st.sampled_from([*DOMAINS, "LIGHT", "ｌｉｇｈｔ", "lights"]))
    if draw(st.booleans()):
        arguments["area"] = draw(ROOM_WORDS)
    if draw(st.booleans()):
        text = names[draw(st.sampled_from(allowed))][5:]
        arguments["name"] = text[:draw(st.integers(1, max(1, len(text))))].strip() or "x"
    if draw(st.booleans()):
        arguments["limit"] = draw(st.integers(1, 15))
    return config, placed, arguments


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(home_and_filters=homes())
def test_for_any_allowlist_rooms_names_and_filters_the_card_names_exactly_what_is_read(
        home: StubHomeAssistant, home_and_filters: tuple[HomeAssistantConfig, list[dict[str, Any]], dict[str, Any]],
) -> None:
    config, placed, arguments = home_and_filters
    config = dataclasses.replace(config, base_url=home.base_url)
    index = build_area_index(AREAS, placed, [])
    home.registries = {**REGISTRIES, "config/entity_registry/list": placed}
    arguments = validate(LIST_ENTITIES, arguments)
    body = LIST_ENTITIES.card(config, arguments, CardFacts(areas=index)).body
    with HomeAssistantClient(home.base_url, Secret(home.token), reads=LIST_ENTITIES.reads) as client:
        result = LIST_ENTITIES.execute(client, config, arguments, Deadline(8), NOW)
    read = {e["entity_id"] for e in result["entities"]} | set(result["missing_entities"])
    named = {BY_TAG[tag] for tag in TAG.findall(body)}
    assert named <= read, (arguments, body)
    if len(read) <= MAX_NAMED:
        assert named == read, (arguments, body)
    # Before any room is known: the card names every device the read may answer about (it says so), no other.
    unknown = LIST_ENTITIES.card(config, arguments, NOTHING_KNOWN).body
    if "such as" not in unknown and "among them" not in unknown:
        assert read <= {BY_TAG[tag] for tag in TAG.findall(unknown)}, (arguments, unknown)
