"""The Home Assistant settings page in Chromium: discovery, token, test connection, the entity picker."""

from __future__ import annotations

import re
from collections.abc import Callable

import pytest
from playwright.sync_api import Page, expect

from console_ha.secret import Secret
from console_ha.store.ha_token import StoredToken
from tests.e2e.conftest import (
    DESKTOP,
    SETTINGS,
    Advertisement,
    LiveConsole,
    Received,
    entity,
    log_in,
    saved_file,
    screenshot,
    serious_violations,
)
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant
from tests.web.conftest import unused_port

pytestmark = pytest.mark.browser

API = "/api/v1/conversation/home-assistant"


def wait_for_picker(page: Page) -> None:
    expect(page.locator("#picker-status")).to_contain_text("Loaded", timeout=10_000)


@pytest.fixture
def configured_page(
    page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant, areas: dict[str, str]
) -> Page:
    """Logged in on the settings page of a Console already connected to the stub, picker loaded."""
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True)
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    wait_for_picker(page)
    return page


# --- discovery -----------------------------------------------------------------------------------------


def test_the_only_home_assistant_found_on_the_network_fills_in_the_url(
    settings_page: Page, stub_ha: StubHomeAssistant, advertise: Callable[[str, str], Advertisement]
) -> None:
    page = settings_page
    ad = advertise("Home", stub_ha.base_url)
    page.reload()
    url_field = page.get_by_label("Home Assistant URL")
    expect(url_field).to_have_value(ad.base_url, timeout=10_000)
    expect(page.get_by_role("button", name=re.compile(re.escape(ad.location_name)))).to_be_visible()
    expect(page.locator("#discovery-status")).to_contain_text("filled in its address")
    screenshot(page, "settings-first-visit-discovered")


def test_choosing_one_of_several_discovered_instances_fills_in_its_address(
    settings_page: Page, stub_ha: StubHomeAssistant, advertise: Callable[[str, str], Advertisement]
) -> None:
    page = settings_page
    first = advertise("Home", stub_ha.base_url)
    second = advertise("Cabin", "http://127.0.0.1:8123")
    page.reload()
    expect(page.locator("#discovery-status")).to_contain_text("Found 2", timeout=10_000)
    url_field = page.get_by_label("Home Assistant URL")
    expect(url_field).to_have_value("")  # two found: the household chooses
    page.get_by_role("button", name=re.compile(re.escape(second.location_name))).click()
    expect(url_field).to_have_value(second.base_url)
    page.get_by_role("button", name=re.compile(re.escape(first.location_name))).click()
    expect(url_field).to_have_value(first.base_url)
    expect(page.get_by_label("Access token")).to_be_focused()


# --- the access token -------------------------------------------------------------------------------------


def test_a_saved_token_is_never_shown_again(
    settings_page: Page, console: LiveConsole, stub_ha: StubHomeAssistant, received: Received
) -> None:
    page = settings_page
    token_field = page.get_by_label("Access token")
    expect(token_field).to_have_attribute("type", "password")
    expect(page.locator("#token-status")).to_have_text("No token is stored yet.")
    page.get_by_label("Home Assistant URL").fill(stub_ha.base_url)
    token_field.fill(stub_ha.token)
    page.get_by_role("checkbox", name="Let the assistant read Home Assistant").check()
    page.get_by_role("button", name="Save").click()

    expect(page.locator("#save-status")).to_contain_text("Saved")
    expect(token_field).to_have_value("")
    expect(page.locator("#token-status")).to_have_text("A token is stored. Leave this field empty to keep it.")
    wait_for_picker(page)  # the picker now loads through the saved URL and token

    page.reload()
    wait_for_picker(page)
    expect(token_field).to_have_value("")
    assert stub_ha.token not in page.content()
    json_urls = [url for url, raw in received.responses if b"application/json" in raw.split(b"\n\n", 1)[0]]
    assert any(url.endswith(API) for url in json_urls) and any(url.endswith("/entities") for url in json_urls)
    assert received.containing(stub_ha.token) == []
    assert console.tokens.read_record() == StoredToken(Secret(stub_ha.token), stub_ha.base_url)
    assert stub_ha.token not in console.config.path.read_text()


