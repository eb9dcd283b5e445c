"""A hung Home Assistant never takes the served Console's threads: `console-ha serve` over real HTTP on loopback."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass

import pytest

from console_ha.ha.rest_client import MAX_CALLS_PER_ORIGIN
from console_ha.settings.settings_service import DISCOVERY_REQUESTS
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

ENTITIES = "api/v1/conversation/home-assistant/entities"
PICKERS = 12
# Generous: a refusal or /health takes milliseconds; a thread stuck behind Home Assistant takes 8 s.
PROMPT = 3.0


@dataclass
class Answer:
    status: int
    code: str | None
    seconds: float


def get(url: str, headers: dict[str, str] | None = None) -> Answer:
    """One GET; the status, the error code if any, and how long it took."""
    started = time.monotonic()
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
    return Answer(status, code, time.monotonic() - started)


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
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}
    process = subprocess.Popen(
        [sys.executable, "-m", "console_ha", "serve", "--host", "127.0.0.1", "--port", "0",
         "--data-dir", str(data_dir.root)],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env,
    )
    assert process.stdout is not None  # stdout=PIPE: Popen has made the pipe
    try:
        line = process.stdout.readline()
        assert line.startswith("Console listening on http://127.0.0.1:"), line
        yield line.split()[-1]
    finally:
        process.terminate()
        try:
            process.wait(timeout=10)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()
        process.stdout.close()


def test_twelve_pickers_on_a_hung_home_assistant_leave_health_and_pages_answering(
        data_dir: DataDir, served: str) -> None:
    """Past the cap the pickers get HA_BUSY at once, and /health and a page answer while the rest hang."""
    with StubHomeAssistant() as hung:
        hung.fault("slow", delay=60)
        seed_settings(data_dir, {"enabled": True, "base_url": hung.base_url}, token=hung.token)
        household = household_session(served, data_dir)

        answers: list[Answer] = []
        lock = threading.Lock()

        def picker() -> None:
            answer = get(served + ENTITIES, household)
            with lock:
                answers.append(answer)

        threads = [threading.Thread(target=picker) for _ in range(PICKERS)]
        for thread in threads:
            thread.start()
        deadline = time.monotonic() + PROMPT
        while time.monotonic() < deadline and len(answers) < PICKERS - MAX_CALLS_PER_ORIGIN:
            time.sleep(0.02)
        # The hung pickers are still waiting on Home Assistant now (the Console waits 8 s for it).
        assert len(hung.requests) >= 1
        health = get(served + "health")
        page = get(served + "login")
        still_hanging = PICKERS - len(answers)
        for thread in threads:
            thread.join(30)

    assert still_hanging >= 1, "no picker was left waiting on Home Assistant: the test proved nothing"
    assert (health.status, health.seconds < PROMPT) == (200, True), health
    assert (page.status, page.seconds < PROMPT) == (200, True), page
    busy = [a for a in answers if a.code == "HA_BUSY"]
    assert len(busy) >= PICKERS - MAX_CALLS_PER_ORIGIN, answers
    assert all(a.status == 503 and a.seconds < PROMPT for a in busy), busy
    waited = [a for a in answers if a.code != "HA_BUSY"]
    assert len(waited) <= MAX_CALLS_PER_ORIGIN
    assert all((a.status, a.code) == (502, "HA_TIMEOUT") for a in waited), waited


def test_parallel_discoveries_leave_health_answering(data_dir: DataDir, served: str) -> None:
    """One mDNS browse at a time, one request waiting for it, and the others refused at once.

    Queued behind one lock, twelve browses of 3 s each held every thread for up to half a minute.
    """
    household = household_session(served, data_dir)
    answers: list[Answer] = []
    lock = threading.Lock()

    def discover() -> None:
        answer = get(served + "api/v1/conversation/home-assistant/discover", household)
        with lock:
            answers.append(answer)

    threads = [threading.Thread(target=discover) for _ in range(PICKERS)]
    for thread in threads:
        thread.start()
    time.sleep(0.5)
    health = get(served + "health")
    for thread in threads:
        thread.join(60)

    assert (health.status, health.seconds < 2.0) == (200, True), health
    browsed = [a for a in answers if a.status == 200]
    busy = [a for a in answers if a.code == "HA_BUSY"]
    assert 1 <= len(browsed) <= DISCOVERY_REQUESTS and len(browsed) + len(busy) == PICKERS, answers
    assert all(a.status == 503 and a.seconds < PROMPT for a in busy), busy
