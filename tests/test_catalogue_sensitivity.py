"""Calendars and to-do lists are sensitive in the picker (issue 28): personal appointments and lists."""

from __future__ import annotations

from console_ha.settings.catalogue import missing_entities, narrow_states
from console_ha.store.config import HomeAssistantConfig


def state(entity_id: str) -> dict[str, object]:
    return {"entity_id": entity_id, "state": "on", "attributes": {"friendly_name": entity_id}}


def test_calendars_and_to_do_lists_are_sensitive_and_a_forecast_is_not() -> None:
    entries = narrow_states([state(e) for e in ("calendar.family", "todo.shopping_list", "weather.home",
                                                "lock.front_door", "sensor.kitchen")],
                            HomeAssistantConfig(), None)
    assert {e["entity_id"]: e["sensitive"] for e in entries} == {
        "calendar.family": True, "lock.front_door": True, "sensor.kitchen": False, "todo.shopping_list": True,
        "weather.home": False}


def test_an_allowlisted_calendar_home_assistant_lost_is_still_marked_sensitive() -> None:
    config = HomeAssistantConfig(allowlisted_entities=("calendar.gone", "todo.gone"))
    assert [e["sensitive"] for e in missing_entities([], config)] == [True, True]
