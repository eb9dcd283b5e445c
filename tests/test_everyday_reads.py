"""get_calendar, get_todo and get_forecast against a stub Home Assistant, a hostile one among them.

The stub's answers are shaped as Home Assistant 2025.4.4 sends them (tests/real_ha/test_everyday_real.py holds
the same reads to the real one). A hostile Home Assistant's links, dial-in codes, secrets, oversized text and
malformed answers never reach a result.
"""

from __future__ import annotations

import json
import time as clock
from collections.abc import Iterator
from datetime import UTC, date, datetime, time, timedelta
from typing import Any

import pytest

from console_ha.capabilities import get_calendar, get_forecast, get_todo
from console_ha.capabilities.plain_text import household_text
from console_ha.capabilities.registry import HOME_ASSISTANT_READS
from console_ha.capabilities.spec import Capability
from console_ha.deadline import Deadline
from console_ha.errors import HABadResponse, HANotFound, HATimeout
from console_ha.ha import rest_client as client_module
from console_ha.ha.rest_client import KEPT_CONFIG_SECONDS, HomeAssistantClient
from console_ha.secret import Secret
from console_ha.store.config import HomeAssistantConfig
from tests.executors import console_client, executor_over
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant, default_config
from tests.stub_ha_everyday import CALENDAR, TODO, WEATHER, ZONE, StubEveryday, event

NOW = datetime.now(UTC).replace(microsecond=0)
TODAY = NOW.astimezone(ZONE).date()
NAMES = {CALENDAR: "Family calendar", TODO: "Shopping list", WEATHER: "Home"}
# What a hostile (or careless) calendar puts in a title or a place: each is dropped whole.
HOSTILE_TEXT = [
    "https://meet.example.com/abc-defg-hij",
    "Join: zoom.us/j/98765",
    "Dial +31 20 123 4567",
    "Call 0612345678 then",
    "Conference code 884 112 #",
    "PIN 4412",
    "Password: hunter2",
    "Meeting ID 812 3344 5566",
    "token=abcdef",
    "/api/camera_proxy/camera.door",
    "admin:secret@cam.local",
    "x" * 65,  # oversized: cut would pass on a part
    "Fake\u202etitle",  # a bidi override
    # Full-width forms read as the ASCII they look like (NFKC), as get_state's links are.
    "ＰＩＮ ４４２１",
    "Ｐａｓｓｃｏｄｅ ４４２１ ＃",
    "Ｍｅｅｔｉｎｇ ＩＤ ８８４ ２２１ ９９０",
    # Phone numbers as households and invitations group them, without a "+" or ten digits in a row.
    "Dial-in: 020 7946 0000",
    "Call 0800 123 4567",
    "(020) 7946-0000",
    "Zoom 884 2219 9901",
    # A code or a password under a short or another language's name.
    "Code: 4421",
    "Door ID 8841",
    "pw: hunter2",
    "Kennwort: geheim",
    "contraseña: hunter2",
]


@pytest.fixture
def everyday(stub_ha: StubHomeAssistant) -> StubEveryday:
    return stub_ha.serve_everyday()


def config_for(stub: StubHomeAssistant) -> HomeAssistantConfig:
    return HomeAssistantConfig(enabled=True, base_url=stub.base_url, allowlisted_entities=tuple(NAMES),
                               entity_names=NAMES)


def read(capability: Capability, stub: StubHomeAssistant, arguments: dict[str, Any]) -> dict[str, Any]:
    with HomeAssistantClient(stub.base_url, Secret(stub.token), reads=capability.reads) as client:
        result = capability.execute(client, config_for(stub), arguments, Deadline(10), NOW)
    assert_matches_result_schema(capability.name, result)
    return result


def local(day: int, hour: int) -> datetime:
    return datetime.combine(TODAY + timedelta(days=day), time(hour), tzinfo=ZONE)


# --- the text rule -------------------------------------------------------------------------------

