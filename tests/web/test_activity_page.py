"""GET /activity with every event and every reason code in the log: words, not codes; the latest events first."""

from __future__ import annotations

import json
import re
from html.parser import HTMLParser

import pytest
from flask.testing import FlaskClient

from console_ha.capabilities.registry import REGISTRY
from console_ha.conversation.activity import EVENT_TABLE, reason
from console_ha.language import Words
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.datadir import DataDir
from console_ha.store.instances import Instances
from tests.activity_log import FAILURE_CODES, HOOKS, LONG_PROGRAM, PLUGIN, REFUSAL_CODES, add_instance, fill, record

CODE = re.compile(r"\b[A-Z][A-Z0-9]*_[A-Z0-9_]+\b")


class _Page(HTMLParser):
    """The text of <main> as a reader meets it (no attributes, no scripts) and every data-code value."""

    def __init__(self) -> None:
        super().__init__()
        self.text: list[str] = []
        self.codes: list[str] = []
        self._in_main = 0

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._in_main += tag == "main"
        self.codes += [value for name, value in attrs if name == "data-code" and value]

    def handle_endtag(self, tag: str) -> None:
        self._in_main -= tag == "main"

    def handle_data(self, data: str) -> None:
        if self._in_main:
            self.text.append(data)


def read(household: FlaskClient) -> tuple[str, str, list[str]]:
    html = household.get("/activity").get_data(as_text=True)
    page = _Page()
    page.feed(html)
    return html, " ".join(" ".join(page.text).split()), page.codes


def test_no_code_is_in_the_page_s_text_and_every_one_is_in_its_data(household: FlaskClient, data_dir: DataDir):
    """Issue 25: "Expired unanswered CONFIRMATION_INVALID" and "Refused ENTITY_NOT_ALLOWLISTED 1" are gone."""
    fill(data_dir)
    _, text, codes = read(household)
    assert CODE.findall(text) == []
    assert "home_assistant." not in text  # a capability is named in words; its id is in the data
    assert set(codes) >= {*REFUSAL_CODES, *FAILURE_CODES, "CONFIRMATION_DENIED", "CONFIRMATION_INVALID"}
    for event, code in [*((AuditEvent.REJECTED, c) for c in REFUSAL_CODES),
                        *((AuditEvent.FAILED, c) for c in FAILURE_CODES)]:
        why = reason(event, code)
        assert why is not None and why in text
    for event, words in EVENT_TABLE.items():
        line = Words(words.line.msgid, plugin=PLUGIN, hook=HOOKS[event]) if event in HOOKS else words.line
        assert line in text and words.counter in text
    assert LONG_PROGRAM in text


def test_the_latest_events_come_before_the_counts(household: FlaskClient, data_dir: DataDir):
    fill(data_dir)
    html, _, _ = read(household)
    assert html.index('id="latest-title"') < html.index('class="event-card"') < html.index('id="counts-title"')


def test_how_often_shows_only_counts_that_are_not_zero_and_names_the_rest_once(household: FlaskClient,
                                                                               data_dir: DataDir):
    from console_ha.store.audit import AuditLog

    log = AuditLog(data_dir)
    state, history = "home_assistant.get_state", "home_assistant.get_history"
    for event in (AuditEvent.PROPOSED, AuditEvent.REJECTED) * 2:
        record(log, event, state)
    record(log, AuditEvent.REJECTED, state, "CAPABILITY_DISABLED")
    html, _, _ = read(household)
    block = re.search(rf'<li class="tally" data-capability="{re.escape(state)}">(.*?)</li>', html, re.S)
    assert block is not None
    counts = re.findall(r'<div data-event="(\w+)"><dt>([^<]+)</dt><dd>(\d+)</dd>', block.group(1))
    assert counts == [("proposed", "Asked to read", "2"), ("rejected", "Refused by the Console", "3")]
    reasons = re.findall(r'data-code="(\w+)"><dt>[^<]+</dt><dd>(\d+)</dd>', block.group(1))
    assert reasons == [("ENTITY_NOT_ALLOWLISTED", "2"), ("CAPABILITY_DISABLED", "1")]
    assert 'class="tally" data-capability="' + history not in html
    not_yet = re.search(r'<ul class="not-yet">(.*?)</ul>', html, re.S)
    assert not_yet is not None
    assert re.findall(r'data-capability="([\w.]+)"', not_yet.group(1)) == [c for c in REGISTRY if c != state]
    counts_section = html[html.index('id="counts-title"'):]
    assert "0" not in re.findall(r"<dd>(\d+)</dd>", counts_section)


