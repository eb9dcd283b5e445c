"""Browser tests: a real Console served on 127.0.0.1, a stub Home Assistant, Debian's Chromium.

Only pytest-playwright's `page` fixture drives the browser (one Playwright style per session).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import socket
import threading
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, cast

import pytest
from flask import Flask
from playwright.sync_api import Error as PlaywrightError
from playwright.sync_api import Locator, Page, Response, ViewportSize, expect
from werkzeug.serving import make_server
from zeroconf import ServiceInfo, Zeroconf

from console_ha.ha.discovery import SERVICE_TYPE, Instance
from console_ha.store.config import ConfigStore
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore
from console_ha.web import create_app
from tests.conftest import CONVERSATION_ALLOWED
from tests.fake_model import FakeModel
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

PASSWORD = "correct horse battery staple"
FAST_HASH = "pbkdf2:sha256:1000"  # the tests prove the flows, not the password hash's cost
SETTINGS = "/settings/home-assistant"
SCREENSHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"
DESKTOP: ViewportSize = {"width": 1280, "height": 900}
PHONE: ViewportSize = {"width": 390, "height": 844}

# Keep Chromium off the network (notes/browser-mdns-packaging.md). No --disable-features of our own:
# it would replace Playwright's list.
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-quic",
    "--no-first-run",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--host-resolver-rules=MAP * ~NOTFOUND , EXCLUDE 127.0.0.1 , EXCLUDE localhost",
]


@pytest.fixture(scope="session")
def browser_type_launch_args(browser_type_launch_args: dict[str, Any]) -> dict[str, Any]:
    """pytest-playwright's launch arguments plus Debian's Chromium and its quiet flags."""
    chromium = shutil.which("chromium")
    if chromium is None:
        if os.environ.get("CI", "").lower() in ("true", "1", "yes"):
            pytest.fail("chromium is not on PATH; CI must install it (apt-get install -y chromium)")
        pytest.skip("chromium is not installed here (apt-get install -y chromium); browser tests skipped")
    return {
        **browser_type_launch_args,
        "executable_path": chromium,
        "args": [*browser_type_launch_args.get("args", []), *CHROMIUM_ARGS],
    }


# --- the Console, served for real -------------------------------------------------------------------


@dataclass
class LiveConsole:
    """A Console app served by werkzeug on an ephemeral loopback port."""

    app: Flask
    data_dir: DataDir
    url: str
    discovered_names: set[str] = field(default_factory=set)

    def at(self, path: str) -> str:
        return self.url + path

    @property
    def config(self) -> ConfigStore:
        return ConfigStore(self.data_dir)

    @property
    def tokens(self) -> TokenStore:
        return TokenStore(self.data_dir)

    def configure(self, base_url: str, token: str, **changes: Any) -> None:
        """Save settings and the token, as a household that saved them before would have."""
        seed_settings(self.data_dir, {"base_url": base_url, **changes}, token=token)

    @property
    def services(self) -> Any:
        return self.app.extensions["console_ha"]


@pytest.fixture
def console(data_dir: DataDir) -> Iterator[LiveConsole]:
    """A Console on a fresh data dir, served on 127.0.0.1 in a thread."""
    app = create_app(
        data_dir,
        {
            "CONSOLE_HA_STATES_TIMEOUT": 3.0,
            "CONSOLE_HA_TEST_TIMEOUT": 3.0,
            "CONSOLE_HA_AREAS_TIMEOUT": 0.5,
            "CONSOLE_HA_DISCOVERY_TIMEOUT": 2.5,
        },
    )
    server = make_server("127.0.0.1", 0, app, threaded=True)
    thread = threading.Thread(target=server.serve_forever, name="live-console", daemon=True)
    thread.start()
    live = LiveConsole(app, data_dir, f"http://127.0.0.1:{server.server_port}")
    try:
        yield live
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


@pytest.fixture
def household_password(data_dir: DataDir) -> str:
    """The Console password, set (cheaply hashed) before the test."""
    ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)
    return PASSWORD


def log_in(page: Page, console: LiveConsole, password: str = PASSWORD, path: str = SETTINGS) -> None:
    """Open `path`, meet the login page, log in through it and arrive back at `path`."""
    page.goto(console.at(path))
    expect(page).to_have_url(re.compile(r"/login\?"))
    page.get_by_label("Password", exact=True).fill(password)
    page.get_by_role("button", name="Log in").click()
    expect(page).to_have_url(console.at(path))
    # The URL changes when the page starts to arrive; its module scripts run before "load". A click
    # before then is a plain form post, which a test of the scripted page must not make by chance.
    page.wait_for_load_state()



def log_in_in_any_language(page: Page, console: LiveConsole) -> None:
    """Log in through the login page, whatever its language (found by its form, not its words), and arrive at the
    settings page; without JavaScript, and the connection saved, it refreshes to its whole list (`?q=`)."""
    page.goto(console.at(SETTINGS))
    expect(page).to_have_url(re.compile(r"/login\?"))
    page.locator("#password").fill(PASSWORD)
    page.locator("button[type=submit].primary").click()
    expect(page).to_have_url(re.compile(re.escape(console.at(SETTINGS)) + r"(\?q=)?$"))
    page.wait_for_load_state()

@pytest.fixture
def settings_page(page: Page, console: LiveConsole, household_password: str) -> Page:
    """A logged-in browser tab on the settings page."""
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password)
    return page


@pytest.fixture
def areas(console: LiveConsole) -> dict[str, str]:
    """Areas for the stub's entities (the stub has no WebSocket registries); edit before the page loads."""
    mapping = {
        "sensor.living_room_temperature": "Living room",
        "light.living_room": "Living room",
        "binary_sensor.kitchen_window": "Kitchen",
        "switch.coffee_machine": "Kitchen",
        "light.bedroom": "Bedroom",
        "binary_sensor.front_door": "Hallway",
        "binary_sensor.hallway_motion": "Hallway",
        "lock.front_door": "Hallway",
    }
    from console_ha.ha.areas import AreaCache

    console.services.settings.areas = AreaCache(fetch=lambda *args, **kwargs: dict(mapping))
    return mapping


