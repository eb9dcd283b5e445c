"""A card's words fit the kind of device, are written once, and are quoted whole: never "now?." in any line."""

from __future__ import annotations

import re
from types import SimpleNamespace
from typing import Any

import pytest

from console_ha import words
from console_ha.answers.page_watch import HouseholdWatch
from console_ha.capabilities.card_facts import NOTHING_KNOWN, CardFacts, Traits
from console_ha.capabilities.find_entities import NAME as FIND_ENTITIES
from console_ha.capabilities.get_state import DOMAIN_WORDS, HOUSEHOLD_ATTRIBUTES
from console_ha.capabilities.get_state import NAME as GET_STATE
from console_ha.capabilities.get_statistics import NAME as GET_STATISTICS
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.registry import REGISTRY
from console_ha.capabilities.spec import Capability
from console_ha.capabilities.stages import validate
from console_ha.console import Console
from console_ha.errors import CapabilityError
from console_ha.language import Language, Words, by_code
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from console_ha.words import (
    CHAT_ALLOWED,
    CHAT_ALLOWED_FAILED,
    CHAT_DENIED,
    CHAT_EXPIRED,
    CHAT_FALLBACK,
    CHAT_RESTARTED,
    CHAT_WITHDRAWN,
    CHAT_WORDS,
    KIND_NAMES,
    NOTIFICATION_BODY,
)
from tests.executors import configured
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

DOMAINS = sorted(KIND_NAMES)
CONFIG = HomeAssistantConfig(enabled=True, base_url="http://homeassistant.local:8123",
                             allowlisted_entities=tuple(f"{d}.kitchen" for d in DOMAINS),
                             entity_names={f"{d}.kitchen": f"Kitchen {KIND_NAMES[d].lower()}" for d in DOMAINS})
SEEN_AS: dict[str, Traits | None] = {
           "temperature": Traits("temperature", "measurement"), "humidity": Traits("humidity", "measurement"),
           "energy meter": Traits("energy", "total_increasing"), "gas meter": Traits("gas", None),
           "counter": Traits(None, "total"), "unknown": None}
# Punctuation doubled where one sentence is put inside another: "now?.", "..", "?:", " ." and the like.
DOUBLED = re.compile(r"[?!.:;,][.?!:;,]|\s[.?!:;,]")


def doubled(text: str) -> list[str]:
    """The doublings in `text`, quotes set aside (“now?”. is still "now?.")."""
    return DOUBLED.findall(re.sub("[“”‘’]", "", text))


def arguments_for(capability: Capability, entity_id: str) -> dict[str, Any]:
    """Valid arguments naming `entity_id` where the capability takes an entity, the first choice elsewhere."""
    arguments: dict[str, Any] = {}
    for name, schema in capability.arguments_schema["properties"].items():
        if name in capability.entity_arguments:
            arguments[name] = entity_id
        elif name in capability.arguments_schema.get("required", []):
            arguments[name] = schema["enum"][0] if "enum" in schema else schema["examples"][0]
    return validate(capability, arguments)


def every_card() -> list[tuple[str, Any]]:
    """Each read's card for each kind, with its kind of reading seen and not, and list filters of each kind."""
    cards = []
    for capability in REGISTRY.values():
        # A read that answers for some kinds only (a calendar's, issue 28) refuses any other at stage 2.
        for domain in (d for d in DOMAINS if capability.answers_for is None or d in capability.answers_for):
            for seen in SEEN_AS.values():
                facts = CardFacts(traits={f"{domain}.kitchen": seen}) if seen else NOTHING_KNOWN
                cards.append((capability.name, capability.card(CONFIG, arguments_for(capability, f"{domain}.kitchen"),
                                                               facts)))
    for arguments in ({"domain": "light"}, {"domain": "Lights!"}, {"area": "Kitchen", "limit": 3},
                      {"name": "kitchen", "domain": "sensor", "area": "Lounge", "limit": 1}, {"domain": "lock"}):
        cards.append((LIST_ENTITIES, REGISTRY[LIST_ENTITIES].card(CONFIG, validate(REGISTRY[LIST_ENTITIES],
                                                                                    arguments))))
    for query in ("kitchen lights?", "front door.", "is it warm…"):  # the model's words, quoted inside a sentence
        cards.append((FIND_ENTITIES, REGISTRY[FIND_ENTITIES].card(CONFIG, {"query": query})))
    return cards


