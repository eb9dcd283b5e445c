"""In a real browser: a calendar or a to-do list is sensitive in the picker and asks first; a forecast does not."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from console_ha.words import SENSITIVE_WHY
from tests.e2e.conftest import DESKTOP, LiveConsole, entity, log_in, serious_violations
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser


def test_choosing_a_calendar_or_a_to_do_list_asks_first_and_a_weather_entity_does_not(
        page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant,
        areas: dict[str, str]) -> None:
    stub_ha.set_state("calendar.family", "off", {"friendly_name": "Family calendar"})
    stub_ha.set_state("todo.shopping_list", "2", {"friendly_name": "Shopping list"})
    stub_ha.set_state("weather.home", "rainy", {"friendly_name": "Home"})
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True)
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)
    dialog = page.get_by_role("dialog", name="Let the assistant read this?")
    for entity_id, name in (("calendar.family", "Family calendar"), ("todo.shopping_list", "Shopping list")):
        box = entity(page, entity_id)
        box.click()
        expect(dialog).to_be_visible()
        expect(dialog).to_contain_text(name)
        expect(dialog).to_contain_text(SENSITIVE_WHY)
        assert serious_violations(page) == []
        dialog.get_by_role("button", name="Cancel").click()
        expect(box).not_to_be_checked()
    weather = entity(page, "weather.home")
    weather.click()
    expect(dialog).to_be_hidden()
    expect(weather).to_be_checked()
