"""One Console reading two real Home Assistants, a house (`home`) and a cabin, each through its own recording
proxy (issue 29, "Against two real Home Assistants").

Both are saved the way the household saves them (the settings save's one pass, per instance), and read through
the Console's own executor and kept clients (`Console.open`), so what crosses each wire is what a household's
Console sends. The cores are the session's (`real_ha`, `cabin_ha`): a test that stops one starts it again.
"""

from __future__ import annotations

import asyncio
import re
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import anyio
import pytest
from mcp import types

from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.get_state import NAME as GET_STATE
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.console import Console
from console_ha.errors import CapabilityError
from console_ha.settings.saving import save_settings
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import check_token
from console_ha.store.instances import Instances
from console_ha.web import create_app
from tests.mcp.conftest import FAST_HASH, PASSWORD, ServedConsole, log_in, mcp_session, serve, stop
from tests.mcp.test_mcp_http import error_of, household_answers, run
from tests.real_ha.harness import (
    CABIN_LIVING_ROOM_TEMPERATURE,
    CABIN_ONLY_ENTITY,
    CABIN_TEMPERATURE,
    RealHomeAssistant,
)
from tests.real_ha.wire import RecordingProxy
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings

pytestmark = pytest.mark.real_ha

CONVERSATION = "two-homes"
SHARED_ENTITY = "sensor.living_room_temperature"  # in both cores, another value in each
HOUSE_ONLY_ENTITY = "sensor.kitchen_temperature"
CABIN_DOOR = "binary_sensor.porch_door"
GET_STATE_TOOL = "home_assistant_get_state"
HOUSE_NAME = "Town house"
CABIN_NAME = "Cabin"
HOUSE_ALLOWED = [SHARED_ENTITY, HOUSE_ONLY_ENTITY]
CABIN_ALLOWED = [SHARED_ENTITY, CABIN_ONLY_ENTITY, CABIN_DOOR]
NO_READING = {"unknown", "unavailable"}


@dataclass(frozen=True)
class Site:
    """One of the two: its core and the proxy the Console reaches it through."""

    core: RealHomeAssistant
    wire: RecordingProxy


