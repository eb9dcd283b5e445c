"""Cards in Chromium, at 1280 and 390 px: issue 25's filtered list card on /conversation names only the room's
devices; issue 29's card names the Home Assistant it reads when there are several."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, log_in, screenshot, serious_violations
from tests.fake_model import FakeModel, answer_from_tool_result, text, tool_call
from tests.stub_ha import StubHomeAssistant
from tests.two_instances import CABIN, seed_instance

pytestmark = pytest.mark.browser

LIST = "home_assistant__list_entities"
ROOMS = {"light.living_room": "Living room", "light.bedroom": "Bedroom",
         "sensor.living_room_temperature": "Living room", "switch.coffee_machine": "Kitchen"}
ALLOWED = [*ROOMS, "binary_sensor.front_door"]
# As the picker saves them: the names Home Assistant gave when the household chose.
NAMES = {"light.living_room": "Living room light", "light.bedroom": "Bedroom light",
         "sensor.living_room_temperature": "Living room temperature", "switch.coffee_machine": "Coffee machine",
         "binary_sensor.front_door": "Front door"}
TITLE = "Read your Home Assistant devices?"


@pytest.fixture
def model(monkeypatch: pytest.MonkeyPatch) -> Iterator[FakeModel]:
    with FakeModel() as fake:
        monkeypatch.setenv("CONSOLE_HA_LLM_URL", fake.url)
        monkeypatch.setenv("CONSOLE_HA_LLM_MODEL", "fake-model")
        monkeypatch.delenv("CONSOLE_HA_LLM_API_KEY", raising=False)
        yield fake


def ask(page: Page, words: str) -> None:
    page.get_by_label("Message", exact=True).fill(words)
    page.get_by_role("button", name="Send", exact=True).click()


def fits(page: Page, viewport: ViewportSize) -> None:
    """The card's words wrap within the page: no sideways scrolling, the card inside the viewport."""
    box = page.get_by_role("region", name=TITLE).bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_a_filtered_list_card_names_only_that_room_s_lights_in_household_words(
        page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant, model: FakeModel,
        viewport: ViewportSize) -> None:
    stub_ha.serve_registries(ROOMS)
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True, allowlisted_entities=ALLOWED,
                      entity_names=NAMES)
    page.set_viewport_size(viewport)
    log_in(page, console, household_password, path="/conversation")
    filters = {"area": "living room", "domain": "light"}
    model.script(tool_call(LIST, filters), answer_from_tool_result, tool_call(LIST, filters), answer_from_tool_result)

    # No registry round yet: the card says so, and names only the lights, whatever their room.
    ask(page, "are the living room lights on?")
    card = page.get_by_role("region", name=TITLE)
    expect(card).to_contain_text("The Console does not know yet which rooms your devices are in")
    expect(card).to_contain_text("from among these 2: Living room light, Bedroom light.")
    expect(card).not_to_contain_text("Coffee machine")
    expect(card).not_to_contain_text("Living room temperature")
    fits(page, viewport)
    page.get_by_role("button", name="Allow this once").click()
    expect(page.get_by_role("log", name="Conversation")).to_contain_text("Living room light is on.")
    assert len(stub_ha.requests_to("/api/websocket")) == 1  # the read's own registry round, after the Allow

    # The areas are held now: the next card names exactly the room's lights, and asks Home Assistant nothing.
    asked = len(stub_ha.requests)
    ask(page, "and now?")
    expect(card).to_contain_text("The assistant wants to read the current state of 1 of the devices you allowed: "
                                 "Living room light. It asked for those in the area “living room”. It asked for those "
                                 "of the kind “Lights”.")
    expect(card).not_to_contain_text("Bedroom")
    expect(card).not_to_contain_text("“light”")
    assert len(stub_ha.requests) == asked
    fits(page, viewport)
    assert serious_violations(page) == []
    screenshot(page, f"filtered-list-card-{viewport['width']}", phone=False)


GET_STATE = "home_assistant__get_state"
CABIN_TITLE = "Cabin: Read Living room temperature now?"


def said_where_it_was_read(request: dict[str, Any]) -> dict[str, Any]:
    """The model's answer: which Home Assistant the read's result says answered, and its state."""
    result = json.loads(next(m for m in reversed(request["messages"]) if m["role"] == "tool")["content"])
    return text(f"Read at the {result['instance']}: {result['state']}.")


@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_with_two_home_assistants_the_card_names_the_cabin_by_its_name_and_the_read_is_the_cabin_s(
        page: Page, console: LiveConsole, household_password: str, model: FakeModel,
        two_homes: tuple[StubHomeAssistant, StubHomeAssistant], viewport: ViewportSize) -> None:
    """Issue 29: the title starts with the instance's name and the last sentence says where the request goes."""
    house, cabin = two_homes
    console.configure(house.base_url, house.token, enabled=True,
                      allowlisted_entities=["sensor.living_room_temperature"],
                      entity_names={"sensor.living_room_temperature": "Living room temperature"})
    seed_instance(console.data_dir, cabin, ["sensor.living_room_temperature"])
    page.set_viewport_size(viewport)
    log_in(page, console, household_password, path="/conversation")
    model.script(tool_call(GET_STATE, {"entity_id": "sensor.living_room_temperature", "instance": CABIN}),
                 said_where_it_was_read)

    ask(page, "how warm is it at the cabin?")
    card = page.get_by_role("region", name=CABIN_TITLE)
    expect(card).to_contain_text(f"This request leaves this device for your Home Assistant “Cabin” at "
                                 f"{cabin.base_url.removeprefix('http://')}.")
    box = card.bounding_box()
    assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
    assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]
    assert serious_violations(page) == []
    screenshot(page, f"card-naming-the-cabin-{viewport['width']}", phone=False)
    house_asked = len(house.requests)
    page.get_by_role("button", name="Allow this once").click()
    expect(page.get_by_role("log", name="Conversation")).to_contain_text("Read at the cabin: ")
    assert cabin.requests_to("/api/states/sensor.living_room_temperature")
    assert len(house.requests) == house_asked
