"""The harness runs a real Home Assistant 2025.4.4 that answers as the tests expect."""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from ipaddress import IPv4Address
from pathlib import Path

import pytest

from tests.real_ha.harness import (
    HA_VERSION,
    LOCATION_NAME,
    UNAVAILABLE_ENTITY,
    AuthInvalid,
    HomeAssistantStartError,
    RealHomeAssistant,
    distinct_series,
)

pytestmark = pytest.mark.real_ha

LOADED_ENTITY = "sensor.kitchen_temperature"


def test_config_reports_version_and_location_with_the_minted_token(real_ha: RealHomeAssistant) -> None:
    response = real_ha.get("/api/config")

    assert response.status_code == 200
    config = response.json()
    assert config["version"] == HA_VERSION
    assert config["location_name"] == LOCATION_NAME
    assert config["state"] == "RUNNING"


def test_states_list_every_configured_entity(real_ha: RealHomeAssistant) -> None:
    states = {state["entity_id"]: state for state in real_ha.get("/api/states").json()}

    assert {entity.entity_id for entity in real_ha.entities} <= states.keys()
    temperature = states["sensor.living_room_temperature"]["attributes"]
    assert temperature["device_class"] == "temperature"
    assert temperature["unit_of_measurement"] == "°C"


def test_entities_are_assigned_to_their_areas(real_ha: RealHomeAssistant) -> None:
    with real_ha.websocket() as ws:
        registry = {entry["entity_id"]: entry for entry in ws.command("config/entity_registry/list")}
        area_names = {area["area_id"]: area["name"] for area in ws.command("config/area_registry/list")}

    for entity in real_ha.entities:
        area_id = registry[entity.entity_id]["area_id"]
        assert (area_names.get(area_id) if area_id else None) == entity.area, entity.entity_id


def test_home_assistant_listens_and_talks_on_loopback_only(real_ha: RealHomeAssistant) -> None:
    sockets = real_ha.sockets()

    endpoint = (IPv4Address("127.0.0.1"), real_ha.port)
    assert any(sock.listening and sock.local == endpoint for sock in sockets)
    for sock in sockets:
        remote_ip, _ = sock.remote
        assert remote_ip.is_loopback or remote_ip.is_unspecified, sock
        if sock.listening:
            assert sock.local[0].is_loopback, sock


def test_template_with_false_availability_is_unavailable(real_ha: RealHomeAssistant) -> None:
    response = real_ha.get(f"/api/states/{UNAVAILABLE_ENTITY}")

    assert response.json()["state"] == "unavailable"


@pytest.mark.parametrize("path", ["/api/", "/api/states", "/api/config", "/api/history/period"])
@pytest.mark.parametrize("token", ["wrong-token", ""], ids=["wrong", "missing"])
def test_a_wrong_or_missing_token_gets_401(real_ha: RealHomeAssistant, path: str, token: str) -> None:
    assert real_ha.get(path, token=token).status_code == 401


def test_a_wrong_token_is_refused_on_the_websocket(real_ha: RealHomeAssistant) -> None:
    with pytest.raises(AuthInvalid):
        with real_ha.websocket("wrong-token"):
            pass


def test_set_value_drives_the_template_sensor_and_history_records_it(real_ha: RealHomeAssistant) -> None:
    entity_id = "sensor.living_room_temperature"
    since = datetime.now(UTC) - timedelta(seconds=1)
    before = len(real_ha.history(entity_id, since, datetime.now(UTC), significant_changes_only=False))

    real_ha.call_service(
        "input_number",
        "set_value",
        {"entity_id": "input_number.living_room_temperature_input", "value": 23.4},
    )

    assert real_ha.get(f"/api/states/{entity_id}").json()["state"] == "23.4"
    rows = real_ha.wait_recorded(entity_id, before + 1, since=since, timeout=10)
    assert rows[-1]["state"] == "23.4"


def test_set_state_creates_a_state_only_entity(real_ha: RealHomeAssistant) -> None:
    real_ha.set_state("sensor.harness_probe", "7", {"unit_of_measurement": "W"})

    state = real_ha.get("/api/states/sensor.harness_probe").json()
    assert (state["state"], state["attributes"]["unit_of_measurement"]) == ("7", "W")