def test_the_empty_log_says_nothing_happened_and_names_every_read_once(household: FlaskClient):
    html, text, _ = read(household)
    assert "Nothing yet" in text
    assert all(f'data-capability="{name}"' in html for name in REGISTRY)
    assert 'class="tally"' not in html


def test_every_audit_event_has_its_counter_on_the_page(household: FlaskClient, data_dir: DataDir):
    fill(data_dir)
    html, _, _ = read(household)
    block = re.search(r'<li class="tally" data-capability="home_assistant.list_entities">(.*?)</li>', html, re.S)
    assert block is not None
    assert re.findall(r'<div data-event="(\w+)">', block.group(1)) == list(EVENT_TABLE)
    assert sorted(EVENT_TABLE) == sorted(AuditEvent)


def test_hostile_and_damaged_lines_are_shown_escaped_and_in_words(household: FlaskClient, data_dir: DataDir):
    """The audit log is a file: a line with HTML, wrong types or no fields at all must not break or inject."""
    fill(data_dir)
    hostile = {"event": "<img src=x onerror=alert(1)>", "capability": "<script>alert(1)</script>",
               "client": "<b>evil</b>", "time": "<i>then</i>", "code": '" onmouseover="alert(1)', "stage": "x",
               "duration_ms": [1]}
    with data_dir.audit_log.open("a", encoding="utf-8") as log:
        log.write("\n".join([json.dumps(hostile), "{}", "[1, 2]", '{"event": 5, "capability": {"a": 1}}', ""]))
    response = household.get("/activity")
    assert response.status_code == 200
    html, text, _ = read(household)
    for raw in ("<script>alert", "<img src=x", "<b>evil</b>", "<i>then</i>", '" onmouseover="'):
        assert raw not in html
    assert "<b>evil</b>" in text and "<i>then</i>" in text  # shown as the text it is
    assert CODE.findall(text) == []


def test_one_event_is_counted_in_the_singular(household: FlaskClient, data_dir: DataDir):
    """The first line of a new Console's log: "1 events in the log in all" is not a sentence."""
    record(AuditLog(data_dir), AuditEvent.PROPOSED, next(iter(REGISTRY)))
    html, text, _ = read(household)
    assert "One event in the log in all." in text and "1 events" not in text
    assert 'aria-label="The most recent event"' in html
    record(AuditLog(data_dir), AuditEvent.PROPOSED, next(iter(REGISTRY)))
    html, text, _ = read(household)
    assert "2 events in the log in all." in text and 'aria-label="The 2 most recent events, newest first"' in html


# --- several Home Assistants (issue 29) --------------------------------------------------------------------

STATE = "home_assistant.get_state"


def _filter_links(html: str) -> list[tuple[str, str, bool]]:
    """The instance filter's links: (href, text, whether it is the page shown)."""
    nav = re.search(r'<nav class="instance-filter".*?</nav>', html, re.S)
    assert nav is not None, "no instance filter"
    return [(href.replace("&amp;", "&"), " ".join(text.split()), bool(current))
            for href, current, text in re.findall(r'<a href="([^"]+)"[^>]*?( aria-current="page")?>(.*?)</a>',
                                                  nav.group(0), re.S)]


def _events(html: str) -> list[tuple[str, str]]:
    """Each latest event's instance id (data) and the name it shows."""
    return re.findall(r'<li class="event-card"[^>]*data-instance="(\w+)">.*?<dt>Home Assistant</dt><dd>([^<]*)</dd>',
                      html, re.S)


def _house_and_cabin(data_dir: DataDir) -> AuditLog:
    add_instance(data_dir, "home", "House")
    add_instance(data_dir, "cabin", "Cabin")
    log = AuditLog(data_dir)
    record(log, AuditEvent.PROPOSED, STATE)  # a line of the release before instances: home's
    record(log, AuditEvent.EXECUTED, STATE, instance="home")
    record(log, AuditEvent.FAILED, STATE, "HA_UNREACHABLE", instance="cabin")
    return log


def test_with_two_instances_each_event_names_its_own_and_a_link_shows_one(household: FlaskClient, data_dir: DataDir):
    _house_and_cabin(data_dir)
    html, text, _ = read(household)
    assert _events(html) == [("cabin", "Cabin"), ("home", "House"), ("home", "House")]
    assert _filter_links(html) == [("/activity", "All", True), ("/activity?instance=home", "House", False),
                                   ("/activity?instance=cabin", "Cabin", False)]
    assert "Show the events of" in text and "3 events in the log in all." in text

    cabin = household.get("/activity?instance=cabin").get_data(as_text=True)
    assert _events(cabin) == [("cabin", "Cabin")]
    assert [current for _, _, current in _filter_links(cabin)] == [False, False, True]
    assert "One event of Cabin in the log." in cabin
    counts = re.findall(r'<div data-event="(\w+)"><dt>', cabin[cabin.index('id="counts-title"'):])
    assert counts == ["failed"]  # How often counts the cabin's events only

    home = household.get("/activity?instance=home").get_data(as_text=True)
    assert _events(home) == [("home", "House"), ("home", "House")]  # the line naming none is home's
    assert "2 events of House in the log." in home