# --- what the page received ---------------------------------------------------------------------------


@dataclass
class Received:
    """Every response the page received, with its body where it has one."""

    responses: list[tuple[str, bytes]] = field(default_factory=list)

    def containing(self, needle: str) -> list[str]:
        return [url for url, body in self.responses if needle.encode() in body]


@pytest.fixture(autouse=True)
def _page_responses_are_checked_for_secrets(request: pytest.FixtureRequest, recorded_responses: list[bytes]) -> None:
    """Every response a test's browser receives joins the suite-wide check that no secret is in one."""
    if "page" not in request.fixturenames:
        return
    page: Page = request.getfixturevalue("page")

    def on_response(response: Response) -> None:
        try:
            body = response.body()
        except PlaywrightError:  # redirects and aborted requests have no body
            body = b""
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items()).encode()
        recorded_responses.append(headers + b"\n\n" + body)

    page.on("response", on_response)


@pytest.fixture
def received(page: Page) -> Received:
    """Record the body of every response the page receives from now on."""
    record = Received()

    def on_response(response: Response) -> None:
        try:
            body = response.body()
        except PlaywrightError:  # redirects and aborted requests have no body
            body = b""
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items()).encode()
        record.responses.append((response.url, headers + b"\n\n" + body))

    page.on("response", on_response)
    return record


# --- zeroconf on loopback -------------------------------------------------------------------------------


@dataclass
class Advertisement:
    """One Home Assistant advertised on 127.0.0.1."""

    location_name: str
    base_url: str
    version: str


@pytest.fixture
def advertise(console: LiveConsole) -> Iterator[Callable[[str, str], Advertisement]]:
    """Advertise Home Assistant instances on loopback, as HA's zeroconf integration does.

    Other test runs on this machine may advertise on loopback at the same time, so the Console's browse
    (real zeroconf) keeps only this test's advertisements: "exactly one found" stays deterministic.
    """
    zc = Zeroconf(interfaces=["127.0.0.1"], use_asyncio=False)
    registered: list[ServiceInfo] = []
    ours: set[str] = set()
    real_discover = console.services.settings.discover

    def only_ours(*args: Any, **kwargs: Any) -> list[Instance]:
        return [i for i in real_discover(*args, **kwargs) if i.name in ours]

    console.services.settings.discover = only_ours

    def register(location_name: str, base_url: str) -> Advertisement:
        suffix = uuid.uuid4().hex[:6]
        name = f"{location_name} {suffix}"
        ha_uuid = uuid.uuid4().hex
        port = int(base_url.rsplit(":", 1)[1])
        version = "2025.4.4"
        info = ServiceInfo(
            SERVICE_TYPE,
            f"{name}.{SERVICE_TYPE}",
            addresses=[socket.inet_aton("127.0.0.1")],
            port=port,
            properties={
                "location_name": name,
                "uuid": ha_uuid,
                "version": version,
                "external_url": "",
                "internal_url": base_url,
                "base_url": base_url,
                "requires_api_password": "True",
            },
            server=f"{ha_uuid}.local.",
        )
        zc.register_service(info)
        registered.append(info)
        ours.add(name)
        return Advertisement(name, base_url, version)

    try:
        yield register
    finally:
        for info in registered:
            zc.unregister_service(info)
        zc.close()


