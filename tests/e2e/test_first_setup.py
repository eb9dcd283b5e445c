"""A first-time household sets up Home Assistant with one Save: URL, token, test, choose, turn on, save."""

from __future__ import annotations

import json
import re

import pytest
from playwright.sync_api import Locator, Page, expect

from console_ha.secret import Secret
from console_ha.store.ha_token import StoredToken
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, Received, entity, screenshot, serious_violations
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser

# The words, with the brackets the stylesheet puts around them.
DONE = re.compile(r"^\(?done\)?$")
NOT_DONE = re.compile(r"^\(?not done yet\)?$")


def step(page: Page, key: str) -> Locator:
    """The words that say whether one set-up step is done."""
    return page.locator(f'#steps-list li[data-step="{key}"] .step__state')


def test_a_first_set_up_needs_one_save(
    settings_page: Page, console: LiveConsole, stub_ha: StubHomeAssistant, received: Received
) -> None:
    """Test connection loads the picker from what was typed; one Save then stores everything together."""
    page = settings_page
    page.set_viewport_size(DESKTOP)
    expect(page.get_by_role("heading", name="Setting up, step by step")).to_be_visible()
    for key in ("url", "token", "test", "entities", "enabled", "save"):
        expect(step(page, key)).to_have_text(NOT_DONE)
    expect(page.locator("#picker-status")).to_contain_text("then press Test connection")

    page.get_by_label("Home Assistant URL").fill(stub_ha.base_url)
    expect(step(page, "url")).to_have_text(DONE)
    page.get_by_label("Access token").fill(stub_ha.token)
    expect(step(page, "token")).to_have_text(DONE)
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text("Connected to “Home”")
    expect(step(page, "test")).to_have_text(DONE)

    # The picker is there before anything is saved, from the URL and token just tested.
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)
    assert not console.config.path.exists() and console.tokens.read_record() is None
    assert [r.path for r in stub_ha.requests_to("/api/states")] == ["/api/states"]
    assert stub_ha.requests_to("/api/states")[0].headers["Authorization"] == f"Bearer {stub_ha.token}"

    entity(page, "light.living_room").check()
    expect(step(page, "entities")).to_have_text(DONE)
    page.get_by_role("checkbox", name="Let the assistant read Home Assistant").check()
    expect(step(page, "enabled")).to_have_text(DONE)
    expect(step(page, "save")).to_have_text(NOT_DONE)
    assert serious_violations(page) == []
    page.set_viewport_size(PHONE)
    assert serious_violations(page) == []
    page.set_viewport_size(DESKTOP)
    screenshot(page, "settings-first-set-up-before-save")

    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved. The assistant may read 1 entity")
    expect(step(page, "save")).to_have_text(DONE)
    saved = json.loads(console.config.path.read_text())
    assert saved["base_url"] == stub_ha.base_url and saved["enabled"] is True
    assert saved["allowlisted_entities"] == ["light.living_room"]
    assert console.tokens.read_record() == StoredToken(Secret(stub_ha.token), stub_ha.base_url)
    assert received.containing(stub_ha.token) == []

    # Typing another token undoes the test step: it counted for what was tested only.
    page.get_by_label("Access token").fill("another-token")
    expect(step(page, "test")).to_have_text(NOT_DONE)
    expect(step(page, "save")).to_have_text(NOT_DONE)


def test_a_failed_test_loads_no_picker_and_leaves_the_step_undone(
    settings_page: Page, console: LiveConsole, stub_ha: StubHomeAssistant
) -> None:
    """A refused token: the test step stays undone, and the picker is never asked for."""
    page = settings_page
    page.get_by_label("Home Assistant URL").fill(stub_ha.base_url)
    page.get_by_label("Access token").fill("not-the-token")
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text("refused the access token")
    expect(step(page, "test")).to_have_text(NOT_DONE)
    expect(page.locator("#picker")).to_be_hidden()
    assert stub_ha.requests_to("/api/states") == []
