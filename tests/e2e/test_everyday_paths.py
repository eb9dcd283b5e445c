"""Issue 25's everyday paths in Chromium, with and without JavaScript, at 1280 and 390 px: the front door, the
live list of recent conversations, conversations after a restart, and the Enter hint."""

from __future__ import annotations

import re
import threading
from collections.abc import Iterator
from contextlib import contextmanager

import pytest
from playwright.sync_api import APIResponse, Browser, Page, Route, ViewportSize, expect
from werkzeug.serving import make_server

from console_ha.web import create_app
from console_ha.words import CHAT_RESTARTED
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, screenshot, send, serious_violations
from tests.fake_model import FakeModel, text, tool_call
from tests.stub_ha import StubHomeAssistant

# The fake model, named in the environment before the app starts (conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("model_in_the_environment")]

ALLOWED = ["sensor.living_room_temperature", "binary_sensor.front_door"]
LIST = "home_assistant__list_entities"
TITLE = "Read your Home Assistant devices?"
WAITS = "a question waits for your answer"
WIDTHS = [pytest.param(DESKTOP, id="1280"), pytest.param(PHONE, id="390")]




@pytest.fixture
def set_up(console: LiveConsole, stub_ha: StubHomeAssistant) -> LiveConsole:
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True, allowlisted_entities=ALLOWED)
    return console


@contextmanager
def tab(browser: Browser, viewport: ViewportSize, *, javascript: bool,
        recorded_responses: list[bytes]) -> Iterator[tuple[Page, list[str]]]:
    """A fresh browser tab, and the errors its console logs (every page load must log none)."""
    context = browser.new_context(java_script_enabled=javascript, viewport=viewport)
    page = context.new_page()
    errors: list[str] = []
    page.on("console", lambda message: errors.append(message.text) if message.type == "error" else None)
    page.on("pageerror", lambda error: errors.append(str(error)))
    page.on("response", lambda r: recorded_responses.append(r.body() if r.status < 300 else b""))
    try:
        yield page, errors
    finally:
        context.close()


def log_in_at_the_front_door(page: Page, console: LiveConsole, password: str) -> None:
    """The login page reached from `/`, as a bookmark of the Console's address reaches it."""
    page.goto(console.at("/"))
    expect(page).to_have_url(re.compile(r"/login\?"))
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Log in").click()
    page.wait_for_load_state()


def settled(page: Page) -> None:
    """The page loaded and its scripts' first requests answered (every page keeps a long poll open, so the
    network is never idle)."""
    page.wait_for_load_state("load")
    page.wait_for_timeout(1000)


def recent(page: Page):
    return page.get_by_role("region", name="Recent conversations")


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
@pytest.mark.parametrize("viewport", WIDTHS)
def test_once_set_up_the_front_door_and_a_login_land_on_the_conversation_with_no_console_error(
        browser: Browser, set_up: LiveConsole, household_password: str, recorded_responses: list[bytes],
        viewport: ViewportSize, javascript: bool) -> None:
    with tab(browser, viewport, javascript=javascript, recorded_responses=recorded_responses) as (page, errors):
        log_in_at_the_front_door(page, set_up, household_password)
        expect(page).to_have_url(set_up.at("/conversation"))
        expect(page.get_by_role("heading", name="Ask about your home")).to_be_visible()
        # Logged in, the front door itself leads there too.
        page.goto(set_up.at("/"))
        expect(page).to_have_url(set_up.at("/conversation"))
        expect(recent(page)).to_contain_text("None yet.")
        expect(recent(page)).to_contain_text("also across a restart")
        # The hint about Enter is true: shown where Enter sends, hidden where it starts a new line.
        hint = page.get_by_text("Press Enter to send")
        if javascript:
            expect(hint).to_be_visible()
        else:
            expect(hint).to_be_hidden()
        settled(page)
        assert errors == []
        if javascript:  # axe runs in the page
            assert serious_violations(page) == []


