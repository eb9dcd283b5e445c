"""A Console served by waitress on loopback (as `console-ha serve` does), an API token, and a household."""

from __future__ import annotations

import os
import re
import threading
import time
from collections.abc import AsyncIterator, Callable, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from typing import Any

import httpx
import pytest
import requests
from flask import Flask
from mcp import ClientSession
from mcp.client.streamable_http import streamable_http_client
from waitress.server import BaseWSGIServer, create_server  # the stubs re-export only serve() from `waitress`

from console_ha.cli import WAITRESS_OPTIONS
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

PASSWORD = "correct horse battery staple"
FAST_HASH = "pbkdf2:sha256:1000"
CLIENT_NAME = "desk assistant"
ALLOWED = ["sensor.living_room_temperature", "light.living_room"]
_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


@dataclass
class ServedConsole:
    """A Console on a real port: its URL, app, data dir and waitress server."""

    app: Flask
    data_dir: DataDir
    url: str
    server: Any = None

    def busy_threads(self) -> int:
        """How many of waitress's worker threads are running a request now."""
        return int(self.server.task_dispatcher.active_count)

    @property
    def mcp_url(self) -> str:
        return self.url + "/mcp"

    def configure(self, base_url: str, token: str, allowlist: list[str] = ALLOWED, **changes: Any) -> None:
        """Settings as a household that saved them would have them."""
        seed_settings(self.data_dir, {"enabled": True, "base_url": base_url, "allowlisted_entities": allowlist,
                                      **changes}, token=token)


def wait_until_idle(console: ServedConsole, timeout: float = 15.0) -> tuple[int, int, int]:
    """(busy worker threads, responses open at /mcp, requests the event loop serves) once all are zero,
    or as they are when `timeout` has passed."""
    endpoint = console.app.extensions["console_ha_mcp"]
    deadline = time.monotonic() + timeout
    while True:
        held = console.busy_threads(), endpoint.open_requests(), endpoint.serving()
        if held == (0, 0, 0) or time.monotonic() > deadline:
            return held
        time.sleep(0.05)


def serve(app: Flask) -> tuple[Any, threading.Thread, str]:
    """Serve `app` on waitress (the production server) on an ephemeral loopback port."""
    server = create_server(app, host="127.0.0.1", port=0, threads=8,
                           **WAITRESS_OPTIONS)  # type: ignore[arg-type]  # the stubs type no options dict
    assert isinstance(server, BaseWSGIServer)  # one host and port: one server, not a MultiSocketServer
    thread = threading.Thread(target=server.run, name="waitress-console", daemon=True)
    thread.start()
    # BaseWSGIServer.__init__ sets effective_port; types-waitress does not declare it.
    return server, thread, f"http://127.0.0.1:{server.effective_port}"  # type: ignore[attr-defined]


@pytest.fixture
def make_console(data_dir: DataDir) -> Iterator[Callable[..., ServedConsole]]:
    """Start a served Console with config overrides (a short confirmation expiry, say)."""
    started: list[tuple[Any, threading.Thread, Flask]] = []

    def make(**config: Any) -> ServedConsole:
        app = create_app(data_dir, {"CONSOLE_HA_CONFIRMATION_TTL": 30.0, **config})
        server, thread, url = serve(app)
        started.append((server, thread, app))
        return ServedConsole(app, data_dir, url, server)

    yield make
    for server, thread, app in started:
        app.extensions["console_ha_mcp"].close()
        stop(server, thread)


def stop(server: Any, thread: threading.Thread) -> None:
    """Stop waitress: its loop runs while any connection is open, so every kept-alive one is closed first."""
    for channel in list(server._map.values()):
        channel.will_close = True
    server.task_dispatcher.shutdown(timeout=2)
    check_trigger(server)
    # Closed on waitress's own loop thread (its trigger runs the call there): closing the listening socket
    # from this thread while the loop waits in select() on it made the loop die with EBADF.
    server.trigger.pull_trigger(server.close)
    thread.join(5)
    assert not thread.is_alive(), "waitress did not stop"


def check_trigger(server: Any) -> None:
    """Fail with the cause, not waitress's EBADF, if the server's trigger pipe is no longer its own.

    Waitress closes the trigger only in server.close(); closed before stop() means the server closed itself
    (an uncaught error on its listening socket), and an open descriptor that is not the pipe means some code
    closed a descriptor it did not own and the number was reused.
    """
    trigger = server.trigger
    assert not trigger._closed, "waitress closed this server before stop(): see its 'uncaptured python exception'"
    read_end, write_end = trigger._fds
    try:
        same_pipe = os.fstat(write_end).st_ino == os.fstat(read_end).st_ino
    except OSError as err:
        raise AssertionError(f"the trigger pipe's descriptors were closed by someone else: {err}") from err
    assert same_pipe, "a trigger descriptor now belongs to another file: something closed a descriptor twice"


@pytest.fixture
def console(make_console: Callable[..., ServedConsole]) -> ServedConsole:
    """A served Console with a 30-second confirmation expiry."""
    return make_console()


@pytest.fixture
def api_token(data_dir: DataDir) -> str:
    """An API token named for the MCP client, as `console-ha api-token create` makes it."""
    return ConsoleSecrets(data_dir).create_api_token(CLIENT_NAME)


@pytest.fixture
def household_for(data_dir: DataDir) -> Iterator[Callable[[ServedConsole], requests.Session]]:
    """Log the household's browser in to a served Console."""
    ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)
    browsers: list[requests.Session] = []

    def open_browser(console: ServedConsole) -> requests.Session:
        browsers.append(log_in(console))
        return browsers[-1]

    yield open_browser
    for browser in browsers:
        browser.close()


@pytest.fixture
def household(console: ServedConsole, household_for: Callable[[ServedConsole], requests.Session]) -> requests.Session:
    """The household's browser on the console fixture."""
    return household_for(console)


def _csrf_of(page: str) -> str:
    match = _CSRF_META.search(page)
    assert match, "the page carries no CSRF meta tag"
    return match.group(1)


def log_in(console: ServedConsole) -> requests.Session:
    """The household's browser: logged in, sending its CSRF token with every request."""
    browser = requests.Session()
    page = browser.get(console.url + "/login", timeout=5).text
    token = _csrf_of(page)
    answer = browser.post(console.url + "/login", data={"password": PASSWORD, "csrf_token": token},
                          allow_redirects=False, timeout=5)
    assert answer.status_code == 302
    page = browser.get(console.url + "/confirmations", timeout=5).text
    browser.headers["X-CSRFToken"] = _csrf_of(page)
    browser.headers["Origin"] = console.url
    return browser


@asynccontextmanager
async def mcp_session(url: str, token: str | None) -> AsyncIterator[ClientSession]:
    """The official SDK's client on streamable HTTP, initialised."""
    headers = {"Authorization": f"Bearer {token}"} if token else {}
    async with httpx.AsyncClient(headers=headers, timeout=httpx.Timeout(30, read=300)) as http, \
            streamable_http_client(url, http_client=http) as (read, write, _):
        async with ClientSession(read, write) as session:
            await session.initialize()
            yield session


@pytest.fixture
def configured(console: ServedConsole, stub_ha: StubHomeAssistant) -> ServedConsole:
    """The served Console set up for the stub Home Assistant, with ALLOWED allowed."""
    console.configure(stub_ha.base_url, stub_ha.token)
    return console