@dataclass(frozen=True)
class TwoHomes:
    """A Console with `home` = the house and `cabin` = the cabin, each behind its own recording proxy."""

    console: Console
    house: Site
    cabin: Site

    def read(self, capability: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
        """Propose, then the household's "yes": the result, checked against the capability's schema."""
        proposal = self.console.executor.propose(capability, arguments or {}, conversation_id=CONVERSATION)
        result = self.console.executor.answer(proposal.token, approve=True, conversation_id=CONVERSATION)
        assert_matches_result_schema(capability, result)
        return result

    def refusal(self, capability: str, arguments: dict[str, Any]) -> CapabilityError:
        """The error a proposal (or, once allowed, its read) ends with."""
        with pytest.raises(CapabilityError) as caught:
            self.read(capability, arguments)
        return caught.value

    def bytes_sent(self) -> int:
        """How many bytes the Console has sent to either Home Assistant so far."""
        return len(self.house.wire.sent_bytes()) + len(self.cabin.wire.sent_bytes())


def save_both(data_dir: DataDir, house: Site, cabin: Site) -> None:
    """Save both instances as the household would: each URL (its proxy's), token, name and allowlist."""
    seed_settings(data_dir, {"enabled": True, "base_url": house.wire.url, "name": HOUSE_NAME,
                             "allowlisted_entities": HOUSE_ALLOWED}, token=house.core.token)
    stores = Instances(data_dir).get("cabin")
    save_settings(stores.config, stores.token, {"enabled": True, "base_url": cabin.wire.url, "name": CABIN_NAME,
                                                "allowlisted_entities": CABIN_ALLOWED},
                  token=check_token(cabin.core.token))


@pytest.fixture
def house_and_cabin(data_dir: DataDir, real_ha: RealHomeAssistant, cabin_ha: RealHomeAssistant,
                    recording_proxy: Callable[[str], RecordingProxy], hidden_secrets: list[str]) -> TwoHomes:
    """The Console over both cores; the cabin's token joins the secrets no response or log line may hold."""
    hidden_secrets.append(cabin_ha.token)
    house = Site(real_ha, recording_proxy(real_ha.base_url))
    cabin = Site(cabin_ha, recording_proxy(cabin_ha.base_url))
    save_both(data_dir, house, cabin)
    return TwoHomes(Console.open(data_dir), house, cabin)


def live_state(core: RealHomeAssistant, entity_id: str) -> str:
    """The entity's state as the core itself says, straight from it (no proxy, no Console)."""
    response = core.get(f"/api/states/{entity_id}")
    response.raise_for_status()
    return str(response.json()["state"])


@pytest.fixture
def cabin_restarted(cabin_ha: RealHomeAssistant) -> Iterator[RealHomeAssistant]:
    """The cabin's core, started again (and RUNNING) after the test, whatever it did to it."""
    yield cabin_ha
    cabin_ha.start()


# --- 1. reads per instance ----------------------------------------------------------------------


@pytest.mark.parametrize("asked", [{}, {"instance": "home"}])
def test_a_read_naming_no_instance_or_home_reads_the_house(house_and_cabin: TwoHomes, asked: dict[str, str]) -> None:
    result = house_and_cabin.read(GET_STATE, {"entity_id": SHARED_ENTITY, **asked})

    assert result["instance"] == "home"
    assert result["state"] == live_state(house_and_cabin.house.core, SHARED_ENTITY) != CABIN_LIVING_ROOM_TEMPERATURE


def test_a_read_of_the_cabin_reads_the_cabins_own_value_of_the_shared_entity(house_and_cabin: TwoHomes) -> None:
    result = house_and_cabin.read(GET_STATE, {"entity_id": SHARED_ENTITY, "instance": "cabin"})

    assert (result["instance"], result["entity_id"], result["state"]) == (
        "cabin", SHARED_ENTITY, CABIN_LIVING_ROOM_TEMPERATURE)


@pytest.mark.parametrize(("asked", "instance", "allowlist"), [
    ({}, "home", HOUSE_ALLOWED),
    ({"instance": "home"}, "home", HOUSE_ALLOWED),
    ({"instance": "cabin"}, "cabin", CABIN_ALLOWED),
])
def test_list_entities_lists_each_instances_own_allowlist_with_its_own_states(
        house_and_cabin: TwoHomes, asked: dict[str, str], instance: str, allowlist: list[str]) -> None:
    result = house_and_cabin.read(LIST_ENTITIES, asked)

    core = house_and_cabin.cabin.core if instance == "cabin" else house_and_cabin.house.core
    assert result["instance"] == instance
    assert [entity["entity_id"] for entity in result["entities"]] == allowlist
    assert {entity["entity_id"]: entity["state"] for entity in result["entities"]} == {
        entity_id: live_state(core, entity_id) for entity_id in allowlist}


def test_the_cabins_list_holds_its_own_readings(house_and_cabin: TwoHomes) -> None:
    states = {entity["entity_id"]: entity["state"]
              for entity in house_and_cabin.read(LIST_ENTITIES, {"instance": "cabin"})["entities"]}

    assert (states[SHARED_ENTITY], states[CABIN_ONLY_ENTITY]) == (CABIN_LIVING_ROOM_TEMPERATURE, CABIN_TEMPERATURE)


def test_get_history_reads_each_instances_own_history_of_the_shared_entity(house_and_cabin: TwoHomes) -> None:
    house = house_and_cabin.read(GET_HISTORY, {"entity_id": SHARED_ENTITY, "period": "day"})
    cabin = house_and_cabin.read(GET_HISTORY, {"entity_id": SHARED_ENTITY, "period": "day", "instance": "cabin"})

    assert (house["instance"], cabin["instance"]) == ("home", "cabin")
    # Nothing drives the cabin's living room: its day holds one reading (and `unknown` while its core started).
    assert readings(cabin) == {CABIN_LIVING_ROOM_TEMPERATURE}
    assert live_state(house_and_cabin.house.core, SHARED_ENTITY) in readings(house)


def readings(history: dict[str, Any]) -> set[str]:
    """The states a get_history result holds (its first and every change), without `unknown` and `unavailable`."""
    states = {change["state"] for change in history["changes"]}
    if history["initial_state"] is not None:
        states.add(history["initial_state"]["state"])
    return states - NO_READING


# --- 2. each token only to its own origin, on the wire -------------------------------------------


def test_each_token_reaches_only_its_own_core_over_rest_and_websocket(house_and_cabin: TwoHomes) -> None:
    """After both instances' reads (REST states, and the WebSocket: history and the area registries)."""
    for asked in ({}, {"instance": "cabin"}):
        house_and_cabin.read(GET_STATE, {"entity_id": SHARED_ENTITY, **asked})
        house_and_cabin.read(LIST_ENTITIES, asked)
        house_and_cabin.read(GET_HISTORY, {"entity_id": SHARED_ENTITY, "period": "day", **asked})

    house, cabin = house_and_cabin.house, house_and_cabin.cabin
    assert house.core.token != cabin.core.token
    for site in (house, cabin):
        assert site.wire.saw(f"Authorization: Bearer {site.core.token}".encode())  # REST: a header
        assert site.wire.saw(f'"access_token":"{site.core.token}"'.encode())  # WebSocket: the auth message
    assert not house.wire.saw(cabin.core.token.encode())
    assert not cabin.wire.saw(house.core.token.encode())


# --- 3. allowlists kept apart ---------------------------------------------------------------------


@pytest.mark.parametrize(("entity_id", "asked"), [
    (CABIN_ONLY_ENTITY, {}),
    (CABIN_DOOR, {"instance": "home"}),
    (HOUSE_ONLY_ENTITY, {"instance": "cabin"}),
])
def test_an_entity_allowlisted_only_on_the_other_instance_is_not_allowlisted_here(
        house_and_cabin: TwoHomes, entity_id: str, asked: dict[str, str]) -> None:
    sent_before = house_and_cabin.bytes_sent()

    error = house_and_cabin.refusal(GET_STATE, {"entity_id": entity_id, **asked})

    assert error.code == "ENTITY_NOT_ALLOWLISTED"
    # Refused at stage 3, before any card: neither Home Assistant was asked anything.
    assert house_and_cabin.bytes_sent() == sent_before


def test_an_instance_that_is_not_configured_is_invalid_arguments_naming_the_ids(house_and_cabin: TwoHomes) -> None:
    error = house_and_cabin.refusal(GET_STATE, {"entity_id": SHARED_ENTITY, "instance": "workshop"})

    assert error.code == "INVALID_ARGUMENTS"
    assert "home, cabin" in error.message


# --- 4. cards and the audit naming the instance ---------------------------------------------------


def test_each_card_names_its_instance_and_each_audit_line_records_its_id(house_and_cabin: TwoHomes) -> None:
    executor = house_and_cabin.console.executor
    house_card = executor.propose(GET_STATE, {"entity_id": SHARED_ENTITY}, conversation_id=CONVERSATION)
    cabin_card = executor.propose(GET_STATE, {"entity_id": SHARED_ENTITY, "instance": "cabin"},
                                  conversation_id=CONVERSATION)
    executor.answer(house_card.token, approve=True, conversation_id=CONVERSATION)
    with pytest.raises(CapabilityError):
        executor.answer(cabin_card.token, approve=False, conversation_id=CONVERSATION)

    house_words, cabin_words = (f"{shown.card.title} {shown.card.body}" for shown in (house_card, cabin_card))
    assert HOUSE_NAME in house_words and CABIN_NAME not in house_words
    assert CABIN_NAME in cabin_words and HOUSE_NAME not in cabin_words
    events = [(line["event"], line.get("instance")) for line in house_and_cabin.console.audit.events()]
    assert events == [
        ("proposed", "home"), ("confirmation_requested", "home"),
        ("proposed", "cabin"), ("confirmation_requested", "cabin"),
        ("approved", "home"), ("executed", "home"),
        ("denied", "cabin"),
    ]


# --- 5. one instance down, the other answering ----------------------------------------------------


def test_a_cabin_that_is_down_fails_its_own_reads_while_the_house_keeps_answering(
        house_and_cabin: TwoHomes, cabin_restarted: RealHomeAssistant) -> None:
    house_and_cabin.read(GET_STATE, {"entity_id": SHARED_ENTITY, "instance": "cabin"})  # a kept connection, then down
    cabin_restarted.stop()

    for capability, arguments in ((GET_STATE, {"entity_id": SHARED_ENTITY}), (LIST_ENTITIES, {}),
                                  (GET_HISTORY, {"entity_id": SHARED_ENTITY, "period": "day"})):
        error = house_and_cabin.refusal(capability, {**arguments, "instance": "cabin"})
        assert error.code == "HA_UNREACHABLE", (capability, error.code)
        assert house_and_cabin.read(capability, arguments)["instance"] == "home"

    cabin_restarted.start()
    assert house_and_cabin.read(GET_STATE, {"entity_id": SHARED_ENTITY, "instance": "cabin"})["state"] == (
        CABIN_LIVING_ROOM_TEMPERATURE)
    failed = [line for line in house_and_cabin.console.audit.events() if line["event"] == "failed"]
    assert [(line["instance"], line["code"]) for line in failed] == [("cabin", "HA_UNREACHABLE")] * 3


def test_the_fixture_leaves_the_data_dir_with_two_instances(house_and_cabin: TwoHomes, data_dir: DataDir) -> None:
    """What the other tests stand on: both saved through the real save, named, each with its own token file."""
    instances = Instances(data_dir)
    assert instances.ids() == ("home", "cabin")
    assert instances.names() == {"home": HOUSE_NAME, "cabin": CABIN_NAME}
    assert Path(instances.get("cabin").files.token).is_file()


# --- 6. the same through MCP, with the official Python SDK ----------------------------------------


@pytest.fixture
def served(data_dir: DataDir, house_and_cabin: TwoHomes) -> Iterator[ServedConsole]:
    """The same data dir served as `console-ha serve` serves it (waitress on loopback), for MCP."""
    app = create_app(data_dir)
    server, thread, url = serve(app)
    try:
        yield ServedConsole(app, data_dir, url, server)
    finally:
        app.extensions["console_ha_mcp"].close()
        stop(server, thread)


def mcp_read(console: ServedConsole, arguments: dict[str, Any], *, approve: bool = True,
             ) -> tuple[list[dict[str, Any]], types.CallToolResult]:
    """One MCP program's get_state call: the card the household saw (if any) and the call's result."""
    secrets = ConsoleSecrets(console.data_dir)
    token = secrets.create_api_token("cabin-aware assistant")
    secrets.set_password(PASSWORD, method=FAST_HASH)
    household = log_in(console)

    async def scenario() -> tuple[list[dict[str, Any]], types.CallToolResult]:
        async with mcp_session(console.mcp_url, token) as session:
            call = asyncio.create_task(session.call_tool(GET_STATE_TOOL, arguments))
            cards: list[dict[str, Any]] = []
            while not call.done() and not cards:
                cards = (await anyio.to_thread.run_sync(
                    lambda: household.get(console.url + "/api/v1/confirmations", timeout=5))).json()["pending"]
                await asyncio.sleep(0.05)
            for card in cards:
                await household_answers(console, household, card["token"], approve)
            return cards, await asyncio.wait_for(call, 30)

    try:
        return run(scenario)
    finally:
        household.close()


@pytest.mark.parametrize(("asked", "instance", "name"), [
    ({}, "home", HOUSE_NAME),
    ({"instance": "cabin"}, "cabin", CABIN_NAME),
])
def test_an_mcp_program_reads_the_instance_it_names_after_a_card_naming_it(
        served: ServedConsole, house_and_cabin: TwoHomes, asked: dict[str, str], instance: str, name: str) -> None:
    cards, result = mcp_read(served, {"entity_id": SHARED_ENTITY, **asked})

    assert [name in f"{card['card']['title']} {card['card']['body']}" for card in cards] == [True]
    assert result.isError is False, result.structuredContent
    assert result.structuredContent is not None
    assert result.structuredContent["instance"] == instance
    core = house_and_cabin.cabin.core if instance == "cabin" else house_and_cabin.house.core
    assert result.structuredContent["state"] == live_state(core, SHARED_ENTITY)


def test_an_mcp_program_naming_an_instance_there_is_not_gets_invalid_arguments_and_no_card(
        served: ServedConsole) -> None:
    cards, result = mcp_read(served, {"entity_id": SHARED_ENTITY, "instance": "workshop"})

    assert cards == []
    error = error_of(result)
    assert error["code"] == "INVALID_ARGUMENTS" and "home, cabin" in error["message"]


def test_activity_names_the_instance_of_each_real_read_and_shows_one_instance_on_asking(
        served: ServedConsole, house_and_cabin: TwoHomes) -> None:
    """After a program read each Home Assistant, Activity's events say which by name, and its filter shows one."""
    for asked in ({}, {"instance": "cabin"}):
        mcp_read(served, {"entity_id": SHARED_ENTITY, **asked})
    household = log_in(served)
    try:
        every = household.get(served.url + "/activity", timeout=10).text
        cabin = household.get(served.url + "/activity?instance=cabin", timeout=10).text
    finally:
        household.close()

    assert events_by_instance(every) >= {("home", HOUSE_NAME), ("cabin", CABIN_NAME)}
    assert events_by_instance(cabin) == {("cabin", CABIN_NAME)}


def events_by_instance(html: str) -> set[tuple[str, str]]:
    """Each event's instance id (its data) and the name it shows, as Activity renders them."""
    return set(re.findall(
        r'<li class="event-card"[^>]*data-instance="(\w+)">.*?<dt>Home Assistant</dt><dd>([^<]*)</dd>', html, re.S))
