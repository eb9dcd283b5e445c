"""Issue 25 in Chromium: a filtered list card on /conversation names only the room's devices, at 1280 and 390 px."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, log_in, screenshot, serious_violations
from tests.fake_model import FakeModel, answer_from_tool_result, tool_call
from tests.stub_ha import StubHomeAssistant

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
