"""The two example plugins installed by pip as docs/plugins.md says, in a Console served by `console-ha serve`, met
by clients nobody here wrote: Chromium in French and in Chinese on the plugins page, the official MCP TypeScript
SDK reading during quiet hours and outside them, and `console-ha plugins` in a terminal.

Quiet hours' clock: the served Console's zone is UTC (CONSOLE_HA_TIME_ZONE), and each test sets a window that
holds now (an hour either side) or one that does not (starting an hour from now): never a wait for the night.
"""

from __future__ import annotations

import base64
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any

import pytest
import requests
from playwright.sync_api import Browser, expect

from console_ha.plugins.hook_calls import call_each
from console_ha.plugins.plugin_registry import Plugins
from console_ha.plugins.plugin_settings import PluginSettings
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.console_settings import ConsoleSettingsStore
from console_ha.store.datadir import DataDir
from console_ha.store.plugin_switches import PluginSwitches
from console_ha.store.plugin_values import PluginValuesFile
from tests.e2e.conftest import DESKTOP, FAST_HASH, PASSWORD, serious_violations
from tests.example_plugins import load_example
from tests.mcp.conftest import ALLOWED, CLIENT_NAME, ServedConsole
from tests.mcp.conftest import log_in as household_logs_in
from tests.mcp.sdk_clients import start_program
from tests.moving_clock import PATIENCE, wait_for
from tests.seed import seed_settings
from tests.served_process import serve_in_process
from tests.stub_ha import StubHomeAssistant
from tests.test_example_plugins import CARD

PAGE = "/settings/plugins"
HISTORY = "home_assistant_get_history"
ENTITY = "sensor.living_room_temperature"


def environment(site: Path) -> dict[str, str]:
    """The Console's environment with the examples installed in it, and the household's zone UTC."""
    path = os.pathsep.join(p for p in (str(site), os.environ.get("PYTHONPATH", "")) if p)
    return {**os.environ, "PYTHONPATH": path, "PYTHONUNBUFFERED": "1", "CONSOLE_HA_TIME_ZONE": "UTC"}


@dataclass
class Served:
    """`console-ha serve` in its own process: its URL (no trailing slash) and data dir."""

    url: str
    data_dir: DataDir

    def at(self, path: str) -> str:
        return self.url + path


@pytest.fixture
def served(example_site: Path, data_dir: DataDir, stub_ha: StubHomeAssistant) -> Iterator[Served]:
    """The Console served with both examples installed, set up for the stub Home Assistant, in French."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": ALLOWED},
                  token=stub_ha.token)
    ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)
    ConsoleSettingsStore(data_dir).set_language("fr")
    with serve_in_process(data_dir, environment(example_site)) as url:
        yield Served(url.rstrip("/"), data_dir)


@dataclass
class Phone:
    """A recording HTTP server on loopback standing in for the household's ntfy server: every request it gets."""

    url: str
    requests: list[tuple[str, str, dict[str, str], bytes]] = field(default_factory=list)
    arrived: threading.Event = field(default_factory=threading.Event)
    redirect_to: str = ""  # when set, every request is sent there (302), as a misconfigured reverse proxy might


@pytest.fixture
def phone() -> Iterator[Phone]:
    yield from recording_phone()


@pytest.fixture
def elsewhere() -> Iterator[Phone]:
    """Another recording server: where a redirect points."""
    yield from recording_phone()


def recording_phone() -> Iterator[Phone]:
    recorded = Phone("")

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            recorded.requests.append(("POST", self.path, dict(self.headers.items()), body))
            recorded.arrived.set()
            self.answer(200)

        def do_GET(self) -> None:
            recorded.requests.append(("GET", self.path, dict(self.headers.items()), b""))
            recorded.arrived.set()
            self.answer(405)

        def answer(self, status: int) -> None:
            self.send_response(302 if recorded.redirect_to else status)
            if recorded.redirect_to:
                self.send_header("Location", recorded.redirect_to)
            self.send_header("Content-Length", "0")
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True, name="phone")
    thread.start()
    recorded.url = f"http://127.0.0.1:{server.server_port}/console"
    try:
        yield recorded
    finally:
        server.shutdown()
        server.server_close()
        thread.join(5)


