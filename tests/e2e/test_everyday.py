"""Issue 21 in Chromium: the household's clock, past conversations, the Console's own lines, the words that help."""

from __future__ import annotations

import re
from collections.abc import Callable
from datetime import datetime
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from playwright.sync_api import Browser, Page, Route, expect

from tests.conftest import CONVERSATION_ALLOWED
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, log_in, screenshot, send, serious_violations, transcript
from tests.fake_model import FakeModel, status, text, tool_call
from tests.stub_ha import StubHomeAssistant

# The fake model, named in the environment before the app starts (conftest.py).
pytestmark = [pytest.mark.browser, pytest.mark.usefixtures("model_in_the_environment")]

ALLOWED = CONVERSATION_ALLOWED  # what `configured` and `chat` allow (conftest.py)
LIST = "home_assistant__list_entities"
HISTORY = "home_assistant__get_history"
TITLE = "Read your Home Assistant devices?"
BROWSER_ZONE = "Asia/Tokyo"  # far from the machine's (UTC here) and from the Console's configured zone


@pytest.fixture
def browser_context_args(browser_context_args: dict[str, Any]) -> dict[str, Any]:
    """This module's browser lives in Tokyo."""
    return {**browser_context_args, "timezone_id": BROWSER_ZONE}




def until(page: Page, happened: Callable[[], object], seconds: float = 10) -> None:
    """Let the page's events in (Playwright's handlers run while the page waits) until `happened` is true."""
    for _ in range(int(seconds * 50)):
        if happened():
            return
        page.wait_for_timeout(20)
    raise AssertionError(f"not within {seconds} s")


def in_tokyo(moment: str, pattern: str) -> str:
    return datetime.fromisoformat(moment.replace("Z", "+00:00")).astimezone(ZoneInfo(BROWSER_ZONE)).strftime(pattern)


def tokyo_clock(moment: str) -> re.Pattern[str]:
    """`moment`'s time of day in Tokyo as the browser writes it: 24-hour ("13:06") or, in English, 12-hour
    ("1:06 PM"). Only the 24-hour form was expected once, and this module failed whenever Tokyo was past noon."""
    minute = in_tokyo(moment, "%M")
    hour24 = in_tokyo(moment, "%H").lstrip("0") or "0"
    hour12 = in_tokyo(moment, "%I").lstrip("0")
    return re.compile(rf"\b0?{hour24}:{minute}\b|\b{hour12}:{minute}\s?{in_tokyo(moment, '%p')}")


def test_the_card_s_expiry_and_activity_are_in_the_browser_s_zone_while_the_server_keeps_utc(
        chat: Page, console: LiveConsole, model: FakeModel):
    model.script(tool_call(LIST, {}))
    send(chat, "what's on?")
    expires = chat.locator("#confirm-card time")
    expect(expires).to_be_visible()
    moment = expires.get_attribute("datetime")
    assert moment is not None and moment.endswith("Z")  # the element keeps UTC
    expect(expires).to_contain_text(tokyo_clock(moment))
    assert "UTC" not in expires.inner_text()
    # After a reload the server's card is localised too.
    chat.reload()
    expect(chat.locator("#confirm-card time")).to_contain_text(tokyo_clock(moment))
    chat.goto(console.at("/activity"))
    first = chat.locator(".event-card time").first
    when = first.get_attribute("datetime")
    assert when is not None
    expect(first).to_contain_text(in_tokyo(when, "%Y").lstrip("0"))
    expect(first).to_contain_text(tokyo_clock(when))


def test_without_javascript_times_are_in_the_console_s_configured_zone(
        browser: Browser, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant,
        model: FakeModel, recorded_responses: list[bytes]):
    from console_ha.web.clock import _ZONE
    console.app.extensions[_ZONE] = ZoneInfo("America/New_York")  # as CONSOLE_HA_TIME_ZONE would set it
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True, allowlisted_entities=ALLOWED)
    context = browser.new_context(java_script_enabled=False, timezone_id=BROWSER_ZONE)
    page = context.new_page()
    page.on("response", lambda r: recorded_responses.append(r.body() if r.status < 300 else b""))
    try:
        log_in(page, console, household_password, path="/conversation")
        model.script(tool_call(LIST, {}))
        send(page, "what's on?")
        expires = page.locator("#confirm-card time")
        moment = expires.get_attribute("datetime")
        assert moment is not None
        new_york = datetime.fromisoformat(moment.replace("Z", "+00:00")).astimezone(ZoneInfo("America/New_York"))
        # English's own short time (CLDR's, as Babel writes it: a narrow no-break space before AM/PM; issue 26).
        expect(expires).to_have_text(new_york.strftime("%-I:%M\u202f%p %Z"))
    finally:
        context.close()


