"""A whole conversation turn with the scripted fake model and a real Home Assistant 2025.4.4."""

from __future__ import annotations

import json
import time
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.fake_model import FakeModel, answer_from_tool_result, tool_call
from tests.moving_clock import PATIENCE
from tests.real_ha.harness import RealHomeAssistant
from tests.seed import seed_settings
from tests.web.conftest import household_client

pytestmark = pytest.mark.real_ha

MESSAGE = "/api/v1/conversation/message"
SENSOR = "sensor.living_room_temperature"
SENSOR_INPUT = "input_number.living_room_temperature_input"
ALLOWLIST = [SENSOR, "binary_sensor.front_door"]


@pytest.fixture
def console(tmp_path: Path, real_ha: RealHomeAssistant, model: FakeModel) -> FlaskClient:
    """The Console reading the real Home Assistant, its model the fake, driven by the household's session."""
    data_dir = DataDir(tmp_path / "console")
    seed_settings(data_dir, {"enabled": True, "base_url": real_ha.base_url, "allowlisted_entities": ALLOWLIST},
                  token=real_ha.token)
    app = create_app(data_dir, {"TESTING": True, "CONSOLE_HA_LLM_URL": model.url,
                                "CONSOLE_HA_LLM_MODEL": "fake-model", "CONSOLE_HA_LLM_TIMEOUT": 5})
    return household_client(app, data_dir)


def set_temperature(real_ha: RealHomeAssistant, value: float) -> dict[str, Any]:
    """Drive the template sensor and wait until Home Assistant shows it; its state."""
    real_ha.call_service("input_number", "set_value", {"entity_id": SENSOR_INPUT, "value": value})
    deadline = time.monotonic() + PATIENCE  # patience for Home Assistant, not a bound
    while (state := real_ha.get(f"/api/states/{SENSOR}").json())["state"] != str(value):
        assert time.monotonic() < deadline, f"{SENSOR} is {state['state']}, expected {value}"
        time.sleep(0.05)
    return state


def tool_result(model: FakeModel) -> dict[str, Any]:
    """The capability result the model was sent in the last tool message."""
    message = model.requests[-1].last("tool")
    assert message is not None, "the model was never sent a tool message"
    return json.loads(message["content"])


def test_ask_approve_and_the_model_reads_the_real_state(
    real_ha: RealHomeAssistant, console: FlaskClient, model: FakeModel
) -> None:
    live = set_temperature(real_ha, 19.7)
    model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)

    paused = console.post(MESSAGE, json={"message": "How warm is the living room?"})

    assert paused.status_code == 200, paused.get_json()
    pending = paused.get_json()["pending_confirmation"]
    assert paused.get_json()["reply"] is None
    assert pending["capability"] == LIST_ENTITIES and pending["arguments"] == {}
    assert pending["card"]["title"] and pending["card"]["body"]
    assert len(model.requests) == 1  # nothing was read before the household said yes

    done = console.post(MESSAGE, json={"conversation_id": paused.get_json()["conversation_id"],
                                       "confirmation": {"token": pending["token"], "approve": True}})

    assert done.status_code == 200, done.get_json()
    entities = {e["entity_id"]: e for e in tool_result(model)["entities"]}
    assert list(entities) == ALLOWLIST
    assert entities[SENSOR]["state"] == "19.7"
    live_changed = datetime.fromisoformat(live["last_changed"]).astimezone(UTC).replace(microsecond=0)
    assert entities[SENSOR]["last_changed"] == live_changed.isoformat().replace("+00:00", "Z")
    front_door = real_ha.get("/api/states/binary_sensor.front_door").json()["state"]
    assert entities["binary_sensor.front_door"]["state"] == front_door
    assert done.get_json()["reply"].startswith("Living room temperature is 19.7 °C.")
    assert done.get_json()["pending_confirmation"] is None
    assert real_ha.token not in model.seen()


def test_ask_approve_and_the_model_reads_the_real_history(
    real_ha: RealHomeAssistant, console: FlaskClient, model: FakeModel
) -> None:
    since = datetime.now(UTC)
    for value in (18.2, 26.9, 21.3):
        set_temperature(real_ha, value)
    real_ha.wait_recorded(SENSOR, 4, since=since)
    arguments = {"entity_id": SENSOR, "period": "hour"}
    model.script(tool_call("home_assistant__get_history", arguments), answer_from_tool_result)

    paused = console.post(MESSAGE, json={"message": "How did the living room temperature change?"}).get_json()
    pending = paused["pending_confirmation"]
    assert pending["capability"] == GET_HISTORY and pending["arguments"] == arguments
    done = console.post(MESSAGE, json={"conversation_id": paused["conversation_id"],
                                       "confirmation": {"token": pending["token"], "approve": True}}).get_json()

    result = tool_result(model)
    assert (result["entity_id"], result["period"]) == (SENSOR, "hour")
    assert [c["state"] for c in result["changes"][-3:]] == ["18.2", "26.9", "21.3"]
    assert result["summary"]["kind"] == "numeric" and result["summary"]["last"] == 21.3
    assert result["summary"]["max"] >= 26.9 and result["summary"]["min"] <= 18.2
    assert f"changed {result['total_changes']} times over the past hour" in done["reply"]
    assert real_ha.token not in model.seen()
