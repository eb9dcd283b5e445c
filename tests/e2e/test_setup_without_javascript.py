"""The whole set-up in Chromium, from first run to 3 entities picked by search, area and kind (issue 21).

Once with JavaScript off, through the page's plain forms; once with it on, at phone width.
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from console_ha.settings.held import HOLD_SECONDS
from console_ha.store.ca_certificate import DAMAGED
from console_ha.words import (
    CA_ADDED,
    CA_REMOVE_QUESTION,
    CA_REMOVED,
    CA_TAKES_EFFECT,
    CONFIRMATION_SPENT,
    NOTHING_CHOSEN,
    PICKER_NEEDS_SAVED_CONNECTION,
    SENSITIVE_QUESTION,
    token_kept,
)
from tests.certs import make_ca
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, entity, log_in, saved_file, screenshot, serious_violations
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser

CHOSEN = ["light.bedroom", "light.living_room", "switch.coffee_machine"]


def violations_without_script(browser: Browser, console: LiveConsole, page: Page) -> list[dict[str, Any]]:
    """axe's serious and critical findings on the page as a browser without JavaScript has it now.

    axe is a script, and a page with JavaScript off runs none: the same HTML is loaded in a context with
    JavaScript on, at the Console's origin (so its stylesheet applies), with the page's own scripts blocked.
    """
    html = page.content()
    context = browser.new_context(viewport=page.viewport_size or DESKTOP, bypass_csp=True)
    try:
        copy = context.new_page()
        copy.route(re.compile(r".*\.js(\?.*)?$"), lambda route: route.abort())
        copy.goto(console.at("/login"))  # an HTML page of the Console, for its origin
        copy.set_content(html)
        assert copy.locator("#nojs-picker").count() == 1  # no script of the page ran
        return serious_violations(copy)
    finally:
        context.close()


# Each shown hint and status line of the page, and whether it lies within the page's width with nothing in it cut
# off (wider than its own box). Run by Playwright, which evaluates it even where the page's own scripts are off.
_MISFITS = """(width) => [...document.querySelectorAll('main .hint, main [role=status], main .notice')]
    .filter((el) => el.offsetParent !== null && el.textContent.trim() !== '')
    .filter((el) => {
        const box = el.getBoundingClientRect();
        return box.left < 0 || box.right > width || el.scrollWidth > el.clientWidth + 1;
    })
    .map((el) => `${el.id || el.className}: ${el.textContent.trim().slice(0, 60)}`)"""


def hints_fit(page: Page, viewport: ViewportSize) -> None:
    """Issue 25 ("hints fit the page" without JavaScript): no hint reaches past the page's width or is cut off."""
    shown = page.locator("main .hint:visible").count()
    assert shown > 0  # the page's hints are there to be measured
    assert page.evaluate(_MISFITS, viewport["width"]) == []


def save(page: Page) -> None:
    page.get_by_role("button", name="Save", exact=True).click()


