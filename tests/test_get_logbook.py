"""home_assistant.get_logbook against a stub Home Assistant: causes named only through the allowlist, 50 entries.

The entries are shaped as Home Assistant 2025.4.4 sends them (seen against the real one; see
tests/real_ha/test_logbook_real.py, which drives the same causes through a real core).
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.capabilities import get_logbook
from console_ha.capabilities.entity_budget import json_size
from console_ha.capabilities.get_logbook import MAX_ENTRIES, NAME
from console_ha.deadline import Deadline
from console_ha.errors import HABadResponse, HANotFound
from console_ha.ha.logbook import logbook_command
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from tests.executors import executor_over
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

NOW = datetime.now(UTC).replace(microsecond=0)
LIGHT = "light.hall"
OWNER_USER = "dffbfe593ca3463fb0ec678015f90636"
GUEST_USER = "0a1b2c3d4e5f46778899aabbccddeeff"


def when(seconds_ago: float) -> float:
    return (NOW - timedelta(seconds=seconds_ago)).timestamp()


# The causes as Home Assistant 2025.4.4 writes them into an entry of the asked entity.
BY_OWNER_SERVICE = {"context_user_id": OWNER_USER, "context_domain": "light", "context_service": "turn_on",
                    "context_event_type": "call_service"}
BY_AUTOMATION = {"context_event_type": "automation_triggered", "context_domain": "automation",
                 "context_name": "Night hall light",
                 "context_message": "triggered by state of binary_sensor.secret_motion",
                 "context_source": "state of binary_sensor.secret_motion",
                 "context_entity_id": "automation.night_hall_light"}
BY_SCRIPT = {"context_user_id": GUEST_USER, "context_domain": "script", "context_service": "hall_light_off",
             "context_event_type": "call_service"}
BY_STATE_WRITE = {"context_user_id": GUEST_USER}
BY_INTEGRATION = {"context_domain": "light", "context_service": "turn_off", "context_event_type": "call_service"}


def state_entry(state: str, seconds_ago: float, cause: dict[str, Any], entity_id: str = LIGHT) -> dict[str, Any]:
    return {"state": state, "entity_id": entity_id, "when": when(seconds_ago), **cause}


def person(entity_id: str, name: str, user_id: str) -> dict[str, Any]:
    return {"entity_id": entity_id, "state": "home", "attributes": {"friendly_name": name, "user_id": user_id,
                                                                     "id": entity_id.split(".")[1]}}


def config_for(stub: StubHomeAssistant, allowed: list[str]) -> HomeAssistantConfig:
    return HomeAssistantConfig(enabled=True, base_url=stub.base_url, allowlisted_entities=tuple(allowed))


def read(stub: StubHomeAssistant, allowed: list[str], period: str = "day",
         entity_id: str = LIGHT) -> dict[str, Any]:
    with HomeAssistantClient(stub.base_url, Secret(stub.token), reads=get_logbook.CAPABILITY.reads) as client:
        result = get_logbook.execute(client, config_for(stub, allowed), {"entity_id": entity_id, "period": period},
                                     Deadline(10), NOW)
    assert_matches_result_schema(NAME, result)
    return result


@pytest.fixture
def hall(stub_ha: StubHomeAssistant) -> StubHomeAssistant:
    """A stub with the hall light, its owner and a guest as people, and a night of logbook entries."""
    stub_ha.set_state(LIGHT, "on", {"friendly_name": "Hall light"})
    stub_ha.states += [person("person.owner", "Olga", OWNER_USER), person("person.guest", "Gus", GUEST_USER)]
    stub_ha.serve_logbook({LIGHT: [
        state_entry("on", 5000, BY_OWNER_SERVICE),
        state_entry("off", 4000, BY_INTEGRATION),
        state_entry("on", 3000, BY_AUTOMATION),
        state_entry("off", 2000, BY_SCRIPT),
        state_entry("on", 1000, BY_STATE_WRITE),
        state_entry("off", 500, {}),
    ]})
    return stub_ha


def causes(result: dict[str, Any]) -> list[dict[str, str]]:
    return [entry["cause"] for entry in result["entries"]]


def test_each_cause_is_named_when_its_entity_is_allowlisted(hall: StubHomeAssistant) -> None:
    result = read(hall, [LIGHT, "person.owner", "person.guest", "automation.night_hall_light",
                         "script.hall_light_off"])
    assert [entry["state"] for entry in result["entries"]] == ["on", "off", "on", "off", "on", "off"]
    assert causes(result) == [
        {"kind": "person", "name": "Olga"},
        {"kind": "service"},
        {"kind": "automation", "name": "Night hall light"},
        {"kind": "script", "name": "Hall light off"},
        {"kind": "person", "name": "Gus"},
        {"kind": "unknown"},
    ]
    assert result["total"] == 6 and result["truncated"] is False
    assert result["friendly_name"] == "Hall light"
    assert result["entries"][0]["when"] == datetime.fromtimestamp(when(5000), UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


def test_only_the_kind_is_given_when_the_cause_is_not_allowlisted(hall: StubHomeAssistant) -> None:
    result = read(hall, [LIGHT])
    assert causes(result) == [{"kind": "person"}, {"kind": "service"}, {"kind": "automation"},
                              {"kind": "script"}, {"kind": "person"}, {"kind": "unknown"}]
    text = json.dumps(result)
    for secret in ("Olga", "Gus", "Night hall light", "night_hall_light", "secret_motion", "hall_light_off",
                   OWNER_USER, GUEST_USER):
        assert secret not in text
    # No person's state was read: none is allowlisted.
    assert not hall.requests_to("/api/states/person.")


def test_people_are_learned_from_the_allowlisted_person_entities_only(hall: StubHomeAssistant) -> None:
    result = read(hall, [LIGHT, "person.guest"])
    assert causes(result)[0] == {"kind": "person"}  # the owner's person entity is not allowlisted
    assert causes(result)[4] == {"kind": "person", "name": "Gus"}
    assert [r.path for r in hall.requests_to("/api/states/")] == [f"/api/states/{LIGHT}", "/api/states/person.guest"]


def test_an_allowlisted_person_gone_from_home_assistant_is_no_one(hall: StubHomeAssistant) -> None:
    result = read(hall, [LIGHT, "person.ghost", "person.guest"])
    assert causes(result)[4] == {"kind": "person", "name": "Gus"}


def test_a_logbook_message_is_never_passed_on(stub_ha: StubHomeAssistant) -> None:
    """Home Assistant's message can name any entity ("triggered by state of ..."): a fixed word replaces it."""
    automation = "automation.night_hall_light"
    stub_ha.set_state(automation, "on", {"friendly_name": "Night hall light"})
    stub_ha.serve_logbook({automation: [
        {"name": "Night hall light", "message": "triggered by state of binary_sensor.secret_motion",
         "source": "state of binary_sensor.secret_motion", "entity_id": automation, "context_id": "01M8",
         "domain": "automation", "when": when(60)},
        {"name": "Custom", "message": "Gus pressed the vault button", "domain": "vault", "entity_id": automation,
         "when": when(30)},
    ]})
    result = read(stub_ha, [automation], period="hour", entity_id=automation)
    assert [entry.get("message") for entry in result["entries"]] == ["triggered", "logged"]
    assert "secret_motion" not in json.dumps(result) and "vault" not in json.dumps(result)


