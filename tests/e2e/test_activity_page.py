"""Activity in Chromium (issue 25): words, not codes; nothing cut off at 1280 or 390 px; the latest events first.

With JavaScript and without, on a log that holds every event, every reason code and a long program name; and
(issue 29) with two Home Assistants, each event naming its own, and the events of one chosen in the browser.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, ViewportSize, expect

from console_ha.conversation.activity import EVENT_WORDS, reason
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.config import MAX_INSTANCE_NAME_LENGTH
from tests.activity_log import FAILURE_CODES, LONG_PROGRAM, REFUSAL_CODES, add_instance, fill, record
from tests.e2e.conftest import DESKTOP, PHONE, LiveConsole, log_in, screenshot, serious_violations

pytestmark = pytest.mark.browser

CODE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")

# Every box in <main> that is wider inside than it is (cut off, or scrolled sideways), and every element
# that reaches past the window's edge. Visually hidden labels are 1 px boxes by design and are left out.
OVERFLOWING = """() => {
  const edge = document.documentElement.clientWidth;
  const main = document.querySelector('main');
  const found = [];
  for (const e of [main, ...main.querySelectorAll('*')]) {
    if (e.closest('.visually-hidden')) continue;
    const style = getComputedStyle(e);
    if (style.display === 'none') continue;
    const box = e.getBoundingClientRect();
    const name = e.tagName + '.' + e.className + ' ' + (e.textContent || '').trim().slice(0, 40);
    if (!['inline', 'contents'].includes(style.display) && e.scrollWidth > e.clientWidth + 1) {
      found.push(name + ': ' + e.scrollWidth + ' px in ' + e.clientWidth);
    }
    if (box.width && (box.right > edge + 1 || box.left < -1)) found.push(name + ': right edge ' + box.right);
  }
  return found;
}"""


def open_activity(browser: Browser, console: LiveConsole, password: str, *, javascript: bool,
                  viewport: ViewportSize) -> Page:
    """A household's tab on /activity, with or without JavaScript, at `viewport`."""
    context = browser.new_context(java_script_enabled=javascript, viewport=viewport)
    page = context.new_page()
    log_in(page, console, password, path="/activity")
    return page


def violations_without_script(browser: Browser, console: LiveConsole, page: Page) -> list[dict[str, Any]]:
    """axe's serious and critical findings on the page a browser without JavaScript has: the same HTML in a
    context where axe (a script) can run, at the Console's origin for its stylesheet, the page's scripts blocked."""
    html = page.content()
    context = browser.new_context(viewport=page.viewport_size or DESKTOP, bypass_csp=True)
    try:
        copy = context.new_page()
        copy.route(re.compile(r".*\.js(\?.*)?$"), lambda route: route.abort())
        copy.goto(console.at("/login"))
        copy.set_content(html)
        return serious_violations(copy)
    finally:
        context.close()


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
@pytest.mark.parametrize("viewport", [DESKTOP, PHONE], ids=["1280", "390"])
def test_activity_says_what_happened_in_words_fits_the_screen_and_shows_the_latest_first(
        browser: Browser, console: LiveConsole, household_password: str, javascript: bool,
        viewport: ViewportSize) -> None:
    fill(console.data_dir)
    page = open_activity(browser, console, household_password, javascript=javascript, viewport=viewport)
    try:
        main = page.locator("main")
        latest = page.get_by_role("list", name=re.compile("most recent events"))
        expect(latest).to_be_visible()
        # Words, never a code: what happened, and why for a refusal or a failure.
        text = main.inner_text()
        assert CODE.findall(text) == []
        for event, codes in ((AuditEvent.REJECTED, REFUSAL_CODES), (AuditEvent.FAILED, FAILURE_CODES)):
            for code in codes:
                line = latest.locator(f'[data-event="{event}"][data-code="{code}"]').first
                expect(line).to_contain_text(EVENT_WORDS[event])
                expect(line).to_contain_text(reason(event, code) or "")
        expect(latest.locator('[data-event="asked_again"]').first).to_contain_text(
            EVENT_WORDS[AuditEvent.ASKED_AGAIN])
        expect(latest).to_contain_text(LONG_PROGRAM)

        # The latest events come first, beginning on the first screen; the counts follow them.
        first_event = latest.get_by_role("listitem").first.bounding_box()
        how_often = page.get_by_role("heading", name="How often", exact=True).bounding_box()
        assert first_event is not None and how_often is not None
        assert first_event["y"] < viewport["height"] and first_event["y"] < how_often["y"]

        # Nothing is cut off or scrolled sideways, the counts included.
        counts = page.get_by_role("region", name="How often")
        expect(counts.locator('.tally [data-event="abandoned"]').first).to_be_visible()
        assert page.evaluate(OVERFLOWING) == []
        assert page.evaluate("document.documentElement.scrollWidth") <= viewport["width"]

        found = serious_violations(page) if javascript else violations_without_script(browser, console, page)
        assert found == []
        if javascript:
            screenshot(page, f"activity-{viewport['width']}", phone=False)
    finally:
        page.context.close()


