"""The household answers an MCP client's waiting read on /confirmations, in Chromium."""

from __future__ import annotations

import asyncio
import threading
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
    log_in(page, configured, household_password, path="/settings/home-assistant")
    page.get_by_role("link", name="Confirmations").click()
    # Without the script the page does not refresh itself: a reload shows a card that arrived later.
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
    configured.app.config["CONSOLE_HA_NAV_POLL_SECONDS"] = 1
    page.set_viewport_size(DESKTOP)
    log_in(page, configured, household_password, path="/activity")
    expect(page.locator("#waiting-count")).to_be_hidden()
    call = start_call(configured, api_token, calls)
    expect(page.locator("#waiting-count")).to_have_text("1 waiting", timeout=10_000)
    page.get_by_role("link", name="Confirmations").click()
    page.locator("section.confirm-card").get_by_role("button", name="Don't allow").click()
    assert call.wait().structuredContent["error"]["code"] == "CONFIRMATION_DENIED"