CARDS = every_card()


def test_every_card_is_a_question_and_whole_sentences_without_doubled_punctuation() -> None:
    for name, card in CARDS:
        assert card.title.endswith("?") and card.body.endswith("."), (name, card)
        assert doubled(card.title) == [] and doubled(card.body) == [], (name, card)


# Every line of words.py that quotes a card's title, found by its placeholder: a new one cannot be left out.
QUOTING = [line for line in vars(words).values() if isinstance(line, str) and re.search(r"\{(card_)?title\}", line)]
# Those with another placeholder besides, filled with every text it takes.
FILLED = {CHAT_ALLOWED_FAILED: [CHAT_ALLOWED_FAILED.replace("{outcome}", outcome)
                                for outcome in [*CHAT_WORDS.values(), CHAT_FALLBACK]]}


def test_the_lines_that_quote_a_card_are_all_found() -> None:
    assert {CHAT_ALLOWED, CHAT_DENIED, CHAT_WITHDRAWN, CHAT_EXPIRED, CHAT_RESTARTED, NOTIFICATION_BODY,
            CHAT_ALLOWED_FAILED} <= set(QUOTING)


@pytest.mark.parametrize("line", [filled for line in QUOTING for filled in FILLED.get(line, [line])])
def test_every_line_that_quotes_a_card_quotes_it_whole_without_doubled_punctuation(line: str) -> None:
    """Issue 25: "You did not allow: Read Kitchen Lights now?. Nothing was read." """
    for _, card in CARDS:
        said = line.format(title=card.title, card_title=card.title)
        assert card.title in said and doubled(said) == [], said


def test_the_notification_a_page_shows_quotes_the_title_whole() -> None:
    title = REGISTRY[GET_STATE].card(CONFIG, {"entity_id": "light.kitchen"}).title
    waiting = SimpleNamespace(token="t", client="desk", proposal=SimpleNamespace(card=SimpleNamespace(title=title)))
    watch = HouseholdWatch(lambda: [waiting])  # type: ignore[list-item]  # only the fields it reads
    body = watch.now().to_dict()["cards"][0]["notification_body"]
    assert body == "Read Kitchen lights now? Allow it or not on the Console’s Confirmations page."


# --- issue 26: the same cards in French and in Chinese -------------------------------------------------------

FRENCH, CHINESE = by_code("fr"), by_code("zh-Hans")
# French typography: a (narrow) no-break space before ? ! : ; and inside « »; set aside before looking for doublings.
FRENCH_SPACED = re.compile("[\u202f\u00a0](?=[?!:;»])|(?<=«)\u00a0")
# Chinese full-width punctuation doubled ("？。", "。。", "，。").
DOUBLED_WIDE = re.compile("[？！。：；，、][。？！：；，、]|[?!.:;,][。？！：；，]|[。？！：；，][.?!:;,]")
# What is not the card's own words: the names, ids and address it quotes, the picker's kind names (the settings
# converter's words), the model's quoted query, and Home Assistant's own name.
VALUES = re.compile("|".join(re.escape(v) for v in sorted(
    {*CONFIG.entity_names.values(), *CONFIG.allowlisted_entities, *KIND_NAMES.values(), "homeassistant.local:8123",
     "Home Assistant", "kitchen lights", "front door", "is it warm", "Kitchen", "Lounge", "kitchen", "Lights"},
    key=len, reverse=True)))
ENGLISH_WORDS = re.compile(r"\b(the|and|wants|read|now|its|devices?|allowed|request|leaves|this|asked|statistics|"
                           r"history|logbook|what|whether|which|room)\b", re.IGNORECASE)


def test_every_card_in_french_is_a_question_in_whole_french_sentences() -> None:
    for name, card in CARDS:
        title, body = card.title.in_language(FRENCH), card.body.in_language(FRENCH)
        assert title.endswith("\u202f?") and body.endswith("."), (name, title, body)
        assert doubled(FRENCH_SPACED.sub("", title)) == [] and doubled(FRENCH_SPACED.sub("", body)) == [], body
        left = VALUES.sub("", f"{title} {body}")
        assert ENGLISH_WORDS.findall(left) == [], (name, left)
        assert card.approve_label.in_language(FRENCH) == "Autoriser cette fois-ci"


