"""Issue 18's rooms against a real Home Assistant 2025.4.4: list_entities by area, and list_areas, confirmed."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from console_ha.capabilities.list_areas import NAME as LIST_AREAS
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from tests.real_ha.harness import UNAVAILABLE_ENTITY, RealHomeAssistant
from tests.real_ha.test_capabilities_real import make_executor, run

pytestmark = pytest.mark.real_ha

# Set up here through Home Assistant's own WebSocket config commands, and taken away afterwards: an area
# whose name has an accent and an alias, holding one entity.
DINING = "Salle à manger"
DINING_ENTITY = "input_select.house_mode"
KITCHEN = ["sensor.kitchen_temperature", "binary_sensor.kitchen_window", "switch.coffee_machine"]
LIVING = ["sensor.living_room_temperature", "light.living_room_lamp"]
# Kitchen and living-room entities, the dining one, and two in no area (one of them unavailable). Nothing of
# the hallway: its entities stay off the allowlist.
ALLOWLIST = [*KITCHEN, *LIVING, DINING_ENTITY, UNAVAILABLE_ENTITY, "timer.laundry"]


@pytest.fixture(scope="module")
def dining_room(real_ha: RealHomeAssistant) -> Iterator[str]:
    with real_ha.websocket() as ws:
        area = ws.command("config/area_registry/create", name=DINING, aliases=["Dining"])
        ws.command("config/entity_registry/update", entity_id=DINING_ENTITY, area_id=area["area_id"])
    # No areas kept from other tests' reads: these executors' clients are made per read, by no Console.
    try:
        yield area["area_id"]
    finally:
        with real_ha.websocket() as ws:
            ws.command("config/entity_registry/update", entity_id=DINING_ENTITY, area_id=None)
            ws.command("config/area_registry/delete", area_id=area["area_id"])


def test_a_confirmed_list_entities_by_area_answers_that_rooms_allowlisted_entities(
        real_ha: RealHomeAssistant, dining_room: str, tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, ALLOWLIST)
    proposal = executor.propose(LIST_ENTITIES, {"area": "KITCHEN"}, conversation_id="rooms")
    assert "in the area “KITCHEN”" in proposal.card.body and real_ha.base_url.split("//")[1] in proposal.card.body
    result = executor.answer(proposal.token, approve=True, conversation_id="rooms")
    assert [e["entity_id"] for e in result["entities"]] == KITCHEN
    assert {e["area"] for e in result["entities"]} == {"Kitchen"} and result["total"] == len(KITCHEN)


def test_once_the_rooms_were_read_a_card_names_exactly_the_room_s_devices(
        real_ha: RealHomeAssistant, dining_room: str, tmp_path: Path) -> None:
    """Issue 25: the card of a kitchen read names the kitchen's allowed devices, and no device of another room."""
    executor = make_executor(tmp_path, real_ha, ALLOWLIST)
    run(executor, LIST_ENTITIES, {"area": "Kitchen"})  # one registry round, held for the cards after it
    proposal = executor.propose(LIST_ENTITIES, {"area": "kitchen", "domain": "sensor"}, conversation_id="rooms")
    result = executor.answer(proposal.token, approve=True, conversation_id="rooms")
    assert [e["entity_id"] for e in result["entities"]] == ["sensor.kitchen_temperature"]
    assert proposal.card.body.startswith("The assistant wants to read the current state of 1 of the devices you "
                                         "allowed: Kitchen temperature.")
    assert "“Sensors (temperature, energy, humidity…)”" in proposal.card.body
    assert "Living room" not in proposal.card.body and "Kitchen window" not in proposal.card.body


@pytest.mark.parametrize("area", ["salle a manger", "SALLE À MANGER", "dining", "Dining"])
def test_an_area_is_found_by_name_without_accents_or_by_alias(
        real_ha: RealHomeAssistant, dining_room: str, tmp_path: Path, area: str) -> None:
    result = run(make_executor(tmp_path, real_ha, ALLOWLIST), LIST_ENTITIES, {"area": area})
    assert [(e["entity_id"], e["area"]) for e in result["entities"]] == [(DINING_ENTITY, DINING)]


def test_an_area_by_its_id_with_a_domain_and_a_limit(
        real_ha: RealHomeAssistant, dining_room: str, tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, ALLOWLIST)
    by_id = run(executor, LIST_ENTITIES, {"area": real_ha.area_ids["Living Room"], "domain": "light"})
    assert [e["entity_id"] for e in by_id["entities"]] == ["light.living_room_lamp"]
    limited = run(executor, LIST_ENTITIES, {"limit": 2})
    assert len(limited["entities"]) == 2 and limited["total"] == len(ALLOWLIST)


@pytest.mark.parametrize("area", ["Hallway", "Bedroom", "Attic"])
def test_a_room_without_allowlisted_entities_answers_as_one_that_does_not_exist(
        real_ha: RealHomeAssistant, dining_room: str, tmp_path: Path, area: str) -> None:
    """The hallway holds entities off the allowlist, onboarding made an empty bedroom, and there is no attic."""
    result = run(make_executor(tmp_path, real_ha, ALLOWLIST), LIST_ENTITIES, {"area": area})
    assert (result["entities"], result["missing_entities"], result["total"]) == ([], [], 0)


def test_with_no_arguments_each_entity_carries_its_real_area(
        real_ha: RealHomeAssistant, dining_room: str, tmp_path: Path) -> None:
    result = run(make_executor(tmp_path, real_ha, ALLOWLIST), LIST_ENTITIES)
    areas = {e["entity_id"]: e["area"] for e in result["entities"]}
    assert areas == {**dict.fromkeys(KITCHEN, "Kitchen"), **dict.fromkeys(LIVING, "Living Room"),
                     DINING_ENTITY: DINING, UNAVAILABLE_ENTITY: None, "timer.laundry": None}
    assert "areas_known" not in result and result["total"] == len(ALLOWLIST)


def test_a_confirmed_list_areas_counts_allowlisted_entities_per_room_and_names_no_other_room(
        real_ha: RealHomeAssistant, dining_room: str, tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, ALLOWLIST)
    proposal = executor.propose(LIST_AREAS, {}, conversation_id="rooms")
    assert f"the {len(ALLOWLIST)} devices you allowed" in proposal.card.body
    result = executor.answer(proposal.token, approve=True, conversation_id="rooms")
    assert result["areas"] == [
        {"area": "Kitchen", "entities": 3, "unavailable": 0},
        {"area": "Living Room", "entities": 2, "unavailable": 0},
        {"area": DINING, "entities": 1, "unavailable": 0},
        {"area": None, "entities": 2, "unavailable": 1},
    ]
    assert "Hallway" not in repr(result) and "Bedroom" not in repr(result)