def test_the_stored_token_can_be_forgotten(configured_page: Page, console: LiveConsole) -> None:
    page = configured_page
    page.get_by_role("checkbox", name="Forget the stored token when I save").check()
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#token-status")).to_have_text("No token is stored yet.")
    expect(page.get_by_role("checkbox", name="Forget the stored token when I save")).to_be_hidden()
    assert console.tokens.read_record() is None


# --- test connection ----------------------------------------------------------------------------------------


def test_test_connection_names_the_home_assistant_it_reached(
    settings_page: Page, stub_ha: StubHomeAssistant
) -> None:
    page = settings_page
    page.get_by_label("Home Assistant URL").fill(stub_ha.base_url)
    page.get_by_label("Access token").fill(stub_ha.token)
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text("Connected to “Home”, Home Assistant 2025.4.4")


@pytest.mark.parametrize(
    ("case", "words"),
    [
        ("wrong token", "refused the access token"),
        ("nothing listening", "Couldn’t reach Home Assistant"),
        ("not Home Assistant", "doesn’t look like Home Assistant"),
        ("untrusted certificate", "certificate"),
    ],
)
def test_test_connection_explains_a_failure_in_household_words(
    settings_page: Page,
    stub_ha: StubHomeAssistant,
    self_signed_cert: tuple[str, str],
    case: str,
    words: str,
) -> None:
    page = settings_page
    url, token = stub_ha.base_url, stub_ha.token
    tls_stub = None
    if case == "wrong token":
        token = "not-the-token"
    elif case == "nothing listening":
        url = f"http://127.0.0.1:{unused_port()}"
    elif case == "not Home Assistant":
        stub_ha.fault("404", "/api/config")
    elif case == "untrusted certificate":
        tls_stub = StubHomeAssistant(certfile=self_signed_cert[0], keyfile=self_signed_cert[1]).start()
        url, token = tls_stub.base_url, tls_stub.token
    try:
        page.get_by_label("Home Assistant URL").fill(url)
        page.get_by_label("Access token").fill(token)
        page.get_by_role("button", name="Test connection").click()
        status = page.locator("#test-status")
        expect(status).to_contain_text(words, timeout=10_000)
        expect(status).not_to_contain_text("HA_")  # no codes shown to the household
        if case == "wrong token":
            screenshot(page, "test-connection-wrong-token")
    finally:
        if tls_stub is not None:
            tls_stub.stop()


# --- the entity picker ---------------------------------------------------------------------------------------