def test_every_card_in_chinese_is_a_question_in_whole_chinese_sentences() -> None:
    for name, card in CARDS:
        title, body = card.title.in_language(CHINESE), card.body.in_language(CHINESE)
        assert title.endswith("？") and body.endswith("。"), (name, title, body)
        assert DOUBLED_WIDE.findall(f"{title}{body}") == [] and doubled(f"{title} {body}") == [], body
        # Nothing in Latin letters but the values it quotes (and the "Console"'s name is 控制台 there).
        left = VALUES.sub("", f"{title} {body}")
        assert re.findall("[A-Za-z]{2,}", re.sub(r"[a-z_]+\.[a-z_]+", "", left)) == [], (name, left)
        assert card.deny_label.in_language(CHINESE) == "不允许"


@pytest.mark.parametrize("language", [FRENCH, CHINESE], ids=["fr", "zh-Hans"])
def test_every_chat_line_quotes_the_card_whole_in_the_household_s_language(language: Language) -> None:
    """The lines after Allow, Don't allow, a withdrawal and an expiry, the card's title in them, once."""
    for _, card in CARDS[:40]:
        title = card.title.in_language(language)
        for line in (CHAT_ALLOWED, CHAT_DENIED, CHAT_WITHDRAWN, CHAT_EXPIRED):
            said = Words(line, title=card.title).in_language(language)
            assert said.startswith(title) and said != Words(line, title=card.title), said
            spaced = FRENCH_SPACED.sub("", said)
            assert doubled(spaced) == [] and DOUBLED_WIDE.findall(said) == [], said
        failed = Words(CHAT_ALLOWED_FAILED, title=card.title, outcome=CHAT_FALLBACK).in_language(language)
        assert failed.endswith(CHAT_FALLBACK.in_language(language)), failed


def test_the_notification_is_in_the_language_of_the_page_that_shows_it() -> None:
    title = REGISTRY[GET_STATE].card(CONFIG, {"entity_id": "light.kitchen"}).title
    waiting = SimpleNamespace(token="t", client="desk", proposal=SimpleNamespace(card=SimpleNamespace(title=title)))
    card = HouseholdWatch(lambda: [waiting]).now().to_dict()["cards"][0]  # type: ignore[list-item]
    assert card["notification_title"].in_language(FRENCH) == "«\u00a0desk\u00a0» demande à lire Home Assistant"
    assert card["notification_body"].in_language(CHINESE) == (
        "现在读取Kitchen lights？请在控制台的“确认请求”页面上选择是否允许。")


# --- get_state: the details named are those its read returns for the domain ---------------------------------

# A word on a card, and the attributes (HOUSEHOLD_ATTRIBUTES) that a read must return for the card to say it.
WORD_NEEDS = {"brightness": {"brightness"}, "colour": {"color_temp_kelvin", "color_mode"},
              "position": {"current_position"}, "tilt": {"current_tilt_position"}, "volume": {"volume_level"},
              "playing": {"media_title"}, "battery": {"battery_level"}, "humidity": {"humidity", "current_humidity"},
              "temperature": {"temperature", "current_temperature"}, "wind": {"wind_speed"},
              "speed": {"percentage", "fan_speed"}, "version": {"installed_version"}, "step": {"step"}}


def test_every_domain_with_details_has_its_own_sentence() -> None:
    assert set(DOMAIN_WORDS) == set(HOUSEHOLD_ATTRIBUTES)


@pytest.mark.parametrize("domain", DOMAINS)
def test_a_state_card_names_only_details_its_read_returns(domain: str) -> None:
    body = REGISTRY[GET_STATE].card(CONFIG, {"entity_id": f"{domain}.kitchen"}).body.lower()
    keys = set(HOUSEHOLD_ATTRIBUTES.get(domain, ()))
    for word, needs in WORD_NEEDS.items():
        if re.search(rf"\b{word}\b", body.replace(KIND_NAMES[domain].lower(), "")):
            assert keys & needs, f"{domain}: the card says {word!r}, its read returns none of {sorted(needs)}"


