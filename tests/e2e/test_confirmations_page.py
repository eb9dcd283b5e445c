"""The household answers an MCP client's waiting read on /confirmations, in Chromium."""

from __future__ import annotations

import asyncio
import threading
import time
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.registry import REGISTRY
from console_ha.store.console_secrets import ConsoleSecrets
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, log_in, screenshot, serious_violations
from tests.mcp.conftest import mcp_session
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser

ENTITY = "sensor.living_room_temperature"
CLIENT = "desk assistant"


class BackgroundCall:
    """One MCP tool call made through the SDK's client in a thread, while the browser answers."""

    def __init__(self, url: str, token: str, tool: str, arguments: dict[str, Any]) -> None:
        self.result: Any = None
        self.error: BaseException | None = None
        self._thread = threading.Thread(target=self._run, args=(url, token, tool, arguments), daemon=True)
        self._thread.start()

    def _run(self, url: str, token: str, tool: str, arguments: dict[str, Any]) -> None:
        async def call() -> Any:
            async with mcp_session(url, token) as session:
                return await session.call_tool(tool, arguments)

        try:
            self.result = asyncio.run(call())
        except BaseException as err:  # handed to the test, which fails on it
            self.error = err

    def wait(self, timeout: float = 20) -> Any:
        self._thread.join(timeout)
        assert not self._thread.is_alive(), "the MCP call did not end"
        if self.error is not None:
            raise self.error
        return self.result


@pytest.fixture
def configured(console: LiveConsole, stub_ha: StubHomeAssistant) -> LiveConsole:
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True,
                      allowlisted_entities=[ENTITY, "light.living_room"],
                      entity_names={ENTITY: "Living room temperature"})
    return console


@pytest.fixture
def api_token(console: LiveConsole) -> str:
    return ConsoleSecrets(console.data_dir).create_api_token(CLIENT)


@pytest.fixture
def calls(console: LiveConsole) -> Iterator[list[BackgroundCall]]:
    """The test's MCP calls; afterwards the MCP server stops, ending any call a failed test left waiting."""
    made: list[BackgroundCall] = []
    yield made
    console.app.extensions["console_ha_mcp"].close()


def start_call(console: LiveConsole, token: str, calls: list[BackgroundCall], period: str = "day") -> BackgroundCall:
    call = BackgroundCall(console.at("/mcp"), token, "home_assistant_get_history",
                          {"entity_id": ENTITY, "period": period})
    calls.append(call)
    return call


def test_the_household_approves_a_waiting_mcp_read_on_the_page(
    page: Page, configured: LiveConsole, household_password: str, api_token: str, stub_ha: StubHomeAssistant,
    calls: list[BackgroundCall],
) -> None:
    """The page, already open, shows the new card by itself; Allow sends the read to the waiting client."""
    page.set_viewport_size(DESKTOP)
    log_in(page, configured, household_password, path="/confirmations")
    expect(page.get_by_text("Nothing is waiting for you.")).to_be_visible()

    call = start_call(configured, api_token, calls)
    card = page.locator("section.confirm-card")
    expect(card.get_by_role("heading", name="Read the history of Living room temperature?")).to_be_visible(
        timeout=10_000)
    expect(card).to_contain_text("how Living room temperature (sensor.living_room_temperature) changed over "
                                 "the past day")
    expect(card).to_contain_text(f"Asked by “{CLIENT}”")
    expect(page.locator("#waiting-count")).to_have_text("1 waiting")
    assert serious_violations(page) == []
    screenshot(page, "confirmations-waiting")
    assert stub_ha.requests_to("/api/history") == []

    card.get_by_role("button", name="Allow this once").click()
    expect(page.get_by_role("status").first).to_contain_text("Allowed")
    result = call.wait()
    assert result.isError is False
    assert result.structuredContent["entity_id"] == ENTITY
    import jsonschema

    jsonschema.validate(result.structuredContent, REGISTRY[GET_HISTORY].result_schema)
    expect(page.get_by_text("Nothing is waiting for you.")).to_be_visible()
    expect(page.locator("#waiting-count")).to_be_hidden()


def test_at_phone_width_the_card_fits_and_deny_works(
    page: Page, configured: LiveConsole, household_password: str, api_token: str, calls: list[BackgroundCall],
) -> None:
    page.set_viewport_size(PHONE)
    call = start_call(configured, api_token, calls)
    log_in(page, configured, household_password, path="/confirmations")
    card = page.locator("section.confirm-card")
    expect(card.get_by_role("button", name="Don't allow")).to_be_visible(timeout=10_000)
    assert page.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert serious_violations(page) == []
    card.get_by_role("button", name="Don't allow").click()
    result = call.wait()
    assert result.structuredContent["error"]["code"] == "CONFIRMATION_DENIED"


@pytest.mark.browser_context_args(java_script_enabled=False)
def test_without_javascript_each_card_is_a_form_that_answers(
    page: Page, configured: LiveConsole, household_password: str, api_token: str, calls: list[BackgroundCall],
) -> None:
    page.set_viewport_size(DESKTOP)
    call = start_call(configured, api_token, calls, period="week")
    # Not the settings page: without JavaScript, a set-up one reloads itself once to list the entities.
    log_in(page, configured, household_password, path="/activity")
    page.get_by_role("link", name="Confirmations").click()
    # A reload shows a card that arrived later (the page also reloads itself: test_confirmations_refresh.py).
    for _ in range(50):
        if page.locator("section.confirm-card").count():
            break
        page.wait_for_timeout(200)
        page.reload()
    card = page.locator("section.confirm-card")
    expect(card.get_by_role("heading", name="Read the history of Living room temperature?")).to_be_visible()
    screenshot(page, "confirmations-without-javascript", phone=False)
    card.get_by_role("button", name="Allow this once").click()
    expect(page.get_by_role("status").first).to_contain_text("Allowed")
    result = call.wait()
    assert result.isError is False and result.structuredContent["period"] == "week"