def test_choosing_entities_with_search_kind_filter_sensitive_warning_and_bulk_select(
    configured_page: Page, console: LiveConsole
) -> None:
    page = configured_page
    search = page.get_by_role("searchbox", name="Search entities")
    expect(page.get_by_role("group", name=re.compile("^Hallway"))).to_be_visible()
    expect(page.locator("#picker-count")).to_contain_text("0 chosen · 16 of 16 shown")
    screenshot(page, "settings-picker")

    # Search as you type, by name, entity_id and area.
    search.fill("living")
    expect(entity(page, "light.living_room")).to_be_visible()
    expect(entity(page, "sensor.living_room_temperature")).to_be_visible()
    expect(entity(page, "light.bedroom")).to_be_hidden()
    search.fill("kitchen")  # the coffee machine matches by its area only
    expect(entity(page, "switch.coffee_machine")).to_be_visible()
    expect(entity(page, "binary_sensor.kitchen_window")).to_be_visible()
    expect(entity(page, "light.living_room")).to_be_hidden()
    search.fill("sensor.outdoor")
    expect(entity(page, "sensor.outdoor_humidity")).to_be_visible()
    expect(page.locator("#picker-count")).to_contain_text("1 of 16 shown")
    search.fill("")

    # Filter by kind.
    page.get_by_label("Kind of entity").select_option("light")
    expect(entity(page, "light.bedroom")).to_be_visible()
    expect(entity(page, "switch.coffee_machine")).to_be_hidden()

    # A sensitive entity needs a confirm step; cancelling leaves it unchosen.
    page.get_by_label("Kind of entity").select_option("")
    lock = entity(page, "lock.front_door")
    lock.click()
    dialog = page.get_by_role("dialog", name="Let the assistant read this?")
    expect(dialog).to_be_visible()
    expect(dialog).to_contain_text("Front door lock")
    screenshot(page, "sensitive-warning", whole_page=False)
    dialog.get_by_role("button", name="Cancel").click()
    expect(dialog).to_be_hidden()
    expect(lock).not_to_be_checked()
    lock.click()
    dialog.get_by_role("button", name="Yes, let it read this").click()
    expect(lock).to_be_checked()

    # Select all shown never takes sensitive ones in bulk.
    page.get_by_label("Kind of entity").select_option("binary_sensor")
    page.get_by_role("button", name="Select all shown").click()
    expect(entity(page, "binary_sensor.hallway_motion")).to_be_checked()
    expect(entity(page, "binary_sensor.front_door")).not_to_be_checked()
    expect(entity(page, "binary_sensor.kitchen_window")).not_to_be_checked()
    expect(page.locator("#bulk-status")).to_contain_text("Left out 2 sensitive entities")

    # Clear all shown acts on the filter's result only.
    page.get_by_label("Kind of entity").select_option("")
    search.fill("living")
    page.get_by_role("button", name="Select all shown").click()
    expect(page.locator("#picker-count")).to_contain_text("4 chosen")
    page.get_by_role("button", name="Clear all shown").click()
    expect(entity(page, "light.living_room")).not_to_be_checked()
    entity(page, "light.living_room").check()
    search.fill("")
    expect(page.locator("#picker-count")).to_contain_text("3 chosen")
    expect(lock).to_be_checked()

    page.get_by_label("Only chosen").check()
    expect(page.locator("#picker-count")).to_contain_text("3 chosen · 3 of 16 shown")
    page.get_by_label("Only chosen").uncheck()

    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved. The assistant may read 3 entities")
    saved = saved_file(console)
    chosen = {"lock.front_door", "binary_sensor.hallway_motion", "light.living_room"}
    assert set(saved["allowlisted_entities"]) == chosen
    assert saved["entity_names"] == {
        "lock.front_door": "Front door lock",
        "binary_sensor.hallway_motion": "Hallway motion",
        "light.living_room": "Living room light",
    }

    page.reload()
    wait_for_picker(page)
    for entity_id in chosen:
        expect(entity(page, entity_id)).to_be_checked()
    expect(entity(page, "binary_sensor.front_door")).not_to_be_checked()


def test_sensitive_warning_works_from_the_keyboard(configured_page: Page) -> None:
    page = configured_page
    search = page.get_by_role("searchbox", name="Search entities")
    search.fill("driveway")
    search.press("Enter")  # searching never submits the form
    expect(page.locator("#save-status")).to_be_empty()
    camera = entity(page, "camera.driveway")
    camera.focus()
    page.keyboard.press("Space")
    dialog = page.get_by_role("dialog", name="Let the assistant read this?")
    expect(dialog).to_be_visible()
    expect(dialog.get_by_role("button", name="Cancel")).to_be_focused()  # the safe choice first
    page.keyboard.press("Escape")
    expect(dialog).to_be_hidden()
    expect(camera).to_be_focused()
    expect(camera).not_to_be_checked()


