""""What turned the hall light on?" against a logbook a real Home Assistant 2025.4.4 recorded.

The scene is made by the test harness (never by the package), through the owner's token: a service call
by the owner (a known user, whose person entity onboarding made), a script run as a service, an automation
triggered by another entity, and a state written directly with POST /api/states. The causes and their names
are then read through the six-stage executor with the causes' entities allowlisted and not.
"""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from console_ha.capabilities.get_logbook import NAME as GET_LOGBOOK
from tests.moving_clock import PATIENCE
from tests.real_ha.harness import RealHomeAssistant
from tests.real_ha.test_capabilities_real import make_executor, run, wait_state

pytestmark = pytest.mark.real_ha

# Driven only by this module (the harness's configuration.yaml makes them).
HALL_LIGHT = "input_boolean.hall_light"
NIGHT_MOTION = "input_boolean.night_motion"  # the automation's trigger: never allowlisted here
AUTOMATION = "automation.night_hall_light"
SCRIPT = "script.hall_light_off"
OWNER = "person.console_test_owner"
CAUSES = [OWNER, AUTOMATION, SCRIPT]


def _logbook(real_ha: RealHomeAssistant, entity_id: str, since: datetime) -> list[dict[str, Any]]:
    """Home Assistant's own logbook answer, read by the test to wait for the recorder."""
    with real_ha.websocket() as ws:
        return list(ws.command("logbook/get_events", start_time=since.isoformat(),
                               end_time=datetime.now(UTC).isoformat(), entity_ids=[entity_id]))


@pytest.fixture(scope="module")
def scene(real_ha: RealHomeAssistant) -> dict[str, Any]:
    """Four changes of the hall light, each with another cause; its raw logbook, and HA's user id for the owner."""
    since = datetime.now(UTC) - timedelta(seconds=1)
    real_ha.call_service("input_boolean", "turn_off", {"entity_id": NIGHT_MOTION})
    if real_ha.get(f"/api/states/{HALL_LIGHT}").json()["state"] != "off":
        real_ha.call_service("input_boolean", "turn_off", {"entity_id": HALL_LIGHT})
    attributes = real_ha.get(f"/api/states/{HALL_LIGHT}").json()["attributes"]
    steps = [
        (lambda: real_ha.call_service("input_boolean", "turn_on", {"entity_id": HALL_LIGHT}), "on"),  # the owner
        (lambda: real_ha.call_service("script", "hall_light_off"), "off"),  # a script, as a service
        (lambda: real_ha.call_service("input_boolean", "turn_on", {"entity_id": NIGHT_MOTION}), "on"),  # automation
        # A state written directly, keeping its attributes (its name): other tests list every entity's name.
        (lambda: real_ha.set_state(HALL_LIGHT, "off", attributes), "off"),
    ]
    for act, state in steps:
        act()
        wait_state(real_ha, HALL_LIGHT, state)
        time.sleep(1.1)  # distinct seconds, and the recorder's commit interval
    deadline = time.monotonic() + PATIENCE  # patience for the recorder, not a bound
    while len(entries := [e for e in _logbook(real_ha, HALL_LIGHT, since) if "state" in e]) < len(steps):
        assert time.monotonic() < deadline, f"the logbook holds {len(entries)} changes, expected {len(steps)}"
        time.sleep(0.3)
    assert real_ha.get(f"/api/states/{HALL_LIGHT}").json()["attributes"] == attributes
    owner_user = real_ha.get(f"/api/states/{OWNER}").json()["attributes"]["user_id"]
    return {"raw": entries[-len(steps):], "owner_user": owner_user}


def test_the_causes_are_named_when_their_entities_are_allowlisted(
        real_ha: RealHomeAssistant, scene: dict[str, Any], tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, [HALL_LIGHT, *CAUSES])
    result = run(executor, GET_LOGBOOK, {"entity_id": HALL_LIGHT, "period": "hour"})
    last = result["entries"][-4:]
    assert [entry["state"] for entry in last] == ["on", "off", "on", "off"]
    assert [entry["cause"] for entry in last] == [
        {"kind": "person", "name": "Console Test Owner"},
        {"kind": "script", "name": "Hall light off"},
        {"kind": "automation", "name": "Night hall light"},
        # POST /api/states carries the writer's user: the owner wrote it.
        {"kind": "person", "name": "Console Test Owner"},
    ]
    # Each entry's time is Home Assistant's own.
    assert [entry["when"] for entry in last] == [
        datetime.fromtimestamp(raw["when"], UTC).isoformat(timespec="seconds").replace("+00:00", "Z")
        for raw in scene["raw"]]
    assert result["total"] == len(result["entries"]) >= 4 and result["truncated"] is False


def test_without_their_entities_allowlisted_only_the_kinds_are_given(
        real_ha: RealHomeAssistant, scene: dict[str, Any], tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, [HALL_LIGHT])
    result = run(executor, GET_LOGBOOK, {"entity_id": HALL_LIGHT, "period": "hour"})
    assert [entry["cause"] for entry in result["entries"][-4:]] == [
        {"kind": "person"}, {"kind": "script"}, {"kind": "automation"}, {"kind": "person"}]
    text = json.dumps(result)
    # Home Assistant's answer names them all (the raw logbook holds the automation's trigger, its name...).
    raw = json.dumps(scene["raw"])
    for hidden in ("night_motion", "Night hall light", "night_hall_light", scene["owner_user"]):
        assert hidden in raw
    for hidden in ("night_motion", "Night motion", "Night hall light", "night_hall_light", "hall_light_off",
                   "Hall light off", "Console Test Owner", "console_test_owner", scene["owner_user"]):
        assert hidden not in text


def test_one_cause_allowlisted_is_named_and_the_others_are_not(
        real_ha: RealHomeAssistant, scene: dict[str, Any], tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, [HALL_LIGHT, AUTOMATION])
    result = run(executor, GET_LOGBOOK, {"entity_id": HALL_LIGHT, "period": "day"})
    assert [entry["cause"] for entry in result["entries"][-4:]] == [
        {"kind": "person"}, {"kind": "script"}, {"kind": "automation", "name": "Night hall light"}, {"kind": "person"}]


def test_an_automations_own_logbook_says_it_ran_but_not_what_triggered_it(
        real_ha: RealHomeAssistant, scene: dict[str, Any], tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, [AUTOMATION])
    result = run(executor, GET_LOGBOOK, {"entity_id": AUTOMATION, "period": "hour"})
    assert {"message": "triggered", "cause": {"kind": "unknown"}}.items() <= result["entries"][-1].items()
    assert "night_motion" not in json.dumps(result) and "Night motion" not in json.dumps(result)
