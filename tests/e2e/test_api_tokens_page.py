"""The API tokens page in Chromium: reached from the settings page, accessible, revokes without JavaScript."""

from __future__ import annotations

import pytest
from playwright.sync_api import Page, expect

from console_ha.store.console_secrets import ConsoleSecrets
from tests.e2e.conftest import DESKTOP, LiveConsole, log_in, screenshot, serious_violations

pytestmark = pytest.mark.browser


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_household_revokes_an_api_token_from_the_settings_page(
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

        page.get_by_role("button", name="Revoke old laptop").click()
        expect(page.get_by_role("status")).to_contain_text("Revoked the token “old laptop”")
        expect(page.get_by_role("button", name="Revoke old laptop")).to_have_count(0)
        expect(page.get_by_role("button", name="Revoke kitchen tablet")).to_be_visible()
        if javascript:
            assert serious_violations(page) == []
    finally:
        context.close()
    assert secrets.verify_api_token(revoked) is None
    assert secrets.verify_api_token(kept) is not None