@pytest.mark.browser_context_args(java_script_enabled=False)
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_the_whole_set_up_without_javascript(
    page: Page, browser: Browser, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant,
    areas: dict[str, str], viewport: ViewportSize,
) -> None:
    """Issue 25: the token pasted once, the lists there at once, 3 entities by search, area and kind in one Save."""
    page.set_viewport_size(viewport)
    log_in(page, console, household_password)

    # Nothing saved yet: the list says what it needs, in words.
    page.get_by_role("button", name="Show entities").click()
    expect(page.locator("#nojs-picker-status")).to_have_text(PICKER_NEEDS_SAVED_CONNECTION)

    # Test connection with what is typed, before anything is saved; the token is never sent back, but kept.
    page.get_by_label("Home Assistant URL").fill(stub_ha.base_url)
    page.get_by_label("Access token").fill(stub_ha.token)
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text("Connected to “Home”")
    expect(page.locator("#token-kept")).to_contain_text(
        token_kept(HOLD_SECONDS // 60, stub_ha.base_url)[0])
    expect(page.get_by_label("Home Assistant URL")).to_have_value(stub_ha.base_url)
    expect(page.get_by_label("Access token")).to_have_value("")
    assert stub_ha.token not in page.content()
    assert not console.config.path.exists()
    assert violations_without_script(browser, console, page) == []
    hints_fit(page, viewport)
    screenshot(page, f"settings-token-kept-without-javascript-{viewport['width']}", phone=False)

    # Save the connection without pasting again (the assistant stays off): the entities are listed at once.
    save(page)
    expect(page.get_by_role("status").first).to_have_text("Saved.")
    assert console.tokens.read_record() is not None
    expect(page.locator("#nojs-count")).to_contain_text("Showing 1–")

    # A first load lists them too, with both lists filled.
    page.goto(console.at("/settings/home-assistant"))
    expect(page.locator("#nojs-count")).to_contain_text("Showing 1–")
    kinds = page.get_by_label("Kind of entity").locator("option").all_text_contents()
    assert "Lights (2)" in kinds and not any(text.startswith("binary_sensor") for text in kinds)
    assert "Living room (2)" in page.get_by_label("Area", exact=True).locator("option").all_text_contents()
    assert violations_without_script(browser, console, page) == []
    hints_fit(page, viewport)
    screenshot(page, f"settings-picker-without-javascript-{viewport['width']}", phone=False)

    # One by search: Enter in the search field searches, and saves nothing.
    page.get_by_label("Search entities").fill("coffee")
    page.get_by_label("Search entities").press("Enter")
    expect(page.locator("#nojs-count")).to_contain_text("of 1 matching")
    entity(page, "switch.coffee_machine").check()

    # One by area, without a Save between: the one above is not on this list, and is carried along.
    page.get_by_label("Search entities").fill("")
    page.get_by_label("Area", exact=True).select_option("area:Living room")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(page.locator("#nojs-count")).to_contain_text("of 2 matching")
    expect(entity(page, "switch.coffee_machine")).to_have_count(0)
    expect(page.locator("#nojs-kept")).to_contain_text("1 chosen entity is not on this page")
    hints_fit(page, viewport)
    entity(page, "light.living_room").check()

    # One by kind, in the household's words; then turn it on, and one Save keeps all three.
    page.get_by_label("Area", exact=True).select_option("")
    page.get_by_label("Kind of entity").select_option("light")
    page.get_by_role("button", name="Search", exact=True).click()
    expect(entity(page, "light.living_room")).to_be_checked()
    entity(page, "light.bedroom").check()
    page.get_by_role("checkbox", name="Let the assistant read Home Assistant").check()
    assert saved_file(console)["allowlisted_entities"] == []  # nothing saved by the searches
    save(page)
    expect(page.get_by_role("status").first).to_have_text("Saved.")
    saved = saved_file(console)
    assert saved["enabled"] is True and sorted(saved["allowlisted_entities"]) == CHOSEN
    # Home Assistant's names, as with JavaScript: a card reads "Bedroom light", not one made from the id.
    assert saved["entity_names"] == {"light.bedroom": "Bedroom light", "light.living_room": "Living room light",
                                     "switch.coffee_machine": "Coffee machine"}
    assert stub_ha.token not in page.content()
    assert violations_without_script(browser, console, page) == []

    # Unticking one on a list keeps the others.
    entity(page, "light.bedroom").uncheck()
    save(page)
    assert sorted(saved_file(console)["allowlisted_entities"]) == ["light.living_room", "switch.coffee_machine"]


@pytest.mark.browser_context_args(java_script_enabled=False)
def test_switching_on_with_nothing_chosen_says_so_without_javascript(
    page: Page, browser: Browser, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant
) -> None:
    log_in(page, console, household_password)
    page.get_by_label("Home Assistant URL").fill(stub_ha.base_url)
    page.get_by_label("Access token").fill(stub_ha.token)
    page.get_by_role("checkbox", name="Let the assistant read Home Assistant").check()
    save(page)
    expect(page.get_by_role("status").first).to_have_text(NOTHING_CHOSEN)
    assert violations_without_script(browser, console, page) == []


def test_the_whole_set_up_with_javascript_at_phone_width(
    settings_page: Page, console: LiveConsole, stub_ha: StubHomeAssistant, areas: dict[str, str]
) -> None:
    page = settings_page
    page.set_viewport_size(PHONE)
    page.get_by_label("Home Assistant URL").fill(stub_ha.base_url)
    page.get_by_label("Access token").fill(stub_ha.token)
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)
    # The filter of the page without JavaScript is gone: one "Search entities", one "Kind of entity".
    expect(page.get_by_label("Search entities")).to_have_count(1)

    # Switched on with nothing chosen, the save says the assistant can read nothing yet.
    page.get_by_role("checkbox", name="Let the assistant read Home Assistant").check()
    save(page)
    expect(page.locator("#save-status")).to_have_text(NOTHING_CHOSEN)

    page.get_by_label("Search entities").fill("coffee")
    entity(page, "switch.coffee_machine").check()
    page.get_by_label("Search entities").fill("")
    page.get_by_label("Area", exact=True).select_option("Living room")
    expect(entity(page, "light.bedroom")).to_be_hidden()
    entity(page, "light.living_room").check()
    page.get_by_label("Area", exact=True).select_option("")
    kinds = page.get_by_label("Kind of entity").locator("option").all_text_contents()
    assert "Lights (2)" in kinds and not any(text.startswith("binary_sensor") for text in kinds)
    page.get_by_label("Kind of entity").select_option("light")
    entity(page, "light.bedroom").check()
    assert serious_violations(page) == []
    save(page)
    expect(page.locator("#save-status")).to_contain_text("The assistant may read 3 entities")
    saved = saved_file(console)
    assert saved["enabled"] is True and sorted(saved["allowlisted_entities"]) == CHOSEN
    screenshot(page, "settings-set-up-phone", phone=False)


@pytest.mark.browser_context_args(java_script_enabled=False)
def test_the_ca_certificate_without_javascript_says_what_is_wrong_and_remove_asks_first(
    page: Page, browser: Browser, console: LiveConsole, household_password: str, tmp_path: Path
) -> None:
    pem = make_ca(tmp_path / "ca").ca_pem
    lines = pem.strip().split("\n")
    damaged = "\n".join([*lines[:2], lines[2][:10] + "!" + lines[2][11:], *lines[3:]])  # the first line is right
    log_in(page, console, household_password)
    page.get_by_label("Home Assistant URL").fill("https://127.0.0.1:8443")
    page.locator("#ca-section summary").click()
    expect(page.locator("#ca-section")).to_contain_text(CA_TAKES_EFFECT)

    page.get_by_label("CA certificate (PEM)").fill(damaged)
    page.get_by_role("button", name="Add certificate").click()
    expect(page.locator("#ca-pem-error")).to_have_text(DAMAGED)
    expect(page.get_by_label("CA certificate (PEM)")).to_have_attribute("aria-invalid", "true")
    expect(page.get_by_label("Home Assistant URL")).to_have_value("https://127.0.0.1:8443")  # what was typed stays
    assert violations_without_script(browser, console, page) == []

    page.get_by_label("CA certificate (PEM)").fill(pem)
    page.get_by_role("button", name="Add certificate").click()
    expect(page.locator("#ca-status")).to_have_text(CA_ADDED)
    expect(page.locator("#ca-current")).to_contain_text("CN=Test household CA")
    assert console.data_dir.ha_ca_bundle.exists()

    page.get_by_role("button", name="Remove certificate").click()
    question = page.locator("#ca-remove-question")
    expect(question).to_contain_text(CA_REMOVE_QUESTION)
    assert console.data_dir.ha_ca_bundle.exists()  # asked, not yet done
    assert violations_without_script(browser, console, page) == []
    question.get_by_role("button", name="Keep it").click()
    assert console.data_dir.ha_ca_bundle.exists()
    page.get_by_role("button", name="Remove certificate").click()
    page.get_by_role("button", name="Yes, remove the certificate").click()
    expect(page.locator("#ca-status")).to_have_text(CA_REMOVED)
    assert not console.data_dir.ha_ca_bundle.exists()


def test_a_damaged_certificate_body_is_named_as_such_with_javascript(settings_page: Page, tmp_path: Path) -> None:
    page = settings_page
    lines = make_ca(tmp_path / "ca").ca_pem.strip().split("\n")
    page.locator("#ca-section summary").click()
    page.get_by_label("CA certificate (PEM)").fill("\n".join([*lines[:3], *lines[5:]]))  # two lines lost
    page.get_by_role("button", name="Add certificate").click()
    expect(page.locator("#ca-pem-error")).to_have_text(DAMAGED)


@pytest.mark.browser_context_args(java_script_enabled=False)
def test_a_sensitive_entity_asks_before_it_is_saved_without_javascript(
    page: Page, browser: Browser, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant
) -> None:
    log_in(page, console, household_password)
    page.get_by_label("Home Assistant URL").fill(stub_ha.base_url)
    page.get_by_label("Access token").fill(stub_ha.token)
    save(page)
    page.get_by_label("Search entities").fill("front door")
    page.get_by_label("Search entities").press("Enter")
    expect(entity(page, "binary_sensor.front_door")).to_be_visible()
    entity(page, "binary_sensor.front_door").check()
    entity(page, "lock.front_door").check()
    save(page)

    question = page.locator("#sensitive-question")
    expect(question).to_contain_text(SENSITIVE_QUESTION)
    expect(question.locator("code")).to_have_text(["binary_sensor.front_door", "lock.front_door"])
    assert saved_file(console)["allowlisted_entities"] == []  # asked, nothing saved
    expect(entity(page, "lock.front_door")).to_be_checked()
    assert violations_without_script(browser, console, page) == []
    screenshot(page, "settings-sensitive-question-without-javascript", phone=False)

    # Going back saves nothing and shows the saved list.
    question.get_by_role("link", name="Go back without saving").click()
    expect(page.locator("#sensitive-question")).to_have_count(0)
    expect(entity(page, "lock.front_door")).not_to_be_checked()
    assert saved_file(console)["allowlisted_entities"] == []

    # Asked again, "Save anyway" saves what was ticked.
    entity(page, "lock.front_door").check()
    save(page)
    expect(page.locator("#sensitive-question code")).to_have_text(["lock.front_door"])
    with page.expect_request(lambda r: r.method == "POST") as answered:
        page.get_by_role("button", name="Save anyway").click()
    expect(page.get_by_role("status").first).to_have_text("Saved.")
    assert saved_file(console)["allowlisted_entities"] == ["lock.front_door"]
    expect(page.get_by_label("Search entities")).to_have_value("front door")  # back to the same list

    # Already allowlisted, it is not asked about again.
    save(page)
    expect(page.get_by_role("status").first).to_have_text("Saved.")

    # Removed, then the same "Save anyway" posted again (Back and resubmit): asked again, nothing saved.
    entity(page, "lock.front_door").uncheck()
    save(page)
    assert saved_file(console)["allowlisted_entities"] == []
    replay = answered.value
    again = page.request.post(replay.url, headers={k: v for k, v in replay.headers.items()
                                                   if k.lower() in ("content-type", "origin", "referer")},
                              data=replay.post_data_buffer)
    assert again.status == 200
    assert CONFIRMATION_SPENT in again.text() and SENSITIVE_QUESTION in again.text()
    assert saved_file(console)["allowlisted_entities"] == []


def test_with_javascript_the_listed_pages_turn_and_save_nothing_while_the_live_picker_cannot_load(
    page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant
) -> None:
    """The server's list (a `?q=` link) stays while the live picker cannot load: Next turns the page, never saves."""
    for i in range(250):
        stub_ha.states.append({"entity_id": f"sensor.extra_{i:03d}", "state": str(i), "attributes": {},
                               "last_changed": "2026-01-01T00:00:00+00:00",
                               "last_updated": "2026-01-01T00:00:00+00:00"})
    console.configure(stub_ha.base_url, stub_ha.token)
    before = console.config.path.read_bytes()
    # The live picker's list never arrives: the page keeps the list the server drew.
    page.route(re.compile(r".*/entities(\?.*)?$"), lambda route: route.abort())
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password, path="/settings/home-assistant?q=extra")
    expect(page.locator("#nojs-count")).to_contain_text("Showing 1–200 of 250 matching")
    entity(page, "sensor.extra_001").check()

    page.get_by_role("button", name="Next 200").click()
    expect(page.locator("#nojs-count")).to_contain_text("Showing 201–250 of 250 matching")
    expect(page.locator("#nojs-kept")).to_contain_text("1 chosen entity is not on this page")
    expect(page.locator("#save-status")).to_have_text("")
    assert console.config.path.read_bytes() == before  # nothing was saved
    page.get_by_role("button", name="Previous 200").click()
    expect(page.locator("#nojs-count")).to_contain_text("Showing 1–200 of 250 matching")
    expect(entity(page, "sensor.extra_001")).to_be_checked()
    assert console.config.path.read_bytes() == before
