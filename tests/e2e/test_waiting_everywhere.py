"""A program's new card reaches the count and the title of every open Console page within 2 s (issue 25).

Five tabs of one browser, and one tab right after moving through five pages, in Chromium, with the Console
served for real and the card asked through the real household queue. Each page stamps the moment its title
first shows the new count (a MutationObserver, `Date.now()`), compared with the moment the card was asked.
The figures are in docs/benchmarks.md ("Issue 25"); `-s` prints them.
"""

from __future__ import annotations

import re
import statistics
import time
from collections.abc import Iterator

import pytest
from playwright.sync_api import BrowserContext, Page, Route, ViewportSize, expect

from console_ha.answers.household_queue import HouseholdQueue
from console_ha.answers.page_watch import HouseholdWatch
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from tests.e2e.conftest import DESKTOP, PHONE, THERMOMETER, LiveConsole, log_in
from tests.household_cards import withdraw

pytestmark = pytest.mark.browser

ENTITY = THERMOMETER  # what `configured` allows (conftest.py)
PAGES = ("/settings/home-assistant", "/settings/model", "/conversation", "/activity", "/confirmations")
WITHIN_SECONDS = 2.0
ROUNDS = 4
# Every page: from the moment the title shows `(count)`, its stamp (ms since the epoch, the page's clock).
STAMP_WHEN_COUNTED = """count => {
  window.__counted = null;
  const seen = () => {
    if (window.__counted === null && document.title.startsWith(`(${count})`)) window.__counted = Date.now();
  };
  new MutationObserver(seen).observe(document.head, { childList: true, characterData: true, subtree: true });
  seen();
}"""


@pytest.fixture
def queue(configured: LiveConsole) -> Iterator[HouseholdQueue]:
    """The live Console's household queue, the one MCP calls fill; its cards are withdrawn afterwards."""
    household: HouseholdQueue = configured.app.extensions["console_ha_mcp"].queue
    yield household
    for waiting in household.pending():
        withdraw(household, waiting)


def ask(queue: HouseholdQueue, n: int) -> float:
    """A program's new card (a new program each time, so each round adds one); when it was asked."""
    asked = time.time()
    queue.ask(f"desk assistant {n}", GET_HISTORY, {"entity_id": ENTITY, "period": "day"})
    return asked


def seconds_until_counted(pages: list[Page], count: int, asked: float) -> list[float]:
    """How long after `asked` each page's title showed `count` (fails after 20 s)."""
    for page in pages:
        page.wait_for_function("() => window.__counted !== null", timeout=20_000)
    return [page.evaluate("window.__counted") / 1000 - asked for page in pages]


def open_tabs(context: BrowserContext, console: LiveConsole, password: str) -> list[Page]:
    first = context.new_page()
    first.set_viewport_size(DESKTOP)
    log_in(first, console, password, path=PAGES[0])
    tabs = [first]
    for path in PAGES[1:]:
        tab = context.new_page()
        tab.set_viewport_size(DESKTOP)
        tab.goto(console.at(path))
        tab.wait_for_load_state()
        tabs.append(tab)
    return tabs


def report(what: str, took: list[float]) -> None:
    print(f"\n{what}: median {statistics.median(took):.3f} s, max {max(took):.3f} s over {len(took)} (page, round)s")


def _five_tabs(context: BrowserContext, queue: HouseholdQueue, console: LiveConsole, password: str) -> list[float]:
    tabs = open_tabs(context, console, password)
    time.sleep(1.0)  # every page has started (and the leader's question is open)
    took: list[float] = []
    spreads: list[float] = []
    for n in range(1, ROUNDS + 1):
        for tab in tabs:
            tab.evaluate(STAMP_WHEN_COUNTED, n)
        counted = seconds_until_counted(tabs, n, ask(queue, n))
        spreads.append(max(counted) - min(counted))
        took += counted
    print(f"\nfirst to last of the five tabs, each card: {', '.join(f'{s * 1000:.0f} ms' for s in spreads)}")
    return took


def test_a_new_card_reaches_five_open_tabs_within_2_s(
    context: BrowserContext, configured: LiveConsole, queue: HouseholdQueue, household_password: str,
) -> None:
    """Five tabs (settings, model, conversation, activity, confirmations): every title counts each new card."""
    took = _five_tabs(context, queue, configured, household_password)
    report("five open tabs", took)
    # Real time: issue 25's promise is how soon a person sees the count in a real browser, on Chromium's clock.
    assert max(took) < WITHIN_SECONDS, took
    # One question for the five: the page holding the lock asks, the others hear its answers.
    open_questions = []
    for _ in range(20):
        open_questions.append(configured.services.household_watch.watching())
        time.sleep(0.05)
    assert max(open_questions) == 1, open_questions


@pytest.fixture
def without_web_locks(context: BrowserContext) -> BrowserContext:
    """A browser without Web Locks, as a Console on plain http from another machine is (no secure context)."""
    context.add_init_script("delete Navigator.prototype.locks;")
    return context


def test_without_web_locks_every_tab_still_counts_a_new_card_within_2_s(
    without_web_locks: BrowserContext, configured: LiveConsole, queue: HouseholdQueue, household_password: str,
) -> None:
    """The fallback: each page asks for itself (the server holds two, turns three away) and shares what it hears."""
    took = _five_tabs(without_web_locks, queue, configured, household_password)
    report("five open tabs, without Web Locks", took)
    # Real time: issue 25's promise is how soon a person sees the count in a real browser, on Chromium's clock.
    assert max(took) < WITHIN_SECONDS, took