def test_before_set_up_the_front_door_leads_to_settings(
        browser: Browser, console: LiveConsole, household_password: str, recorded_responses: list[bytes]) -> None:
    with tab(browser, DESKTOP, javascript=True, recorded_responses=recorded_responses) as (page, _errors):
        log_in_at_the_front_door(page, console, household_password)
        expect(page).to_have_url(console.at("/settings/home-assistant"))


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
@pytest.mark.parametrize("viewport", WIDTHS)
def test_the_recent_list_updates_live_in_the_order_of_the_last_message(
        browser: Browser, set_up: LiveConsole, household_password: str, model: FakeModel,
        recorded_responses: list[bytes], viewport: ViewportSize, javascript: bool) -> None:
    """With JavaScript without a reload; without it, every form post comes back to a page the server lists anew."""
    with tab(browser, viewport, javascript=javascript, recorded_responses=recorded_responses) as (page, errors):
        log_in_at_the_front_door(page, set_up, household_password)
        model.script(text("Hello!"), tool_call(LIST, {}), text("You have two devices."), text("Hello again!"))
        send(page, "hello there")
        expect(page.get_by_role("log", name="Conversation")).to_contain_text("Hello!")
        # Listed at once, without a reload.
        expect(recent(page).get_by_role("link")).to_have_text(["hello there"])
        expect(recent(page).get_by_role("link", name="hello there")).to_have_attribute("aria-current", "page")
        page.get_by_role("link", name="New conversation").click()
        send(page, "which devices can you see?")
        card = page.get_by_role("region", name=TITLE)
        expect(card).to_be_visible()
        expect(recent(page).get_by_role("link")).to_have_text(["which devices can you see?", "hello there"])
        expect(recent(page).get_by_role("listitem").first).to_contain_text(WAITS)
        card.get_by_role("button", name="Allow this once").click()
        expect(page.get_by_role("log", name="Conversation")).to_contain_text("You have two devices.")
        # After the approval the entry no longer says a question waits: no reload needed.
        expect(recent(page).get_by_role("listitem").first).not_to_contain_text(WAITS)
        # Reopening the older conversation moves nothing; a new message in it moves it to the top.
        recent(page).get_by_role("link", name="hello there").click()
        expect(recent(page).get_by_role("link")).to_have_text(["which devices can you see?", "hello there"])
        page.wait_for_load_state()
        send(page, "me again")
        expect(page.get_by_role("log", name="Conversation")).to_contain_text("Hello again!")
        expect(recent(page).get_by_role("link")).to_have_text(["hello there", "which devices can you see?"])
        if javascript:  # axe runs in the page
            assert serious_violations(page) == []
            screenshot(page, f"conversation-recent-live-{viewport['width']}", phone=False)
        assert errors == []


@contextmanager
def restarted(console: LiveConsole) -> Iterator[str]:
    """The same data dir opened by a new Console (as `console-ha serve` after a restart), served on a new port.

    Cookies do not depend on the port, and the session and its key are in the data dir, so the household stays
    logged in, as it does across a real restart.
    """
    app = create_app(console.data_dir, {"CONSOLE_HA_STATES_TIMEOUT": 3.0})
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="restarted-console", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_a_conversation_survives_a_restart_and_one_that_waited_says_its_question_closed(
        browser: Browser, set_up: LiveConsole, household_password: str, model: FakeModel,
        recorded_responses: list[bytes], javascript: bool) -> None:
    with tab(browser, PHONE, javascript=javascript, recorded_responses=recorded_responses) as (page, errors):
        log_in_at_the_front_door(page, set_up, household_password)
        model.script(tool_call(LIST, {}))
        send(page, "which devices can you see?")
        expect(page.get_by_role("region", name=TITLE)).to_be_visible()
        conversation = re.search(r"[?&]c=([^&]+)", page.url)
        assert conversation is not None
        with restarted(set_up) as url:
            page.goto(f"{url}/conversation?c={conversation[1]}")
            log = page.get_by_role("log", name="Conversation")
            expect(log).to_contain_text("which devices can you see?")
            expect(log).to_contain_text(CHAT_RESTARTED.format(title=TITLE))
            expect(page.get_by_role("region", name=TITLE)).to_have_count(0)  # no card to answer
            expect(recent(page).get_by_role("link")).to_have_text(["which devices can you see?"])
            expect(recent(page)).not_to_contain_text(WAITS)
            model.script(text("Two devices: a thermometer and a door."))
            send(page, "ask again")
            expect(log).to_contain_text("Two devices: a thermometer and a door.")
            settled(page)
        assert errors == []


