"""get_calendar, get_todo and get_forecast against a real Home Assistant 2025.4.4, each equal to its own answer.

A Home Assistant of this module's own: the harness's configuration plus the `demo` integration (its calendars
and weather entities), which loads only from configuration.yaml, so the session's shared instance is left
as other tests expect it. The shopping list is made by the test through Home Assistant's own config flow
(`POST /api/config/config_entries/flow`) and filled with `todo.add_item`, never by the Console. Each result
is compared with what Home Assistant answers to the same question in the same run, read by the test itself.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import date, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from console_ha.capabilities import get_calendar, get_forecast, get_todo
from console_ha.capabilities.executor import Executor
from console_ha.errors import CapabilityError
from console_ha.store.datadir import DataDir
from tests.executors import console_client, executor_over
from tests.real_ha import harness
from tests.real_ha.harness import RealHomeAssistant, default_venv, install_home_assistant
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings

pytestmark = pytest.mark.real_ha

CALENDARS = ("calendar.calendar_1", "calendar.calendar_2")
WEATHER = "weather.demo_weather_south"  # daily only, in °C and m/s
WEATHER_NORTH = "weather.demo_weather_north"  # daily, hourly and twice daily, in °F and mph
SHOPPING = "todo.shopping_list"
ITEMS = ("Milk", "Bread", "Batteries")


def demo_home_assistant(config_dir: Path) -> RealHomeAssistant:
    """A provisioned, running Home Assistant with the demo integration and a shopping list of three items, one done
    (the benchmark, benchmarks/bench_everyday.py, starts the same)."""
    write = harness.write_config_dir

    def with_demo(config_dir: Path, port: int, site: harness.Site = harness.HOUSE) -> None:
        write(config_dir, port, site)
        with (config_dir / "configuration.yaml").open("a", encoding="utf-8") as config:
            config.write("\n# tests/real_ha/test_everyday_real.py: calendars and weather with forecasts\ndemo:\n")

    instance = RealHomeAssistant(install_home_assistant(default_venv()), config_dir)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(harness, "write_config_dir", with_demo)
        instance.provision()
    try:
        make_shopping_list(instance)
    except BaseException:
        instance.stop()
        raise
    return instance


@pytest.fixture(scope="module")
def demo_ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealHomeAssistant]:
    instance = demo_home_assistant(tmp_path_factory.mktemp("everyday_ha"))
    try:
        yield instance
    finally:
        instance.stop()


def make_shopping_list(real_ha: RealHomeAssistant) -> None:
    """The shopping_list integration through Home Assistant's own config flow, then its items (test-only writes)."""
    flow = real_ha._post("/api/config/config_entries/flow", json={"handler": "shopping_list"}).json()
    if flow.get("type") != "create_entry":
        real_ha._post(f"/api/config/config_entries/flow/{flow['flow_id']}", json={})
    for item in ITEMS:
        real_ha.call_service("todo", "add_item", {"entity_id": SHOPPING, "item": item})
    real_ha.call_service("todo", "update_item", {"entity_id": SHOPPING, "item": "Bread", "status": "completed"})


@pytest.fixture(scope="module")
def executor(demo_ha: RealHomeAssistant, tmp_path_factory: pytest.TempPathFactory) -> Executor:
    data_dir = DataDir(tmp_path_factory.mktemp("everyday_console"))
    seed_settings(data_dir, {"enabled": True, "base_url": demo_ha.base_url,
                             "allowlisted_entities": [*CALENDARS, WEATHER, WEATHER_NORTH, SHOPPING]},
                  token=demo_ha.token)
    return executor_over(data_dir, clients=console_client)


def run(executor: Executor, capability: str, arguments: dict[str, Any]) -> dict[str, Any]:
    proposal = executor.propose(capability, arguments, conversation_id="everyday")
    result = executor.answer(proposal.token, approve=True, conversation_id="everyday")
    assert_matches_result_schema(capability, result)
    return result


def zone_of(real_ha: RealHomeAssistant) -> ZoneInfo:
    return ZoneInfo(real_ha.get("/api/config").json()["time_zone"])


# --- calendars -------------------------------------------------------------------------------------

def own_events(real_ha: RealHomeAssistant, entity_id: str, period: str) -> list[dict[str, Any]]:
    """Home Assistant's own answer for the period's days, as the result should list it (worked out here)."""
    zone = zone_of(real_ha)
    today = datetime.now(zone).date()
    first, days = {"today": (0, 1), "tomorrow": (1, 1), "next_7_days": (0, 7)}[period]
    start = datetime.combine(today + timedelta(days=first), datetime.min.time(), tzinfo=zone)
    end = datetime.combine(today + timedelta(days=first + days), datetime.min.time(), tzinfo=zone)
    answer = real_ha.get(f"/api/calendars/{entity_id}", params={"start": start.isoformat(), "end": end.isoformat()})
    answer.raise_for_status()
    events = []
    for item in json.loads(answer.content):
        all_day = "date" in item["start"]
        if all_day:
            start_text = item["start"]["date"]
            end_text = (date.fromisoformat(item["end"]["date"]) - timedelta(days=1)).isoformat()
        else:
            start_text = datetime.fromisoformat(item["start"]["dateTime"]).isoformat(timespec="seconds")
            end_text = datetime.fromisoformat(item["end"]["dateTime"]).isoformat(timespec="seconds")
        event = {"summary": item["summary"], "start": start_text, "end": end_text, "all_day": all_day}
        if item.get("location"):
            event["location"] = item["location"]
        events.append(event)
    return events


