"""Without JavaScript, /confirmations shows a card that arrives while it is open, with no reload (issue 25)."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from playwright.sync_api import Page, ViewportSize, expect

from console_ha.answers.household_queue import HouseholdQueue
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.web.confirmation_routes import NOSCRIPT_REFRESH_SECONDS
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, log_in
from tests.household_cards import withdraw
from tests.moving_clock import PATIENCE
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser

ENTITY = "sensor.living_room_temperature"


@pytest.fixture
def queue(console: LiveConsole, stub_ha: StubHomeAssistant) -> Iterator[HouseholdQueue]:
    """A Console set up with one entity; its household queue, the one MCP calls fill (emptied afterwards)."""
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True, allowlisted_entities=[ENTITY],
                      entity_names={ENTITY: "Living room temperature"})
    household: HouseholdQueue = console.app.extensions["console_ha_mcp"].queue
    yield household
    for waiting in household.pending():
        withdraw(household, waiting)


@pytest.mark.browser_context_args(java_script_enabled=False)
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280", "390"])
def test_without_javascript_a_new_card_appears_by_itself(
    page: Page, console: LiveConsole, queue: HouseholdQueue, household_password: str, size: ViewportSize,
) -> None:
    """The page, open and empty, shows a program's new card within its refresh, and says that it looks."""
    page.set_viewport_size(size)
    log_in(page, console, household_password, path="/confirmations")
    expect(page.get_by_text("Nothing is waiting for you.")).to_be_visible()
    expect(page.locator("#confirmations-refresh")).to_have_text(
        f"This page looks for new requests every {NOSCRIPT_REFRESH_SECONDS} seconds. Stop looking for new requests")
    queue.ask("desk assistant", GET_HISTORY, {"entity_id": ENTITY, "period": "day"})
    card = page.locator("section.confirm-card")
    # Only the page's own refresh can show the card: the test never reloads it. How often it refreshes is the
    # page's <meta> (tests/web/test_confirmations_refresh.py); the wait here is patience, not that bound.
    expect(card.get_by_role("heading", name="Read the history of Living room temperature?")).to_be_visible(
        timeout=(NOSCRIPT_REFRESH_SECONDS + PATIENCE) * 1000)
    expect(card.get_by_role("button", name="Allow this once")).to_be_visible()
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]


def test_with_javascript_the_page_never_reloads_itself(page: Page, console: LiveConsole, household_password: str,
                                                       queue: HouseholdQueue) -> None:
    """The refresh is inside <noscript>: with the script the page stays, and keeps itself current instead."""
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password, path="/confirmations")
    page.evaluate("window.__same_page = true")
    expect(page.locator("#confirmations-refresh")).to_have_count(0)
    page.wait_for_timeout((NOSCRIPT_REFRESH_SECONDS + 2) * 1000)
    assert page.evaluate("window.__same_page === true")


@pytest.mark.browser_context_args(java_script_enabled=False)
@pytest.mark.parametrize("size", [DESKTOP, PHONE], ids=["1280", "390"])
def test_without_javascript_the_household_can_stop_the_refresh(
    page: Page, console: LiveConsole, household_password: str, size: ViewportSize,
) -> None:
    """WCAG 2.2.1: the timed reload can be turned off, by a link before the cards, and turned on again."""
    page.set_viewport_size(size)
    log_in(page, console, household_password, path="/confirmations")
    page.get_by_role("link", name="Stop looking for new requests").click()
    expect(page.locator("#confirmations-refresh")).to_contain_text("does not look for new requests by itself")
    loads: list[str] = []
    page.on("request", lambda request: loads.append(request.url) if request.resource_type == "document" else None)
    page.wait_for_timeout((NOSCRIPT_REFRESH_SECONDS + 2) * 1000)
    assert loads == []  # stopped: no reload
    assert page.evaluate("document.documentElement.scrollWidth") <= size["width"]
    page.get_by_role("link", name=f"Look for new requests every {NOSCRIPT_REFRESH_SECONDS} seconds").click()
    expect(page.locator("#confirmations-refresh")).to_contain_text("Stop looking for new requests")
    with page.expect_request(console.at("/confirmations"), timeout=(NOSCRIPT_REFRESH_SECONDS + 5) * 1000):
        pass  # looking again: the page reloads itself