def test_stop_then_start_keeps_config_token_and_areas(real_ha: RealHomeAssistant) -> None:
    real_ha.stop()
    try:
        assert not real_ha.running
        with pytest.raises(OSError):
            real_ha.get("/api/", timeout=2)
    finally:
        real_ha.start()

    assert real_ha.get("/api/config").json()["state"] == "RUNNING"
    with real_ha.websocket() as ws:
        registry = {entry["entity_id"]: entry for entry in ws.command("config/entity_registry/list")}
    assert registry["sensor.living_room_temperature"]["area_id"] == real_ha.area_ids["Living Room"]


@pytest.fixture(scope="module")
def loaded_history(real_ha: RealHomeAssistant) -> list[tuple[float, str]]:
    """10,000 distinct rows for sensor.kitchen_temperature, loaded into the recorder while stopped."""
    # They end before this session began, so no row Home Assistant records itself falls among them.
    end = time.time() - 2 * 3600
    values = distinct_series(10_000, end - 3600, end)
    real_ha.stop()
    try:
        assert real_ha.load_history(LOADED_ENTITY, values) == len(values)
    finally:
        real_ha.start()
    return values


def _ts(iso: str) -> float:
    return datetime.fromisoformat(iso).timestamp()


def test_loaded_history_reads_back_through_the_history_api(
    real_ha: RealHomeAssistant, loaded_history: list[tuple[float, str]]
) -> None:
    rows = real_ha.history(
        LOADED_ENTITY,
        datetime.fromtimestamp(loaded_history[0][0] - 1, UTC),
        datetime.fromtimestamp(loaded_history[-1][0] + 1, UTC),
        minimal_response=True,
        no_attributes=True,
    )

    assert len(rows) == len(loaded_history)
    assert [row["state"] for row in rows] == [state for _, state in loaded_history]
    assert _ts(rows[0]["last_changed"]) == pytest.approx(loaded_history[0][0], abs=1e-3)
    assert _ts(rows[-1]["last_changed"]) == pytest.approx(loaded_history[-1][0], abs=1e-3)


@pytest.mark.parametrize("minimal_response", [False, True], ids=["full", "minimal"])
def test_history_first_row_is_the_state_at_window_start_clamped_to_it(
    real_ha: RealHomeAssistant, loaded_history: list[tuple[float, str]], minimal_response: bool
) -> None:
    """The row before the window comes first, its last_changed and last_updated set to the start."""
    start = (loaded_history[99][0] + loaded_history[100][0]) / 2
    end = loaded_history[199][0] + 0.001

    rows = real_ha.history(
        LOADED_ENTITY,
        datetime.fromtimestamp(start, UTC),
        datetime.fromtimestamp(end, UTC),
        minimal_response=minimal_response,
    )

    first = rows[0]
    assert set(first) == {"entity_id", "state", "attributes", "last_changed", "last_updated"}
    assert first["state"] == loaded_history[99][1]
    assert first["attributes"]["unit_of_measurement"] == "°C"
    assert _ts(first["last_changed"]) == pytest.approx(start, abs=1e-5)
    assert _ts(first["last_updated"]) == pytest.approx(start, abs=1e-5)
    assert [row["state"] for row in rows[1:]] == [state for _, state in loaded_history[100:200]]
    later_keys = {"state", "last_changed"} if minimal_response else set(first)
    assert all(set(row) == later_keys for row in rows[1:])


def _fake_hass(tmp_path: Path, body: str) -> Path:
    script = tmp_path / "hass"
    script.write_text(f"#!/bin/sh\n{body}\n", encoding="utf-8")
    script.chmod(0o755)
    return script


def test_a_hass_that_exits_raises_with_the_last_40_log_lines(tmp_path: Path) -> None:
    hass = _fake_hass(tmp_path, 'for i in $(seq 1 60); do echo "boot line $i"; done; exit 3')
    instance = RealHomeAssistant(hass, tmp_path / "config")

    with pytest.raises(HomeAssistantStartError, match=r"exited \(code 3\)") as info:
        instance.start(timeout=10)

    lines = str(info.value).splitlines()
    assert "boot line 60" in lines and "boot line 21" in lines
    assert "boot line 20" not in lines


def test_a_hass_that_never_serves_is_stopped_and_raises_within_the_bound(tmp_path: Path) -> None:
    hass = _fake_hass(tmp_path, 'echo "stuck in bootstrap"; exec sleep 60')
    instance = RealHomeAssistant(hass, tmp_path / "config")

    # The fake sleeps a minute: "timed out" (not "exited") is the harness's own bound giving up on it.
    with pytest.raises(HomeAssistantStartError, match="timed out") as info:
        instance.start(timeout=1.5)

    assert "stuck in bootstrap" in str(info.value)
    assert not instance.running
