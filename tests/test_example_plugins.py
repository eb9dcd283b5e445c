"""The two example plugins, called through the Console's own hook machinery: quiet hours and notify.

Notify is tested against a local recording HTTP server on loopback: no ntfy server can be installed here
(Debian has no `ntfy` package, and PyPI's `ntfy` is another project, a notification *sender*).
"""

from __future__ import annotations

import json
import logging
import sys
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from datetime import time as clock_time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from types import ModuleType

import pytest

from console_ha.plugins.hook_calls import call_each
from console_ha.plugins.plugin_registry import PluginInfo, Plugins
from console_ha.plugins.plugin_settings import PluginSettings
from console_ha.store.datadir import DataDir
from console_ha.store.plugin_switches import PluginSwitches
from console_ha.store.plugin_values import PluginValuesFile
from tests.example_plugins import EXAMPLES, load_example

READ = {"capability": "get_state", "arguments": {"entity_id": "lock.front_door"}, "principal": "household"}
CARD = {"title": "Read Front door now?", "title_in_language": "Lire Porte d’entrée maintenant ?", "language": "fr",
        "capability": "get_state", "instance": "home", "expires_at": "2026-12-05T07:00:00Z"}


def plugins_with(data_dir: DataDir, **given: ModuleType) -> Plugins:
    plugins = Plugins(PluginSwitches(data_dir), PluginSettings(PluginValuesFile(data_dir)))
    for name, module in given.items():
        plugins.register(module, name)
    return plugins


# --- quiet hours -------------------------------------------------------------------------------


@pytest.mark.parametrize("moment, start, end, quiet", [
    ("23:00", "22:00", "07:00", True),  # over midnight: before it
    ("03:15", "22:00", "07:00", True),  # over midnight: after it
    ("22:00", "22:00", "07:00", True),  # the start is quiet
    ("07:00", "22:00", "07:00", False),  # the end is not
    ("12:00", "22:00", "07:00", False),
    ("13:30", "13:00", "14:00", True),  # within one day
    ("14:00", "13:00", "14:00", False),
    ("12:59", "13:00", "14:00", False),
    ("10:00", "10:00", "10:00", False),  # equal times: no quiet span at all
])
def test_quiet_hours_span_the_times_set_over_midnight_too(moment: str, start: str, end: str, quiet: bool) -> None:
    at = clock_time.fromisoformat
    assert load_example("quiet_hours").quiet_at(at(moment), at(start), at(end)) is quiet


def _quiet_hours_at(monkeypatch: pytest.MonkeyPatch, hour: int, minute: int) -> ModuleType:
    module = load_example("quiet_hours")
    monkeypatch.setattr(module, "now", lambda: datetime(2026, 12, 5, hour, minute, 30).astimezone())
    return module