def test_the_nav_count_appears_on_other_pages_while_a_read_waits(
    page: Page, configured: LiveConsole, household_password: str, api_token: str, calls: list[BackgroundCall],
) -> None:
    page.set_viewport_size(DESKTOP)
    log_in(page, configured, household_password, path="/activity")
    expect(page.locator("#waiting-count")).to_be_hidden()
    call = start_call(configured, api_token, calls)
    expect(page.locator("#waiting-count")).to_have_text("1 waiting", timeout=10_000)
    page.get_by_role("link", name="Confirmations").click()
    page.locator("section.confirm-card").get_by_role("button", name="Don't allow").click()
    assert call.wait().structuredContent["error"]["code"] == "CONFIRMATION_DENIED"


# -- issue 20: cards people see -----------------------------------------------------------------------------

# Wraps the page's Notification to record each construction (title, body, tag and when), then makes the real
# one: what is observed is the page's own call of the browser's Notification API.
RECORD_NOTIFICATIONS = """
(() => {
  const Real = window.Notification;
  if (!Real) return;
  window.__notifications = [];
  class Recorded extends Real {
    constructor(title, options = {}) {
      super(title, options);
      window.__notifications.push({ title, body: options.body, tag: options.tag, at: Date.now() });
    }
  }
  window.Notification = Recorded;
})();
"""


def test_a_new_card_shows_a_system_notification_and_the_title_count_within_two_seconds(
    browser, configured: LiveConsole, household_password: str, api_token: str, calls: list[BackgroundCall],
) -> None:
    """Allowed once on /confirmations, then any open page: the notification and "(1)" in the title within 2 s."""
    context = browser.new_context(viewport=DESKTOP)
    context.add_init_script(RECORD_NOTIFICATIONS)
    try:
        page: Page = context.new_page()
        log_in(page, configured, household_password, path="/confirmations")
        notifications = page.get_by_role("region", name="Notifications")
        expect(notifications).to_contain_text("can show a notification from your system")
        # The household's "Allow" in the browser's own prompt, which Playwright gives as a grant.
        context.grant_permissions(["notifications"], origin=configured.url)
        notifications.get_by_role("button", name="Turn on notifications").click()
        expect(notifications).to_contain_text("Notifications are on")
        expect(notifications.get_by_role("button", name="Turn on notifications")).to_be_hidden()
        assert serious_violations(page) == []

        page.get_by_role("link", name="Activity").click()
        expect(page).to_have_title("Activity · Console")
        page.wait_for_timeout(500)  # the page's long poll is open, waiting

        start_call(configured, api_token, calls)
        queue = configured.services.household
        deadline = time.monotonic() + 10
        while not queue.pending() and time.monotonic() < deadline:
            time.sleep(0.005)
        card_at = time.time()  # the card exists from here (within 5 ms)
        page.wait_for_function("() => window.__notifications.length > 0", timeout=10_000)
        shown = page.evaluate("window.__notifications")
        assert len(shown) == 1
        assert shown[0]["title"] == f"“{CLIENT}” asks to read Home Assistant"
        assert shown[0]["body"].startswith("Read the history of Living room temperature?")
        # From the card to the page's notification (the browser and this test share the machine's clock).
        delay = shown[0]["at"] / 1000 - card_at
        print(f"the notification came {delay:.2f} s after the card")
        assert delay < 2.0, delay
        expect(page).to_have_title("(1) Activity · Console", timeout=100)
        expect(page.locator("#waiting-count")).to_have_text("1 waiting")
        screenshot(page, "notification-title-count", phone=False, whole_page=False)

        # Answered elsewhere: the count and the title follow, and no second notification is made.
        other = context.new_page()
        other.goto(configured.at("/confirmations"))
        other.locator("section.confirm-card").get_by_role("button", name="Don't allow").click()
        expect(page).to_have_title("Activity · Console", timeout=5_000)
        expect(page.locator("#waiting-count")).to_be_hidden()
        assert page.evaluate("window.__notifications.length") == 1
        assert calls[0].wait().structuredContent["error"]["code"] == "CONFIRMATION_DENIED"
    finally:
        context.close()


def test_without_the_permission_no_notification_is_made_but_the_count_still_comes(
    browser, configured: LiveConsole, household_password: str, api_token: str, calls: list[BackgroundCall],
) -> None:
    """Before the household allows notifications the page makes none; the nav and the title still update."""
    context = browser.new_context(viewport=DESKTOP)
    context.add_init_script(RECORD_NOTIFICATIONS)
    try:
        page: Page = context.new_page()
        log_in(page, configured, household_password, path="/activity")
        page.wait_for_timeout(500)
        start_call(configured, api_token, calls)
        expect(page).to_have_title("(1) Activity · Console", timeout=2_000)
        assert page.evaluate("window.__notifications.length") == 0
    finally:
        context.close()
