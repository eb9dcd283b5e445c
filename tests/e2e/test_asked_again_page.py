"""Issue 25, in Chromium: a program's card on /confirmations says how often the program asked, with
JavaScript (the open page updates itself) and without (a reload shows it), at 1280 and 390 px."""

from __future__ import annotations

import pytest
from playwright.sync_api import Browser, Page, expect

from console_ha.answers.household_queue import Asker
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from tests.e2e.conftest import DESKTOP, PHONE, THERMOMETER, LiveConsole, log_in, screenshot, serious_violations

pytestmark = pytest.mark.browser

ENTITY = THERMOMETER  # what `configured` allows (conftest.py)
PROGRAM = Asker("desk assistant", token_id="0123456789abcdef")
TITLE = "Read the history of Living room temperature?"


def program_asks(console: LiveConsole, times: int) -> None:
    """The program's same call, made `times` times: the first makes the card, each later one joins it."""
    for _ in range(times):
        console.services.household.call(PROGRAM, GET_HISTORY, {"entity_id": ENTITY, "period": "day"})


def fits(page: Page, width: int) -> None:
    """The card and its count line lie within the page's width."""
    for part in (page.locator("section.confirm-card"), page.locator("section.confirm-card [data-slot=asked]")):
        box = part.bounding_box()
        assert box is not None and box["x"] >= 0 and box["x"] + box["width"] <= width


@pytest.mark.parametrize("javascript", [True, False], ids=["javascript", "no-javascript"])
def test_the_card_says_how_many_times_its_program_asked(
    browser: Browser, configured: LiveConsole, household_password: str, javascript: bool,
) -> None:
    context = browser.new_context(java_script_enabled=javascript, viewport=DESKTOP)
    try:
        page: Page = context.new_page()
        program_asks(configured, 1)
        log_in(page, configured, household_password, path="/confirmations")
        card = page.locator("section.confirm-card")
        expect(card.get_by_role("heading", name=TITLE)).to_be_visible()
        expect(card.locator("[data-slot=asked]")).to_be_hidden()  # asked once: nothing to say

        program_asks(configured, 2)
        if not javascript:
            page.reload()  # without the script the page shows what the server renders on each load
        # With it, the page's own refresh shows the server's sentence (confirmations.js), the card kept.
        expect(card.locator("[data-slot=asked]")).to_have_text("Asked 3 times.", timeout=10_000)
        expect(card.get_by_role("heading", name=TITLE)).to_be_visible()
        for size in (DESKTOP, PHONE):
            page.set_viewport_size(size)
            fits(page, size["width"])
            if javascript:
                assert serious_violations(page) == []
        if javascript:
            screenshot(page, "confirmations-asked-again")
        card.get_by_role("button", name="Don't allow").click()
        expect(page.get_by_role("status").first).to_contain_text("Not allowed")
        expect(page.locator("section.confirm-card")).to_have_count(0)
    finally:
        context.close()
