"""Confirmation card copy says, in plain words, what will be read and where the request goes."""

from __future__ import annotations

from console_ha.capabilities.cards import Card
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.registry import REGISTRY
from console_ha.store.config import HomeAssistantConfig

CONFIG = HomeAssistantConfig(
    enabled=True,
    base_url="http://homeassistant.local:8123",
    allowlisted_entities=("sensor.living_room_temperature", "binary_sensor.front_door", "light.hall", "switch.fan"),
    entity_names={"sensor.living_room_temperature": "Living Room Temperature",
                  "binary_sensor.front_door": "Front Door"},
)


def card_for(name: str, config: HomeAssistantConfig, arguments: dict) -> Card:
    """The card the executor shows for one validated invocation of the capability of that name."""
    return REGISTRY[name].card(config, arguments)


def test_history_card_names_the_entity_the_period_and_the_host():
    card = card_for(GET_HISTORY, CONFIG, {"entity_id": "sensor.living_room_temperature", "period": "week"})
    assert card.title == "Read the history of Living Room Temperature?"
    assert "past week" in card.body
    assert "leaves this device" in card.body and "homeassistant.local:8123" in card.body
    assert card.approve_label and card.deny_label


def test_history_card_without_a_known_name_uses_the_object_id_in_words():
    card = card_for(GET_HISTORY, CONFIG, {"entity_id": "light.hall", "period": "hour"})
    assert "Hall" in card.title and "past hour" in card.body


def test_list_card_counts_and_names_every_allowed_device():
    card = card_for(LIST_ENTITIES, CONFIG, {})
    assert card.body.startswith("The assistant wants to read the current state of all 4 devices you allowed: "
                                "Living Room Temperature, Front Door, Hall, Fan.")
    assert "homeassistant.local:8123" in card.body


def test_list_card_with_one_device():
    config = HomeAssistantConfig(enabled=True, base_url="http://ha:8123", allowlisted_entities=("light.hall",))
    card = card_for(LIST_ENTITIES, config, {})
    assert "the one device you allowed: Hall." in card.body


def test_history_card_says_what_the_household_is_letting_the_assistant_learn():
    card = card_for(GET_HISTORY, CONFIG, {"entity_id": "binary_sensor.front_door", "period": "day"})
    assert "how long it was in each state" in card.body and "when it changed" in card.body
