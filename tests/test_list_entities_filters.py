"""list_entities' filters (domain, area, name, limit), each entity's area and `total`, over real HTTP to the stub."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.capabilities.executor import Executor
from console_ha.capabilities.list_entities import CAPABILITY, NAME, card, execute
from console_ha.capabilities.stages import validate
from console_ha.deadline import Deadline
from console_ha.errors import CapabilityError
from console_ha.ha.areas import REGISTRY_COMMANDS, AreaIndexCache
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from tests.executors import executor_over
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

NOW = datetime(2026, 12, 1, 12, 0, tzinfo=UTC)
# The stub's entities in rooms: some by their own area, some through their device, a room no allowlist below
# reaches (the study: only the lock is in it), and entities in no room at all.
AREAS: list[dict[str, Any]] = [
    {"area_id": "kitchen", "name": "Küche", "aliases": ["Cooking corner"]},
    {"area_id": "living_room", "name": "Living room", "aliases": ["Lounge"]},
    {"area_id": "bedroom", "name": "Bedroom", "aliases": []},
    {"area_id": "study", "name": "Secret study", "aliases": ["Hideout"]},
    {"area_id": "empty_room", "name": "Empty room", "aliases": []},
]
DEVICES: list[dict[str, Any]] = [{"id": "dev_lounge", "area_id": "living_room"},
                                 {"id": "dev_kitchen", "area_id": "kitchen"}]
PLACED: list[dict[str, Any]] = [
    {"entity_id": "sensor.living_room_temperature", "area_id": None, "device_id": "dev_lounge"},
    {"entity_id": "light.living_room", "area_id": None, "device_id": "dev_lounge"},
    # its own area wins over its device's
    {"entity_id": "binary_sensor.kitchen_window", "area_id": "kitchen", "device_id": "dev_lounge"},
    {"entity_id": "switch.coffee_machine", "area_id": None, "device_id": "dev_kitchen"},
    {"entity_id": "light.bedroom", "area_id": "bedroom", "device_id": None},
    {"entity_id": "lock.front_door", "area_id": "study", "device_id": None},
    {"entity_id": "sensor.outdoor_humidity", "area_id": None, "device_id": None},
]
ALLOWED = ["sensor.living_room_temperature", "light.living_room", "binary_sensor.kitchen_window",
           "switch.coffee_machine", "light.bedroom", "sensor.outdoor_humidity", "sensor.garden_soil_moisture"]


def place_entities(stub: StubHomeAssistant) -> None:
    stub.registries = {"config/area_registry/list": AREAS, "config/entity_registry/list": PLACED,
                       "config/device_registry/list": DEVICES}


def read(stub: StubHomeAssistant, arguments: dict[str, Any], allowed: list[str] = ALLOWED,
         area_indexes: AreaIndexCache | None = None) -> dict[str, Any]:
    """list_entities' execute through a client that may read what it declares, and nothing else (and keeps
    its areas in `area_indexes`, as a Console's client keeps them in the Console's)."""
    config = HomeAssistantConfig(enabled=True, base_url=stub.base_url, allowlisted_entities=tuple(allowed))
    with HomeAssistantClient(stub.base_url, Secret(stub.token), reads=CAPABILITY.reads,
                             area_indexes=area_indexes) as client:
        result = execute(client, config, validate(CAPABILITY, arguments), Deadline(8), NOW)
    assert_matches_result_schema(NAME, result)
    return result


def ids(result: dict[str, Any]) -> list[str]:
    return [e["entity_id"] for e in result["entities"]]


def test_no_arguments_is_every_allowlisted_entity_with_its_area_and_the_total(rooms: StubHomeAssistant) -> None:
    result = read(rooms, {})
    assert ids(result) == ALLOWED
    assert {e["entity_id"]: e["area"] for e in result["entities"]} == {
        "sensor.living_room_temperature": "Living room", "light.living_room": "Living room",
        "binary_sensor.kitchen_window": "Küche", "switch.coffee_machine": "Küche", "light.bedroom": "Bedroom",
        "sensor.outdoor_humidity": None, "sensor.garden_soil_moisture": None}
    assert result["total"] == len(ALLOWED) and "areas_known" not in result


@pytest.mark.parametrize("area", ["Küche", "kuche", "KÜCHE", "kitchen", "Cooking corner", " cooking  CORNER "])
def test_an_area_is_matched_by_name_id_or_alias_ignoring_case_and_accents(rooms: StubHomeAssistant, area: str) -> None:
    assert ids(read(rooms, {"area": area})) == ["binary_sensor.kitchen_window", "switch.coffee_machine"]


def test_an_area_filter_keeps_entities_placed_through_their_device(rooms: StubHomeAssistant) -> None:
    assert ids(read(rooms, {"area": "lounge"})) == ["sensor.living_room_temperature", "light.living_room"]


@pytest.mark.parametrize("area", ["Secret study", "hideout", "study", "Empty room", "No such room", "Küch"])
def test_an_area_without_allowlisted_entities_answers_exactly_as_one_that_does_not_exist(
        rooms: StubHomeAssistant, area: str) -> None:
    """An area holding only entities outside the allowlist, an empty one, a made-up one: the same empty answer."""
    result = read(rooms, {"area": area})
    assert {k: v for k, v in result.items() if k != "retrieved_at"} == {
        "entities": [], "missing_entities": [], "total": 0}


@pytest.mark.parametrize(("domain", "expected"), [
    ("light", ["light.living_room", "light.bedroom"]), ("LIGHT", ["light.living_room", "light.bedroom"]),
    ("lock", []), ("vacuum", []), ("ligh", [])])
def test_a_domain_keeps_that_domain_only(rooms: StubHomeAssistant, domain: str, expected: list[str]) -> None:
    result = read(rooms, {"domain": domain})
    assert ids(result) == expected and result["total"] == len(expected)


@pytest.mark.parametrize(("name", "expected"), [
    ("living room", ["sensor.living_room_temperature", "light.living_room"]),
    ("LIVING_ROOM", []),  # words, not the id's underscores: the name's spaces and the id read as words
    ("Température", ["sensor.living_room_temperature"]),
    ("coffee", ["switch.coffee_machine"]),
    ("garden", ["sensor.garden_soil_moisture"]),
    ("front door", []),  # the lock is not allowlisted
])
def test_a_name_is_a_case_and_accent_blind_substring_of_the_name_or_id(
        rooms: StubHomeAssistant, name: str, expected: list[str]) -> None:
    assert ids(read(rooms, {"name": name})) == expected


@pytest.mark.parametrize("name", ["\u0301", "\u0301\u0308 \u0327"])
def test_a_name_that_folds_to_nothing_matches_nothing_rather_than_everything(
        rooms: StubHomeAssistant, name: str) -> None:
    """Combining marks alone pass the schema's "not only spaces" and fold to "", which every name contains."""
    result = read(rooms, {"name": name})
    assert ids(result) == [] and result["total"] == 0