# --- TLS and screenshots ------------------------------------------------------------------------------


def screenshot(page: Page, name: str, *, phone: bool = True, whole_page: bool = True) -> None:
    """Save the whole page at desktop width, and at phone width too, under test-artifacts/screenshots/.

    The viewport grows to the page's height first, so the sticky save bar sits at the end as it does
    once a person has scrolled down, rather than floating over the middle of a full-page capture.
    """
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    size = page.viewport_size or DESKTOP
    widths = [("desktop", size["width"])] + ([("phone", PHONE["width"])] if phone else [])
    for label, width in widths:
        page.set_viewport_size({"width": width, "height": size["height"]})
        if whole_page:
            height = page.evaluate("document.documentElement.scrollHeight")
            page.set_viewport_size({"width": width, "height": max(size["height"], height)})
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{label}.png"))
    page.set_viewport_size(size)


def serious_violations(page: Page) -> list[dict[str, Any]]:
    """axe-core's serious and critical violations on the page as it is now."""
    # axe-playwright-python ships neither a py.typed marker nor stubs.
    from axe_playwright_python.sync_playwright import Axe  # type: ignore[import-untyped]

    results = Axe().run(page)
    return [
        {"id": v["id"], "impact": v["impact"], "help": v["help"],
         "targets": [node["target"] for node in v["nodes"]][:5]}
        for v in results.response["violations"]
        if v.get("impact") in ("serious", "critical")
    ]


@pytest.fixture
def model_in_the_environment(monkeypatch: pytest.MonkeyPatch, model: FakeModel) -> None:
    """The fake model, named in the environment before the app starts, as a household would."""
    monkeypatch.setenv("CONSOLE_HA_LLM_URL", model.url)
    monkeypatch.setenv("CONSOLE_HA_LLM_MODEL", "fake-model")
    monkeypatch.delenv("CONSOLE_HA_LLM_API_KEY", raising=False)


# --- what several pages' tests share (one definition each: tests/test_fixture_copies.py) ------------------

# The one entity the waiting-card pages' tests allow, under the name the picker saw.
THERMOMETER = "sensor.living_room_temperature"


@pytest.fixture
def configured(console: LiveConsole, stub_ha: StubHomeAssistant) -> LiveConsole:
    """Home Assistant set up with only THERMOMETER allowed, named as the picker saw it."""
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True, allowlisted_entities=[THERMOMETER],
                      entity_names={THERMOMETER: "Living room temperature"})
    return console


@pytest.fixture
def chat(page: Page, console: LiveConsole, household_password: str, stub_ha: StubHomeAssistant) -> Page:
    """A logged-in tab on the conversation page, with Home Assistant set up and CONVERSATION_ALLOWED allowed."""
    console.configure(stub_ha.base_url, stub_ha.token, enabled=True, allowlisted_entities=CONVERSATION_ALLOWED)
    page.set_viewport_size(DESKTOP)
    log_in(page, console, household_password, path="/conversation")
    return page


def send(page: Page, words: str) -> None:
    """Type `words` into the conversation page's message box and send them."""
    page.get_by_label("Message", exact=True).fill(words)
    page.get_by_role("button", name="Send", exact=True).click()


def transcript(page: Page) -> Locator:
    """The conversation page's transcript."""
    return page.get_by_role("log", name="Conversation")


def entity(page: Page, entity_id: str) -> Locator:
    """The picker's checkbox for `entity_id` (its accessible name holds the id as a word of its own)."""
    return page.get_by_role("checkbox", name=re.compile(rf"(^|\s){re.escape(entity_id)}(\s|$)"))


def saved_file(console: LiveConsole) -> dict[str, Any]:
    """The settings file as saved on disk."""
    return cast(dict[str, Any], json.loads(console.config.path.read_text()))
