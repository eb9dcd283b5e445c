"""What changed in the house: new entities since the last review, and chosen ones Home Assistant lost."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Page, expect

from console_ha.store.review import ReviewStore
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, entity, log_in, screenshot, serious_violations
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser


def loaded(page: Page) -> None:
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)


@pytest.fixture
def reviewed(page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant) -> Page:
    """A Console whose household saved its choices once on the page, picker and all."""
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True)
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    loaded(page)
    entity(page, "light.living_room").check()
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved")
    return page


def test_saving_on_the_page_remembers_what_the_picker_showed(
    reviewed: Page, console: LiveConsole, stub_ha: StubHomeAssistant
) -> None:
    record = json.loads(ReviewStore(console.data_dir).path.read_text())
    assert set(record["entity_ids"]) == {s["entity_id"] for s in stub_ha.states}
    expect(reviewed.locator("#new-notice")).to_be_hidden()


def test_new_entities_are_told_filtered_and_marked_never_chosen(
    reviewed: Page, console: LiveConsole, stub_ha: StubHomeAssistant
) -> None:
    page = reviewed
    stub_ha.set_state("input_boolean.guest_mode", "off", {"friendly_name": "Guest mode"})
    stub_ha.set_state("sensor.attic_humidity", "51", {"friendly_name": "Attic humidity"})
    page.reload()
    loaded(page)
    notice = page.locator("#new-notice")
    expect(notice).to_contain_text("Home Assistant has 2 new entities since your choices were last saved")
    for new in ("input_boolean.guest_mode", "sensor.attic_humidity"):
        expect(entity(page, new)).not_to_be_checked()
        expect(entity(page, new)).to_have_accessible_name(re.compile(r"\bNew\b"))
    expect(entity(page, "light.living_room")).not_to_have_accessible_name(re.compile(r"\bNew\b"))

    page.get_by_role("checkbox", name="New since last review").check()
    expect(page.locator("#picker-count")).to_contain_text("2 of")
    expect(entity(page, "light.living_room")).to_be_hidden()
    assert serious_violations(page) == []
    page.set_viewport_size(PHONE)
    assert serious_violations(page) == []
    page.set_viewport_size(DESKTOP)
    screenshot(page, "settings-new-entities")
    assert json.loads(console.config.path.read_text())["allowlisted_entities"] == ["light.living_room"]

    # Saving is the review: the marks go, and after a reload nothing is new.
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved")
    expect(notice).to_be_hidden()
    expect(page.get_by_role("checkbox", name="New since last review")).to_be_hidden()
    page.reload()
    loaded(page)
    expect(notice).to_be_hidden()
    assert json.loads(console.config.path.read_text())["allowlisted_entities"] == ["light.living_room"]


def test_chosen_entities_home_assistant_lost_are_unticked_in_one_click(
    page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant
) -> None:
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True,
                      allowlisted_entities=["light.living_room", "sensor.gone_one", "switch.gone_two"])
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    loaded(page)
    missing = page.locator("#missing-notice")
    expect(missing).to_contain_text("2 chosen entities are no longer in Home Assistant")
    assert serious_violations(page) == []
    page.get_by_role("button", name="Untick all that are no longer in Home Assistant").click()
    expect(entity(page, "sensor.gone_one")).not_to_be_checked()
    expect(entity(page, "switch.gone_two")).not_to_be_checked()
    expect(entity(page, "light.living_room")).to_be_checked()
    expect(missing).to_be_hidden()
    expect(page.locator("#review-status")).to_contain_text("Press Save to keep this")
    # Still only on the page until Save.
    assert json.loads(console.config.path.read_text())["allowlisted_entities"] == [
        "light.living_room", "sensor.gone_one", "switch.gone_two"]
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved")
    assert json.loads(console.config.path.read_text())["allowlisted_entities"] == ["light.living_room"]
