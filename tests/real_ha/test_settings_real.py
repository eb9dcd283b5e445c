"""The settings API against a real Home Assistant 2025.4.4: connection test, wrong token, the entity picker."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import pytest
from flask.testing import FlaskClient

from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.real_ha.harness import HA_VERSION, LOCATION_NAME, UNAVAILABLE_ENTITY, RealHomeAssistant
from tests.web.conftest import household_client

pytestmark = pytest.mark.real_ha

API = "/api/v1/conversation/home-assistant"
WRONG_TOKEN = "not-a-token-home-assistant-issued"
ALLOWLIST = ["sensor.living_room_temperature", "binary_sensor.front_door", UNAVAILABLE_ENTITY]
AREAS_WAIT = 10.0


@pytest.fixture
def console(tmp_path: Path) -> FlaskClient:
    """The Console on a fresh data dir, driven as the household's settings page drives it (its session)."""
    data_dir = DataDir(tmp_path / "console")
    app = create_app(data_dir, {"TESTING": True})
    return household_client(app, data_dir)


def save(console: FlaskClient, **settings: Any) -> dict[str, Any]:
    response = console.post(API, json=settings)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def picker(console: FlaskClient) -> dict[str, Any]:
    """The picker's answer once the areas are in: the registries arrive over a WebSocket of their own,
    and a first answer may come without them while they are still on their way."""
    deadline = time.monotonic() + AREAS_WAIT
    while True:
        response = console.get(f"{API}/entities")
        assert response.status_code == 200, response.get_json()
        body = response.get_json()
        if body["areas_known"] or time.monotonic() >= deadline:
            return body
        time.sleep(0.2)


@pytest.mark.parametrize("stored", [False, True], ids=["given", "stored"])
def test_connection_test_reports_the_real_version_and_location(
    real_ha: RealHomeAssistant, console: FlaskClient, stored: bool
) -> None:
    credentials = {"base_url": real_ha.base_url, "access_token": real_ha.token}
    if stored:
        save(console, **credentials)

    response = console.post(f"{API}/test", json={} if stored else credentials)

    assert response.status_code == 200, response.get_json()
    body = response.get_json()
    assert (body["ok"], body["version"], body["location_name"]) == (True, HA_VERSION, LOCATION_NAME)
    assert real_ha.token not in response.get_data(as_text=True)


def test_connection_test_with_a_wrong_token_is_ha_unauthorized(
    real_ha: RealHomeAssistant, console: FlaskClient
) -> None:
    response = console.post(f"{API}/test", json={"base_url": real_ha.base_url, "access_token": WRONG_TOKEN})

    assert response.status_code == 502
    assert response.get_json()["error"]["code"] == "HA_UNAUTHORIZED"
    assert WRONG_TOKEN not in response.get_data(as_text=True)


def test_the_picker_with_a_wrong_stored_token_is_ha_unauthorized(
    real_ha: RealHomeAssistant, console: FlaskClient
) -> None:
    save(console, base_url=real_ha.base_url, access_token=WRONG_TOKEN)

    response = console.get(f"{API}/entities")

    assert response.status_code == 502
    assert response.get_json()["error"]["code"] == "HA_UNAUTHORIZED"


def test_the_picker_lists_every_real_entity_with_its_state_area_and_unavailable_flag(
    real_ha: RealHomeAssistant, console: FlaskClient
) -> None:
    save(console, base_url=real_ha.base_url, access_token=real_ha.token, allowlisted_entities=ALLOWLIST)

    body = picker(console)

    live = {state["entity_id"]: state for state in real_ha.get("/api/states").json()}
    listed = {entry["entity_id"]: entry for entry in body["entities"]}
    assert body["areas_known"] is True
    assert listed.keys() == live.keys()
    assert [entry["entity_id"] for entry in body["entities"]] == sorted(live)
    areas = {entity.entity_id: entity.area for entity in real_ha.entities}
    for entity_id, entry in listed.items():
        state = live[entity_id]["state"]
        assert entry["state"] == state, entity_id
        assert entry["unavailable"] is (state in ("unavailable", "unknown")), entity_id
        assert entry["friendly_name"] == live[entity_id]["attributes"].get("friendly_name", entity_id), entity_id
        assert entry["domain"] == entity_id.split(".")[0]
        assert entry["allowlisted"] is (entity_id in ALLOWLIST), entity_id
        # Areas come from the WebSocket registries; entities the harness did not place have none.
        assert entry["area"] == areas.get(entity_id), entity_id
    assert listed[UNAVAILABLE_ENTITY]["unavailable"] is True
    assert {entry["area"] for entry in listed.values()} >= {"Living Room", "Kitchen", "Hallway"}
    assert body["missing"] == []
