"""The settings page in Chromium against a real Home Assistant 2025.4.4, found through zeroconf on 127.0.0.1."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

# The browser suite's own fixtures (Chromium's launch arguments, the live Console, the loopback
# advertisement), used here as they are; importing them makes them this module's fixtures too.
from tests.e2e.conftest import (  # noqa: F401
    Advertisement,
    LiveConsole,
    advertise,
    browser_type_launch_args,
    console,
    entity,
    household_password,
    log_in,
    settings_page,
)
from tests.real_ha.harness import HA_VERSION, LOCATION_NAME, RealHomeAssistant

pytestmark = [pytest.mark.real_ha, pytest.mark.browser]

CHOSEN = ["sensor.kitchen_humidity", "light.living_room_lamp", "counter.doorbell_rings"]
LOAD_TIMEOUT = 15_000


def picker_loaded(page: Page, count: int) -> None:
    expect(page.locator("#picker-status")).to_contain_text(f"Loaded {count} entities", timeout=LOAD_TIMEOUT)


def test_discover_paste_test_pick_save_and_reload(
    settings_page: Page,  # noqa: F811
    console: LiveConsole,  # noqa: F811
    advertise: Callable[[str, str], Advertisement],  # noqa: F811
    real_ha: RealHomeAssistant,
) -> None:
    page = settings_page
    ad = advertise(LOCATION_NAME, real_ha.base_url)

    # Discovery fills in the one Home Assistant advertised on the loopback.
    page.reload()
    url_field = page.get_by_label("Home Assistant URL")
    expect(url_field).to_have_value(real_ha.base_url, timeout=LOAD_TIMEOUT)
    expect(page.get_by_role("button", name=re.compile(re.escape(ad.location_name)))).to_be_visible()

    # The household pastes its token; the real Home Assistant answers the connection test.
    page.get_by_label("Access token").fill(real_ha.token)
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text(
        f"Connected to “{LOCATION_NAME}”, Home Assistant {HA_VERSION}", timeout=LOAD_TIMEOUT
    )

    # Saved, the picker loads the real entities through the Console.
    page.get_by_role("checkbox", name="Let the assistant read Home Assistant").check()
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved")
    live = {state["entity_id"]: state["state"] for state in real_ha.get("/api/states").json()}
    picker_loaded(page, len(live))
    for entity_id in ("sensor.kitchen_humidity", "input_select.house_mode", "switch.coffee_machine"):
        row = page.locator("li.entity", has=entity(page, entity_id))
        expect(row.locator(".entity__state")).to_have_text(live[entity_id])
    unavailable = page.locator("li.entity", has=entity(page, "sensor.garage_temperature"))
    expect(unavailable).to_contain_text("Unavailable")

    for entity_id in CHOSEN:
        entity(page, entity_id).check()
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved")

    page.reload()
    picker_loaded(page, len(live))
    for entity_id in CHOSEN:
        expect(entity(page, entity_id)).to_be_checked()
    expect(entity(page, "sensor.living_room_temperature")).not_to_be_checked()
    expect(page.get_by_label("Access token")).to_have_value("")
    saved = json.loads(console.config.path.read_text())
    assert (saved["enabled"], saved["base_url"]) == (True, real_ha.base_url)
    assert sorted(saved["allowlisted_entities"]) == sorted(CHOSEN)
    assert real_ha.token not in page.content()


@pytest.mark.browser_context_args(java_script_enabled=False)
def test_the_whole_set_up_without_javascript_against_the_real_home_assistant(
    page: Page,
    console: LiveConsole,  # noqa: F811
    household_password: str,  # noqa: F811
    real_ha: RealHomeAssistant,
) -> None:
    """Issues 21 and 25: first run to a saved allowlist of 3 entities, by search, area and kind, with no script at
    all: the token pasted once, and the three chosen across searches with one Save."""
    log_in(page, console, household_password)
    page.get_by_label("Home Assistant URL").fill(real_ha.base_url)
    page.get_by_label("Access token").fill(real_ha.token)
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text(f"Connected to “{LOCATION_NAME}”, Home Assistant {HA_VERSION}")
    expect(page.get_by_label("Access token")).to_have_value("")
    assert not console.config.path.exists()

    # Kept on the server for this URL: no second paste.
    page.get_by_role("button", name="Save", exact=True).click()
    live = real_ha.get("/api/states").json()
    expect(page.locator("#nojs-count")).to_contain_text(f"of {len(live)} matching")
    kinds = page.get_by_label("Kind of entity").locator("option").all_text_contents()
    assert "Helpers: numbers (3)" in kinds and not any(text.startswith("input_number") for text in kinds)

    # By search, by area (Home Assistant's own area registry), by kind: the ticks go along without a Save.
    page.get_by_label("Search entities").fill("humidity")
    page.get_by_label("Search entities").press("Enter")
    entity(page, "sensor.kitchen_humidity").check()
    page.get_by_label("Search entities").fill("")
    page.get_by_label("Area", exact=True).select_option("area:Living Room")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("#nojs-count")).to_contain_text("of 2 matching")
    entity(page, "light.living_room_lamp").check()
    page.get_by_label("Area", exact=True).select_option("")
    page.get_by_label("Kind of entity").select_option("counter")
    page.get_by_role("button", name="Search", exact=True).click()
    entity(page, "counter.doorbell_rings").check()
    page.get_by_role("checkbox", name="Let the assistant read Home Assistant").check()
    page.get_by_role("button", name="Save", exact=True).click()
    expect(page.get_by_role("status").first).to_have_text("Saved.")

    saved = json.loads(console.config.path.read_text())
    assert (saved["enabled"], saved["base_url"]) == (True, real_ha.base_url)
    assert sorted(saved["allowlisted_entities"]) == sorted(CHOSEN)
    # Home Assistant's own names, as the script stores them.
    names = {state["entity_id"]: state["attributes"].get("friendly_name") for state in live}
    assert saved["entity_names"] == {entity_id: names[entity_id] for entity_id in CHOSEN}
    assert real_ha.token not in page.content()