def test_one_instance_with_only_home_s_events_reads_as_before(household: FlaskClient, data_dir: DataDir):
    """No filter and no instance on the events: a household of one Home Assistant sees today's page, its HTML
    naming no instance anywhere (not even in an event's data, as the release before did not)."""
    log = fill(data_dir)
    record(log, AuditEvent.EXECUTED, STATE, instance="home")
    html, text, _ = read(household)
    assert 'class="instance-filter"' not in html and "<dt>Home Assistant</dt>" not in html
    assert "instance" not in html
    assert "Show the events of" not in text and "events in the log in all." in text


def test_an_instance_removed_since_is_named_by_its_id_marked_and_can_be_shown(household: FlaskClient,
                                                                             data_dir: DataDir):
    """The Console has one Home Assistant again, but the log still holds the cabin's events."""
    record(AuditLog(data_dir), AuditEvent.EXECUTED, STATE, instance="cabin")
    record(AuditLog(data_dir), AuditEvent.PROPOSED, STATE)
    html, _, _ = read(household)
    assert _events(html) == [("home", "Home"), ("cabin", "cabin (removed)")]
    assert [text for _, text, _ in _filter_links(html)] == ["All", "Home", "cabin (removed)"]
    cabin = household.get("/activity?instance=cabin").get_data(as_text=True)
    assert _events(cabin) == [("cabin", "cabin (removed)")]


def test_an_instance_with_no_events_yet_says_so(household: FlaskClient, data_dir: DataDir):
    add_instance(data_dir, "cabin", "Cabin")
    record(AuditLog(data_dir), AuditEvent.EXECUTED, STATE, instance="home")
    _, text, _ = read(household)
    assert "Cabin" in text  # offered: it is the Console's
    html = household.get("/activity?instance=cabin").get_data(as_text=True)
    assert "No events of Cabin yet." in html and 'class="event-card"' not in html


@pytest.mark.parametrize("asked", ["attic", "Cabin", "", "<b>x</b>", "cabin/../home"])
def test_a_filter_naming_no_instance_there_is_or_was_shows_every_event(household: FlaskClient, data_dir: DataDir,
                                                                       asked: str):
    """A stale or mistyped link is sent to every event, never to a page about an instance that is not there."""
    _house_and_cabin(data_dir)
    response = household.get("/activity", query_string={"instance": asked})
    assert response.status_code == 302 and response.headers["Location"] == "/activity"


def test_with_one_instance_a_link_to_home_s_events_shows_the_page_as_before(household: FlaskClient,
                                                                            data_dir: DataDir):
    """`?instance=home` on a Console of one Home Assistant: every event is home's, so the page without a choice."""
    record(AuditLog(data_dir), AuditEvent.EXECUTED, STATE, instance="home")
    response = household.get("/activity", query_string={"instance": "home"})
    assert response.status_code == 302 and response.headers["Location"] == "/activity"


def test_the_household_s_name_for_an_instance_is_shown_as_text(household: FlaskClient, data_dir: DataDir):
    add_instance(data_dir, "cabin", "<b>Cabin</b>")
    record(AuditLog(data_dir), AuditEvent.EXECUTED, STATE, instance="cabin")
    for path in ("/activity", "/activity?instance=cabin"):
        html = household.get(path).get_data(as_text=True)
        assert "<b>Cabin</b>" not in html and "&lt;b&gt;Cabin&lt;/b&gt;" in html


def test_a_hand_edited_name_holding_a_lone_surrogate_shows_it_as_a_replacement_character(household: FlaskClient,
                                                                                           data_dir: DataDir):
    """Half of a UTF-16 pair (JSON's `\\ud800`) cannot be sent as UTF-8: the page crashed; it shows as U+FFFD."""
    add_instance(data_dir, "cabin", "Cabin")
    path = Instances(data_dir).get("cabin").config.path
    path.write_text(path.read_text().replace('"Cabin"', '"\\ud800Cabin"'))
    record(AuditLog(data_dir), AuditEvent.EXECUTED, STATE, instance="cabin")
    response = household.get("/activity")
    assert response.status_code == 200 and "\ufffdCabin" in response.get_data(as_text=True)
