"""Open pages' long polls on waitress, the production server, with `console-ha serve`'s threads: bounded, and
pages still load while every allowed poll is held."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import requests
from flask import Flask
from waitress import create_server  # type: ignore[attr-defined]

from console_ha.answers.page_watch import MAX_WATCHERS, MAX_WATCHERS_PER_SESSION, HouseholdWatch
from console_ha.cli import server_threads
from tests.mcp.conftest import stop
from tests.moving_clock import PATIENCE
from tests.web.live import Browser

WATCH = "/api/v1/confirmations/watch"
HELD_SECONDS = 4.0


@pytest.fixture
def served_app(make_app: Callable[..., Flask]) -> Flask:
    """The app `waitress_url` serves: a test reads its watch to know a poll is held before it goes on."""
    return make_app(CONSOLE_HA_WATCH_SECONDS=HELD_SECONDS)


@pytest.fixture
def waitress_url(served_app: Flask) -> Iterator[str]:
    """The Console on waitress with the threads `console-ha serve --threads 3` runs (the fewest it allows)."""
    app = served_app
    server = create_server(app, host="127.0.0.1", port=0, threads=server_threads(3))
    thread = threading.Thread(target=server.run, name="waitress-watch", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        stop(server, thread)


def _poll(browser: Browser, seen: str, answers: list[dict[str, Any]]) -> None:
    answers.append(browser.get(f"{WATCH}?seen={seen}").json())


def test_polls_past_the_bounds_are_turned_away_at_once_and_pages_still_load(served_app: Flask, waitress_url: str,
                                                                           password: str) -> None:
    """Every session opens one poll more than its bound: 6 are held overall, the rest answered busy at once;
    meanwhile a page loads at once.

    "At once" is told by order, not by a stopwatch: answered while every allowed poll is still held.
    """
    holding = _holding(served_app)
    sessions = []
    for _ in range(MAX_WATCHERS // MAX_WATCHERS_PER_SESSION + 1):
        browser = Browser(waitress_url)
        assert browser.log_in(password).status_code == 302
        sessions.append(browser)
    seen = sessions[0].get(WATCH + "?seen=").json()["version"]
    answers: list[dict[str, Any]] = []
    polls = [threading.Thread(target=_poll, args=(browser, seen, answers))
             for browser in sessions for _ in range(MAX_WATCHERS_PER_SESSION + 1)]
    for poll in polls:
        poll.start()
    _until(lambda: holding() == MAX_WATCHERS and len(answers) == len(polls) - MAX_WATCHERS)
    assert all(body["busy"] and body["retry_after"] > 0 for body in answers)

    # Every allowed poll is held now; the household still gets a page, before any of them lets go.
    page = sessions[0].get("/activity")
    assert requests.get(waitress_url + "/health", timeout=5).status_code == 200
    assert page.status_code == 200 and holding() == MAX_WATCHERS

    for poll in polls:
        poll.join(HELD_SECONDS + PATIENCE)
    held = [body for body in answers if not body["busy"]]
    assert len(held) == MAX_WATCHERS and holding() == 0
    assert all(body["version"] == seen for body in held)  # held to the end, nothing changed


# -- issue 25: a page's place is freed as soon as the page goes ---------------------------------------------

LEAVE = WATCH + "/leave"
TAB = "tab-0123456789"


def _background_poll(browser: Browser, query: str, answers: list[dict[str, Any]]) -> threading.Thread:
    thread = threading.Thread(target=_poll_query, args=(browser, query, answers), daemon=True)
    thread.start()
    return thread


def _poll_query(browser: Browser, query: str, answers: list[dict[str, Any]]) -> None:
    answers.append(browser.get(f"{WATCH}?{query}").json())


def _until(condition: Callable[[], bool], seconds: float = PATIENCE) -> None:
    """Wait for what the test needs to be so (generous: a loaded machine is slow, never wrong)."""
    deadline = time.monotonic() + seconds
    while not condition() and time.monotonic() < deadline:
        time.sleep(0.02)
    assert condition()


def _one_held_and_answered(holding: Callable[[], int], answers: list[Any], n: int) -> bool:
    return holding() == 1 and len(answers) == n


def _holding(app: Flask) -> Callable[[], int]:
    """How many polls the served Console holds now."""
    watch: HouseholdWatch = app.extensions["console_ha"].household_watch
    return watch.watching


def test_a_tab_moving_through_pages_is_never_turned_away(served_app: Flask, waitress_url: str, password: str) -> None:
    """Five pages in a row in one tab, each leaving its poll open behind it: each new one replaces the one before
    (answered at once, `replaced`), none busy (before issue 25 the third was busy, and its count came 15 s late)."""
    holding = _holding(served_app)
    browser = Browser(waitress_url)
    assert browser.log_in(password).status_code == 302
    # The CSRF token is minted before any poll starts, as a page's is: a poll answers with the session cookie as
    # it was when the poll began, and one begun before the token was minted would put back a cookie without it
    # when a beacon ends it, before the next beacon is sent.
    csrf = browser.csrf("/activity")
    seen = browser.get(WATCH).json()["version"]
    answers: list[dict[str, Any]] = []
    for n in range(5):
        _background_poll(browser, f"seen={seen}&page={TAB}&load=load-{n:07d}", answers)
        # Each page asks once the one before is held (or answered): the pages of a tab come one after another.
        _until(partial(_one_held_and_answered, holding, answers, n))
    assert all(not body["busy"] and body.get("replaced") is True for body in answers), answers
    # Another tab of the same session still gets its place beside this tab's latest.
    other = _background_poll(browser, f"seen={seen}&page=another-tab-01&load=load-0000009", answers)
    _until(lambda: holding() == 2 or len(answers) > 4)
    assert len(answers) == 4 and holding() == 2
    for page_id, load in ((TAB, "load-0000004"), ("another-tab-01", "load-0000009")):
        left = browser.post(LEAVE, data={"page": page_id, "load": load, "csrf_token": csrf})
        assert left.status_code == 204
    assert holding() == 0  # the beacons freed both places, not the polls' timeouts
    other.join(HELD_SECONDS + PATIENCE)
    _until(lambda: len(answers) == 6)
    assert all(not body["busy"] and "replaced" not in body for body in answers[4:])


def test_the_leave_beacon_is_checked_as_every_change_is(served_app: Flask, waitress_url: str, password: str) -> None:
    """No CSRF token: refused; another site's Origin: refused; and the poll it named stays held."""
    holding = _holding(served_app)
    browser = Browser(waitress_url)
    assert browser.log_in(password).status_code == 302
    seen = browser.get(WATCH).json()["version"]
    answers: list[dict[str, Any]] = []
    poll = _background_poll(browser, f"seen={seen}&page={TAB}&load=load-0000001", answers)
    _until(lambda: holding() == 1)
    form = {"page": TAB, "load": "load-0000001"}
    no_csrf = browser.post(LEAVE, data=form)
    assert no_csrf.status_code == 400 and no_csrf.json()["error"]["code"] == "CSRF_INVALID"
    foreign = browser.post(LEAVE, data={**form, "csrf_token": browser.csrf("/activity")}, origin="http://evil.test")
    assert foreign.status_code == 403 and foreign.json()["error"]["code"] == "FORBIDDEN"
    assert requests.post(waitress_url + LEAVE, data=form, timeout=5).status_code == 401
    assert holding() == 1 and answers == []
    poll.join(HELD_SECONDS + PATIENCE)
    assert answers[0]["version"] == seen and "replaced" not in answers[0]  # held on to its own end


def test_a_logout_answers_its_session_s_polls_at_once(served_app: Flask, waitress_url: str, password: str) -> None:
    """The session's open poll answers as the logout happens, its next is refused, and its place is free."""
    holding = _holding(served_app)
    browser = Browser(waitress_url)
    assert browser.log_in(password).status_code == 302
    csrf = browser.csrf("/activity")
    seen = browser.get(WATCH).json()["version"]
    answers: list[dict[str, Any]] = []
    poll = _background_poll(browser, f"seen={seen}&page={TAB}&load=load-0000001", answers)
    _until(lambda: holding() == 1)
    assert browser.post("/logout", data={"csrf_token": csrf}).status_code == 302
    assert holding() == 0
    poll.join(HELD_SECONDS + PATIENCE)
    assert answers and answers[0]["version"] == seen and not answers[0]["busy"]
    assert browser.get(f"{WATCH}?seen={seen}&page={TAB}&load=load-0000002").status_code == 401
