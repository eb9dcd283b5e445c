"""home_assistant.get_state: one allowed entity, its area and only the household attributes of its domain."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from console_ha.capabilities.executor import Executor
from console_ha.capabilities.get_state import HOUSEHOLD_ATTRIBUTES, MAX_ATTRIBUTE_CHARS, NAME, household_attributes
from console_ha.errors import CapabilityError
from console_ha.store.datadir import DataDir
from tests.executors import configured
from tests.result_schemas import assert_matches_result_schema
from tests.stub_ha import StubHomeAssistant

DOCS = Path(__file__).resolve().parent.parent / "docs" / "capabilities.md"


def read(executor: Executor, entity_id: str) -> dict[str, Any]:
    proposal = executor.propose(NAME, {"entity_id": entity_id}, conversation_id="c")
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert_matches_result_schema(NAME, result)
    return result


def test_a_thermostat_answers_how_warm_and_what_it_is_doing(data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    stub_ha.serve_registries({"climate.thermostat": "Living Room", "light.bedroom": "Bedroom"})
    executor = configured(data_dir, stub_ha, ["climate.thermostat"])
    result = read(executor, "climate.thermostat")
    assert result["entity_id"] == "climate.thermostat" and result["state"] == "heat"
    assert result["area"] == "Living Room" and "areas_known" not in result
    assert result["attributes"] == {"current_temperature": 21.4, "temperature": 21.5, "hvac_action": "heating"}
    assert "hvac_modes" not in json.dumps(result) and "supported_features" not in json.dumps(result)
    # One GET of the entity's state, and the registries over the WebSocket.
    assert [r.path for r in stub_ha.requests if r.path != "/api/websocket"] == ["/api/states/climate.thermostat"]


def test_without_the_registries_the_state_still_comes_with_areas_unknown(data_dir: DataDir,
                                                                         stub_ha: StubHomeAssistant) -> None:
    stub_ha.fault("404", "/api/websocket")
    result = read(configured(data_dir, stub_ha, ["light.living_room"]), "light.living_room")
    assert (result["area"], result["areas_known"]) == (None, False)
    assert result["attributes"] == {"brightness": 180, "color_mode": "brightness"}


def test_a_camera_gives_its_state_and_never_its_picture_or_token(data_dir: DataDir,
                                                                 stub_ha: StubHomeAssistant) -> None:
    camera = next(s for s in stub_ha.states if s["entity_id"] == "camera.driveway")
    executor = configured(data_dir, stub_ha, ["camera.driveway"])
    result = read(executor, "camera.driveway")
    assert result["state"] == "idle" and result["attributes"] == {}
    text = json.dumps(result)
    assert camera["attributes"]["access_token"] not in text
    assert "entity_picture" not in text and "camera_proxy" not in text and "token" not in text


def test_a_person_is_home_or_away_and_never_where(data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    result = read(configured(data_dir, stub_ha, ["person.alex"]), "person.alex")
    assert result["state"] == "home" and result["attributes"] == {}
    assert "52.37" not in json.dumps(result)


def test_an_entity_home_assistant_lacks_is_not_found(data_dir: DataDir, stub_ha: StubHomeAssistant) -> None:
    executor = configured(data_dir, stub_ha, ["sensor.attic"])
    proposal = executor.propose(NAME, {"entity_id": "sensor.attic"}, conversation_id="c")
    with pytest.raises(CapabilityError) as caught:
        executor.answer(proposal.token, approve=True, conversation_id="c")
    assert (caught.value.code, caught.value.stage) == ("HA_NOT_FOUND", 5)


@pytest.mark.parametrize(("domain", "attributes", "kept"), [
    ("light", {"brightness": 180, "color_temp_kelvin": 2700, "entity_picture": "/local/x.png",
               "rgb_color": [255, 0, 0]}, {"brightness": 180, "color_temp_kelvin": 2700}),
    ("cover", {"current_position": 40, "device_class": "blind"}, {"current_position": 40, "device_class": "blind"}),
    ("media_player", {"media_title": "Blue in Green", "volume_level": 0.35,
                      "entity_picture": "/api/media_player_proxy/media_player.tv?token=abc&cache=1",
                      "media_image_url": "http://cdn.example/cover.jpg"},
     {"media_title": "Blue in Green", "volume_level": 0.35}),
    ("weather", {"temperature": 8.5, "humidity": 80, "forecast": [{"t": 1}], "attribution": "x"},
     {"temperature": 8.5, "humidity": 80}),
    ("sensor", {"device_class": "temperature", "state_class": "measurement", "unit_of_measurement": "°C",
                "friendly_name": "T"}, {"device_class": "temperature", "state_class": "measurement"}),
], ids=["light", "cover", "media_player", "weather", "sensor"])
def test_only_listed_keys_of_the_domain_are_kept(domain: str, attributes: dict[str, Any],
                                                 kept: dict[str, Any]) -> None:
    assert household_attributes({"entity_id": f"{domain}.x", "state": "on", "attributes": attributes}) == kept


@pytest.mark.parametrize("value", [
    "http://192.168.1.5/stream.m3u8", "rtsp://cam.local/live", "/api/camera_proxy/camera.x?token=1",
    "song?token=abc", "Bearer-token-abc", "data:image/png;base64,AAAA", "x" * (MAX_ATTRIBUTE_CHARS + 1),
    "safe\u202etext", "line\nbreak", "", None, [1, 2], {"a": 1}, float("nan"), float("inf"), 2**60,
    # Links without a scheme (these came through): credentials, a host and its path, an address and port.
    "admin:hunter2@192.168.1.20/live", "admin:hunter2@cam", "192.168.1.20:8554/live", "cam.local/stream",
    "10.0.0.7/live",
], ids=lambda v: repr(v)[:20])
def test_a_listed_key_whose_value_is_a_link_a_blob_or_odd_is_dropped(value: object) -> None:
    state = {"entity_id": "media_player.tv", "state": "playing", "attributes": {"media_title": value}}
    assert household_attributes(state) == {}


@pytest.mark.parametrize(("key", "value"), [
    ("media_title", "AC/DC"), ("media_title", "Track 1/12"), ("media_title", "Rated 3.5/5"),
    ("media_title", "Mr. Brightside"), ("media_artist", "Sigur Rós"), ("source", "HDMI 1"),
])
def test_titles_that_merely_hold_a_slash_or_a_dot_are_kept(key: str, value: str) -> None:
    state = {"entity_id": "media_player.tv", "state": "playing", "attributes": {key: value}}
    assert household_attributes(state) == {key: value}


def test_versions_times_and_durations_are_kept() -> None:
    assert household_attributes({"entity_id": "update.core", "attributes": {
        "installed_version": "2025.4.4", "latest_version": "1.0.0.25"}}) == {
        "installed_version": "2025.4.4", "latest_version": "1.0.0.25"}
    assert household_attributes({"entity_id": "timer.tea", "attributes": {
        "duration": "0:10:00", "finishes_at": "2026-12-02T07:00:00+00:00"}}) == {
        "duration": "0:10:00", "finishes_at": "2026-12-02T07:00:00+00:00"}


def test_a_domain_without_a_list_gives_no_attributes() -> None:
    state = {"entity_id": "camera.x", "state": "idle", "attributes": {"brightness": 3, "device_class": "x"}}
    assert household_attributes(state) == {}
    assert household_attributes({"entity_id": "light.x", "attributes": "not a mapping"}) == {}


@settings(max_examples=200, deadline=None)
@given(domain=st.sampled_from([*HOUSEHOLD_ATTRIBUTES, "camera", "image", "person", "lock"]),
       attributes=st.dictionaries(st.text(max_size=20), st.one_of(
           st.none(), st.booleans(), st.integers(), st.floats(), st.text(max_size=80),
           st.lists(st.integers(), max_size=3)), max_size=12))
def test_whatever_home_assistant_sends_only_listed_plain_values_come_back(domain: str,
                                                                          attributes: dict[str, Any]) -> None:
    kept = household_attributes({"entity_id": f"{domain}.x", "attributes": attributes})
    assert set(kept) <= set(HOUSEHOLD_ATTRIBUTES.get(domain, ()))
    for key, value in kept.items():
        assert value is attributes[key] or value == attributes[key]
        assert isinstance(value, bool | int | float | str)
        if isinstance(value, str):
            assert len(value) <= MAX_ATTRIBUTE_CHARS and "://" not in value and "token" not in value.lower()


def documented_table() -> dict[str, tuple[str, ...]]:
    """The attribute table as docs/capabilities.md writes it: `| domain | key, key |` between its markers."""
    text = DOCS.read_text(encoding="utf-8")
    section = text.split("<!-- get_state attributes: begin -->", 1)[1].split("<!-- get_state attributes: end -->", 1)[0]
    table: dict[str, tuple[str, ...]] = {}
    for line in section.splitlines():
        cells = [cell.strip() for cell in line.strip().strip("|").split("|")]
        if len(cells) == 2 and re.fullmatch(r"`[a-z_]+`", cells[0]):
            table[cells[0].strip("`")] = tuple(key.strip().strip("`") for key in cells[1].split(","))
    return table


def test_the_documented_attribute_table_is_the_code_s() -> None:
    assert documented_table() == HOUSEHOLD_ATTRIBUTES
