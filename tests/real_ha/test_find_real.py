"""Issue 18's get_state and find_entities against a real Home Assistant 2025.4.4, confirmed; and the tokens a
real camera and a real image entity carry in their attributes never reach a result, a page, a log or the audit."""

from __future__ import annotations

import json
import logging
from pathlib import Path

import pytest

from console_ha.capabilities.find_entities import NAME as FIND_ENTITIES
from console_ha.capabilities.get_state import HOUSEHOLD_ATTRIBUTES
from console_ha.capabilities.get_state import NAME as GET_STATE
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.executors import executor_over
from tests.real_ha.harness import RealHomeAssistant
from tests.real_ha.test_capabilities_real import make_executor, run
from tests.real_ha.test_settings_real import API, picker
from tests.web.conftest import household_client

pytestmark = pytest.mark.real_ha

CAMERA = "camera.driveway_camera"
IMAGE = "image.driveway_snapshot"
ALLOWLIST = ["sensor.living_room_temperature", "light.living_room_lamp", "sensor.kitchen_temperature",
             "binary_sensor.kitchen_window", "switch.coffee_machine", "binary_sensor.front_door", CAMERA, IMAGE]


def test_a_confirmed_get_state_gives_the_entity_its_area_and_household_attributes(
        real_ha: RealHomeAssistant, tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, ALLOWLIST)
    live = real_ha.get("/api/states/sensor.kitchen_temperature").json()
    result = run(executor, GET_STATE, {"entity_id": "sensor.kitchen_temperature"})
    assert (result["entity_id"], result["state"], result["area"]) == (
        "sensor.kitchen_temperature", live["state"], "Kitchen")
    assert result["unit_of_measurement"] == "°C"
    assert result["attributes"] == {"device_class": "temperature", "state_class": "measurement"}


def test_a_confirmed_find_entities_finds_the_kitchen_by_its_area_and_the_lamp_by_its_kind(
        real_ha: RealHomeAssistant, tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, ALLOWLIST)
    kitchen = run(executor, FIND_ENTITIES, {"query": "what is in the KITCHEN"})
    assert [m["entity_id"] for m in kitchen["matches"]][:3] == [
        "sensor.kitchen_temperature", "binary_sensor.kitchen_window", "switch.coffee_machine"]
    assert all(m["area"] == "Kitchen" for m in kitchen["matches"][:3])
    lamp = run(executor, FIND_ENTITIES, {"query": "lamp"})["matches"][0]
    assert (lamp["entity_id"], lamp["area"], lamp["why"]) == ("light.living_room_lamp", "Living Room",
                                                              {"lamp": "friendly_name"})
    thermometer = run(executor, FIND_ENTITIES, {"query": "thermometer"})
    assert [m["entity_id"] for m in thermometer["matches"]] == [
        "sensor.living_room_temperature", "sensor.kitchen_temperature"]
    assert {m["why"]["thermometer"] for m in thermometer["matches"]} == {"domain"}
    # The hallway's motion sensor is Home Assistant's, in the Hallway, and not allowed: never found.
    hallway = run(executor, FIND_ENTITIES, {"query": "hallway motion"})
    assert [m["entity_id"] for m in hallway["matches"]] == ["binary_sensor.front_door"]


def _secrets_of(real_ha: RealHomeAssistant) -> list[str]:
    """The access tokens and picture URLs Home Assistant shows for the camera and the image right now."""
    found = []
    for entity_id in (CAMERA, IMAGE):
        attributes = real_ha.get(f"/api/states/{entity_id}").json()["attributes"]
        token, picture = attributes["access_token"], attributes["entity_picture"]
        assert len(token) >= 32 and token in picture, "a camera-like entity carrying a token, as in the field"
        found += [token, picture]
    return found


def test_a_camera_s_and_an_image_s_token_never_reaches_a_result_page_log_or_audit(
        real_ha: RealHomeAssistant, tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    before = _secrets_of(real_ha)
    data_dir = DataDir(tmp_path / "console")
    console = household_client(create_app(data_dir, {"TESTING": True}), data_dir)
    saved = console.post(API, json={"enabled": True, "base_url": real_ha.base_url, "access_token": real_ha.token,
                                    "allowlisted_entities": ALLOWLIST})
    assert saved.status_code == 200, saved.get_json()
    seen: list[str] = [json.dumps(picker(console))]
    seen.append(console.get("/settings/home-assistant").get_data(as_text=True))
    seen.append(console.get("/settings/home-assistant?q=driveway").get_data(as_text=True))

    executor = executor_over(data_dir)
    results = []
    for capability, arguments in [(GET_STATE, {"entity_id": CAMERA}), (GET_STATE, {"entity_id": IMAGE}),
                                  (FIND_ENTITIES, {"query": "driveway camera snapshot picture token"})]:
        proposal = executor.propose(capability, arguments, conversation_id="tokens")
        seen.append(json.dumps(proposal.to_dict()))
        results.append(executor.answer(proposal.token, approve=True, conversation_id="tokens"))
    seen += [json.dumps(result) for result in results]
    seen.append(console.get("/activity").get_data(as_text=True))

    camera, image, found = results
    assert (camera["entity_id"], camera["attributes"], image["entity_id"], image["attributes"]) == (
        CAMERA, {}, IMAGE, {})
    assert {m["entity_id"] for m in found["matches"]} == {CAMERA, IMAGE}
    assert "camera" not in HOUSEHOLD_ATTRIBUTES and "image" not in HOUSEHOLD_ATTRIBUTES

    audit = data_dir.audit_log.read_text(encoding="utf-8")
    logs = "\n".join(record.getMessage() for record in caplog.records)
    secrets = before + _secrets_of(real_ha)  # Home Assistant may have turned a token over meanwhile
    for where, text in [*((f"answer {i}", t) for i, t in enumerate(seen)), ("audit", audit), ("log", logs)]:
        for secret in secrets:
            assert secret not in text, f"a camera-like entity's token reached the {where}"
    # Not even the attributes' names: in a result or the audit (a settings page has an access_token field).
    for text in [*(json.dumps(result) for result in results), audit]:
        assert "entity_picture" not in text and "access_token" not in text
    assert audit.count('"executed"') == len(results)

