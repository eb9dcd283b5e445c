"""The settings page in Chromium: the stored token stays with the Home Assistant it was saved for.

Two stub Home Assistants (`two_homes`): the household's, and a rogue one advertised on loopback under
the name "Home" that takes any token and would print it back. Each fails the test if it ever sees the
other's token.
"""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from console_ha.ha.addresses import origin_of
from console_ha.secret import Secret
from console_ha.store.ha_token import StoredToken
from tests.e2e.conftest import DESKTOP, Advertisement, LiveConsole, log_in, screenshot, serious_violations
from tests.seed import hand_edit
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser

Homes = tuple[StubHomeAssistant, StubHomeAssistant]
SAVED_FOR = "The stored access token was saved for the Home Assistant at"


def paths(stub: StubHomeAssistant) -> list[str]:
    """What a stub was asked for (never its headers, which hold tokens a failure report would print)."""
    return [request.path for request in stub.requests]


@pytest.fixture
def homes(console: LiveConsole, two_homes: Homes) -> Homes:
    """The household saved its own Home Assistant; the other one is a rogue on the network."""
    home, rogue = two_homes
    rogue.rogue = True
    console.configure(home.base_url, home.token, enabled=True, allowlisted_entities=["light.living_room"])
    return home, rogue


def test_use_then_test_connection_never_sends_the_stored_token_to_a_rogue_instance(
    page: Page, console: LiveConsole, household_password: str, homes: Homes,
    advertise: Callable[[str, str], Advertisement],
) -> None:
    """"Use" fills in the rogue's address; the page says the token must be entered again; nothing reaches it."""
    home, rogue = homes
    ad = advertise("Home", rogue.base_url)
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)
    note = page.locator("#token-origin-note")
    expect(note).to_be_hidden()

    page.get_by_role("button", name="Look for Home Assistant on the network").click()
    page.get_by_role("button", name=re.compile(re.escape(ad.location_name))).click()
    url_field, token_field = page.get_by_label("Home Assistant URL"), page.get_by_label("Access token")
    expect(url_field).to_have_value(rogue.base_url)
    expect(note).to_be_visible()
    expect(note).to_contain_text(f"{SAVED_FOR} {origin_of(home.base_url)}")
    expect(note).to_contain_text(f"To use {origin_of(rogue.base_url)}, enter the access token")
    expect(token_field).to_have_accessible_description(re.compile(re.escape(SAVED_FOR)))
    expect(page.locator("#token-status")).to_have_text("A token is stored, but for another Home Assistant.")
    screenshot(page, "settings-token-for-another-home-assistant")
    assert serious_violations(page) == []

    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#access-token-error")).to_contain_text(SAVED_FOR)
    expect(token_field).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#test-status")).not_to_contain_text("Connected")

    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Nothing was saved")
    assert console.config.load().base_url == home.base_url
    assert console.tokens.read_record() == StoredToken(Secret(home.token), origin_of(home.base_url))
    assert paths(rogue) == [] and len(rogue.ws_messages) == 0

    url_field.fill(home.base_url + "/")  # back home (another spelling of the same origin): nothing to say
    expect(note).to_be_hidden()
    expect(page.locator("#token-status")).to_have_text("A token is stored. Leave this field empty to keep it.")


def test_typing_the_token_of_the_new_address_makes_the_note_go_and_saves_the_new_pair(
    page: Page, console: LiveConsole, household_password: str, two_homes: Homes,
) -> None:
    """Moving to another Home Assistant on purpose: its URL and its own token, saved together."""
    home, other = two_homes
    console.configure(home.base_url, home.token)
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    note = page.locator("#token-origin-note")
    page.get_by_label("Home Assistant URL").fill(other.base_url)
    expect(note).to_be_visible()
    page.get_by_label("Access token").fill(other.token)
    expect(note).to_be_hidden()
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved")
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)
    assert console.tokens.read_record() == StoredToken(Secret(other.token), origin_of(other.base_url))
    expect(note).to_be_hidden()
    assert "/api/states" in paths(other)  # the picker now reads the new Home Assistant, with its own token


def test_a_saved_url_the_token_does_not_belong_to_asks_for_the_token_on_load(
    page: Page, console: LiveConsole, household_password: str, homes: Homes, recorded_responses: list[bytes],
) -> None:
    """After a hand edit (or an older release's crash) left another origin in the file: the page says so."""
    home, rogue = homes
    hand_edit(console.data_dir, {"base_url": rogue.base_url})  # a save would refuse it
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    expect(page.locator("#token-origin-note")).to_be_visible()
    expect(page.locator("#picker-status")).to_contain_text(f"{SAVED_FOR} {origin_of(home.base_url)}")
    assert paths(rogue) == [] and paths(home) == []
    # The browser's responses are in the suite-wide secret check (the page and its JSON among them).
    assert any(b"token-origin-note" in raw for raw in recorded_responses)
    assert any(b"token_for_another_origin" in raw for raw in recorded_responses)


@pytest.mark.browser_context_args(java_script_enabled=False)
def test_without_javascript_saving_another_origin_is_refused_with_the_reason(
    page: Page, console: LiveConsole, household_password: str, homes: Homes,
) -> None:
    """The form posted without a script: the server's refusal is shown under the token field."""
    home, rogue = homes
    page.set_viewport_size(DESKTOP)
    # With the list asked for already: without JavaScript, a set-up page without it reloads itself once to list
    # the entities (docs/settings-page.md), which would race this test's typing.
    log_in(page, console, household_password, path="/settings/home-assistant?q=")
    page.get_by_label("Home Assistant URL").fill(rogue.base_url)
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#access-token-error")).to_contain_text(SAVED_FOR)
    expect(page.get_by_role("alert")).to_contain_text("Nothing was saved.")
    expect(page.get_by_label("Home Assistant URL")).to_have_value(rogue.base_url)
    expect(page.locator("#token-origin-note")).to_be_visible()  # rendered by the server for the typed URL
    expect(page.get_by_label("Access token")).to_have_accessible_description(re.compile(re.escape(SAVED_FOR)))
    assert console.config.load().base_url == home.base_url
    assert paths(rogue) == []