def test_an_answer_that_comes_while_the_list_is_being_read_still_reaches_the_list(
        browser: Browser, set_up: LiveConsole, household_password: str, model: FakeModel,
        recorded_responses: list[bytes]) -> None:
    """A read of the list answered before a message's answer must not stand in for the read after it."""
    with tab(browser, DESKTOP, javascript=True, recorded_responses=recorded_responses) as (page, errors):
        log_in_at_the_front_door(page, set_up, household_password)
        settled(page)
        held: list[tuple[Route, APIResponse]] = []

        def hold_the_first(route: Route) -> None:
            if held:
                route.continue_()
            else:
                held.append((route, route.fetch()))  # answered now, before the message below exists

        page.route("**/api/v1/conversation/recent", hold_the_first)
        page.evaluate("document.dispatchEvent(new Event('visibilitychange'))")  # the tab shown again: a read
        for _ in range(50):
            if held:
                break
            page.wait_for_timeout(100)
        assert held, "the list was not reread when the tab was shown"
        model.script(text("Hello!"))
        send(page, "hello there")
        expect(page.get_by_role("log", name="Conversation")).to_contain_text("Hello!")
        route, stale = held[0]
        route.fulfill(response=stale)
        expect(recent(page).get_by_role("link")).to_have_text(["hello there"], timeout=5000)
        assert errors == []


def minute(page: Page) -> None:
    """A minute of the page's clock, a second at a time, each second's reads given the time to be answered."""
    for _ in range(60):
        page.clock.run_for(1000)
        page.wait_for_timeout(20)


def test_the_list_is_reread_every_15_s_while_shown_and_never_while_hidden(
        browser: Browser, set_up: LiveConsole, household_password: str, recorded_responses: list[bytes]) -> None:
    """No fetch storm: a minute shown is four reads, a minute hidden none, and showing the tab again one."""
    with tab(browser, DESKTOP, javascript=True, recorded_responses=recorded_responses) as (page, errors):
        log_in_at_the_front_door(page, set_up, household_password)
        reads: list[str] = []
        page.on("request", lambda r: reads.append(r.url) if r.url.endswith("/api/v1/conversation/recent") else None)
        page.clock.install()
        page.goto(set_up.at("/conversation"))
        settled(page)
        reads.clear()
        minute(page)
        assert len(reads) == 4
        reads.clear()
        page.evaluate("""() => {
            Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "hidden" });
            document.dispatchEvent(new Event("visibilitychange"));
        }""")
        minute(page)
        assert reads == []
        page.evaluate("""() => {
            Object.defineProperty(document, "visibilityState", { configurable: true, get: () => "visible" });
            document.dispatchEvent(new Event("visibilitychange"));
        }""")
        page.wait_for_timeout(500)
        assert len(reads) == 1
        assert errors == []


@pytest.mark.parametrize("viewport", WIDTHS)
def test_a_long_word_in_a_first_question_wraps_in_the_recent_list(
        browser: Browser, set_up: LiveConsole, household_password: str, model: FakeModel,
        recorded_responses: list[bytes], viewport: ViewportSize) -> None:
    """A pasted address or a long compound word is one word of 80 characters: it must wrap, not widen the page."""
    with tab(browser, viewport, javascript=True, recorded_responses=recorded_responses) as (page, errors):
        log_in_at_the_front_door(page, set_up, household_password)
        model.script(text("Hello!"))
        send(page, "http://homeassistant.local:8123/lovelace/kitchen-and-living-room-overview/" + "x" * 120)
        expect(page.get_by_role("log", name="Conversation")).to_contain_text("Hello!")
        expect(recent(page).get_by_role("link")).to_have_count(1)
        widths = page.evaluate("""() => ({page: document.documentElement.scrollWidth,
            list: document.getElementById("recent-conversations").scrollWidth,
            box: document.getElementById("recent-conversations").clientWidth})""")
        assert widths["page"] <= viewport["width"]
        assert widths["list"] <= widths["box"]
        assert errors == []