def window(around_now: bool) -> dict[str, str]:
    """Quiet hours holding now (an hour either side, in UTC, the served zone), or starting an hour from now."""
    now = datetime.now(UTC)
    start, end = (now - timedelta(hours=1), now + timedelta(hours=1)) if around_now else \
        (now + timedelta(hours=1), now + timedelta(hours=2))
    return {"start": start.strftime("%H:%M"), "end": end.strftime("%H:%M")}


def household(served: Served) -> requests.Session:
    browser = household_logs_in(ServedConsole(None, served.data_dir, served.url))  # type: ignore[arg-type]
    browser.trust_env = False
    return browser


def save(browser: requests.Session, served: Served, plugin: str, values: dict[str, str]) -> None:
    """Save a plugin's settings through the plugins page's form, as the household's browser posts it."""
    answer = browser.post(served.at(f"{PAGE}/{plugin}/settings"), data=values, allow_redirects=False, timeout=5)
    assert answer.status_code in (302, 303), answer.text


# --- the plugins page in Chromium, in French and in Chinese -------------------------------------------------


WORDS = {
    "fr-FR": {"from": "Silence à partir de", "until": "Silence jusqu’à", "url": "Envoyer à (un sujet ntfy ou un "
              "webhook Home Assistant)", "save": "Enregistrer les réglages de {}", "off": "Désactiver {}",
              "on": "Activer {}", "version": "Version 1.0.0."},
    "zh-CN": {"from": "安静开始时间", "until": "安静结束时间", "url": "发送到(ntfy 主题或 Home Assistant webhook)",
              "save": "保存 {} 的设置", "off": "关闭 {}", "on": "开启 {}", "version": "版本 1.0.0。"},
}


@pytest.mark.browser
@pytest.mark.parametrize("javascript", [True, False], ids=["with-javascript", "without-javascript"])
@pytest.mark.parametrize("locale", ["fr-FR", "zh-CN"])
def test_the_installed_examples_on_the_plugins_page_in_the_browser_s_language(
        browser: Browser, served: Served, locale: str, javascript: bool) -> None:
    ConsoleSettingsStore(served.data_dir).set_language("automatic")  # the browser's language, then
    words = WORDS[locale]
    context = browser.new_context(locale=locale, java_script_enabled=javascript, viewport=DESKTOP)
    page = context.new_page()
    try:
        # Logged in on the way to the plugins page, whatever the login page's language (by its form, as
        # log_in_in_any_language does; not through the settings page, whose refresh without JavaScript would race
        # a second navigation).
        page.goto(served.at(PAGE))
        expect(page).to_have_url(re.compile(r"/login\?"))
        page.locator("#password").fill(PASSWORD)
        page.locator("button[type=submit].primary").click()
        expect(page).to_have_url(served.at(PAGE))
        expect(page.locator("html")).to_have_attribute("lang", "fr" if locale == "fr-FR" else "zh-Hans")
        quiet, notify = page.get_by_role("region", name="quiet_hours"), page.get_by_role("region", name="notify")
        expect(quiet).to_contain_text(words["version"])
        expect(quiet).to_contain_text("before_toolcall")
        expect(notify).to_contain_text(words["version"])
        expect(notify).to_contain_text("on_card")

        quiet.get_by_label(words["from"], exact=True).fill("22:00")
        quiet.get_by_label(words["until"], exact=True).fill("07:30")
        quiet.get_by_role("button", name=words["save"].format("quiet_hours")).click()
        expect(page.get_by_role("status")).to_contain_text("quiet_hours")
        quiet = page.get_by_role("region", name="quiet_hours")
        expect(quiet.get_by_label(words["from"], exact=True)).to_have_value("22:00")
        expect(quiet.get_by_label(words["until"], exact=True)).to_have_value("07:30")

        notify = page.get_by_role("region", name="notify")
        notify.get_by_label(words["url"], exact=True).fill("https://ntfy.example/console")
        notify.get_by_role("button", name=words["save"].format("notify")).click()
        expect(page.get_by_role("status")).to_contain_text("notify")
        expect(page.get_by_label(words["url"], exact=True)).to_have_value("https://ntfy.example/console")

        page.get_by_role("button", name=words["off"].format("notify")).click()
        expect(page.get_by_role("status")).to_contain_text("notify")
        expect(page.get_by_role("button", name=words["on"].format("notify"))).to_be_visible()
        page.get_by_role("button", name=words["on"].format("notify")).click()
        expect(page.get_by_role("button", name=words["off"].format("notify"))).to_be_visible()
        if javascript:  # axe runs as a script
            assert serious_violations(page) == []
    finally:
        context.close()
    values = json.loads(served.data_dir.plugin_settings.read_text())
    assert values == {"quiet_hours": {"start": "22:00", "end": "07:30"},
                      "notify": {"url": "https://ntfy.example/console"}}, values
    assert json.loads(served.data_dir.plugin_switches.read_text()) == {"turned_off": []}