def test_entries_about_another_entity_are_left_out(stub_ha: StubHomeAssistant) -> None:
    stub_ha.set_state(LIGHT, "on")
    stub_ha.serve_logbook({LIGHT: [state_entry("on", 60, {}),
                                   state_entry("on", 50, {}, entity_id="lock.secret_safe")]})
    result = read(stub_ha, [LIGHT], period="hour")
    assert result["total"] == 1 and "secret_safe" not in json.dumps(result)


def test_a_week_of_entries_is_spread_like_history_with_the_first_and_last(stub_ha: StubHomeAssistant) -> None:
    stub_ha.set_state(LIGHT, "on")
    week = timedelta(weeks=1).total_seconds()
    # Bunched: most entries in the last day, a few over the rest of the week.
    ages = [week - 10 - i * 3600 * 12 for i in range(13)] + [86_000 - i * 40 for i in range(2000)]
    stub_ha.serve_logbook({LIGHT: [state_entry("on" if i % 2 else "off", age, {}) for i, age in enumerate(ages)]})
    result = read(stub_ha, [LIGHT], period="week")
    entries = result["entries"]
    assert len(entries) == MAX_ENTRIES and result["total"] == len(ages) and result["truncated"] is True
    stamp = "%Y-%m-%dT%H:%M:%SZ"
    assert entries[0]["when"] == datetime.fromtimestamp(when(ages[0]), UTC).strftime(stamp)
    assert entries[-1]["when"] == datetime.fromtimestamp(when(ages[-1]), UTC).strftime(stamp)
    assert [e["when"] for e in entries] == sorted(e["when"] for e in entries)
    # The quiet days are not crowded out by the busy one: each of the early entries has its own bucket.
    early = [e for e in entries if e["when"] < datetime.fromtimestamp(when(86_400), UTC).strftime(stamp)]
    assert len(early) >= 10