@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_text_that_looks_like_a_link_a_dial_in_code_or_a_secret_is_dropped_whole(text: str) -> None:
    assert household_text(text) is None


@pytest.mark.parametrize("text", ["Dentist", "Main Street 4", "School trip 2026-12-05", "Grandma's 80th birthday",
                                  "Swimming at 17:30", "Milk (2 l)", "Room 204", "Party 05.12.2026",
                                  "Party 12/5/26", "Meeting 10:00-11:30", "Flight KL 1234 at 10:15"])
def test_plain_household_text_passes_as_it_is(text: str) -> None:
    assert household_text(text) == text


# --- get_calendar ---------------------------------------------------------------------------------

def test_tomorrow_is_the_household_s_tomorrow_in_start_order_with_all_day_days_as_a_household_says_them(
        stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    result = read(get_calendar.CAPABILITY, stub_ha, {"entity_id": CALENDAR, "period": "tomorrow"})
    (asked,) = stub_ha.requests_to("/api/calendars/")
    # Home Assistant's days (Europe/Amsterdam), sent in UTC with a Z.
    assert asked.query == {"start": [local(1, 0).astimezone(UTC).isoformat().replace("+00:00", "Z")],
                           "end": [local(2, 0).astimezone(UTC).isoformat().replace("+00:00", "Z")]}
    tomorrow = (TODAY + timedelta(days=1)).isoformat()
    assert result["events"] == [
        {"summary": "School trip", "start": tomorrow, "end": tomorrow, "all_day": True},
        {"summary": "Dentist", "start": local(1, 9).isoformat(), "end": local(1, 10).isoformat(), "all_day": False,
         "location": "Main Street 4"},
    ]
    assert (result["total"], result["truncated"], result["time_zone"]) == (2, False, "Europe/Amsterdam")


def test_today_and_the_next_7_days_cover_the_days_they_name(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    today = read(get_calendar.CAPABILITY, stub_ha, {"entity_id": CALENDAR, "period": "today"})
    week = read(get_calendar.CAPABILITY, stub_ha, {"entity_id": CALENDAR, "period": "next_7_days"})
    assert [e["summary"] for e in today["events"]] == ["Swimming"]
    assert [e["summary"] for e in week["events"]] == ["Swimming", "School trip", "Dentist", "Grandma's birthday"]
    assert stub_ha.requests_to("/api/calendars/")[-1].query["end"] == [
        local(7, 0).astimezone(UTC).isoformat().replace("+00:00", "Z")]


@pytest.mark.parametrize("text", HOSTILE_TEXT)
def test_a_hostile_title_or_place_is_dropped_and_a_description_never_passes(
        stub_ha: StubHomeAssistant, everyday: StubEveryday, text: str) -> None:
    everyday.calendars[CALENDAR] = [event(text, local(0, 9), local(0, 10), location=text,
                                          description="Dial-in: +1 555 0100, PIN 1234")]
    result = read(get_calendar.CAPABILITY, stub_ha, {"entity_id": CALENDAR, "period": "today"})
    assert result["events"] == [{"summary": None, "start": local(0, 9).isoformat(), "end": local(0, 10).isoformat(),
                                 "all_day": False}]
    assert "PIN" not in json.dumps(result) and "555" not in json.dumps(result)


def test_at_most_50_events_the_earliest_and_the_total_said(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    # Home Assistant's order is not promised: given last first, the result still starts with the earliest.
    everyday.calendars[CALENDAR] = [event(f"Slot {i}", local(0, 0) + timedelta(minutes=10 * i),
                                          local(0, 0) + timedelta(minutes=10 * i + 5)) for i in range(120)][::-1]
    result = read(get_calendar.CAPABILITY, stub_ha, {"entity_id": CALENDAR, "period": "today"})
    assert [e["summary"] for e in result["events"]] == [f"Slot {i}" for i in range(50)]
    assert (result["total"], result["truncated"]) == (120, True)


@pytest.mark.parametrize("answer", [
    {"events": []},  # an object where the list belongs
    [{"summary": "No times"}],
    [{"start": {"dateTime": "2026-12-05T10:00:00"}, "end": {"dateTime": "2026-12-05T11:00:00"}}],  # no offset
    [{"start": {"dateTime": "2026-12-05T10:00:00+01:00"}, "end": {"dateTime": "2026-12-05T09:00:00+01:00"}}],
    [{"start": {"date": "2026-12-05"}, "end": {"dateTime": "2026-12-05T09:00:00+01:00"}}],
    [{"start": {"date": "tomorrow"}, "end": {"date": "2026-12-06"}}],
    [{"start": {"date": "2026-12-05", "x": 1}, "end": {"date": "2026-12-06"}}],
    ["an event"],
    # A moment past what a datetime holds once in the household's zone (it raised OverflowError).
    [{"start": {"dateTime": "9999-12-31T23:59:59-23:59"}, "end": {"dateTime": "9999-12-31T23:59:59-23:59"}}],
    [{"start": {"dateTime": "0001-01-01T00:00:00+23:59"}, "end": {"dateTime": "0001-01-01T00:00:00+23:59"}}],
])
def test_a_malformed_answer_is_a_bad_response_never_a_result(stub_ha: StubHomeAssistant, everyday: StubEveryday,
                                                              answer: Any) -> None:
    stub_ha.override(f"/api/calendars/{CALENDAR}", json.dumps(answer).encode())
    with pytest.raises(HABadResponse) as caught:
        read(get_calendar.CAPABILITY, stub_ha, {"entity_id": CALENDAR, "period": "today"})
    assert caught.value.detail["reason"] == "wrong_shape"


def test_an_answer_past_its_byte_bound_is_refused(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    big = [event("x", local(0, 9), local(0, 10), description="y" * 1000)] * 3000
    stub_ha.override(f"/api/calendars/{CALENDAR}", json.dumps(big).encode())
    with pytest.raises(HABadResponse) as caught:
        read(get_calendar.CAPABILITY, stub_ha, {"entity_id": CALENDAR, "period": "today"})
    assert caught.value.detail["reason"] == "too_large"


def test_a_calendar_home_assistant_lacks_is_not_found(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    with pytest.raises(HANotFound, match="calendar.gone"):
        read(get_calendar.CAPABILITY, stub_ha, {"entity_id": "calendar.gone", "period": "today"})


# --- get_todo --------------------------------------------------------------------------------------

@pytest.mark.parametrize(("status", "summaries"), [(None, ["Milk", "Batteries"]), ("completed", ["Bread"]),
                                                   ("all", ["Milk", "Bread", "Batteries"])])
def test_a_list_s_items_by_status_in_the_list_s_order(stub_ha: StubHomeAssistant, everyday: StubEveryday,
                                                     status: str | None, summaries: list[str]) -> None:
    arguments = {"entity_id": TODO} | ({"status": status} if status else {})
    result = read(get_todo.CAPABILITY, stub_ha, arguments)
    assert [item["summary"] for item in result["items"]] == summaries
    assert result["status"] == (status or "needs_action") and result["total"] == len(summaries)
    (asked,) = [json.loads(m) for m in stub_ha.ws_messages if "todo/item/list" in m]
    assert asked == {"id": 1, "type": "todo/item/list", "entity_id": TODO}


def test_a_due_date_is_kept_as_home_assistant_wrote_it(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    result = read(get_todo.CAPABILITY, stub_ha, {"entity_id": TODO})
    assert result["items"][1] == {"summary": "Batteries", "status": "needs_action",
                                  "due": (TODAY + timedelta(days=2)).isoformat()}


@pytest.mark.parametrize(("due", "written"), [
    ("2026-W49-5", "2026-12-04"),  # a week date, which Python reads too
    ("20261205T100000Z", "2026-12-05T10:00:00+00:00"),  # the basic format
    ("2026-12-05 10:00:00.5+01:00", "2026-12-05T10:00:00.500000+01:00"),
])
def test_a_due_in_another_iso_shape_is_written_as_home_assistant_writes_one(
        stub_ha: StubHomeAssistant, everyday: StubEveryday, due: str, written: str) -> None:
    everyday.raw["todo/item/list"] = lambda i: [{"id": i, "type": "result", "success": True, "result": {
        "items": [{"summary": "Milk", "status": "needs_action", "due": due}]}}]
    assert read(get_todo.CAPABILITY, stub_ha, {"entity_id": TODO})["items"] == [
        {"summary": "Milk", "status": "needs_action", "due": written}]


def test_hostile_items_lose_their_titles_and_at_most_100_are_listed(
        stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    everyday.todo[TODO] = [{"summary": HOSTILE_TEXT[i % len(HOSTILE_TEXT)], "uid": str(i), "status": "needs_action",
                            "description": "PIN 1234"} for i in range(150)]
    result = read(get_todo.CAPABILITY, stub_ha, {"entity_id": TODO})
    assert result["items"] == [{"summary": None, "status": "needs_action"}] * 100
    assert (result["total"], result["truncated"]) == (150, True)


@pytest.mark.parametrize("items", [
    [{"summary": "Milk", "status": "maybe"}],
    [{"summary": "Milk", "status": "needs_action", "due": "soon"}],
    [{"summary": "Milk", "status": "needs_action", "due": "2026-12-05T10:00:00"}],  # a time without its zone
    [{"summary": "Milk", "status": "needs_action", "due": 20261205}],
    ["Milk"],
    None,
])
def test_a_malformed_list_is_a_bad_response(stub_ha: StubHomeAssistant, everyday: StubEveryday, items: Any) -> None:
    everyday.raw["todo/item/list"] = lambda i: [{"id": i, "type": "result", "success": True,
                                                 "result": {"items": items}}]
    with pytest.raises(HABadResponse):
        read(get_todo.CAPABILITY, stub_ha, {"entity_id": TODO})


def test_a_list_home_assistant_lacks_is_not_found(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    with pytest.raises(HANotFound, match="todo.gone"):
        read(get_todo.CAPABILITY, stub_ha, {"entity_id": "todo.gone"})


# --- get_forecast ----------------------------------------------------------------------------------

def test_the_daily_forecast_is_8_days_in_the_household_s_zone_with_units_and_the_subscription_ended(
        stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    result = read(get_forecast.CAPABILITY, stub_ha, {"entity_id": WEATHER, "kind": "daily"})
    assert result["unit"] == {"temperature": "°C", "precipitation": "mm", "wind_speed": "km/h"}
    assert len(result["forecast"]) == 8
    assert result["forecast"][1] == {"datetime": local(1, 0).isoformat(), "condition": "rainy", "temperature": 11.0,
                                     "templow": 3.0, "precipitation": 1.5, "precipitation_probability": 80,
                                     "wind_speed": 12.5}  # humidity is not one of the result's fields
    # The unsubscribe is sent just before the connection closes: the stub may read it a moment after.
    deadline = clock.monotonic() + 5
    while everyday.subscribed and clock.monotonic() < deadline:
        clock.sleep(0.01)
    sent = [json.loads(m) for m in stub_ha.ws_messages[1:]]
    subscribe = next(m for m in sent if m["type"] == "weather/subscribe_forecast")
    assert sent[-1] == {"id": sent[-1]["id"], "type": "unsubscribe_events", "subscription": subscribe["id"]}
    assert everyday.subscribed == set() and everyday.unsubscribed == [subscribe["id"]]


def test_the_hourly_forecast_is_48_hours(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    result = read(get_forecast.CAPABILITY, stub_ha, {"entity_id": WEATHER, "kind": "hourly"})
    assert [e["datetime"] for e in result["forecast"]] == [(local(0, 0) + timedelta(hours=h)).isoformat()
                                                           for h in range(48)]


def test_only_the_subscription_s_own_event_after_its_success_counts(
        stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    good = {"datetime": local(0, 0).isoformat(), "condition": "sunny", "temperature": 4}
    bad = {"datetime": local(0, 0).isoformat(), "condition": "https://evil.example/x", "temperature": 99}
    everyday.raw["weather/subscribe_forecast"] = lambda i: [
        {"id": i, "type": "event", "event": {"type": "daily", "forecast": [bad]}},  # before its success
        {"id": i + 7, "type": "event", "event": {"type": "daily", "forecast": [bad]}},  # another subscription's
        {"id": i, "type": "result", "success": True, "result": None},
        {"id": i, "type": "event", "event": {"type": "daily", "forecast": [good]}},
    ]
    result = read(get_forecast.CAPABILITY, stub_ha, {"entity_id": WEATHER, "kind": "daily"})
    assert result["forecast"] == [{**good, "datetime": local(0, 0).isoformat()}]


@pytest.mark.parametrize("entry", [
    {"datetime": "tomorrow", "condition": "sunny", "temperature": 4},
    {"datetime": "2026-12-05T00:00:00", "condition": "sunny", "temperature": 4},
    {"condition": "sunny", "temperature": 4},
    {"datetime": "2026-12-05T00:00:00+00:00", "condition": "sunny", "temperature": "4"},
    {"datetime": "2026-12-05T00:00:00+00:00", "condition": "sunny", "temperature": 4, "wind_speed": [1]},
    {"datetime": "2026-12-05T00:00:00+00:00", "condition": "sunny", "temperature": True},
    {"datetime": "9999-12-31T23:59:59-23:59", "condition": "sunny", "temperature": 4},  # OverflowError before
])
def test_a_malformed_forecast_is_a_bad_response(stub_ha: StubHomeAssistant, everyday: StubEveryday,
                                                entry: dict[str, Any]) -> None:
    everyday.forecasts[(WEATHER, "daily")] = [entry]
    with pytest.raises(HABadResponse):
        read(get_forecast.CAPABILITY, stub_ha, {"entity_id": WEATHER, "kind": "daily"})


def test_hostile_conditions_and_units_are_dropped(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    everyday.forecasts[(WEATHER, "daily")] = [{"datetime": local(0, 0).isoformat(), "condition": text,
                                                "temperature": 1} for text in HOSTILE_TEXT]
    stub_ha.set_state(WEATHER, "rainy", {"temperature_unit": "https://x.example/u", "precipitation_unit": "y" * 65})
    result = read(get_forecast.CAPABILITY, stub_ha, {"entity_id": WEATHER, "kind": "daily"})
    assert {e["condition"] for e in result["forecast"]} == {None}
    assert result["unit"] == {"temperature": None, "precipitation": None, "wind_speed": None}


def test_a_forecast_home_assistant_cannot_give_is_not_found(stub_ha: StubHomeAssistant,
                                                            everyday: StubEveryday) -> None:
    del everyday.forecasts[(WEATHER, "hourly")]
    with pytest.raises(HANotFound, match="hourly"):
        read(get_forecast.CAPABILITY, stub_ha, {"entity_id": WEATHER, "kind": "hourly"})


def test_no_forecast_at_the_moment_is_an_empty_one(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    everyday.forecasts[(WEATHER, "daily")] = None
    assert read(get_forecast.CAPABILITY, stub_ha, {"entity_id": WEATHER, "kind": "daily"})["forecast"] == []


# --- through the executor: the cards, the audit ------------------------------------------------------

@pytest.fixture
def executor(data_dir: Any, stub_ha: StubHomeAssistant, everyday: StubEveryday) -> Iterator[Any]:
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": list(NAMES),
                             "entity_names": NAMES}, token=stub_ha.token)
    yield executor_over(data_dir, clients=console_client)


@pytest.mark.parametrize(("name", "arguments", "title"), [
    (get_calendar.NAME, {"entity_id": CALENDAR, "period": "tomorrow"}, "See what's on Family calendar tomorrow?"),
    (get_calendar.NAME, {"entity_id": CALENDAR, "period": "today"}, "See what's on Family calendar today?"),
    (get_todo.NAME, {"entity_id": TODO}, "See the Shopping list?"),
    (get_todo.NAME, {"entity_id": TODO, "status": "all"}, "See everything on the Shopping list?"),
    (get_forecast.NAME, {"entity_id": WEATHER, "kind": "daily"}, "See the daily forecast of Home?"),
    (get_forecast.NAME, {"entity_id": WEATHER, "kind": "hourly"}, "See the hourly forecast of Home?"),
])
def test_the_card_says_it_in_household_words_and_the_audit_keeps_no_value(
        executor: Any, data_dir: Any, name: str, arguments: dict[str, Any], title: str) -> None:
    proposal = executor.propose(name, arguments, conversation_id="c")
    assert proposal.card.title == title
    assert "Home Assistant at 127.0.0.1" in proposal.card.body
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert_matches_result_schema(name, result)
    audit = data_dir.audit_log.read_text()
    for value in ("Dentist", "Swimming", "Milk", "Batteries", "rainy", "Main Street"):
        assert value not in audit


def test_a_read_that_reports_the_zone_teaches_it_to_the_prompt(executor: Any) -> None:
    assert executor.household_zone() is None  # nothing is asked of Home Assistant for it
    proposal = executor.propose(get_calendar.NAME, {"entity_id": CALENDAR, "period": "today"}, conversation_id="c")
    executor.answer(proposal.token, approve=True, conversation_id="c")
    zone = executor.household_zone()
    assert zone is not None and zone.key == "Europe/Amsterdam"


def test_a_day_of_the_calendar_is_the_household_s_even_across_midnight_utc() -> None:
    """23:30 UTC on 4 December is already the 5th in Amsterdam in winter: its today starts there."""
    period = get_calendar.PERIODS["today"]
    start, end = period.window(datetime(2026, 12, 4, 23, 30, tzinfo=UTC).astimezone(ZONE))
    assert (start.date(), end.date()) == (date(2026, 12, 5), date(2026, 12, 6))
    assert start.astimezone(UTC) == datetime(2026, 12, 4, 23, 0, tzinfo=UTC)


def test_a_subscription_that_never_sends_its_forecast_ends_at_the_deadline(
        stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    everyday.raw["weather/subscribe_forecast"] = lambda i: [{"id": i, "type": "result", "success": True,
                                                             "result": None}]
    # The forecast never comes (the stub stays silent until it stops): a timeout is the deadline's.
    with HomeAssistantClient(stub_ha.base_url, Secret(stub_ha.token), reads=get_forecast.CAPABILITY.reads) as client, \
            pytest.raises(HATimeout):
        get_forecast.execute(client, config_for(stub_ha), {"entity_id": WEATHER, "kind": "daily"}, Deadline(1), NOW)


@pytest.mark.parametrize("event_body", [
    {"type": "hourly", "forecast": []},  # another kind than asked
    {"type": "daily", "forecast": {"datetime": "2026-12-05T00:00:00+00:00"}},
    "daily",
])
def test_an_event_that_is_not_the_asked_forecast_is_a_bad_response(
        stub_ha: StubHomeAssistant, everyday: StubEveryday, event_body: Any) -> None:
    everyday.raw["weather/subscribe_forecast"] = lambda i: [
        {"id": i, "type": "result", "success": True, "result": None},
        {"id": i, "type": "event", "event": event_body}]
    with pytest.raises(HABadResponse):
        read(get_forecast.CAPABILITY, stub_ha, {"entity_id": WEATHER, "kind": "daily"})


def test_a_forecast_past_its_byte_bound_is_refused(stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    everyday.forecasts[(WEATHER, "daily")] = [{"datetime": local(0, 0).isoformat(), "condition": "x" * 1000,
                                                "temperature": 1}] * 2000
    with pytest.raises(HABadResponse) as caught:
        read(get_forecast.CAPABILITY, stub_ha, {"entity_id": WEATHER, "kind": "daily"})
    assert caught.value.detail["reason"] == "too_large"


@pytest.mark.parametrize(("name", "arguments"), [
    (get_calendar.NAME, {"entity_id": TODO, "period": "today"}),
    (get_todo.NAME, {"entity_id": WEATHER}),
    (get_forecast.NAME, {"entity_id": CALENDAR, "kind": "daily"}),
])
def test_another_kind_of_allowed_entity_is_refused_at_stage_2_in_the_argument_s_words(
        executor: Any, stub_ha: StubHomeAssistant, name: str, arguments: dict[str, Any]) -> None:
    from console_ha.capabilities.registry import REGISTRY
    from console_ha.errors import CapabilityError

    with pytest.raises(CapabilityError) as caught:
        executor.propose(name, arguments, conversation_id="c")
    assert (caught.value.code, caught.value.stage) == ("INVALID_ARGUMENTS", 2)
    assert caught.value.message == REGISTRY[name].argument_messages["entity_id"]
    assert stub_ha.requests_to("/api/calendars/") == []


# --- one request a read: the zone kept on the kept client ---------------------------------------

def test_a_kept_client_asks_for_the_zone_once_then_each_calendar_read_is_one_request(
        stub_ha: StubHomeAssistant, everyday: StubEveryday) -> None:
    with HomeAssistantClient(stub_ha.base_url, Secret(stub_ha.token), reads=HOME_ASSISTANT_READS) as client:
        for capability, arguments in ((get_calendar.CAPABILITY, {"entity_id": CALENDAR, "period": "today"}),
                                      (get_forecast.CAPABILITY, {"entity_id": WEATHER, "kind": "daily"}),
                                      (get_calendar.CAPABILITY, {"entity_id": CALENDAR, "period": "tomorrow"})):
            result = capability.execute(client, config_for(stub_ha), arguments, Deadline(10), NOW)
            assert result["time_zone"] == "Europe/Amsterdam"
    assert len(stub_ha.requests_to("/api/config")) == 1
    assert len(stub_ha.requests_to("/api/calendars/")) == 2
    # The forecast's WebSocket carries the subscription and its end, no configuration.
    assert not any(json.loads(m).get("type") == "get_config" for m in stub_ha.ws_messages[1:])


def test_the_kept_zone_is_asked_for_again_once_it_is_older_than_its_time(
        stub_ha: StubHomeAssistant, everyday: StubEveryday, monkeypatch: pytest.MonkeyPatch) -> None:
    """A household that moves Home Assistant to another zone has its days follow within KEPT_CONFIG_SECONDS."""
    assert KEPT_CONFIG_SECONDS <= 300
    arguments = {"entity_id": CALENDAR, "period": "today"}
    with HomeAssistantClient(stub_ha.base_url, Secret(stub_ha.token), reads=HOME_ASSISTANT_READS) as client:
        get_calendar.execute(client, config_for(stub_ha), arguments, Deadline(10), NOW)
        stub_ha.override("/api/config", json.dumps({**default_config(), "time_zone": "America/New_York"}).encode())
        assert get_calendar.execute(client, config_for(stub_ha), arguments, Deadline(10),
                                    NOW)["time_zone"] == "Europe/Amsterdam"
        monkeypatch.setattr(client_module, "KEPT_CONFIG_SECONDS", 0.0)  # what was kept is now too old
        assert get_calendar.execute(client, config_for(stub_ha), arguments, Deadline(10),
                                    NOW)["time_zone"] == "America/New_York"
    assert len(stub_ha.requests_to("/api/config")) == 2
