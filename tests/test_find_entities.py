"""home_assistant.find_entities: allowed entities only, best first, each with why; nothing found says what next."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.capabilities.entity_budget import json_size
from console_ha.capabilities.executor import Executor
from console_ha.capabilities.find_entities import (
    MAX_ANSWER_BYTES,
    MAX_MATCHES,
    NAME,
    NO_MATCH_HINT,
    find,
    fit,
    query_words,
)
from console_ha.errors import CapabilityError
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from tests.executors import configured
from tests.result_schemas import assert_matches_result_schema
from tests.stub_ha import StubHomeAssistant

AREAS = {"light.living_room": "Living Room", "sensor.living_room_temperature": "Living Room",
         "light.bedroom": "Chambre à coucher", "binary_sensor.kitchen_window": "Küche",
         "switch.coffee_machine": "Küche", "binary_sensor.front_door": "Hallway", "lock.front_door": "Hallway"}
EVERYTHING_BUT_THE_LOCK = [
    "sensor.living_room_temperature", "sensor.outdoor_humidity", "sensor.energy_consumption",
    "binary_sensor.front_door", "binary_sensor.kitchen_window", "binary_sensor.hallway_motion", "light.living_room",
    "light.bedroom", "switch.coffee_machine", "person.alex", "camera.driveway", "cover.garage_door",
    "climate.thermostat", "sensor.garden_soil_moisture", "sensor.washing_machine_status",
]


def search(executor: Executor, query: str) -> dict[str, Any]:
    proposal = executor.propose(NAME, {"query": query}, conversation_id="c")
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert_matches_result_schema(NAME, result)
    return result


@pytest.fixture
def household(data_dir: DataDir, stub_ha: StubHomeAssistant) -> Executor:
    stub_ha.serve_registries(AREAS)
    return configured(data_dir, stub_ha, EVERYTHING_BUT_THE_LOCK)


def ids(result: dict[str, Any]) -> list[str]:
    return [match["entity_id"] for match in result["matches"]]


def test_kitchen_lights_puts_what_matches_both_words_first(household: Executor) -> None:
    result = search(household, "Which lights are on in the living room?")
    assert ids(result)[:2] == ["light.living_room", "sensor.living_room_temperature"]
    best = result["matches"][0]
    assert best["why"] == {"lights": "friendly_name", "living": "friendly_name", "room": "friendly_name"}
    assert (best["friendly_name"], best["state"], best["area"]) == ("Living room light", "on", "Living Room")


def test_an_area_is_found_without_its_accents_or_case(household: Executor) -> None:
    result = search(household, "KUCHE")
    assert ids(result) == ["binary_sensor.kitchen_window", "switch.coffee_machine"]
    assert all(match["why"] == {"kuche": "area"} and match["area"] == "Küche" for match in result["matches"])
    assert ids(search(household, "chambre a coucher")) == ["light.bedroom"]


@pytest.mark.parametrize(("query", "first", "field"), [
    ("lamp", "light.living_room", "domain"),
    ("thermometer", "sensor.living_room_temperature", "domain"),
    ("door", "binary_sensor.front_door", "friendly_name"),
    ("garage", "cover.garage_door", "friendly_name"),
    ("thermostat", "climate.thermostat", "friendly_name"),
    ("coff", "switch.coffee_machine", "friendly_name"),
    ("ashing", "sensor.washing_machine_status", "friendly_name"),
])
def test_household_words_prefixes_and_substrings_find_the_device(household: Executor, query: str, first: str,
                                                                 field: str) -> None:
    match = search(household, query)["matches"][0]
    assert (match["entity_id"], match["why"]) == (first, {query: field})


def test_a_household_word_names_the_device_class_not_every_sensor(household: Executor) -> None:
    found = ids(search(household, "thermometer"))
    assert "sensor.outdoor_humidity" not in found and "sensor.energy_consumption" not in found
    assert ids(search(household, "window")) == ["binary_sensor.kitchen_window"]


def test_nothing_found_says_so_in_words_a_model_can_act_on(household: Executor) -> None:
    result = search(household, "spaceship")
    assert result["matches"] == [] and result["total"] == 0 and result["hint"] == NO_MATCH_HINT
    assert "list_entities" in result["hint"]


def test_an_entity_off_the_allowlist_is_never_found_even_by_its_exact_id(household: Executor,
                                                                         stub_ha: StubHomeAssistant) -> None:
    """The lock is in the Hallway with the door; searching for it by id, name or room never shows it."""
    for query in ("lock.front_door", "front door lock", "hallway", "lock"):
        assert "lock.front_door" not in json.dumps(search(household, query))


def test_a_camera_is_found_by_name_and_its_token_never_shows(household: Executor, stub_ha: StubHomeAssistant) -> None:
    camera = next(s for s in stub_ha.states if s["entity_id"] == "camera.driveway")
    result = search(household, "driveway camera")
    assert ids(result) == ["camera.driveway"]
    assert camera["attributes"]["access_token"] not in json.dumps(result) and "picture" not in json.dumps(result)


def test_without_the_registries_it_still_searches_names_with_areas_unknown(data_dir: DataDir,
                                                                           stub_ha: StubHomeAssistant) -> None:
    stub_ha.fault("404", "/api/websocket")
    result = search(configured(data_dir, stub_ha, EVERYTHING_BUT_THE_LOCK), "bedroom")
    assert ids(result) == ["light.bedroom"] and result["areas_known"] is False


def test_one_get_of_the_states_and_one_registry_round(household: Executor, stub_ha: StubHomeAssistant) -> None:
    search(household, "light")
    assert [r.path for r in stub_ha.requests] in (["/api/states", "/api/websocket"], ["/api/states"])


@pytest.mark.parametrize("query", ["", "   ", "x" * 201, 7, None])
def test_a_query_is_one_to_two_hundred_characters_of_text(household: Executor, query: Any) -> None:
    with pytest.raises(CapabilityError) as caught:
        household.propose(NAME, {"query": query}, conversation_id="c")
    assert caught.value.code == "INVALID_ARGUMENTS"


def test_query_words_leave_out_stop_words_repeats_and_long_runs() -> None:
    assert [w.text for w in query_words("Which LIGHTS are on in the Küche, the lights?")] == ["lights", "kuche"]
    assert [w.text for w in query_words("a" * 40 + " lamp")] == ["lamp"]
    assert len(query_words(" ".join(f"w{i}" for i in range(60)))) == 8


def _many(count: int, id_length: int) -> tuple[list[dict[str, Any]], HomeAssistantConfig]:
    entity_ids = [f"light.{str(i).zfill(id_length - 6)}" for i in range(count)]
    states = [{"entity_id": entity_id, "state": "on", "attributes": {"friendly_name": f"Lamp {i} " + "é" * 60}}
              for i, entity_id in enumerate(entity_ids)]
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123", allowlisted_entities=tuple(entity_ids))
    return states, config


def no_area(entity_id: str) -> str | None:
    return None


def test_at_most_twenty_best_first_and_total_counts_them_all() -> None:
    states, config = _many(50, 20)
    result = find(states, config, no_area, "lamp")
    assert len(result["matches"]) == MAX_MATCHES and result["total"] == 50
    assert ids(result) == list(config.allowlisted_entities[:MAX_MATCHES])  # equal scores: allowlist order


def test_long_ids_keep_the_answer_under_eight_kib_by_leaving_out_the_worst() -> None:
    states, config = _many(40, 255)
    result = fit({**find(states, config, no_area, "lamp light " + " ".join(f"lamp{i}" for i in range(6))),
                  "retrieved_at": "2026-01-01T00:00:00Z"})
    assert json_size(result) <= MAX_ANSWER_BYTES and 0 < len(result["matches"]) < MAX_MATCHES


# --- hypothesis: whatever the allowlist and the query, nothing outside the allowlist comes back ----------

ENTITY_IDS = [state["entity_id"] for state in StubHomeAssistant().states]
WORDS = ["light", "lamp", "door", "front", "kitchen", "küche", "living", "room", "thermometer", "camera",
         "lock", "alex", "driveway", "on", "off", "sensor", "hallway", "window", "token", "é", "_", "."]


@pytest.fixture(scope="module")
def shared_stub() -> Iterator[StubHomeAssistant]:
    with StubHomeAssistant() as stub:
        stub.serve_registries(AREAS)
        yield stub


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(allowlist=st.lists(st.sampled_from(ENTITY_IDS), min_size=1, unique=True),
       query=st.one_of(st.lists(st.sampled_from(WORDS + ENTITY_IDS), min_size=1, max_size=6).map(" ".join),
                       st.text(min_size=1, max_size=200).filter(str.strip)))
def test_no_answer_ever_holds_an_entity_outside_a_random_allowlist(
        allowlist: list[str], query: str, shared_stub: StubHomeAssistant, tmp_path_factory: pytest.TempPathFactory,
) -> None:
    executor = configured(DataDir(tmp_path_factory.mktemp("data")), shared_stub, allowlist)
    result = search(executor, query)
    assert set(ids(result)) <= set(allowlist)
    text = json.dumps(result, ensure_ascii=False)
    for entity_id in set(ENTITY_IDS) - set(allowlist):
        # Not named anywhere (an id that is part of an allowed one's, or the query's own words, aside).
        if not any(entity_id in allowed for allowed in allowlist) and entity_id not in query:
            assert entity_id not in text
    assert json_size(result) <= MAX_ANSWER_BYTES


def test_a_query_of_stop_words_or_punctuation_finds_nothing_and_says_what_next(household: Executor) -> None:
    for query in ("which are the", "___ ...", "?"):
        result = search(household, query)
        assert (result["matches"], result["hint"]) == ([], NO_MATCH_HINT)


def test_odd_states_from_home_assistant_are_searched_without_a_crash() -> None:
    states: list[dict[str, Any]] = [{"entity_id": "light.a", "state": 3, "attributes": None},
              {"entity_id": "light.b", "attributes": {"friendly_name": 7, "device_class": ["door"]}},
              {"entity_id": "sensor.c", "state": "x" * 5000, "attributes": {"friendly_name": "Lamp\u202e\x00 " * 400}},
              {"state": "on"}]
    config = HomeAssistantConfig(enabled=True, base_url="http://ha.local:8123",
                                 allowlisted_entities=("light.a", "light.b", "sensor.c"))
    result = find(states, config, no_area, "lamp light")
    assert ids(result) == ["light.a", "light.b", "sensor.c"]
    assert result["matches"][0]["state"] == "3" and result["matches"][1]["friendly_name"] == "light.b"
    assert all("\u202e" not in m["friendly_name"] and "\x00" not in m["friendly_name"] for m in result["matches"])


def test_the_card_names_the_words_without_control_characters_and_the_count(household: Executor) -> None:
    proposal = household.propose(NAME, {"query": "kitchen\u202e lights\n"}, conversation_id="card")
    assert "“kitchen lights”" in proposal.card.body and f"{len(EVERYTHING_BUT_THE_LOCK)} devices" in proposal.card.body