def _after_moving(page: Page, queue: HouseholdQueue, console: LiveConsole, password: str,
                  monkeypatch: pytest.MonkeyPatch, size: ViewportSize = DESKTOP) -> list[float]:
    watch = console.services.household_watch
    left: list[bool] = []  # each page's beacon as it went: whether it ended a question still open

    def leave(*args: str) -> bool:
        left.append(HouseholdWatch.leave(watch, *args))
        return left[-1]

    monkeypatch.setattr(watch, "leave", leave)
    page.set_viewport_size(size)
    log_in(page, console, password, path="/activity")
    took: list[float] = []
    for n in range(1, ROUNDS + 1):
        for path in PAGES:
            page.goto(console.at(path))
            page.wait_for_load_state()
        page.evaluate(STAMP_WHEN_COUNTED, n)
        took += seconds_until_counted([page], n, ask(queue, n))
        expect(page.locator("#waiting-count")).to_have_text(f"{n} waiting")  # the nav's count, beside the title
        expect(page.locator("#waiting-count")).to_be_visible()
    print(f"\nbeacons: {len(left)}, of which ended a question: {sum(left)}")
    # Best effort by design (a page gone before its question started sends none; a late one finds its question
    # replaced already), but they come and they end questions: on a browser that sends none, this fails.
    assert sum(left) >= len(PAGES), left
    return took


def test_right_after_moving_through_five_pages_a_new_card_counts_within_2_s(
    page: Page, configured: LiveConsole, queue: HouseholdQueue, household_password: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """The page each round ends on counts the card at once: the five it left hold no place on the server."""
    took = _after_moving(page, queue, configured, household_password, monkeypatch)
    report("right after moving through five pages", took)
    # Real time: issue 25's promise is how soon a person sees the count in a real browser, on Chromium's clock.
    assert max(took) < WITHIN_SECONDS, took
    assert configured.services.household_watch.watching() <= 1


def test_without_web_locks_moving_through_five_pages_is_never_turned_away(
    without_web_locks: BrowserContext, configured: LiveConsole, queue: HouseholdQueue, household_password: str,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Each page asks for itself: its beacon on leaving, and its tab's id, free the place it held (at 390 px)."""
    took = _after_moving(without_web_locks.new_page(), queue, configured, household_password, monkeypatch, PHONE)
    report("right after moving through five pages, without Web Locks", took)
    # Real time: issue 25's promise is how soon a person sees the count in a real browser, on Chromium's clock.
    assert max(took) < WITHIN_SECONDS, took


def test_a_page_whose_script_starts_after_a_card_came_still_counts_it(
    context: BrowserContext, configured: LiveConsole, queue: HouseholdQueue, household_password: str,
) -> None:
    """A card that comes between a page's render and its script's start: the leader's answer went out before the
    page listened, so the page asks the others for what they last heard (before, it waited for the leader's next
    answer, up to 25 s)."""
    leader = context.new_page()
    leader.set_viewport_size(DESKTOP)
    log_in(leader, configured, household_password, path="/activity")
    held: list[Route] = []
    context.route(re.compile(r"/static/nav\.js"), lambda route: held.append(route))
    late = context.new_page()
    late.set_viewport_size(DESKTOP)
    late.goto(configured.at("/conversation"), wait_until="commit")  # rendered with nothing waiting
    while not held:
        late.wait_for_timeout(50)
    ask(queue, 1)
    expect(leader).to_have_title(re.compile(r"^\(1\) "))  # the leader heard it, and told the pages listening
    held[0].continue_()
    late.wait_for_load_state()
    expect(late).to_have_title(re.compile(r"^\(1\) "), timeout=WITHIN_SECONDS * 1000)
    expect(late.locator("#waiting-count")).to_have_text("1 waiting")


def test_a_logout_in_one_tab_sends_the_others_to_the_login_page_at_once(
    context: BrowserContext, configured: LiveConsole, household_password: str,
) -> None:
    """Logging out in a tab that does not ask for all: the one that asks is answered now, not at its 25 s, and
    each page goes to the login page in turn, once (before, they stayed up to 25 s)."""
    tabs = [context.new_page()]
    log_in(tabs[0], configured, household_password, path="/settings/model")
    for path in ("/conversation", "/activity"):  # pages without unsaved work, which go to the login page
        tabs.append(context.new_page())
        tabs[-1].goto(configured.at(path))
        tabs[-1].wait_for_load_state()
    asked: list[str] = []
    context.on("request", lambda request: asked.append(request.url) if "/confirmations/watch?" in request.url
               else None)
    tabs[0].wait_for_timeout(1000)  # the first tab holds the lock and its question is open
    tabs[-1].get_by_role("button", name="Log out").click()
    for tab in tabs:
        expect(tab).to_have_url(re.compile(r"/login\?"), timeout=10_000)
    tabs[0].wait_for_timeout(2000)
    assert len(asked) <= len(tabs), asked  # each page asked at most once more: no page keeps asking
    assert configured.services.household_watch.watching() == 0