def test_a_temperature_sensor_is_asked_how_warm_it_is_not_about_brightness_or_position() -> None:
    """Issue 25: "details such as its temperature, brightness or position" on a thermometer's card."""
    facts = CardFacts(traits={"sensor.kitchen": Traits("temperature", "measurement")})
    body = REGISTRY[GET_STATE].card(CONFIG, {"entity_id": "sensor.kitchen"}, facts).body
    assert body.startswith("The assistant wants to read how warm Kitchen sensors (temperature, energy, humidity…) "
                           "(sensor.kitchen) says it is now, and its room.")
    unseen = REGISTRY[GET_STATE].card(CONFIG, {"entity_id": "sensor.kitchen"}).body
    for said in (body, unseen):
        assert "brightness" not in said and "position" not in said


# --- get_statistics: a meter's are how much, a measurement's how warm or how high ---------------------------

@pytest.mark.parametrize(("seen", "says", "never"), [
    ("energy meter", "They say how much Kitchen sensors (temperature, energy, humidity…) counted last month.",
     ["warm", "how high"]),
    ("gas meter", "how much", ["warm", "how high"]),
    ("counter", "how much", ["warm", "how high"]),
    ("temperature", "They say how warm", ["how much", "how high"]),
    ("humidity", "They say how high", ["how much", "warm"]),
    ("unknown", "whether Kitchen sensors (temperature, energy, humidity…) is a meter or a measurement", ["warm"]),
])
def test_statistics_words_follow_the_kind_of_reading(seen: str, says: str, never: list[str]) -> None:
    traits = SEEN_AS[seen]
    facts = CardFacts(traits={"sensor.kitchen": traits}) if traits else NOTHING_KNOWN
    body = REGISTRY[GET_STATISTICS].card(CONFIG, {"entity_id": "sensor.kitchen", "period": "last_month"}, facts).body
    assert says in body and not any(word in body for word in never), body