def test_a_new_message_while_a_card_waits_withdraws_it_in_the_chat_and_in_activity_at_once(
        chat: Page, console: LiveConsole, model: FakeModel):
    model.script(tool_call(LIST, {}), text("The door is shut."))
    send(chat, "what devices are there?")
    expect(chat.get_by_role("region", name=TITLE)).to_be_visible()
    send(chat, "never mind: is the front door shut?")
    expect(transcript(chat)).to_contain_text(
        f"{TITLE} You asked something else, so the Console withdrew this question")
    expect(transcript(chat)).to_contain_text("The door is shut.")
    expect(chat.get_by_role("region", name=TITLE)).to_have_count(0)
    chat.goto(console.at("/activity"))
    expect(chat.locator(".event-card").first).to_contain_text("Withdrawn: you asked something else")


def test_past_conversations_are_listed_and_one_reopens_with_its_waiting_card(
        chat: Page, console: LiveConsole, model: FakeModel):
    model.script(text("Hello!"), tool_call(LIST, {}))
    send(chat, "hello there")
    expect(transcript(chat)).to_contain_text("Hello!")
    chat.get_by_role("link", name="New conversation").click()
    send(chat, "which devices can you see?")
    expect(chat.get_by_role("region", name=TITLE)).to_be_visible()
    chat.get_by_role("link", name="New conversation").click()
    recent = chat.get_by_role("region", name="Recent conversations")
    expect(recent.get_by_role("link")).to_have_text(["which devices can you see?", "hello there"])
    expect(recent.get_by_role("listitem").first).to_contain_text("a question waits for your answer")
    assert serious_violations(chat) == []
    recent.get_by_role("link", name="which devices can you see?").click()
    card = chat.get_by_role("region", name=TITLE)
    expect(card).to_be_visible()
    model.script(text("You have two devices."))
    card.get_by_role("button", name="Allow this once").click()
    expect(transcript(chat)).to_contain_text(f"{TITLE} You allowed it.")
    expect(transcript(chat)).to_contain_text("You have two devices.")
    screenshot(chat, "conversation-recent")


def test_a_refused_read_has_the_console_s_own_line_beside_the_model_s_reply(chat: Page, model: FakeModel):
    model.script(tool_call(HISTORY, {"entity_id": "lock.front_door", "period": "day"}), text("I can't see that lock."))
    send(chat, "is the front door locked?")
    line = transcript(chat).locator(".msg--note")
    expect(line).to_have_text(re.compile("Console\\s*The assistant asked about a device that is not on your list"))
    expect(transcript(chat)).to_contain_text("I can't see that lock.")
    assert serious_violations(chat) == []


def test_a_denial_has_the_console_s_own_line(chat: Page, model: FakeModel):
    model.script(tool_call(LIST, {}), text("Alright."))
    send(chat, "what's on?")
    chat.get_by_role("button", name="Don't allow").click()
    expect(transcript(chat)).to_contain_text(f"{TITLE} You did not allow it, so nothing was read.")


def test_a_model_that_cannot_be_reached_says_what_to_do_and_links_to_model(chat: Page, console: LiveConsole,
                                                                            model: FakeModel):
    model.script(status(500))
    send(chat, "hello?")
    help_line = chat.locator("#model-help")
    expect(help_line).to_be_visible()
    expect(help_line).to_contain_text("Check that the model server is running")
    assert serious_violations(chat) == []
    help_line.get_by_role("link", name="Open Model").click()
    expect(chat).to_have_url(console.at("/settings/model"))


def test_logout_says_you_are_logged_out(chat: Page):
    chat.get_by_role("button", name="Log out").click()
    expect(chat.get_by_role("status")).to_have_text("You are logged out. Log in again to use the Console.")
    expect(chat.get_by_label("Password", exact=True)).to_be_visible()
    assert serious_violations(chat) == []