def test_filters_combine_and_limit_cuts_after_total_is_counted(rooms: StubHomeAssistant) -> None:
    result = read(rooms, {"domain": "light", "area": "living room"})
    assert ids(result) == ["light.living_room"]
    limited = read(rooms, {"limit": 2})
    assert ids(limited) == ALLOWED[:2] and limited["total"] == len(ALLOWED)


def test_missing_entities_follow_the_filters(rooms: StubHomeAssistant) -> None:
    allowed = [*ALLOWED, "light.gone_from_ha", "sensor.gone_too"]
    assert read(rooms, {}, allowed)["missing_entities"] == ["light.gone_from_ha", "sensor.gone_too"]
    assert read(rooms, {"domain": "light"}, allowed)["missing_entities"] == ["light.gone_from_ha"]
    assert read(rooms, {"area": "Küche"}, allowed)["missing_entities"] == []


def test_without_the_registries_an_unfiltered_read_answers_and_says_areas_are_unknown(
        stub_ha: StubHomeAssistant) -> None:
    result = read(stub_ha, {})  # this stub has no WebSocket, as behind a proxy that does not pass one
    assert ids(result) == ALLOWED and {e["area"] for e in result["entities"]} == {None}
    assert result["areas_known"] is False


def test_without_the_registries_an_area_filter_fails_with_its_code(stub_ha: StubHomeAssistant) -> None:
    with pytest.raises(CapabilityError) as caught:
        read(stub_ha, {"area": "Küche"})
    assert caught.value.code == "HA_BAD_RESPONSE"


def test_one_registry_round_serves_reads_in_a_row(rooms: StubHomeAssistant) -> None:
    kept = AreaIndexCache()  # a Console's
    read(rooms, {}, area_indexes=kept)
    read(rooms, {"area": "kitchen"}, area_indexes=kept)
    read(rooms, {"domain": "light"}, area_indexes=kept)
    assert len(rooms.requests_to("/api/websocket")) == 1
    assert len(rooms.requests_to("/api/states")) == 3


@pytest.mark.parametrize("arguments", [
    {"limit": 0}, {"limit": 501}, {"limit": "5"}, {"limit": 2.5}, {"area": ""}, {"area": "x" * 101},
    {"domain": ""}, {"name": 3}, {"room": "kitchen"}, {"name": "   "}, {"area": "\t"}, {"domain": " "},
    {"limit": True}])
def test_out_of_bounds_arguments_are_refused_at_stage_2(arguments: dict[str, Any]) -> None:
    with pytest.raises(CapabilityError) as caught:
        validate(CAPABILITY, arguments)
    assert (caught.value.code, caught.value.stage) == ("INVALID_ARGUMENTS", 2)


def test_the_card_says_the_filters_in_plain_words() -> None:
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123", allowlisted_entities=tuple(ALLOWED))
    plain = card(config, {}).body
    assert plain.startswith(f"The assistant wants to read the current state of all {len(ALLOWED)} devices you allowed")
    body = card(config, {"area": "Küche", "domain": "light", "name": "living", "limit": 5}).body
    assert "in the area “Küche”" in body and "It asked for those of the kind “Lights”." in body
    assert "It asked for those whose name contains “living”." in body and "It asked for at most 5." in body
    assert "ha.local:8123" in body


