"""Every Console page loads without an error in the browser's console (issue 25).

Each page is opened in a tab of its own and watched until nothing but the waiting count's long poll is in
flight: any console error (Chromium logs a failed fetch there, such as the Settings page's 409 before issue
25), any uncaught exception, any request that failed and any answer of 400 or more fails the test.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

import pytest
from playwright.sync_api import BrowserContext, ConsoleMessage, Page, Request, Response

from console_ha.store.console_secrets import ConsoleSecrets
from tests.e2e.conftest import DESKTOP, FAST_HASH, PASSWORD, LiveConsole, log_in
from tests.stub_ha import StubHomeAssistant

pytestmark = pytest.mark.browser

WATCH = "/api/v1/confirmations/watch"
QUIET_SECONDS = 0.6
SETTLE_SECONDS = 12.0
SIGNED_IN_PAGES = ("/settings/home-assistant", "/settings/model", "/settings/api-tokens", "/conversation",
                   "/confirmations", "/activity")


@dataclass
class Watched:
    """What one tab logged while a page loaded and settled."""

    problems: list[str] = field(default_factory=list)
    in_flight: set[Request] = field(default_factory=set)
    last_change: float = field(default_factory=time.monotonic)

    def attach(self, page: Page) -> None:
        page.on("console", self._console)
        page.on("pageerror", lambda error: self.problems.append(f"uncaught: {error}"))
        page.on("request", self._started)
        page.on("requestfinished", self._ended)
        page.on("requestfailed", self._failed)
        page.on("response", self._response)

    def _console(self, message: ConsoleMessage) -> None:
        if message.type == "error":
            self.problems.append(f"console: {message.text} ({message.location.get('url', '')})")

    def _started(self, request: Request) -> None:
        if WATCH not in request.url:  # the long poll is always in flight
            self.in_flight.add(request)
        self.last_change = time.monotonic()

    def _ended(self, request: Request) -> None:
        self.in_flight.discard(request)
        self.last_change = time.monotonic()

    def _failed(self, request: Request) -> None:
        self._ended(request)
        self.problems.append(f"failed: {request.method} {request.url} {request.failure}")

    def _response(self, response: Response) -> None:
        if response.status >= 400:
            self.problems.append(f"{response.status}: {response.request.method} {response.url}")


def problems_loading(context: BrowserContext, url: str) -> list[str]:
    """Open `url` in a new tab, wait until only the long poll is in flight, and say what went wrong."""
    page = context.new_page()
    page.set_viewport_size(DESKTOP)
    watched = Watched()
    watched.attach(page)
    page.goto(url)
    page.wait_for_load_state()
    deadline = time.monotonic() + SETTLE_SECONDS
    while time.monotonic() < deadline:
        page.wait_for_timeout(100)
        if not watched.in_flight and time.monotonic() - watched.last_change > QUIET_SECONDS:
            break
    else:
        watched.problems.append(f"still loading after {SETTLE_SECONDS} s: {[r.url for r in watched.in_flight]}")
    problems = list(watched.problems)
    page.close()
    return problems


def test_the_first_run_and_login_pages_log_no_error(context: BrowserContext, console: LiveConsole) -> None:
    """Before a password is set (the first-run page), and after (the login page)."""
    assert problems_loading(context, console.at("/setup")) == []
    ConsoleSecrets(console.data_dir).set_password(PASSWORD, method=FAST_HASH)
    assert problems_loading(context, console.at("/login")) == []


def test_every_page_of_the_household_logs_no_error(
    page: Page, context: BrowserContext, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant,
) -> None:
    """Settings before Home Assistant is set up and after, and every other page, logged in."""
    log_in(page, console, household_password, path="/activity")
    found = {path: problems_loading(context, console.at(path)) for path in SIGNED_IN_PAGES}
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True,
                      allowlisted_entities=["sensor.living_room_temperature"])
    found["/settings/home-assistant (set up)"] = problems_loading(context, console.at("/settings/home-assistant"))
    assert {path: problems for path, problems in found.items() if problems} == {}