# A household's name for a Home Assistant as long as one may be, in one word: it wraps in the choice and the events.
LONG_NAME = ("TheCabinByTheLakeBeyondTheForestRoad" * 2)[:MAX_INSTANCE_NAME_LENGTH]


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_activity_of_two_home_assistants_names_each_event_s_and_shows_one_when_chosen(
        browser: Browser, console: LiveConsole, household_password: str, javascript: bool) -> None:
    """Issue 29: House and a cabin; the household picks the cabin, then every one again, with JavaScript and
    without, on a phone's width (the choice's links and a long name wrap)."""
    add_instance(console.data_dir, "home", "House")
    add_instance(console.data_dir, "cabin", LONG_NAME)
    log = AuditLog(console.data_dir)
    record(log, AuditEvent.EXECUTED, "home_assistant.get_state")  # a line of the release before: the house's
    record(log, AuditEvent.FAILED, "home_assistant.get_history", "HA_UNREACHABLE", instance="cabin")
    record(log, AuditEvent.DENIED, "home_assistant.get_state", instance="home")
    page = open_activity(browser, console, household_password, javascript=javascript, viewport=PHONE)
    try:
        choice = page.get_by_role("navigation", name="Show the events of")
        events = page.get_by_role("list", name=re.compile("most recent event")).get_by_role("listitem")
        expect(events).to_have_count(3)
        # Newest first: the house's denial, the cabin's failure, the house's read of the release before.
        expect(events.first.get_by_role("term")).to_have_text(["When", "Read", "Home Assistant", "Asked by"])
        for event, name in zip(events.all(), ("House", LONG_NAME, "House"), strict=True):
            expect(event.get_by_role("definition").nth(2)).to_have_text(name)
        expect(choice.get_by_role("link", name="All")).to_have_attribute("aria-current", "page")
        assert page.evaluate(OVERFLOWING) == []

        choice.get_by_role("link", name=LONG_NAME).click()
        expect(page).to_have_url(re.compile(r"/activity\?instance=cabin$"))
        expect(events).to_have_count(1)
        expect(events.first).to_contain_text(EVENT_WORDS[AuditEvent.FAILED])
        expect(events.first).to_contain_text(reason(AuditEvent.FAILED, "HA_UNREACHABLE") or "")
        expect(page.get_by_role("main")).to_contain_text(f"One event of {LONG_NAME} in the log.")
        expect(choice.get_by_role("link", name=LONG_NAME)).to_have_attribute("aria-current", "page")
        counts = page.get_by_role("region", name="How often")
        expect(counts.locator(".tally")).to_have_count(1)  # the cabin's one read, not the house's
        assert page.evaluate(OVERFLOWING) == []
        if javascript:
            assert serious_violations(page) == []
            screenshot(page, "activity-two-instances", phone=False)
        else:
            assert violations_without_script(browser, console, page) == []

        choice.get_by_role("link", name="House").click()
        expect(page).to_have_url(re.compile(r"/activity\?instance=home$"))
        expect(events).to_have_count(2)  # the line that names none is the house's
        choice.get_by_role("link", name="All").click()
        expect(page).to_have_url(re.compile(r"/activity$"))
        expect(events).to_have_count(3)
    finally:
        page.context.close()