def test_an_entry_stamped_at_the_start_of_the_period_is_an_entry(stub_ha: StubHomeAssistant) -> None:
    stub_ha.set_state(LIGHT, "on")
    stub_ha.serve_logbook({LIGHT: [state_entry("off", 3600, {}), state_entry("on", 10, {})]})
    result = read(stub_ha, [LIGHT], period="hour")
    assert [e["state"] for e in result["entries"]] == ["off", "on"] and result["total"] == 2


def test_fifty_long_entries_stay_within_the_result_bound(stub_ha: StubHomeAssistant) -> None:
    stub_ha.set_state("input_text.note", "x")
    name = "N" * 1000
    stub_ha.states.append(person("person.owner", name, OWNER_USER))
    stub_ha.serve_logbook({"input_text.note": [
        state_entry("é" * 1000 + str(i), 3000 - i, BY_OWNER_SERVICE, entity_id="input_text.note")
        for i in range(400)]})
    result = read(stub_ha, ["input_text.note", "person.owner"], entity_id="input_text.note")
    assert json_size(result) <= get_logbook.CAPABILITY.bounds.max_result_bytes
    # Each text within its cap (json_size counts the two quotes too), and cut, not dropped.
    assert max(json_size(e["state"]) for e in result["entries"]) <= get_logbook.STATE_BYTES + 2
    assert all(e["state"].endswith("…") for e in result["entries"])
    assert max(json_size(e["cause"]["name"]) for e in result["entries"]) <= get_logbook.NAME_BYTES + 2


def test_an_empty_logbook_is_an_empty_answer(stub_ha: StubHomeAssistant) -> None:
    """A measuring sensor keeps no logbook: Home Assistant answers an empty list."""
    stub_ha.set_state(LIGHT, "on")
    stub_ha.serve_logbook({})
    result = read(stub_ha, [LIGHT])
    assert result["entries"] == [] and result["total"] == 0 and result["truncated"] is False


def test_the_command_asks_for_one_entity_and_its_window() -> None:
    start = NOW - timedelta(hours=1)
    assert logbook_command(LIGHT, start=start, end=NOW) == {
        "type": "logbook/get_events", "start_time": start.isoformat().replace("+00:00", "Z"),
        "end_time": NOW.isoformat().replace("+00:00", "Z"), "entity_ids": [LIGHT]}
    with pytest.raises(ValueError):
        logbook_command("light.hall\n", start=start, end=NOW)