def test_quiet_hours_refuse_a_read_inside_the_times_the_household_set(
    data_dir: DataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    plugins = plugins_with(data_dir, quiet_hours=_quiet_hours_at(monkeypatch, 23, 40))
    plugins.save_settings("quiet_hours", {"start": "22:00", "end": "07:00"})
    outcome = call_each(plugins, "before_toolcall", READ)
    assert [answer.plugin for answer in outcome.answers] == ["quiet_hours"]
    refusal = outcome.answers[0].value
    assert isinstance(refusal, str) and "22:00" in refusal and "07:00" in refusal
    assert outcome.skipped == []


def test_quiet_hours_let_a_read_through_outside_them(data_dir: DataDir, monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = plugins_with(data_dir, quiet_hours=_quiet_hours_at(monkeypatch, 7, 0))
    plugins.save_settings("quiet_hours", {"start": "22:00", "end": "07:00"})
    assert call_each(plugins, "before_toolcall", READ).answers == []


@pytest.mark.parametrize("saved", [{}, {"start": "22:00"}, {"end": "07:00"}])
def test_quiet_hours_refuse_nothing_until_both_times_are_set(
    data_dir: DataDir, monkeypatch: pytest.MonkeyPatch, saved: dict[str, str]
) -> None:
    plugins = plugins_with(data_dir, quiet_hours=_quiet_hours_at(monkeypatch, 23, 40))
    plugins.save_settings("quiet_hours", saved)
    assert call_each(plugins, "before_toolcall", READ).answers == []


def test_a_new_time_saved_applies_from_the_next_call(data_dir: DataDir, monkeypatch: pytest.MonkeyPatch) -> None:
    plugins = plugins_with(data_dir, quiet_hours=_quiet_hours_at(monkeypatch, 23, 40))
    plugins.save_settings("quiet_hours", {"start": "22:00", "end": "07:00"})
    assert call_each(plugins, "before_toolcall", READ).answers
    plugins.save_settings("quiet_hours", {"start": "01:00", "end": "05:00"})
    assert call_each(plugins, "before_toolcall", READ).answers == []


def test_quiet_hours_use_the_consoles_time_zone_when_one_is_named(monkeypatch: pytest.MonkeyPatch) -> None:
    module = load_example("quiet_hours")
    monkeypatch.setenv("CONSOLE_HA_TIME_ZONE", "Pacific/Kiritimati")
    assert module.now().utcoffset().total_seconds() == 14 * 3600
    monkeypatch.delenv("CONSOLE_HA_TIME_ZONE")
    assert module.now().utcoffset() == datetime.now().astimezone().utcoffset()


# --- notify ------------------------------------------------------------------------------------


@dataclass
class Recorded:
    method: str
    path: str
    content_type: str
    body: bytes
    headers: dict[str, str] = field(default_factory=dict, compare=False)


@dataclass
class RecordingServer:
    """An HTTP server on loopback that keeps every request it gets, and answers after `delay` seconds.

    It answers `status` (with `location` as the Location header, when set), or, with `trickle`, sends its
    status line a byte at a time, each byte `trickle` seconds after the one before: a server that never
    stops answering within a socket's timeout.
    """

    url: str
    requests: list[Recorded] = field(default_factory=list)
    delay: float = 0.0
    status: int = 200
    location: str = ""
    trickle: float = 0.0
    raw: bytes = b""  # sent as the whole answer, when set
    arrived: threading.Event = field(default_factory=threading.Event)


def _recording_server() -> tuple[ThreadingHTTPServer, RecordingServer]:
    state: RecordingServer

    class Handler(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            self.record()

        def do_GET(self) -> None:
            self.record()

        def record(self) -> None:
            body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
            state.requests.append(Recorded(self.command, self.path, self.headers.get("Content-Type", ""), body,
                                           dict(self.headers.items())))
            state.arrived.set()
            time.sleep(state.delay)
            if state.raw:
                self.wfile.write(state.raw)
                return
            if state.trickle:
                for byte in b"HTTP/1.1 200 OK\r\nContent-Length: 0\r\n\r\n":
                    self.wfile.write(bytes([byte]))
                    self.wfile.flush()
                    time.sleep(state.trickle)
                return
            self.send_response(state.status)
            if state.location:
                self.send_header("Location", state.location)
            self.send_header("Content-Length", "2")
            self.end_headers()
            self.wfile.write(b"{}")

        def log_message(self, format: str, *args: object) -> None:
            return

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    state = RecordingServer(f"http://127.0.0.1:{server.server_address[1]}")
    threading.Thread(target=server.serve_forever, daemon=True).start()
    return server, state


@pytest.fixture
def recorder() -> Iterator[RecordingServer]:
    server, state = _recording_server()
    yield state
    server.shutdown()
    server.server_close()


@pytest.fixture
def other_host() -> Iterator[RecordingServer]:
    """A second recording server, another origin a redirect could lead to."""
    server, state = _recording_server()
    yield state
    server.shutdown()
    server.server_close()


def test_notify_posts_the_waiting_cards_title_and_nothing_else(data_dir: DataDir, recorder: RecordingServer) -> None:
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": recorder.url + "/console-cards"})
    outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    assert outcome.answers == [] and outcome.skipped == []
    assert recorder.requests == [Recorded("POST", "/console-cards", "text/plain; charset=utf-8",
                                          CARD["title_in_language"].encode("utf-8"))]


def test_notify_sends_a_home_assistant_webhook_the_title_as_json(
    data_dir: DataDir, recorder: RecordingServer
) -> None:
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": recorder.url + "/api/webhook/console-card-waiting"})
    call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "program:claude"})
    [sent] = recorder.requests
    assert (sent.path, sent.content_type) == ("/api/webhook/console-card-waiting", "application/json")
    assert json.loads(sent.body) == {"message": CARD["title_in_language"]}


@pytest.mark.parametrize("event", ["allowed", "denied", "expired", "withdrawn"])
def test_notify_says_nothing_of_a_card_no_longer_waiting(
    data_dir: DataDir, recorder: RecordingServer, event: str
) -> None:
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": recorder.url})
    call_each(plugins, "on_card", {"event": event, "card": CARD, "principal": "household"})
    assert recorder.requests == []


def test_notify_sends_nothing_until_a_url_is_set(data_dir: DataDir, recorder: RecordingServer) -> None:
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    assert recorder.requests == [] and outcome.skipped == []


def test_a_slow_notification_server_is_given_up_on_within_the_hooks_second_and_logged(
    data_dir: DataDir, recorder: RecordingServer, caplog: pytest.LogCaptureFixture
) -> None:
    """The POST's own timeout ends it before the Console's 1 s (told by order: a later end would be skipped as
    late), never raised, a warning logged."""
    recorder.delay = 3.0
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": recorder.url + "/secret-topic-name"})
    with caplog.at_level(logging.WARNING):
        outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    # Not skipped: it returned before the Console's 1 s deadline (told by the machinery, not a stopwatch).
    assert outcome.skipped == [] and recorder.arrived.is_set()
    assert any("notify" in record.getMessage() and "TimeoutError" in record.getMessage()
               for record in caplog.records)
    assert "secret-topic-name" not in caplog.text


def test_a_server_that_answers_a_byte_at_a_time_is_given_up_on_within_the_hooks_second(
    data_dir: DataDir, recorder: RecordingServer, caplog: pytest.LogCaptureFixture
) -> None:
    """Each byte comes well within the socket's timeout, the answer as a whole never does: notify's watchdog ends
    the POST before the Console's 1 s (a later end would be skipped as late), and a warning is logged."""
    recorder.trickle = 0.3
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": recorder.url + "/secret-topic-name"})
    with caplog.at_level(logging.WARNING):
        outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    assert outcome.skipped == [] and recorder.arrived.is_set()
    assert any("could not be sent" in record.getMessage() for record in caplog.records)
    assert "secret-topic-name" not in caplog.text


@pytest.mark.parametrize("status", [301, 302, 303, 307, 308])
def test_a_redirect_is_never_followed(
    data_dir: DataDir, recorder: RecordingServer, other_host: RecordingServer, caplog: pytest.LogCaptureFixture,
    status: int,
) -> None:
    """A server that answers "elsewhere" is an answer that is not 2xx: logged, and the other host hears nothing."""
    recorder.status, recorder.location = status, other_host.url + "/collect"
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": recorder.url + "/api/webhook/card"})
    with caplog.at_level(logging.WARNING):
        outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    assert outcome.skipped == [] and len(recorder.requests) == 1
    assert other_host.requests == []
    assert any(f"answered {status}" in record.getMessage() for record in caplog.records)


@pytest.mark.parametrize("status", [400, 404, 500, 503])
def test_an_answer_that_is_not_2xx_is_logged_and_nothing_else_breaks(
    data_dir: DataDir, recorder: RecordingServer, caplog: pytest.LogCaptureFixture, status: int
) -> None:
    recorder.status = status
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": recorder.url + "/secret-topic-name"})
    with caplog.at_level(logging.WARNING):
        outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
        again = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    assert outcome.skipped == again.skipped == [] and len(recorder.requests) == 2
    assert [record.getMessage() for record in caplog.records] == [
        f"notify: the waiting card was answered {status}, not sent on"] * 2


def test_an_answer_that_is_not_http_is_logged_and_never_raised(
    data_dir: DataDir, recorder: RecordingServer, caplog: pytest.LogCaptureFixture
) -> None:
    recorder.raw = b"FOO 200 OK\r\n\r\n"
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": recorder.url})
    with caplog.at_level(logging.WARNING):
        outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    assert outcome.skipped == [] and len(recorder.requests) == 1
    assert [record.getMessage() for record in caplog.records] == [
        "notify: the waiting card could not be sent (ValueError)"]


def test_notify_sends_no_header_beyond_the_requests_own(data_dir: DataDir, recorder: RecordingServer) -> None:
    """No credential, cookie or name of the Console's: the server learns the title and no more (the real Home
    Assistant test, tests/real_ha/test_notify_webhook_real.py, looks for the Console's secrets on the wire)."""
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": recorder.url + "/api/webhook/card"})
    call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    [sent] = recorder.requests
    body = json.dumps({"message": CARD["title_in_language"]}).encode("utf-8")
    assert sent.headers == {"Host": recorder.url.removeprefix("http://"), "Accept-Encoding": "identity",
                            "Content-Type": "application/json", "Content-Length": str(len(body))}
    assert sent.body == body


def test_a_notification_server_that_is_down_is_logged_never_raised(
    data_dir: DataDir, caplog: pytest.LogCaptureFixture
) -> None:
    plugins = plugins_with(data_dir, notify=load_example("notify"))
    plugins.save_settings("notify", {"url": "http://127.0.0.1:9/down"})  # the discard port: nothing listens
    with caplog.at_level(logging.WARNING):
        outcome = call_each(plugins, "on_card", {"event": "waiting", "card": CARD, "principal": "household"})
    assert outcome.skipped == []
    assert any("could not be sent" in record.getMessage() for record in caplog.records)


# --- installed as a household installs them ----------------------------------------------------


def test_the_examples_installed_by_pip_are_loaded_through_their_entry_points(
    example_site: Path, data_dir: DataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.syspath_prepend(str(example_site))
    for _, module in EXAMPLES.values():
        monkeypatch.delitem(sys.modules, module, raising=False)
    plugins = Plugins.installed(PluginSwitches(data_dir), PluginSettings(PluginValuesFile(data_dir)))
    assert plugins.describe() == [PluginInfo("notify", "1.0.0", ("on_card",), True),
                                  PluginInfo("quiet_hours", "1.0.0", ("before_toolcall",), True)]
    assert [field.name for field in plugins.setting_fields("quiet_hours")] == ["start", "end"]
    assert [field.name for field in plugins.setting_fields("notify")] == ["url"]