def test_an_energy_meter_s_statistics_card_says_how_much_once_a_read_has_seen_it(
        data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    """Issue 25: "how warm (or how high) Energy today was last month". Nothing is asked for the card itself."""
    executor = configured(data_dir, stub_ha, ["sensor.energy_consumption", "sensor.living_room_temperature"])
    arguments = {"entity_id": "sensor.energy_consumption", "period": "last_month"}
    first = executor.propose(GET_STATISTICS, arguments, conversation_id="c")
    assert "how warm" not in first.card.body and "is a meter or a measurement" in first.card.body
    assert stub_ha.requests == []  # the card asked Home Assistant nothing
    listing = executor.propose(LIST_ENTITIES, {"domain": "sensor"}, conversation_id="c")
    executor.answer(listing.token, approve=True, conversation_id="c")
    again = executor.propose(GET_STATISTICS, arguments, conversation_id="c")
    assert "They say how much Energy consumption counted last month." in again.card.body
    assert "how warm" not in again.card.body and "how high" not in again.card.body
    temperature = executor.propose(GET_STATISTICS, {**arguments, "entity_id": "sensor.living_room_temperature"},
                                   conversation_id="c")
    assert "They say how warm Living room temperature was last month" in temperature.card.body


# --- the executor: a card is built from what is held, and asks Home Assistant nothing -----------------------

def test_a_filtered_list_card_asks_nothing_names_the_room_once_areas_are_held(
        data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    stub_ha.serve_registries({"light.living_room": "Living room", "sensor.living_room_temperature": "Living room",
                              "binary_sensor.kitchen_window": "Kitchen"})
    executor = configured(data_dir, stub_ha, ["sensor.living_room_temperature", "light.living_room",
                                              "binary_sensor.kitchen_window", "sensor.outdoor_humidity"])
    cold = executor.propose(LIST_ENTITIES, {"area": "Living room", "domain": "sensor"}, conversation_id="c")
    assert stub_ha.requests == []
    assert "does not know yet which rooms" in cold.card.body
    assert "Living room temperature, Outdoor humidity" in cold.card.body  # only sensors, the room checked later
    assert "Living room" not in cold.card.body.replace("Living room temperature", "").replace("“Living room”", "")
    result = executor.answer(cold.token, approve=True, conversation_id="c")
    assert [e["entity_id"] for e in result["entities"]] == ["sensor.living_room_temperature"]
    held = len(stub_ha.requests)
    warm = executor.propose(LIST_ENTITIES, {"area": "Living room", "domain": "sensor"}, conversation_id="c")
    assert len(stub_ha.requests) == held
    assert warm.card.body.startswith("The assistant wants to read the current state of 1 of the devices you "
                                     "allowed: Living room temperature.")
    assert "Outdoor humidity" not in warm.card.body and "does not know" not in warm.card.body


def test_the_areas_the_picker_read_name_the_first_card_s_devices(data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    """The household chose its devices in the picker, which read the rooms: the first card already names them."""
    stub_ha.serve_registries({"light.living_room": "Living room", "light.bedroom": "Bedroom"})
    configured(data_dir, stub_ha, ["light.living_room", "light.bedroom", "switch.coffee_machine"])
    console = Console.open(data_dir)
    try:
        console.settings.entities()  # the household opens the picker, which reads the rooms
        asked = len(stub_ha.requests)
        proposal = console.executor.propose(LIST_ENTITIES, {"area": "bedroom"}, conversation_id="c")
    finally:
        console.settings.close()
    assert len(stub_ha.requests) == asked
    assert proposal.card.body.startswith("The assistant wants to read the current state of 1 of the devices you "
                                         "allowed: Bedroom.")


def test_after_the_picker_an_energy_meter_s_first_statistics_card_says_how_much(
        data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    """The picker read every state to offer the devices: the kinds of the allowed ones serve the cards after it."""
    configured(data_dir, stub_ha, ["sensor.energy_consumption"])
    console = Console.open(data_dir)
    try:
        console.settings.entities()  # the household opens the picker
        proposal = console.executor.propose(
            GET_STATISTICS, {"entity_id": "sensor.energy_consumption", "period": "this_month"}, conversation_id="c")
    finally:
        console.settings.close()
    assert "They say how much Energy consumption counted this month." in proposal.card.body


def test_an_approval_covers_the_names_its_list_card_showed(data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    """The card names devices by their saved names: renamed while it was open, nothing is read; ask again."""
    executor = configured(data_dir, stub_ha, ["light.living_room", "light.bedroom"])
    proposal = executor.propose(LIST_ENTITIES, {"domain": "light"}, conversation_id="c")
    assert "Living room, Bedroom" in proposal.card.body
    seed_settings(data_dir, {"entity_names": {"light.bedroom": "Guest room lamp"}})
    with pytest.raises(CapabilityError) as caught:
        executor.answer(proposal.token, approve=True, conversation_id="c")
    assert caught.value.code == "CONFIRMATION_INVALID" and caught.value.detail.get("reason") == "settings_changed"
    assert stub_ha.requests == []


@pytest.mark.parametrize("name", ["Garage door.", "Is it on?", "Stop!", "Hall; upstairs:", "Lamp,"])
def test_a_name_s_own_sentence_end_is_not_doubled_in_a_list_card(name: str) -> None:
    """A name that ends as a sentence does ("Garage door.") read "Garage door., Bedroom." in the list."""
    config = HomeAssistantConfig(enabled=True, base_url="http://homeassistant.local:8123",
                                 allowlisted_entities=("light.garage", "light.bedroom"),
                                 entity_names={"light.garage": name, "light.bedroom": "Bedroom"})
    for arguments in ({}, {"domain": "light"}, {"domain": "light", "area": "Kitchen"}):
        body = REGISTRY[LIST_ENTITIES].card(config, arguments).body
        assert doubled(body) == [] and "Bedroom" in body, body


def test_words_cut_short_for_a_card_still_show_they_were_cut() -> None:
    """A filter of 100 three-byte characters is cut to fit the card: its “…” stays, so it is not shown as whole."""
    body = REGISTRY[LIST_ENTITIES].card(CONFIG, {"name": "厨" * 100}).body
    assert "厨…”" in body and doubled(body) == []


def test_a_measurement_of_energy_is_said_as_a_measurement_as_home_assistant_keeps_it() -> None:
    """The recorder keeps a mean for a state class of measurement whatever the device class: the card says
    "how high", not "how much … counted", for an energy sensor that measures."""
    facts = CardFacts(traits={"sensor.kitchen": Traits("energy", "measurement")})
    arguments = {"entity_id": "sensor.kitchen", "period": "last_month"}
    body = REGISTRY[GET_STATISTICS].card(CONFIG, arguments, facts).body
    assert "They say how high" in body and "counted" not in body
    state = REGISTRY[GET_STATE].card(CONFIG, {"entity_id": "sensor.kitchen"}, facts).body
    assert "counted" not in state