@pytest.mark.parametrize("entries", [
    [{"state": "on", "entity_id": LIGHT, "when": "yesterday"}],
    [{"state": "on", "entity_id": LIGHT}],
    [{"state": "on", "entity_id": LIGHT, "when": when(-3600)}],  # after the window it asked for
    [{"state": "on", "entity_id": LIGHT, "when": when(30)}, {"state": "off", "entity_id": LIGHT, "when": when(60)}],
    [["not", "an", "entry"]],
    ["text"],
    [{"state": "on", "entity_id": LIGHT, "when": True}],
    [{"state": "on", "entity_id": LIGHT, "when": when(30), "extra": [[[[["nested too deep"]]]]]}],
])
def test_an_answer_that_is_not_a_logbook_is_refused(stub_ha: StubHomeAssistant, entries: list[Any]) -> None:
    stub_ha.set_state(LIGHT, "on")
    stub_ha.serve_logbook({LIGHT: []})
    stub_ha.logbook_entries = lambda message: entries  # type: ignore[method-assign]
    with pytest.raises(HABadResponse) as caught:
        read(stub_ha, [LIGHT], period="hour")
    assert caught.value.code == "HA_BAD_RESPONSE"


def test_a_value_an_integration_nests_in_an_entry_is_passed_over(stub_ha: StubHomeAssistant) -> None:
    stub_ha.set_state(LIGHT, "on")
    stub_ha.serve_logbook({LIGHT: [{**state_entry("on", 30, {}), "extra": {"note": ["person.secret"]}}]})
    result = read(stub_ha, [LIGHT], period="hour")
    assert result["entries"] == [{"when": result["entries"][0]["when"], "state": "on", "cause": {"kind": "unknown"}}]


def test_a_home_assistant_without_the_logbook_is_a_bad_response(stub_ha: StubHomeAssistant) -> None:
    stub_ha.set_state(LIGHT, "on")
    stub_ha.serve_registries()  # a WebSocket, but no logbook command on it
    with pytest.raises(HABadResponse):
        read(stub_ha, [LIGHT])


def test_an_entity_home_assistant_lacks_is_not_found(stub_ha: StubHomeAssistant) -> None:
    stub_ha.serve_logbook({})
    with pytest.raises(HANotFound):
        read(stub_ha, ["light.gone"], entity_id="light.gone")


# --- nothing outside the allowlist, whatever the allowlist ---------------------------------------------

# Every entity here has a distinctive id and name, so any trace of one in an answer can be found.
PEOPLE = {f"person.p{i}": (f"Personname{i}", f"{i:032x}") for i in range(4)}
AUTOMATIONS = {f"automation.a{i}": f"Automationname{i}" for i in range(3)}
SCRIPTS = {f"script.s{i}": f"Scriptname{i}" for i in range(3)}
OTHERS = {f"binary_sensor.o{i}": f"Othername{i}" for i in range(3)}
UNIVERSE = [*PEOPLE, *AUTOMATIONS, *SCRIPTS, *OTHERS]


def _cause(draw: st.DrawFn) -> dict[str, Any]:
    kind = draw(st.sampled_from(["user", "automation", "script_service", "script_started", "service", "state",
                                 "none"]))
    user = draw(st.sampled_from([user for _, user in PEOPLE.values()] + ["f" * 32]))
    other = draw(st.sampled_from(list(OTHERS)))
    if kind == "user":
        return {"context_user_id": user, "context_domain": "light", "context_service": "turn_on",
                "context_event_type": "call_service"}
    if kind == "automation":
        automation = draw(st.sampled_from(list(AUTOMATIONS)))
        return {"context_event_type": "automation_triggered", "context_domain": "automation",
                "context_name": AUTOMATIONS[automation], "context_entity_id": automation,
                "context_message": f"triggered by state of {other}", "context_source": f"state of {other}"}
    if kind == "script_service":
        script = draw(st.sampled_from(list(SCRIPTS)))
        return {"context_user_id": user, "context_domain": "script", "context_service": script.split(".")[1],
                "context_event_type": "call_service"}
    if kind == "script_started":
        script = draw(st.sampled_from(list(SCRIPTS)))
        return {"context_event_type": "script_started", "context_domain": "script",
                "context_name": SCRIPTS[script], "context_entity_id": script}
    if kind == "service":
        return {"context_domain": "light", "context_service": "turn_off", "context_event_type": "call_service"}
    if kind == "state":
        return {"context_entity_id": other, "context_state": "on", "context_entity_id_name": OTHERS[other]}
    return {}


