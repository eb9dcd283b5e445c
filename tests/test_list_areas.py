"""list_areas: each area holding allowlisted entities, how many and how many unavailable; nothing else told."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.capabilities.entity_budget import json_size
from console_ha.capabilities.list_areas import CAPABILITY, MAX_RESULT_BYTES, NAME, card, execute
from console_ha.capabilities.stages import validate
from console_ha.deadline import Deadline
from console_ha.errors import CapabilityError
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from tests.executors import executor_over
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant
from tests.test_list_entities_filters import ALLOWED, AREAS, DEVICES, PLACED, STUB_IDS

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)


def read(stub: StubHomeAssistant, allowed: list[str] = ALLOWED) -> dict[str, Any]:
    config = HomeAssistantConfig(enabled=True, base_url=stub.base_url, allowlisted_entities=tuple(allowed))
    with HomeAssistantClient(stub.base_url, Secret(stub.token), reads=CAPABILITY.reads) as client:
        result = execute(client, config, validate(CAPABILITY, {}), Deadline(8), NOW)
    assert_matches_result_schema(NAME, result)
    assert json_size(result) <= MAX_RESULT_BYTES
    return result


def test_each_area_with_allowlisted_entities_is_counted_fullest_first_and_no_area_last(
        rooms: StubHomeAssistant) -> None:
    assert read(rooms)["areas"] == [
        {"area": "Küche", "entities": 2, "unavailable": 0},
        {"area": "Living room", "entities": 2, "unavailable": 0},
        {"area": "Bedroom", "entities": 1, "unavailable": 0},
        # sensor.outdoor_humidity (no area) and sensor.garden_soil_moisture (not in the registry, unavailable)
        {"area": None, "entities": 2, "unavailable": 1},
    ]


def test_areas_holding_only_other_entities_are_never_named(rooms: StubHomeAssistant) -> None:
    text = repr(read(rooms))
    assert "Secret study" not in text and "Empty room" not in text and "lock" not in text


def test_no_area_line_only_when_some_allowlisted_entity_has_no_area(rooms: StubHomeAssistant) -> None:
    assert read(rooms, ["light.bedroom"])["areas"] == [{"area": "Bedroom", "entities": 1, "unavailable": 0}]
    assert read(rooms, [])["areas"] == []


def test_entities_home_assistant_lacks_are_not_counted(rooms: StubHomeAssistant) -> None:
    assert read(rooms, ["light.bedroom", "light.gone"])["areas"] == [
        {"area": "Bedroom", "entities": 1, "unavailable": 0}]


def test_without_the_registries_it_fails_with_its_code(stub_ha: StubHomeAssistant) -> None:
    with pytest.raises(CapabilityError) as caught:
        read(stub_ha)
    assert caught.value.code == "HA_BAD_RESPONSE"


def test_hundreds_of_long_named_areas_stay_under_8_kib_and_say_how_many_were_left_out(
        stub_ha: StubHomeAssistant) -> None:
    allowed = [f"sensor.s{i:03d}" for i in range(260)]
    stub_ha.states.extend({"entity_id": e, "state": "1", "attributes": {}} for e in allowed)
    stub_ha.registries = {
        "config/area_registry/list": [{"area_id": f"a{i}", "name": f"{'Ü' * 60} {i}"} for i in range(260)],
        "config/entity_registry/list": [{"entity_id": e, "area_id": f"a{i}"} for i, e in enumerate(allowed)],
        "config/device_registry/list": []}
    result = read(stub_ha, allowed)
    assert 0 < len(result["areas"]) < 260 and result["areas_left_out"] == 260 - len(result["areas"])
    assert all(line["area"].endswith("…") for line in result["areas"])


def test_a_full_allowlist_each_in_its_own_area_keeps_the_most_lines_that_fit_measuring_few_times(
        stub_ha: StubHomeAssistant, monkeypatch: pytest.MonkeyPatch) -> None:
    """2,000 areas (the largest allowlist, one entity each): lines were dropped one at a time, the whole result
    measured again each time (about 1,900 measures of up to 120 KB: 3 s of the 8 s bound, more under load)."""
    from console_ha.capabilities import list_areas
    allowed = [f"sensor.s{i:04d}" for i in range(2000)]
    stub_ha.states.extend({"entity_id": e, "state": "1", "attributes": {}} for e in allowed)
    stub_ha.registries = {
        "config/area_registry/list": [{"area_id": f"a{i}", "name": f"{'é' * 200} {i}"} for i in range(2000)],
        "config/entity_registry/list": [{"entity_id": e, "area_id": f"a{i}"} for i, e in enumerate(allowed)],
        "config/device_registry/list": []}
    measured: list[int] = []

    def counting(value: Any) -> int:
        measured.append(1)
        return json_size(value)
    monkeypatch.setattr(list_areas, "json_size", counting)
    result = read(stub_ha, allowed)
    kept = len(result["areas"])
    assert result["areas_left_out"] == 2000 - kept and json_size(result) <= MAX_RESULT_BYTES
    # The most that fit: one more line (the next area, as the result would name it) would not.
    one_more = {**result, "areas": [*result["areas"], dict(result["areas"][-1])], "areas_left_out": 2000 - kept - 1}
    assert json_size(one_more) > MAX_RESULT_BYTES
    assert len(measured) < 40


def test_a_few_long_names_are_cut_no_further_than_needed(stub_ha: StubHomeAssistant) -> None:
    stub_ha.registries = {
        "config/area_registry/list": [{"area_id": "a", "name": "The big living room downstairs by the garden door"}],
        "config/entity_registry/list": [{"entity_id": "light.bedroom", "area_id": "a"}],
        "config/device_registry/list": []}
    (line,) = read(stub_ha, ["light.bedroom"])["areas"]
    assert line["area"] == "The big living room downstairs by the garden …"  # 48 bytes, … included


def test_the_card_counts_the_allowed_devices_and_names_the_destination() -> None:
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123", allowlisted_entities=tuple(ALLOWED))
    body = card(config, {}).body
    assert f"the {len(ALLOWED)} devices you allowed" in body and "ha.local:8123" in body


def test_through_the_executor_it_is_confirmed_first(data_dir: DataDir, rooms: StubHomeAssistant) -> None:
    seed_settings(data_dir, {"enabled": True, "base_url": rooms.base_url, "allowlisted_entities": ALLOWED},
                  token=rooms.token)
    executor = executor_over(data_dir)
    proposal = executor.propose(NAME, {}, conversation_id="c")
    assert rooms.requests == []  # nothing read before the household allows it
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert [line["area"] for line in result["areas"]] == ["Küche", "Living room", "Bedroom", None]


@given(allowed=st.lists(st.sampled_from([*STUB_IDS, "sensor.gone"]), unique=True, max_size=12))
@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_answer_names_an_area_only_other_entities_are_in(rooms: StubHomeAssistant, allowed: list[str]) -> None:
    placed = {p["entity_id"]: p["area_id"] or next(d["area_id"] for d in DEVICES if d["id"] == p["device_id"])
              for p in PLACED if p["area_id"] or p["device_id"]}
    names = {a["area_id"]: a["name"] for a in AREAS}
    present = [e for e in allowed if e in STUB_IDS]
    result = read(rooms, allowed)
    assert {line["area"] for line in result["areas"]} - {None} == {names[placed[e]] for e in present if e in placed}
    assert sum(line["entities"] for line in result["areas"]) == len(present)


def test_the_declared_reads_are_the_states_and_the_three_registry_lists() -> None:
    assert CAPABILITY.reads == Reads(paths=("/api/states",), commands=(
        "config/area_registry/list", "config/entity_registry/list", "config/device_registry/list"))
