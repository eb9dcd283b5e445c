"""With several Home Assistants a card names the one it reads, by its name, in its title and its last sentence;
with one, every card stays word for word as it was (issue 29)."""

from __future__ import annotations

from typing import Any

import pytest

from console_ha.capabilities.cards import Card, at_instance
from console_ha.capabilities.get_state import NAME as GET_STATE
from console_ha.capabilities.get_statistics import NAME as GET_STATISTICS
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.registry import REGISTRY
from console_ha.language import ENGLISH, LANGUAGES, Language, Words
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from console_ha.store.instances import Instances
from tests.executors import configured, executor_over
from tests.stub_ha import StubHomeAssistant
from tests.two_instances import CABIN, seed_instance

CONFIG = HomeAssistantConfig(enabled=True, base_url="http://cabin.local:8123", name="Cabin",
                             allowlisted_entities=("sensor.living_room_temperature", "calendar.family",
                                                   "todo.shopping", "weather.home", "sensor.energy_consumption"),
                             entity_names={"sensor.living_room_temperature": "Living room temperature"})
# One valid invocation of every read, in the registry's order.
ARGUMENTS: dict[str, dict[str, Any]] = {
    "home_assistant.list_entities": {"domain": "sensor"},
    "home_assistant.get_history": {"entity_id": "sensor.living_room_temperature", "period": "day"},
    "home_assistant.get_state": {"entity_id": "sensor.living_room_temperature"},
    "home_assistant.find_entities": {"query": "temperature"},
    "home_assistant.list_areas": {},
    "home_assistant.get_statistics": {"entity_id": "sensor.energy_consumption", "period": "last_month"},
    "home_assistant.get_logbook": {"entity_id": "sensor.living_room_temperature", "period": "hour"},
    "home_assistant.get_calendar": {"entity_id": "calendar.family", "period": "today"},
    "home_assistant.get_todo": {"entity_id": "todo.shopping"},
    "home_assistant.get_forecast": {"entity_id": "weather.home", "kind": "daily"},
}
LEAVES = "This request leaves this device for Home Assistant at cabin.local:8123."
NAMED = "This request leaves this device for your Home Assistant “Cabin” at cabin.local:8123."


def test_every_read_is_in_the_table() -> None:
    assert list(ARGUMENTS) == list(REGISTRY)


@pytest.mark.parametrize("name", list(ARGUMENTS))
def test_every_read_s_card_names_the_instance_in_its_title_and_its_last_sentence(name: str) -> None:
    card = REGISTRY[name].card(CONFIG, ARGUMENTS[name])
    named = at_instance(card, "Cabin")
    assert card.body.endswith(LEAVES), "every card ends with `leaves_device`: at_instance swaps that sentence"
    assert named.title == f"Cabin: {card.title}"
    assert named.body == card.body.removesuffix(LEAVES) + NAMED
    assert (named.approve_label, named.deny_label) == (card.approve_label, card.deny_label)


@pytest.mark.parametrize("language", LANGUAGES, ids=lambda language: language.code)
def test_the_named_card_reads_as_one_sentence_of_the_language_with_the_name_in_it(language: Language) -> None:
    card = REGISTRY[GET_STATE].card(CONFIG, ARGUMENTS[GET_STATE])
    named = at_instance(card, "Cabin")
    assert isinstance(named.body, Words) and isinstance(named.title, Words) and isinstance(card.body, Words)
    body, plain = named.body.in_language(language), card.body.in_language(language)
    assert "Cabin" in body and "cabin.local:8123" in body and "Cabin" in named.title.in_language(language)
    assert body != plain and body.startswith(plain[:20])
    if language != ENGLISH:
        assert "leaves this device" not in body  # translated, not English left in


def test_with_one_home_assistant_the_executor_s_card_is_the_capability_s_own_word_for_word(
        data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    executor = configured(data_dir, stub_ha, ["sensor.living_room_temperature"])
    proposal = executor.propose(GET_STATE, ARGUMENTS[GET_STATE], conversation_id="c")
    config = Instances(data_dir).home.config.load()
    assert proposal.card == REGISTRY[GET_STATE].card(config, ARGUMENTS[GET_STATE])
    assert proposal.card.title == "Read Living room temperature now?"


def test_with_two_home_assistants_each_card_names_its_own_by_name_and_address(
        data_dir: DataDir, two_homes: tuple[StubHomeAssistant, StubHomeAssistant]) -> None:
    house, cabin = two_homes
    executor = configured(data_dir, house, ["sensor.living_room_temperature"])
    seed_instance(data_dir, cabin, ["sensor.living_room_temperature"])
    at_cabin = executor.propose(GET_STATE, {**ARGUMENTS[GET_STATE], "instance": CABIN}, conversation_id="c")
    at_home = executor.propose(GET_STATE, ARGUMENTS[GET_STATE], conversation_id="d")
    cabin_host, house_host = (stub.base_url.removeprefix("http://") for stub in (cabin, house))
    assert at_cabin.card.title == "Cabin: Read Living room temperature now?"
    assert at_cabin.card.body.endswith(f"for your Home Assistant “Cabin” at {cabin_host}.")
    # Home is called "Home" until the household names it.
    assert at_home.card.title == "Home: Read Living room temperature now?"
    assert at_home.card.body.endswith(f"for your Home Assistant “Home” at {house_host}.")


def test_cards_of_both_home_assistants_keep_what_their_reads_taught_them(
        data_dir: DataDir, two_homes: tuple[StubHomeAssistant, StubHomeAssistant]) -> None:
    """A read of the cabin leaves what the Console holds of the house (here, that a sensor is a meter)."""
    house, cabin = two_homes
    allowed = ["sensor.energy_consumption"]
    configured(data_dir, house, allowed)
    seed_instance(data_dir, cabin, allowed)
    executor = executor_over(data_dir)

    def read(arguments: dict[str, Any]) -> None:
        proposal = executor.propose(LIST_ENTITIES, arguments, conversation_id="c")
        executor.answer(proposal.token, approve=True, conversation_id="c")

    def statistics_card(arguments: dict[str, Any]) -> Card:
        return executor.propose(GET_STATISTICS, {**ARGUMENTS[GET_STATISTICS], **arguments}, conversation_id="s").card
    read({})
    read({"instance": CABIN})
    for arguments in ({}, {"instance": CABIN}):
        body = statistics_card(arguments).body
        assert "They say how much Energy consumption counted last month." in body, body