def test_an_allowlisted_entity_home_assistant_no_longer_has_is_shown_and_can_be_removed(
    page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant
) -> None:
    console.configure(
        stub_ha.base_url,
        stub_ha.token,
        enabled=True,
        allowlisted_entities=["light.living_room", "sensor.old_thermometer"],
        entity_names={"sensor.old_thermometer": "Old thermometer"},
    )
    log_in(page, console, household_password)
    wait_for_picker(page)
    missing = page.get_by_role("group", name=re.compile("No longer in Home Assistant"))
    expect(missing).to_be_visible()
    expect(missing).to_contain_text("Old thermometer")
    expect(missing).to_contain_text("Missing")
    old = entity(page, "sensor.old_thermometer")
    expect(old).to_be_checked()
    screenshot(page, "settings-missing-entity", phone=False)

    old.uncheck()
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved")
    assert saved_file(console)["allowlisted_entities"] == ["light.living_room"]
    page.reload()
    wait_for_picker(page)
    expect(page.get_by_role("group", name=re.compile("No longer in Home Assistant"))).to_have_count(0)
    expect(entity(page, "light.living_room")).to_be_checked()


# --- saving when something is wrong ----------------------------------------------------------------------------


def test_a_stale_save_says_so_and_keeps_the_households_choices(configured_page: Page, console: LiveConsole) -> None:
    page = configured_page
    entity(page, "light.bedroom").check()
    seed_settings(console.data_dir, {"allowlisted_entities": ["switch.coffee_machine"]})  # another tab saved meanwhile
    page.get_by_role("button", name="Save").click()

    expect(page.locator("#save-status")).to_contain_text("changed these settings elsewhere")
    expect(entity(page, "light.bedroom")).to_be_checked()
    assert saved_file(console)["allowlisted_entities"] == ["switch.coffee_machine"]
    screenshot(page, "save-stale", phone=False)

    page.get_by_role("button", name="Save mine anyway").click()
    expect(page.locator("#save-status")).to_contain_text("Saved")
    assert saved_file(console)["allowlisted_entities"] == ["light.bedroom"]


def test_a_refused_save_points_at_the_field_and_loses_nothing(configured_page: Page, console: LiveConsole) -> None:
    page = configured_page
    before = console.config.path.read_bytes()
    entity(page, "light.bedroom").check()
    url_field = page.get_by_label("Home Assistant URL")
    url_field.fill("ftp://nas.local")
    page.get_by_role("button", name="Save").click()

    expect(page.locator("#save-status")).to_contain_text("Nothing was saved")
    expect(url_field).to_have_attribute("aria-invalid", "true")
    expect(url_field).to_be_focused()
    expect(page.locator("#base-url-error")).to_contain_text("http://")
    expect(entity(page, "light.bedroom")).to_be_checked()
    expect(url_field).to_have_value("ftp://nas.local")
    assert console.config.path.read_bytes() == before


def test_a_save_after_the_session_ended_asks_to_log_in_then_works_without_a_reload(
    configured_page: Page, console: LiveConsole, household_password: str
) -> None:
    page = configured_page
    entity(page, "light.bedroom").check()
    other = page.context.new_page()  # another tab of the same browser logs out, then in again
    other.goto(console.at(SETTINGS))
    other.get_by_role("button", name="Log out").click()

    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("You have been logged out")
    expect(page.get_by_role("link", name="Log in again (opens a new tab)")).to_be_visible()
    expect(entity(page, "light.bedroom")).to_be_checked()

    log_in(other, console, household_password)  # a new session, so a new CSRF token
    page.get_by_role("button", name="Save").click()
    expect(page.locator("#save-status")).to_contain_text("Saved")
    assert saved_file(console)["allowlisted_entities"] == ["light.bedroom"]


def test_a_post_without_the_csrf_token_is_refused(configured_page: Page, console: LiveConsole) -> None:
    before = console.config.path.read_bytes()
    status, body = configured_page.evaluate(
        """async (url) => {
            const r = await fetch(url, {method: "POST", headers: {"Content-Type": "application/json"},
                                        body: JSON.stringify({enabled: false})});
            return [r.status, await r.json()];
        }""",
        console.at(API),
    )
    assert status == 400
    assert body["error"]["code"] == "CSRF_INVALID"
    assert console.config.path.read_bytes() == before