def test_logout_lands_on_its_words_even_when_the_long_poll_s_401_comes_first(chat: Page):
    # The race CI met once: the page's long poll is answered 401 (the session has ended) while the browser
    # is still on its way to the "logged out" page, and the 401's own trip to the login page replaced it.
    # To make that order certain, the logout is held: the test sends it to the Console itself, lets the
    # page's next question meet the ended session, and only then gives the browser the logout's answer.
    # Until then the page asks often (each answer says "busy, ask again in 0.1 s", the Console's own way of
    # spacing pages out), so that its next question comes at once rather than after a 25 s long poll.
    session_ended = False
    held: list[Route] = []
    answered: list[int] = []  # what the Console said to the page's questions after the logout

    def watch(route: Route) -> None:
        if session_ended:
            answer = route.fetch()
            answered.append(answer.status)
            route.fulfill(response=answer)
        else:
            route.fulfill(json={"version": "v", "cards": [], "count": 0, "busy": True, "retry_after": 0.1})

    chat.route(re.compile(r"/api/v1/confirmations/watch\?"), watch)
    chat.route(re.compile(r"/logout$"), lambda route: held.append(route))
    chat.reload()  # its long poll, already waiting at the Console, would not come back before the logout
    expect(chat.get_by_role("button", name="Log out")).to_be_visible()
    # Clicked from the page: Playwright's own click would wait for the navigation this test holds.
    chat.get_by_role("button", name="Log out").evaluate("button => button.click()")
    until(chat, lambda: held)
    logged_out = held[0].fetch(max_redirects=0)  # the Console ends the session and answers 302
    assert logged_out.status == 302
    session_ended = True
    until(chat, lambda: answered)
    assert answered[0] == 401
    chat.wait_for_timeout(300)  # the 401's handler has run: a trip to the login page would be under way
    assert chat.url.endswith("/conversation"), "the 401 took the page away from its logout"
    held[0].fulfill(response=logged_out)
    expect(chat.get_by_role("status")).to_have_text("You are logged out. Log in again to use the Console.")
    assert chat.url.endswith("/login?logged_out=1")


def test_activity_at_phone_width_shows_each_event_as_a_card_what_happened_first_and_nothing_off_screen(
        chat: Page, console: LiveConsole, model: FakeModel):
    model.script(tool_call(LIST, {}), text("Fine."), tool_call(HISTORY, {"entity_id": "lock.front_door",
                                                                          "period": "day"}), text("No."))
    send(chat, "what's on?")
    chat.get_by_role("button", name="Don't allow").click()
    expect(transcript(chat)).to_contain_text("Fine.")
    send(chat, "and the lock?")
    expect(transcript(chat)).to_contain_text("No.")
    chat.set_viewport_size(PHONE)
    chat.goto(console.at("/activity"))
    cards = chat.locator(".event-card")
    expect(cards.first).to_be_visible()
    first_text = cards.first.locator(".event-card__what")
    expect(first_text).to_contain_text("Refused")
    # "What happened" is the card's first line, and no element of the page reaches past the screen's edge.
    assert cards.first.evaluate("c => c.firstElementChild.classList.contains('event-card__what')")
    overflowing = chat.evaluate("""() => [...document.querySelectorAll('main *')]
        .filter(e => e.getBoundingClientRect().right > document.documentElement.clientWidth + 1)
        .map(e => e.tagName + '.' + e.className)""")
    assert overflowing == []
    assert chat.evaluate("document.documentElement.scrollWidth") <= PHONE["width"]
    assert serious_violations(chat) == []
    screenshot(chat, "activity-phone", phone=False)


def test_the_model_page_chooses_a_server_s_only_model_for_you(page: Page, console: LiveConsole,
                                                              household_password: str, model: FakeModel,
                                                              monkeypatch: pytest.MonkeyPatch):
    for name in ("CONSOLE_HA_LLM_URL", "CONSOLE_HA_LLM_MODEL"):
        monkeypatch.delenv(name, raising=False)
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password, path="/settings/model")
    model.models = ["qwen2.5:3b"]
    model.script(tool_call("report_ready", {"ready": True}))
    page.get_by_label("Model server URL").fill(model.url)
    page.get_by_label("Model", exact=True).fill("")
    page.get_by_role("button", name="Test model").click()
    status_line = page.locator("#test-status")
    expect(status_line).to_contain_text("offers one model, qwen2.5:3b, so the Console chose it for you")
    expect(status_line).to_have_class(re.compile("status--ok"))
    expect(page.get_by_label("Model", exact=True)).to_have_value("qwen2.5:3b")
    assert serious_violations(page) == []


def test_the_api_tokens_page_shows_when_a_token_was_made_in_the_browser_s_zone(chat: Page, console: LiveConsole):
    from console_ha.store.console_secrets import ConsoleSecrets
    ConsoleSecrets(console.data_dir).create_api_token("kitchen tablet")
    chat.goto(console.at("/settings/api-tokens"))
    made = chat.locator(".token-list time").first
    moment = made.get_attribute("datetime")
    assert moment is not None and moment.endswith("Z")
    expect(made).to_contain_text(tokyo_clock(moment))
    assert "UTC" not in made.inner_text()
    assert serious_violations(chat) == []