@st.composite
def logbooks(draw: st.DrawFn) -> tuple[list[str], list[dict[str, Any]]]:
    allowed = draw(st.lists(st.sampled_from(UNIVERSE), unique=True))
    count = draw(st.integers(min_value=0, max_value=80))
    ages = sorted(draw(st.lists(st.floats(min_value=1, max_value=3599), min_size=count, max_size=count)),
                  reverse=True)
    entries = []
    for age in ages:
        entry: dict[str, Any] = {"entity_id": LIGHT, "when": when(age), **_cause(draw)}
        if draw(st.booleans()):
            entry["state"] = draw(st.sampled_from(["on", "off"]))
        else:
            other = draw(st.sampled_from(list(OTHERS)))
            entry.update(name=OTHERS[other], message=f"turned on by {other} ({OTHERS[other]})",
                         domain=draw(st.sampled_from(["automation", "script", "homekit"])))
        entries.append(entry)
    return allowed, entries


@pytest.fixture(scope="module")
def module_stub() -> Iterator[StubHomeAssistant]:
    with StubHomeAssistant() as stub:
        stub.set_state(LIGHT, "on", {"friendly_name": "Hall light"})
        for entity_id, (name, user) in PEOPLE.items():
            stub.states.append(person(entity_id, name, user))
        for entity_id, name in {**AUTOMATIONS, **SCRIPTS, **OTHERS}.items():
            stub.set_state(entity_id, "on", {"friendly_name": name})
        yield stub


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(logbook=logbooks())
def test_no_answer_reveals_an_entity_outside_the_allowlist(module_stub: StubHomeAssistant,
                                                           logbook: tuple[list[str], list[dict[str, Any]]]) -> None:
    allowed, entries = logbook
    module_stub.serve_logbook({LIGHT: entries})
    module_stub.requests.clear()
    result = read(module_stub, [LIGHT, *allowed], period="hour")
    text = json.dumps(result)
    names = {**{e: name for e, (name, _) in PEOPLE.items()}, **AUTOMATIONS, **SCRIPTS, **OTHERS}
    for entity_id in UNIVERSE:
        if entity_id not in allowed:
            object_id = entity_id.split(".")[1]
            assert entity_id not in text and f'"{object_id}' not in text and names[entity_id] not in text
    for _, user in PEOPLE.values():
        assert user not in text  # a user id is Home Assistant's, never the household's answer
    assert result["total"] == len(entries) and len(result["entries"]) == min(len(entries), MAX_ENTRIES)
    # Only allowlisted entities' states were read to name anyone.
    read_states = {r.path.removeprefix("/api/states/") for r in module_stub.requests_to("/api/states/")}
    assert read_states <= {LIGHT, *allowed}
    # A name given is the allowlisted cause's own.
    for entry in result["entries"]:
        name = entry["cause"].get("name")
        if name is not None:
            assert name in {names[e] for e in allowed}


def test_through_the_executor_the_card_asks_what_changed_it_and_why(hall: StubHomeAssistant,
                                                                    data_dir: DataDir) -> None:
    """Proposed, nothing is read; approved, the answer names only the allowlisted cause; the audit holds no value."""
    seed_settings(data_dir, {"enabled": True, "base_url": hall.base_url,
                             "allowlisted_entities": [LIGHT, "person.guest"]}, token=hall.token)
    executor = executor_over(data_dir)
    hall.requests.clear()
    proposal = executor.propose(NAME, {"entity_id": LIGHT, "period": "day"}, conversation_id="c")
    assert proposal.card.title.startswith("Read what changed ") and proposal.card.title.endswith(" and why?")
    assert LIGHT in proposal.card.body and "named only if you allowed them" in proposal.card.body
    assert hall.requests == [] and hall.ws_messages == []  # nothing leaves before the household says yes
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert causes(result)[3:5] == [{"kind": "script"}, {"kind": "person", "name": "Gus"}]
    audit = data_dir.audit_log.read_text(encoding="utf-8")
    assert "Gus" not in audit and GUEST_USER not in audit