def test_the_card_drops_controls_and_bidi_overrides_from_the_models_words() -> None:
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123", allowlisted_entities=tuple(ALLOWED))
    body = card(config, {"area": "Kitchen\u202e\n\x00moor"}).body
    assert "“Kitchenmoor”" in body and "\u202e" not in body


def test_through_the_executor_the_read_is_confirmed_and_audited_without_values(
        data_dir: DataDir, rooms: StubHomeAssistant) -> None:
    seed_settings(data_dir, {"enabled": True, "base_url": rooms.base_url, "allowlisted_entities": ALLOWED},
                  token=rooms.token)
    executor: Executor = executor_over(data_dir)
    proposal = executor.propose(NAME, {"area": "Küche", "limit": 1}, conversation_id="c")
    assert "in the area “Küche”" in proposal.card.body
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert ids(result) == ["binary_sensor.kitchen_window"] and result["total"] == 2
    audit = data_dir.audit_log.read_text(encoding="utf-8")
    assert NAME in audit and '"event":"proposed"' in audit
    # The audit has no field for arguments, entities or states: nothing of the filter or the answer is there.
    assert all(word not in audit for word in ("Küche", "kitchen", "Kitchen window", "area"))


def test_a_whole_limit_written_as_a_float_reads_that_many(data_dir: DataDir, rooms: StubHomeAssistant) -> None:
    """JSON Schema's "integer" takes 2.0: it passed stage 2, then slicing by it was INTERNAL_ERROR."""
    seed_settings(data_dir, {"enabled": True, "base_url": rooms.base_url, "allowlisted_entities": ALLOWED},
                  token=rooms.token)
    executor: Executor = executor_over(data_dir)
    proposal = executor.propose(NAME, {"limit": 2.0}, conversation_id="c")
    assert "It asked for at most 2." in proposal.card.body and "2.0" not in proposal.card.body
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert ids(result) == ALLOWED[:2] and result["total"] == len(ALLOWED)


# --- hypothesis: whatever the allowlist and the filters, nothing outside the allowlist is told ------------

STUB_IDS = [s["entity_id"] for s in StubHomeAssistant().states]
WORDS = st.sampled_from(["Küche", "kitchen", "lounge", "Living room", "Secret study", "hideout", "study",
                         "bedroom", "Empty room", "nowhere", "front", "door", "light", "lock", "a", "é", "LOCK"])


@pytest.fixture(scope="module")
def module_rooms() -> Iterator[StubHomeAssistant]:
    with StubHomeAssistant() as stub:
        place_entities(stub)
        yield stub


@given(allowed=st.lists(st.sampled_from([*STUB_IDS, "sensor.gone", "light.gone"]), unique=True, max_size=12),
       domain=st.none() | st.sampled_from(["light", "lock", "sensor", "binary_sensor", "camera", "Light"]),
       area=st.none() | WORDS, name=st.none() | WORDS, limit=st.none() | st.integers(1, 500))
@settings(max_examples=120, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
def test_no_answer_holds_an_entity_or_an_area_outside_the_allowlist(
        module_rooms: StubHomeAssistant, allowed: list[str], domain: str | None, area: str | None,
        name: str | None, limit: int | None) -> None:
    arguments = {k: v for k, v in {"domain": domain, "area": area, "name": name, "limit": limit}.items()
                 if v is not None}
    result = read(module_rooms, arguments, allowed)
    placed = {p["entity_id"]: p["area_id"] or next(d["area_id"] for d in DEVICES if d["id"] == p["device_id"])
              for p in PLACED if p["area_id"] or p["device_id"]}
    names = {a["area_id"]: a["name"] for a in AREAS}
    allowed_areas = {names[placed[e]] for e in allowed if e in placed}
    assert set(ids(result)) <= set(allowed) and set(result["missing_entities"]) <= set(allowed)
    assert {e["area"] for e in result["entities"]} - {None} <= allowed_areas
    assert result["total"] >= len(result["entities"]) and len(result["entities"]) <= (limit or 500)
    # Nothing of the study (only the lock is in it) unless the lock is allowed.
    text = repr(result)
    if "lock.front_door" not in allowed:
        assert "Secret study" not in text and "lock.front_door" not in text


def test_the_declared_reads_are_the_states_and_the_three_registry_lists() -> None:
    assert CAPABILITY.reads == Reads(paths=("/api/states",), commands=REGISTRY_COMMANDS)


def test_a_name_is_matched_as_the_household_saved_it_as_the_card_names_it(rooms: StubHomeAssistant) -> None:
    """The card is written before anything is read: a name Home Assistant gave since the save is not matched."""
    rooms.set_state("light.living_room", "on", {"friendly_name": "Reading lamp"})
    assert ids(read(rooms, {"name": "reading lamp"})) == []
    assert ids(read(rooms, {"name": "living room"})) == ["sensor.living_room_temperature", "light.living_room"]
