"""The household's clock: one template helper writes every moment as <time> in UTC, worded in the configured zone.

The words are English's own forms (CLDR's, as Babel and the browser's Intl write them: a narrow no-break space
before AM/PM) unless the page is in another language (tests/web/test_language.py).
"""

from __future__ import annotations

import json
from collections.abc import Callable

import pytest
from flask import Flask, render_template_string
from flask.testing import FlaskClient

from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.datadir import DataDir


def render(app: Flask, source: str, **context: object) -> str:
    with app.test_request_context():
        return render_template_string(source, **context)


@pytest.mark.parametrize(("zone", "with_date", "words"), [
    ("Europe/Paris", True, "Jul 1, 2026, 2:05\u202fPM CEST"),
    ("Europe/Paris", False, "2:05\u202fPM CEST"),
    ("America/New_York", True, "Jul 1, 2026, 8:05\u202fAM EDT"),
    ("UTC", False, "12:05\u202fPM UTC"),
])
def test_a_moment_keeps_utc_in_datetime_and_is_worded_in_the_configured_zone(
        make_app: Callable[..., Flask], zone: str, with_date: bool, words: str) -> None:
    app = make_app(CONSOLE_HA_TIME_ZONE=zone)
    html = render(app, "{{ moment(t, with_date=w) }}", t="2026-07-01T12:05:09Z", w=with_date)
    style = "date" if with_date else "time"
    assert html == f'<time datetime="2026-07-01T12:05:09Z" data-clock="{style}">{words}</time>'


def test_winter_and_summer_time_follow_the_zone_rules_of_each_moment(make_app: Callable[..., Flask]) -> None:
    app = make_app(CONSOLE_HA_TIME_ZONE="Europe/Paris")
    assert "1:00\u202fPM CET" in render(app, "{{ moment('2026-01-15T12:00:00Z') }}")
    assert "2:00\u202fPM CEST" in render(app, "{{ moment('2026-07-15T12:00:00Z') }}")


def test_the_environment_names_the_zone_when_the_app_config_does_not(
        make_app: Callable[..., Flask], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("CONSOLE_HA_TIME_ZONE", "Asia/Tokyo")
    assert "9:00\u202fPM JST" in render(make_app(), "{{ moment('2026-07-15T12:00:00Z') }}")


def test_without_a_setting_the_machines_own_zone_is_used(
        make_app: Callable[..., Flask], monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("CONSOLE_HA_TIME_ZONE", raising=False)
    monkeypatch.setenv("TZ", "Australia/Adelaide")
    import time
    time.tzset()
    try:
        assert "9:30\u202fPM ACST" in render(make_app(), "{{ moment('2026-07-15T12:00:00Z') }}")
    finally:
        monkeypatch.undo()
        time.tzset()


def test_an_unknown_zone_stops_the_console_at_start_naming_it(make_app: Callable[..., Flask]) -> None:
    with pytest.raises(ValueError, match="Mars/Olympus"):
        make_app(CONSOLE_HA_TIME_ZONE="Mars/Olympus")


@pytest.mark.parametrize("value", ["", None])
def test_no_moment_is_nothing_and_a_slot_is_an_empty_element_for_a_script(
        make_app: Callable[..., Flask], value: object) -> None:
    app = make_app(CONSOLE_HA_TIME_ZONE="UTC")
    assert render(app, "{{ moment(v) }}", v=value) == ""
    assert render(app, "{{ moment(v, with_date=false, slot='expires') }}", v=value) == (
        '<time datetime="" data-clock="time" data-slot="expires"></time>')


def test_text_that_is_no_moment_is_shown_as_it_is_and_escaped(make_app: Callable[..., Flask]) -> None:
    app = make_app(CONSOLE_HA_TIME_ZONE="UTC")
    assert render(app, "{{ moment(v) }}", v="<b>soon</b>") == "<span>&lt;b&gt;soon&lt;/b&gt;</span>"


def test_the_activity_page_shows_each_event_in_the_configured_zone_and_keeps_utc_for_the_script(
        make_app: Callable[..., Flask], data_dir: DataDir, password: str) -> None:
    from tests.web.conftest import log_in
    app = make_app(CONSOLE_HA_TIME_ZONE="Europe/Paris")
    AuditLog(data_dir).record(AuditEvent.PROPOSED, capability="home_assistant.list_entities", classification="read",
                              stage=1, invocation="x")
    line = json.loads(data_dir.audit_log.read_text())
    data_dir.audit_log.write_text(json.dumps({**line, "time": "2026-12-02T09:30:00Z"}) + "\n")
    client: FlaskClient = app.test_client()
    log_in(client, password)
    html = client.get("/activity").get_data(as_text=True)
    assert '<time datetime="2026-12-02T09:30:00Z" data-clock="date">Dec 2, 2026, 10:30\u202fAM CET</time>' in html
    assert "clock.js" in html


@pytest.mark.parametrize(("zone", "value"), [("Asia/Tokyo", "9999-12-31T23:59:59Z"),
                                             ("America/New_York", "0001-01-01T00:00:00Z")])
def test_a_moment_at_the_edge_of_the_calendar_is_shown_as_written_not_a_crash(
        make_app: Callable[..., Flask], data_dir: DataDir, password: str, zone: str, value: str) -> None:
    """A moment the zone cannot hold (a damaged or hand-edited log line) is shown as it is, like any other odd text."""
    from tests.web.conftest import log_in
    app = make_app(CONSOLE_HA_TIME_ZONE=zone)
    assert render(app, "{{ moment(v) }}", v=value) == f"<span>{value}</span>"
    AuditLog(data_dir).record(AuditEvent.PROPOSED, capability="home_assistant.list_entities", classification="read",
                              stage=1, invocation="x")
    line = json.loads(data_dir.audit_log.read_text())
    data_dir.audit_log.write_text(json.dumps({**line, "time": value}) + "\n")
    client: FlaskClient = app.test_client()
    log_in(client, password)
    response = client.get("/activity")
    assert response.status_code == 200 and value in response.get_data(as_text=True)
