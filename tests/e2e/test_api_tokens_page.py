"""The API tokens page in Chromium: reached from the settings page, accessible; makes a token shown once with
its configurations and copy buttons; Revoke asks first, with and without JavaScript."""

from __future__ import annotations

import json

import pytest
from playwright.sync_api import Page, expect

from console_ha.store.console_secrets import ConsoleSecrets
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, log_in, screenshot, serious_violations

pytestmark = pytest.mark.browser

TOKENS_PAGE = "/settings/api-tokens"


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_household_revokes_an_api_token_after_saying_yes_twice(
    browser, console: LiveConsole, household_password: str, javascript: bool
) -> None:
    secrets = ConsoleSecrets(console.data_dir)
    kept = secrets.create_api_token("kitchen tablet")
    revoked = secrets.create_api_token("old laptop")
    assert secrets.verify_api_token(kept) is not None  # used once: the page shows when

    context = browser.new_context(java_script_enabled=javascript, viewport=DESKTOP)
    try:
        page: Page = context.new_page()
        log_in(page, console, household_password)
        page.get_by_role("link", name="API tokens").click()
        expect(page.get_by_role("heading", name="API tokens", level=1)).to_be_visible()
        expect(page.get_by_text("kitchen tablet")).to_be_visible()
        expect(page.get_by_text("Never used.")).to_have_count(1)
        if javascript:
            screenshot(page, "api-tokens")
            assert serious_violations(page) == []

        # The first Revoke only asks. "Keep it" keeps it.
        page.get_by_role("button", name="Revoke old laptop").click()
        if javascript:
            dialog = page.get_by_role("dialog", name="Revoke the token “old laptop”?")
            expect(dialog).to_be_visible()
            assert serious_violations(page) == []
            dialog.get_by_role("button", name="Keep it").click()
            expect(dialog).to_be_hidden()
        else:
            expect(page.get_by_role("heading", name="Revoke the token “old laptop”?", level=1)).to_be_visible()
            page.get_by_role("link", name="Keep it").click()
        expect(page.get_by_role("button", name="Revoke old laptop")).to_be_visible()
        assert secrets.verify_api_token(revoked) is not None

        page.get_by_role("button", name="Revoke old laptop").click()
        if not javascript:
            screenshot(page, "api-token-revoke-question", phone=False)
        page.get_by_role("button", name="Yes, revoke old laptop").click()
        expect(page.get_by_role("status").first).to_contain_text("Revoked the token “old laptop”")
        expect(page.get_by_role("button", name="Revoke old laptop")).to_have_count(0)
        expect(page.get_by_role("button", name="Revoke kitchen tablet")).to_be_visible()
        if javascript:
            assert serious_violations(page) == []
    finally:
        context.close()
    assert secrets.verify_api_token(revoked) is None
    assert secrets.verify_api_token(kept) is not None


def test_the_household_makes_a_token_copies_it_and_its_configurations(
    browser, console: LiveConsole, household_password: str
) -> None:
    """Token name, Create token: shown once with copy buttons that fill the clipboard; a reload shows it no more."""
    context = browser.new_context(viewport=DESKTOP)
    context.grant_permissions(["clipboard-read", "clipboard-write"], origin=console.url)
    try:
        page: Page = context.new_page()
        log_in(page, console, household_password, path=TOKENS_PAGE)
        page.get_by_label("Token name").fill("Desk assistant")
        page.get_by_role("button", name="Create token").click()
        expect(page).to_have_url(console.at(TOKENS_PAGE))
        field = page.get_by_label("API token", exact=True)
        token = field.input_value()
        assert token.startswith("cha_")
        assert ConsoleSecrets(console.data_dir).verify_api_token(token) is not None

        page.get_by_role("button", name="Copy token").click()
        expect(page.get_by_role("status").filter(has_text="Copied.")).to_be_visible()
        assert page.evaluate("navigator.clipboard.readText()") == token

        page.get_by_role("button", name="Copy the configuration for a host that starts a command").click()
        command = json.loads(page.evaluate("navigator.clipboard.readText()"))
        assert command["mcpServers"]["console-ha"]["args"] == ["mcp", "--url", console.url]
        assert command["mcpServers"]["console-ha"]["env"] == {"CONSOLE_HA_API_TOKEN": token}
        page.get_by_role("button", name="Copy the configuration for a host that speaks streamable HTTP").click()
        http = json.loads(page.evaluate("navigator.clipboard.readText()"))
        assert http["mcpServers"]["console-ha"]["url"] == console.url + "/mcp"
        assert http["mcpServers"]["console-ha"]["headers"] == {"Authorization": f"Bearer {token}"}

        screenshot(page, "api-token-new")
        assert serious_violations(page) == []
        page.set_viewport_size(PHONE)
        assert serious_violations(page) == []
        page.set_viewport_size(DESKTOP)

        page.reload()
        expect(page.get_by_text("Desk assistant")).to_be_visible()
        expect(page.get_by_label("API token", exact=True)).to_have_count(0)
        assert token not in page.content()
        page.go_back()  # the page before the POST: the token is not there either (no-store, and taken once)
        assert token not in page.content()

        # The question a Revoke leads to without JavaScript, checked by axe here (axe needs a script).
        token_id = ConsoleSecrets(console.data_dir).api_tokens()[0].token_id
        page.goto(console.at(f"{TOKENS_PAGE}/{token_id}/revoke"))
        expect(page.get_by_role("heading", name="Revoke the token “Desk assistant”?")).to_be_visible()
        assert serious_violations(page) == []
    finally:
        context.close()


def test_without_javascript_a_token_is_made_and_shown_as_text(
    browser, console: LiveConsole, household_password: str
) -> None:
    """No copy buttons (they need a script), but the token and both configurations are there to select."""
    context = browser.new_context(java_script_enabled=False, viewport=DESKTOP)
    try:
        page: Page = context.new_page()
        log_in(page, console, household_password, path=TOKENS_PAGE)
        page.get_by_label("Token name").fill("   ")
        page.get_by_role("button", name="Create token").click()
        expect(page.get_by_role("alert")).to_contain_text("The token needs a name.")
        assert ConsoleSecrets(console.data_dir).api_tokens() == []
        page.get_by_label("Token name").fill("Kitchen tablet")
        page.get_by_role("button", name="Create token").click()
        token = page.get_by_label("API token", exact=True).input_value()
        expect(page.get_by_role("button", name="Copy token")).to_be_hidden()
        for key, name in (("command", "A host that starts a command"), ("http", "A host that speaks streamable HTTP")):
            expect(page.get_by_role("heading", name=name)).to_be_visible()
            expect(page.locator(f"#config-{key}")).to_contain_text(token)
    finally:
        context.close()
