"""The plugins page in Chromium: the installed plugins listed, one turned off, quiet hours set; with and without
JavaScript (the page has no script: every control is a form)."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Browser, Page, expect

from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, log_in, screenshot, serious_violations
from tests.example_plugins import load_example

pytestmark = pytest.mark.browser

PAGE = "/settings/plugins"


@pytest.fixture
def with_examples(console: LiveConsole) -> LiveConsole:
    """The live Console with the two example plugins registered in code, as if installed."""
    console.services.plugins.register(load_example("quiet_hours"), "quiet_hours")
    console.services.plugins.register(load_example("notify"), "notify")
    return console


@pytest.fixture
def plugins_page(page: Page, with_examples: LiveConsole, household_password: str) -> Page:
    page.set_viewport_size(DESKTOP)
    log_in(page, with_examples, household_password, path=PAGE)
    return page


def test_the_settings_page_leads_to_the_plugins_which_are_listed_with_their_hooks(
    page: Page, with_examples: LiveConsole, household_password: str
) -> None:
    page.set_viewport_size(DESKTOP)
    log_in(page, with_examples, household_password)
    page.get_by_role("link", name="Plugins: the household’s own rules, and which are on").click()
    expect(page).to_have_url(with_examples.at(PAGE))
    quiet = page.get_by_role("region", name="quiet_hours")
    expect(quiet).to_contain_text("before_toolcall")
    expect(page.get_by_role("region", name="notify")).to_contain_text("on_card")
    assert serious_violations(page) == []
    page.set_viewport_size(PHONE)
    assert serious_violations(page) == []


def test_turning_a_plugin_off_and_on_again(plugins_page: Page, with_examples: LiveConsole) -> None:
    plugins_page.get_by_role("button", name="Turn off notify").click()
    expect(plugins_page.get_by_role("status")).to_contain_text("“notify” is off")
    expect(plugins_page.get_by_role("region", name="notify")).to_contain_text("Off")
    assert json.loads(with_examples.data_dir.plugin_switches.read_text()) == {"turned_off": ["notify"]}
    assert with_examples.services.plugins.implementations("on_card") == []

    plugins_page.get_by_role("button", name="Turn on notify").click()
    expect(plugins_page.get_by_role("status")).to_contain_text("“notify” is on")
    assert [impl.plugin_name for impl in with_examples.services.plugins.implementations("on_card")] == ["notify"]


def test_setting_quiet_hours_keeps_them_for_the_plugin(plugins_page: Page, with_examples: LiveConsole) -> None:
    quiet = plugins_page.get_by_role("region", name="quiet_hours")
    quiet.get_by_label("Quiet from").fill("22:00")
    quiet.get_by_label("Quiet until").fill("07:00")
    quiet.get_by_role("button", name="Save the settings of quiet_hours").click()
    expect(plugins_page.get_by_role("status")).to_contain_text("Saved the settings of “quiet_hours”")
    expect(plugins_page.get_by_label("Quiet from")).to_have_value("22:00")
    screenshot(plugins_page, "plugins-page")
    assert dict(with_examples.services.plugins.setting_values("quiet_hours")) == {"start": "22:00", "end": "07:00"}


def test_a_url_that_is_not_http_is_refused_beside_its_field_without_javascript(
    browser: Browser, with_examples: LiveConsole, household_password: str
) -> None:
    """The browser's own URL check is stepped past (the field made a text field), as a hand-made form would be:
    the server's refusal, beside the field, is what the household sees, and nothing is saved."""
    context = browser.new_context(java_script_enabled=False, viewport=DESKTOP)
    page = context.new_page()
    try:
        log_in(page, with_examples, household_password, path=PAGE)
        field = page.get_by_label("Send to (an ntfy topic or a Home Assistant webhook)")
        field.evaluate("input => { input.type = 'text'; }")  # past the browser's own URL check
        field.fill("ftp://ntfy.example/console")
        page.get_by_role("button", name="Save the settings of notify").click()
        expect(page.get_by_role("alert")).to_contain_text("starts with http:// or https://")
        expect(page.get_by_label("Send to (an ntfy topic or a Home Assistant webhook)")).to_have_attribute(
            "aria-invalid", "true")
        assert not with_examples.data_dir.plugin_settings.exists()
    finally:
        context.close()