# --- the official MCP TypeScript SDK ------------------------------------------------------------------------


def activity_in_french(browser: requests.Session, served: Served) -> str:
    answer = browser.get(served.at("/activity"), headers={"Accept-Language": "fr"}, timeout=5)
    assert answer.status_code == 200
    return answer.text


def test_a_read_in_quiet_hours_is_refused_by_the_plugin_with_no_card_and_activity_names_it(
        served: Served, phone: Phone) -> None:
    browser = household(served)
    save(browser, served, "quiet_hours", window(around_now=True))
    save(browser, served, "notify", {"url": phone.url})
    token = ConsoleSecrets(served.data_dir).create_api_token(CLIENT_NAME)

    program = start_program("typescript", served.at("/mcp"), token, HISTORY, {"entity_id": ENTITY, "period": "day"})
    try:
        outcome = program.next_result(60)
        assert program.next_result(10) == {"done": True}
    finally:
        if program.process.poll() is None:
            program.kill()
    result = outcome["result"]
    assert result["isError"] is True, result
    error = result["structuredContent"]["error"]
    assert error["code"] == "REFUSED_BY_PLUGIN", error
    assert json.loads(result["content"][0]["text"]) == result["structuredContent"]
    assert "quiet_hours" in json.dumps(error)
    assert browser.get(served.at("/api/v1/confirmations"), timeout=5).json()["pending"] == []
    page = activity_in_french(browser, served)
    assert "quiet_hours" in page
    assert phone.requests == []


@pytest.mark.parametrize("language", ["fr", "zh-Hans"])
def test_outside_quiet_hours_the_card_waits_and_the_phone_gets_its_title_only(
        served: Served, phone: Phone, stub_ha: StubHomeAssistant, language: str) -> None:
    ConsoleSettingsStore(served.data_dir).set_language(language)  # read at each event: a save applies at once
    browser = household(served)
    save(browser, served, "quiet_hours", window(around_now=False))
    save(browser, served, "notify", {"url": phone.url})
    token = ConsoleSecrets(served.data_dir).create_api_token(CLIENT_NAME)

    program = start_program("typescript", served.at("/mcp"), token, HISTORY, {"entity_id": ENTITY, "period": "day"})
    try:
        cards: list[dict[str, Any]] = []

        def a_card_waits() -> bool:
            cards[:] = browser.get(served.at("/api/v1/confirmations"), timeout=5).json()["pending"]
            return len(cards) == 1

        wait_for(a_card_waits, "a waiting card")
        assert phone.arrived.wait(PATIENCE)
        (card,) = cards
        in_language = browser.get(served.at("/api/v1/confirmations"), headers={"Accept-Language": "en"},
                                  timeout=5).json()["pending"][0]  # in the household's Language, whatever the browser's
        assert in_language["card"]["title"] != "Read the history of Living room temperature?"
        ((method, path, headers, body),) = phone.requests
        assert (method, path) == ("POST", "/console")
        text = body.decode("utf-8")
        assert text == in_language["card"]["title"], (text, in_language["card"]["title"])
        sent = text + json.dumps({name: value for name, value in headers.items() if name != "Host"})
        for secret in (ENTITY, stub_ha.token, token, served.url, "127.0.0.1", card["token"]):
            assert secret not in sent

        answer = browser.post(served.at(f"/api/v1/confirmations/{card['token']}"), json={"approve": False},
                              timeout=5)
        assert answer.status_code == 200, answer.text
        outcome = program.next_result(60)
        assert outcome["result"]["isError"] is True
    finally:
        if program.process.poll() is None:
            program.kill()
    # After Deny nothing more is sent. Told by order, not by waiting: the denial is told to notify on the
    # plugins' one worker before the next card's "waiting", so once that next card's title has arrived, whatever
    # the denial sent would have arrived before it.
    again = start_program("typescript", served.at("/mcp"), token, HISTORY, {"entity_id": ENTITY, "period": "week"})
    try:
        wait_for(lambda: len(phone.requests) >= 2, "the next card's notification")
        (waiting,) = browser.get(served.at("/api/v1/confirmations"), timeout=5).json()["pending"]
    finally:
        again.kill()
    assert [body.decode("utf-8") for _, _, _, body in phone.requests] == [
        in_language["card"]["title"], waiting["card"]["title"]]