def test_a_damaged_settings_file_says_what_to_do_and_can_be_started_again(
    page: Page, console: LiveConsole, household_password: str
) -> None:
    console.config.path.parent.mkdir(parents=True, exist_ok=True)
    console.config.path.write_text('{"enabled": tru')
    log_in(page, console, household_password)
    expect(page.get_by_role("heading", name="The Home Assistant settings file is damaged")).to_be_visible()
    expect(page.locator("main")).to_contain_text(str(console.config.path))
    assert "Traceback" not in page.content()
    screenshot(page, "settings-damaged-file")

    page.get_by_role("button", name="Start again with empty settings").click()
    expect(page.get_by_role("status").first).to_contain_text("Started again")
    expect(page.get_by_role("checkbox", name="Let the assistant read Home Assistant")).not_to_be_checked()
    assert list(console.config.path.parent.glob("home-assistant.json.broken-*"))


@pytest.mark.browser_context_args(java_script_enabled=False)
def test_without_javascript_the_page_shows_the_settings_and_can_remove_entities(
    page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant
) -> None:
    console.configure(
        stub_ha.base_url,
        stub_ha.token,
        enabled=True,
        allowlisted_entities=["light.living_room", "switch.coffee_machine"],
        entity_names={"light.living_room": "Living room light"},
    )
    page.set_viewport_size(DESKTOP)
    # With a URL and token saved, the page without scripts refreshes to the whole list (issue 25).
    log_in(page, console, household_password, path=f"{SETTINGS}?q=")
    expect(page.get_by_label("Home Assistant URL")).to_have_value(stub_ha.base_url)
    expect(page.get_by_role("checkbox", name="Let the assistant read Home Assistant")).to_be_checked()
    expect(page.get_by_label("Access token")).to_have_value("")
    expect(page.get_by_role("button", name="Test connection")).to_be_visible()  # a plain form (issue 21)
    screenshot(page, "settings-without-javascript", phone=False)

    entity(page, "switch.coffee_machine").uncheck()
    page.get_by_role("button", name="Save").click()
    expect(page.get_by_role("status").first).to_contain_text("Saved")
    assert saved_file(console)["allowlisted_entities"] == ["light.living_room"]
    assert saved_file(console)["entity_names"] == {"light.living_room": "Living room light"}
    assert console.tokens.read_record() == StoredToken(Secret(stub_ha.token), stub_ha.base_url)


# --- accessibility ------------------------------------------------------------------------------------------------


def test_the_settings_page_has_no_serious_accessibility_violations(configured_page: Page) -> None:
    page = configured_page
    page.get_by_role("button", name="Look for Home Assistant on the network").click()
    expect(page.locator("#discovery-status")).not_to_contain_text("Looking", timeout=10_000)
    assert serious_violations(page) == []

    entity(page, "person.alex").click()
    expect(page.get_by_role("dialog")).to_be_visible()
    assert serious_violations(page) == []


def test_test_connection_without_a_token_says_so_beside_the_token_field(
    settings_page: Page, stub_ha: StubHomeAssistant
) -> None:
    """The status line says how to set up; the token field says what it lacks, as the page did before issue 9."""
    page = settings_page
    page.get_by_label("Home Assistant URL").fill(stub_ha.base_url)
    page.get_by_role("button", name="Test connection").click()
    expect(page.locator("#test-status")).to_contain_text("Enter the Home Assistant URL and an access token")
    expect(page.locator("#access-token-error")).to_have_text(
        "Paste an access token from Home Assistant above, then press Test connection."
    )
    expect(page.get_by_label("Access token")).to_have_attribute("aria-invalid", "true")