@pytest.mark.parametrize("period", ["today", "tomorrow", "next_7_days"])
@pytest.mark.parametrize("entity_id", CALENDARS)
def test_a_demo_calendar_s_events_are_home_assistant_s_own(
        demo_ha: RealHomeAssistant, executor: Executor, entity_id: str, period: str) -> None:
    result = run(executor, get_calendar.NAME, {"entity_id": entity_id, "period": period})
    assert result["events"] == own_events(demo_ha, entity_id, period)
    assert result["total"] == len(result["events"]) and result["time_zone"] == "Europe/Amsterdam"
    assert "Description" not in json.dumps(result)


def test_the_next_7_days_hold_each_demo_event_once(executor: Executor) -> None:
    """The demo's events (one starting half an hour after Home Assistant started, one under way) are found."""
    found = [run(executor, get_calendar.NAME, {"entity_id": c, "period": "next_7_days"})["events"] for c in CALENDARS]
    assert [[e["summary"] for e in events] for events in found] == [["Future Event"], ["Current Event"]]
    assert found[0][0]["location"] == "Future Location"


# --- the shopping list ------------------------------------------------------------------------------

@pytest.mark.parametrize("status", ["needs_action", "completed", "all"])
def test_the_shopping_list_s_items_are_home_assistant_s_own(
        demo_ha: RealHomeAssistant, executor: Executor, status: str) -> None:
    result = run(executor, get_todo.NAME, {"entity_id": SHOPPING, "status": status})
    with demo_ha.websocket() as ws:
        own = ws.command("todo/item/list", entity_id=SHOPPING)["items"]
    expected = [{"summary": item["summary"], "status": item["status"],
                 **({"due": item["due"]} if "due" in item else {})}
                for item in own if status == "all" or item["status"] == status]
    assert result["items"] == expected
    assert {"needs_action": ["Milk", "Batteries"], "completed": ["Bread"], "all": list(ITEMS)}[status] == [
        item["summary"] for item in result["items"]]


# --- the forecast -----------------------------------------------------------------------------------

def own_forecast(real_ha: RealHomeAssistant, entity_id: str, kind: str) -> list[dict[str, Any]]:
    """The subscription's first event, read by the test over its own WebSocket, then unsubscribed."""
    with real_ha.websocket() as ws:
        ws._ws.send_json({"id": 100, "type": "weather/subscribe_forecast", "entity_id": entity_id,
                          "forecast_type": kind})
        while (message := ws._ws.receive_json()).get("type") != "event":
            assert message.get("success") is not False, message
        ws._ws.send_json({"id": 101, "type": "unsubscribe_events", "subscription": 100})
    forecast: list[dict[str, Any]] = message["event"]["forecast"]
    return forecast


@pytest.mark.parametrize(("entity_id", "kind", "most"), [(WEATHER, "daily", 8), (WEATHER_NORTH, "daily", 8),
                                                          (WEATHER_NORTH, "hourly", 48)])
def test_the_demo_forecast_is_home_assistant_s_own(
        demo_ha: RealHomeAssistant, executor: Executor, entity_id: str, kind: str, most: int) -> None:
    result = run(executor, get_forecast.NAME, {"entity_id": entity_id, "kind": kind})
    own = own_forecast(demo_ha, entity_id, kind)[:most]
    zone = zone_of(demo_ha)
    assert len(result["forecast"]) == len(own) > 0
    for entry, theirs in zip(result["forecast"], own, strict=True):
        # The demo stamps its entries from its clock at each call: the same minute, seconds apart.
        when = datetime.fromisoformat(entry["datetime"])
        assert when.utcoffset() == datetime.fromisoformat(theirs["datetime"]).astimezone(zone).utcoffset()
        assert abs((when - datetime.fromisoformat(theirs["datetime"])).total_seconds()) < 60
        fields = ("condition", "temperature", *get_forecast.OPTIONAL_NUMBERS)
        assert {k: entry[k] for k in fields if k in entry} == {k: theirs[k] for k in fields if k in theirs}
    attributes = demo_ha.get(f"/api/states/{entity_id}").json()["attributes"]
    assert result["unit"] == {"temperature": attributes["temperature_unit"],
                              "precipitation": attributes["precipitation_unit"],
                              "wind_speed": attributes["wind_speed_unit"]}


def test_a_forecast_read_changes_nothing(demo_ha: RealHomeAssistant,
                                                                  executor: Executor) -> None:
    """The weather entity's state (and when it last changed) is the same before and after the read."""
    before = demo_ha.get(f"/api/states/{WEATHER}").json()
    run(executor, get_forecast.NAME, {"entity_id": WEATHER, "kind": "daily"})
    after = demo_ha.get(f"/api/states/{WEATHER}").json()
    assert (after["state"], after["last_updated"]) == (before["state"], before["last_updated"])


def test_a_forecast_the_entity_does_not_give_is_not_found(executor: Executor) -> None:
    """The south station has no hourly forecast: Home Assistant answers forecast_not_supported."""
    proposal = executor.propose(get_forecast.NAME, {"entity_id": WEATHER, "kind": "hourly"}, conversation_id="e")
    with pytest.raises(CapabilityError) as caught:
        executor.answer(proposal.token, approve=True, conversation_id="e")
    assert caught.value.code == "HA_NOT_FOUND"


def test_the_benchmark_runs_a_pass_of_each_read(capsys: pytest.CaptureFixture[str]) -> None:
    """benchmarks/bench_everyday.py (a Home Assistant of its own) prints a line per read, so it cannot rot."""
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "benchmarks" / "bench_everyday.py"
    spec = importlib.util.spec_from_file_location("bench_everyday", path)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    module.main(["--repeats", "1"])
    lines = capsys.readouterr().out.splitlines()
    assert [line.split()[0] for line in lines[-3:]] == ["calendar", "todo", "forecast"]
