"""Open pages' long polls on waitress, the production server, with `console-ha serve`'s threads: bounded, and
pages still load while every allowed poll is held."""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Iterator
from typing import Any

import pytest
import requests
from flask import Flask
from waitress import create_server  # type: ignore[attr-defined]

from console_ha.capabilities.household_watch import MAX_WATCHERS, MAX_WATCHERS_PER_SESSION
from console_ha.cli import server_threads
from tests.mcp.conftest import stop
from tests.web.live import Browser

WATCH = "/api/v1/confirmations/watch"
HELD_SECONDS = 4.0


@pytest.fixture
def waitress_url(make_app: Callable[..., Flask]) -> Iterator[str]:
    """The Console on waitress with the threads `console-ha serve --threads 3` runs (the fewest it allows)."""
    app = make_app(CONSOLE_HA_WATCH_SECONDS=HELD_SECONDS)
    server = create_server(app, host="127.0.0.1", port=0, threads=server_threads(3))
    thread = threading.Thread(target=server.run, name="waitress-watch", daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.effective_port}"
    finally:
        stop(server, thread)


def _poll(browser: Browser, seen: str, answers: list[tuple[dict[str, Any], float]]) -> None:
    started = time.monotonic()
    body = browser.get(f"{WATCH}?seen={seen}").json()
    answers.append((body, time.monotonic() - started))


def test_polls_past_the_bounds_are_turned_away_at_once_and_pages_still_load(waitress_url: str, password: str) -> None:
    """Every session opens one poll more than its bound: 6 are held overall, the rest answered busy at once;
    meanwhile a page loads at once."""
    sessions = []
    for _ in range(MAX_WATCHERS // MAX_WATCHERS_PER_SESSION + 1):
        browser = Browser(waitress_url)
        assert browser.log_in(password).status_code == 302
        sessions.append(browser)
    seen = sessions[0].get(WATCH + "?seen=").json()["version"]
    answers: list[tuple[dict[str, Any], float]] = []
    polls = [threading.Thread(target=_poll, args=(browser, seen, answers))
             for browser in sessions for _ in range(MAX_WATCHERS_PER_SESSION + 1)]
    for poll in polls:
        poll.start()
    time.sleep(1.0)
    busy = [(body, took) for body, took in answers if body["busy"]]
    assert len(busy) == len(polls) - MAX_WATCHERS
    assert all(took < 1.0 and body["retry_after"] > 0 for body, took in busy)

    # Every allowed poll is held now; the household still gets a page at once.
    started = time.monotonic()
    page = sessions[0].get("/activity")
    assert page.status_code == 200 and time.monotonic() - started < 1.0
    assert requests.get(waitress_url + "/health", timeout=5).status_code == 200

    for poll in polls:
        poll.join(HELD_SECONDS + 5)
    held = [(body, took) for body, took in answers if not body["busy"]]
    assert len(held) == MAX_WATCHERS
    assert all(body["version"] == seen and took >= HELD_SECONDS - 0.5 for body, took in held)
