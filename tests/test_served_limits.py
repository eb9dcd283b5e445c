"""A hung Home Assistant never takes the served Console's threads: `console-ha serve` over real HTTP on loopback."""

from __future__ import annotations

import json
import os
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass

import pytest

from console_ha.ha.call_limits import MAX_CALLS_PER_ORIGIN
from console_ha.settings.settings_service import DISCOVERY_REQUESTS
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from tests.moving_clock import PATIENCE, wait_for
from tests.seed import seed_settings
from tests.served_process import serve_in_process
from tests.stub_ha import StubHomeAssistant

ENTITIES = "api/v1/conversation/home-assistant/entities"
PICKERS = 12


@dataclass
class Answer:
    what: str
    status: int
    code: str | None


class Arrivals:
    """Answers in the order they came back: "at once" is told by that order, never by a stopwatch.

    A refusal or /health takes milliseconds; a thread stuck behind Home Assistant or a browse holds for
    seconds (8 s, 3 s), so an answer that came before the first of those did not wait behind one.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self.answers: list[Answer] = []

    def get(self, what: str, url: str, headers: dict[str, str] | None = None) -> Answer:
        """GET `url` and log its answer as it comes."""
        answer = get(what, url, headers)
        with self._lock:
            self.answers.append(answer)
        return answer

    def of(self, what: str) -> list[Answer]:
        """The answers to `what`, in the order they came."""
        with self._lock:
            return [answer for answer in self.answers if answer.what == what]

    def came_before_the_first(self, slow: Callable[[Answer], bool], answers: list[Answer]) -> bool:
        """Whether every one of `answers` came back before the first slow answer (any when none came)."""
        with self._lock:
            first = next((n for n, answer in enumerate(self.answers) if slow(answer)), len(self.answers))
            came = {id(answer): n for n, answer in enumerate(self.answers)}  # one GET, one answer: by identity
            return all(came[id(answer)] < first for answer in answers)


def get(what: str, url: str, headers: dict[str, str] | None = None) -> Answer:
    """One GET; the status and the error code if any."""
    request = urllib.request.Request(url, headers=headers or {})
    try:
        with urllib.request.urlopen(request, timeout=30) as response:
            status, body = response.status, response.read()
    except urllib.error.HTTPError as err:
        status, body = err.code, err.read()
    try:
        code = json.loads(body).get("error", {}).get("code")
    except (ValueError, AttributeError):
        code = None
    return Answer(what, status, code)


def household_session(served: str, data_dir: DataDir) -> dict[str, str]:
    """The household's session cookie on the served Console (the picker and discovery are the household's alone)."""
    from tests.web.conftest import FAST_HASH, PASSWORD
    from tests.web.live import Browser

    ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)
    browser = Browser(served.rstrip("/"))
    browser.http.trust_env = False
    assert browser.log_in(PASSWORD).status_code == 302
    return {"Cookie": "; ".join(f"{name}={value}" for name, value in browser.http.cookies.items())}


@pytest.fixture
def served(data_dir: DataDir) -> Iterator[str]:
    """`python -m console_ha serve` with its default threads; yields its URL."""
    with serve_in_process(data_dir, {**os.environ, "PYTHONUNBUFFERED": "1"}) as url:
        yield url


def test_twelve_pickers_on_a_hung_home_assistant_leave_health_and_pages_answering(
        data_dir: DataDir, served: str) -> None:
    """Past the cap the pickers get HA_BUSY at once, and /health and a page answer while the rest hang."""
    with StubHomeAssistant() as hung:
        hung.fault("slow", delay=60)
        seed_settings(data_dir, {"enabled": True, "base_url": hung.base_url}, token=hung.token)
        household = household_session(served, data_dir)
        arrivals = Arrivals()
        threads = [threading.Thread(target=arrivals.get, args=("picker", served + ENTITIES, household))
                   for _ in range(PICKERS)]
        for thread in threads:
            thread.start()
        wait_for(lambda: len(arrivals.of("picker")) >= PICKERS - MAX_CALLS_PER_ORIGIN)
        # The hung pickers are still waiting on Home Assistant now (the Console waits 8 s for it).
        assert len(hung.requests) >= 1
        health = arrivals.get("health", served + "health")
        page = arrivals.get("page", served + "login")
        still_hanging = PICKERS - len(arrivals.of("picker"))
        for thread in threads:
            thread.join(PATIENCE)

    assert still_hanging >= 1, "no picker was left waiting on Home Assistant: the test proved nothing"
    assert (health.status, page.status) == (200, 200), (health, page)
    answers = arrivals.of("picker")
    busy = [a for a in answers if a.code == "HA_BUSY"]
    assert len(busy) >= PICKERS - MAX_CALLS_PER_ORIGIN, answers
    assert all(a.status == 503 for a in busy), busy
    waited = [a for a in answers if a.code != "HA_BUSY"]
    assert len(waited) <= MAX_CALLS_PER_ORIGIN
    assert all((a.status, a.code) == (502, "HA_TIMEOUT") for a in waited), waited
    # At once: the refusals, /health and the page all came back before any picker's wait on Home Assistant ended.
    assert arrivals.came_before_the_first(lambda a: a.code == "HA_TIMEOUT", [*busy, health, page]), arrivals.answers


def test_parallel_discoveries_leave_health_answering(data_dir: DataDir, served: str) -> None:
    """One mDNS browse at a time, one request waiting for it, and the others refused at once.

    Queued behind one lock, twelve browses of 3 s each held every thread for up to half a minute.
    """
    household = household_session(served, data_dir)
    arrivals = Arrivals()
    url = served + "api/v1/conversation/home-assistant/discover"
    threads = [threading.Thread(target=arrivals.get, args=("discover", url, household)) for _ in range(PICKERS)]
    for thread in threads:
        thread.start()
    wait_for(lambda: len(arrivals.of("discover")) >= PICKERS - DISCOVERY_REQUESTS)
    health = arrivals.get("health", served + "health")
    for thread in threads:
        thread.join(2 * PATIENCE)

    assert health.status == 200, health
    answers = arrivals.of("discover")
    browsed = [a for a in answers if a.status == 200]
    busy = [a for a in answers if a.code == "HA_BUSY"]
    assert 1 <= len(browsed) <= DISCOVERY_REQUESTS and len(browsed) + len(busy) == PICKERS, answers
    assert all(a.status == 503 for a in busy), busy
    # At once: the refusals and /health came back before the first 3 s browse ended.
    assert arrivals.came_before_the_first(lambda a: a.status == 200 and a.what == "discover", [*busy, health])