# --- the terminal ------------------------------------------------------------------------------------------


def test_console_ha_plugins_lists_both_with_versions_hooks_switches_and_settings(
        example_site: Path, data_dir: DataDir) -> None:
    ran = subprocess.run([sys.executable, "-m", "console_ha", "plugins", "--data-dir", str(data_dir.root)],
                         env=environment(example_site), capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout.splitlines() == [
        "notify  1.0.0  on  hooks: on_card",
        '  url (url, "Send to (an ntfy topic or a Home Assistant webhook)"): not set',
        "quiet_hours  1.0.0  on  hooks: before_toolcall",
        '  start (time, "Quiet from"): not set',
        '  end (time, "Quiet until"): not set',
    ]


def test_an_ntfy_topic_behind_a_user_name_and_password_gets_the_title_with_them_as_basic_auth(
        served: Served, phone: Phone) -> None:
    """ntfy's access control takes `https://user:password@server/topic`, the form `console-ha plugins` hides as
    `***@`. urllib sends no credentials from a URL: it handed the whole `user:password@host` to the resolver as
    a host name, and the phone never heard."""
    browser = household(served)
    address = phone.url.replace("http://", "http://household:s%C3%A9same%40home@")
    save(browser, served, "notify", {"url": address})
    token = ConsoleSecrets(served.data_dir).create_api_token(CLIENT_NAME)

    program = start_program("typescript", served.at("/mcp"), token, HISTORY, {"entity_id": ENTITY, "period": "day"})
    try:
        wait_for(lambda: len(phone.requests) >= 1, "the waiting card's notification")
        (waiting,) = browser.get(served.at("/api/v1/confirmations"), timeout=5).json()["pending"]
    finally:
        program.kill()
    ((method, path, headers, body),) = phone.requests
    assert (method, path, body.decode("utf-8")) == ("POST", "/console", waiting["card"]["title"])
    assert headers["Authorization"] == "Basic " + base64.b64encode("household:sésame@home".encode()).decode()


def test_notify_follows_no_redirect_so_the_household_s_credentials_go_nowhere_else(
        data_dir: DataDir, phone: Phone, elsewhere: Phone) -> None:
    """urllib follows a 302 with the request's own headers, Authorization too: the household's ntfy password
    would reach whatever server the answer names. A notification has no reason to be redirected: it fails, logged."""
    plugins = Plugins(PluginSwitches(data_dir), PluginSettings(PluginValuesFile(data_dir)))
    plugins.register(load_example("notify"), "notify")
    phone.redirect_to = elsewhere.url
    plugins.save_settings("notify", {"url": phone.url.replace("http://", "http://household:secret@")})
    outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    assert outcome.skipped == []
    assert [(method, body) for method, _, _, body in phone.requests] == [
        ("POST", CARD["title_in_language"].encode("utf-8"))]
    assert elsewhere.requests == []


def test_quiet_hours_turned_off_on_the_page_let_the_read_wait_for_its_card_and_on_again_refuse_it(
        served: Served) -> None:
    browser = household(served)
    save(browser, served, "quiet_hours", window(around_now=True))
    switched = browser.post(served.at(f"{PAGE}/quiet_hours/switch"), data={"on": "off"}, allow_redirects=False,
                            timeout=5)
    assert switched.status_code in (302, 303)
    token = ConsoleSecrets(served.data_dir).create_api_token(CLIENT_NAME)
    program = start_program("typescript", served.at("/mcp"), token, HISTORY, {"entity_id": ENTITY, "period": "day"})
    try:
        wait_for(lambda: len(browser.get(served.at("/api/v1/confirmations"), timeout=5).json()["pending"]) == 1,
                 "the card of a read no plugin refuses")
    finally:
        program.kill()
    switched = browser.post(served.at(f"{PAGE}/quiet_hours/switch"), data={"on": "on"}, allow_redirects=False,
                            timeout=5)
    assert switched.status_code in (302, 303)
    program = start_program("typescript", served.at("/mcp"), token, HISTORY, {"entity_id": ENTITY, "period": "week"})
    try:
        outcome = program.next_result(60)
    finally:
        program.kill()
    assert outcome["result"]["structuredContent"]["error"]["code"] == "REFUSED_BY_PLUGIN"


def test_console_ha_plugins_shows_the_values_saved_on_the_page_without_the_url_s_credentials(
        served: Served, example_site: Path) -> None:
    browser = household(served)
    save(browser, served, "quiet_hours", {"start": "22:00", "end": "07:00"})
    save(browser, served, "notify", {"url": "https://household:secret@ntfy.example/console?auth=tk_secret"})
    browser.post(served.at(f"{PAGE}/notify/switch"), data={"on": "off"}, allow_redirects=False, timeout=5)
    ran = subprocess.run([sys.executable, "-m", "console_ha", "plugins", "--data-dir", str(served.data_dir.root)],
                         env=environment(example_site), capture_output=True, text=True, timeout=60, check=True)
    assert ran.stdout.splitlines() == [
        "notify  1.0.0  off (turned off by the household)  hooks: on_card",
        '  url (url, "Send to (an ntfy topic or a Home Assistant webhook)"): https://***@ntfy.example/console?***',
        "quiet_hours  1.0.0  on  hooks: before_toolcall",
        '  start (time, "Quiet from"): 22:00',
        '  end (time, "Quiet until"): 07:00',
    ]


def test_notify_is_done_once_the_server_has_answered_without_waiting_for_its_body(data_dir: DataDir) -> None:
    """A server that answers in 0.4 s but holds its body back (a buffering proxy): notify read the body it never
    uses, 0.8 s more, and so ran past the Console's 1 s and was skipped, named in Activity, for a notification
    the server had taken."""
    listener = socket.create_server(("127.0.0.1", 0))
    got: list[bytes] = []
    body_sent = threading.Event()

    def answer_then_trickle() -> None:
        connection, _ = listener.accept()
        with connection:
            got.append(connection.recv(65536))
            body_sent.wait(0.4)  # a slowish answer, well inside the hook's second
            connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\n")
            body_sent.wait(10)  # the body only once the call is over (or never, in the time that matters)
            connection.sendall(b"{}")

    server = threading.Thread(target=answer_then_trickle, daemon=True)
    server.start()
    try:
        plugins = Plugins(PluginSwitches(data_dir), PluginSettings(PluginValuesFile(data_dir)))
        plugins.register(load_example("notify"), "notify")
        plugins.save_settings("notify", {"url": f"http://127.0.0.1:{listener.getsockname()[1]}/console"})
        outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    finally:
        body_sent.set()
        server.join(10)
        listener.close()
    assert outcome.skipped == []
    assert got and got[0].startswith(b"POST /console ")
