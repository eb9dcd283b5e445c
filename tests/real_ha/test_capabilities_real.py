"""The two capabilities, run through the six-stage executor against a real Home Assistant 2025.4.4."""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from console_ha.capabilities.executor import Executor
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.errors import CapabilityError
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore, check_token
from tests.executors import executor_over
from tests.real_ha.harness import UNAVAILABLE_ENTITY, RealHomeAssistant
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings

pytestmark = pytest.mark.real_ha

CONVERSATION = "real-ha-tests"
# Allowlisted, well-formed, and not an entity this Home Assistant has.
ABSENT_ENTITY = "sensor.attic_temperature"
# Driven only by this module, so its history holds nothing another test put there.
HISTORY_SENSOR = "sensor.kitchen_humidity"
HISTORY_INPUT = "input_number.kitchen_humidity_input"
# Values outside anything else the sensor shows (it starts at 48), so the extremes are the driven ones.
DRIVEN_HUMIDITY = (55, 3, 97, 12, 88, 61)
UNAVAILABLE_STATES = {"unavailable", "unknown"}


def make_executor(
    root: Path,
    real_ha: RealHomeAssistant,
    allowlist: Sequence[str],
    *,
    token: str | None = None,
    clock: Callable[[], float] = time.time,
) -> Executor:
    """An executor on a fresh data dir, configured as the settings page would leave it."""
    data_dir = DataDir(root)
    seed_settings(data_dir, {"enabled": True, "base_url": real_ha.base_url, "allowlisted_entities": list(allowlist)})
    TokenStore(data_dir).write(check_token(real_ha.token if token is None else token), real_ha.base_url)
    return executor_over(data_dir, clock=clock)


def run(executor: Executor, capability: str, arguments: dict[str, Any] | None = None) -> dict[str, Any]:
    """Propose, then approve: what the household's "yes" on the card returns (checked against its schema)."""
    proposal = executor.propose(capability, arguments or {}, conversation_id=CONVERSATION)
    result = executor.answer(proposal.token, approve=True, conversation_id=CONVERSATION)
    assert_matches_result_schema(capability, result)
    return result


def live_states(real_ha: RealHomeAssistant) -> dict[str, dict[str, Any]]:
    response = real_ha.get("/api/states")
    response.raise_for_status()
    return {state["entity_id"]: state for state in response.json()}


def wait_state(real_ha: RealHomeAssistant, entity_id: str, expected: str, timeout: float = 5.0) -> None:
    """Wait until Home Assistant's state machine shows `expected` (templates follow their inputs)."""
    deadline = time.monotonic() + timeout
    while (state := real_ha.get(f"/api/states/{entity_id}").json().get("state")) != expected:
        if time.monotonic() >= deadline:
            raise TimeoutError(f"{entity_id} is {state!r} after {timeout:.0f} s, expected {expected!r}")
        time.sleep(0.05)


def seconds_z(stamp: str) -> str:
    """An HA timestamp as results write it: UTC, to the second, with Z."""
    moment = datetime.fromisoformat(stamp).astimezone(UTC)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


# --- list_entities -----------------------------------------------------------------------------


def test_list_entities_returns_exactly_the_allowlisted_entities_with_their_live_states(
    real_ha: RealHomeAssistant, tmp_path: Path
) -> None:
    coffee_on = live_states(real_ha)["switch.coffee_machine"]["state"] != "on"
    real_ha.call_service(
        "input_boolean", "turn_on" if coffee_on else "turn_off", {"entity_id": "input_boolean.coffee_machine_power"}
    )
    real_ha.call_service("input_select", "select_option", {"entity_id": "input_select.house_mode", "option": "Night"})
    wait_state(real_ha, "switch.coffee_machine", "on" if coffee_on else "off")
    wait_state(real_ha, "sensor.coffee_machine_power", "1450.0" if coffee_on else "0.8")
    allowlist = [
        "switch.coffee_machine",
        "sensor.coffee_machine_power",
        "input_select.house_mode",
        UNAVAILABLE_ENTITY,
        "binary_sensor.front_door",
    ]
    executor = make_executor(tmp_path, real_ha, allowlist)

    result = run(executor, LIST_ENTITIES)

    states = live_states(real_ha)
    placed = {expected.entity_id: expected.area for expected in real_ha.entities}
    assert [entity["entity_id"] for entity in result["entities"]] == allowlist
    assert result["missing_entities"] == []
    for entity in result["entities"]:
        raw = states[entity["entity_id"]]
        assert entity == {
            "entity_id": raw["entity_id"],
            "friendly_name": raw["attributes"]["friendly_name"],
            "domain": raw["entity_id"].split(".")[0],
            "state": raw["state"],
            "unit_of_measurement": raw["attributes"].get("unit_of_measurement"),
            # Home Assistant's microseconds and +00:00 become seconds and Z: 20 bytes, whatever HA sends
            "last_changed": seconds_z(raw["last_changed"]),
            "unavailable": raw["state"] in UNAVAILABLE_STATES,
            # issue 18: the area the harness placed it in through HA's registry, null for none
            "area": placed.get(raw["entity_id"]),
        }
    assert result["total"] == len(allowlist) and "areas_known" not in result
    by_id = {entity["entity_id"]: entity for entity in result["entities"]}
    assert by_id["switch.coffee_machine"]["state"] == ("on" if coffee_on else "off")
    assert by_id["sensor.coffee_machine_power"]["unit_of_measurement"] == "W"
    assert by_id["input_select.house_mode"]["state"] == "Night"


def test_an_unavailable_entity_is_listed_and_flagged(real_ha: RealHomeAssistant, tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, [UNAVAILABLE_ENTITY, "binary_sensor.front_door"])

    entities = run(executor, LIST_ENTITIES)["entities"]

    assert [(e["entity_id"], e["state"], e["unavailable"]) for e in entities] == [
        (UNAVAILABLE_ENTITY, "unavailable", True),
        ("binary_sensor.front_door", live_states(real_ha)["binary_sensor.front_door"]["state"], False),
    ]


# --- get_history -------------------------------------------------------------------------------


def _reference(rows: list[dict[str, Any]], start: datetime, end: datetime) -> dict[str, Any]:
    """What the result should say, worked out plainly from the rows Home Assistant itself returns."""
    timed = [(datetime.fromisoformat(row["last_changed"]).timestamp(), row["state"]) for row in rows]
    initial = None
    if timed and timed[0][0] <= start.timestamp() + 1e-6:
        initial = {"state": rows[0]["state"], "since": seconds_z(rows[0]["last_changed"])}
        rows = rows[1:]
    changes = [{"state": row["state"], "changed_at": seconds_z(row["last_changed"])} for row in rows]
    bounds = [max(t, start.timestamp()) for t, _ in timed] + [end.timestamp()]
    numbers = [(float(s), bounds[i + 1] - bounds[i]) for i, (_, s) in enumerate(timed) if s not in UNAVAILABLE_STATES]
    weighted = sum(duration for _, duration in numbers)
    return {
        "initial_state": initial,
        "changes": changes,
        "min": min(value for value, _ in numbers),
        "max": max(value for value, _ in numbers),
        "mean": sum(value * duration for value, duration in numbers) / weighted,
        "last": numbers[-1][0],
    }


def test_get_history_returns_the_changes_home_assistant_recorded_with_min_max_and_total(
    real_ha: RealHomeAssistant, tmp_path: Path
) -> None:
    """Drive the template sensor through input_number.set_value, then ask for the last hour."""
    since = datetime.now(UTC) - timedelta(seconds=1)
    for value in DRIVEN_HUMIDITY:
        real_ha.call_service("input_number", "set_value", {"entity_id": HISTORY_INPUT, "value": value})
        wait_state(real_ha, HISTORY_SENSOR, str(value))
    # The row in force at `since` comes first, then one row per driven value.
    recorded = real_ha.wait_recorded(HISTORY_SENSOR, len(DRIVEN_HUMIDITY) + 1, since=since)
    assert [row["state"] for row in recorded[-len(DRIVEN_HUMIDITY):]] == [str(v) for v in DRIVEN_HUMIDITY]
    now = time.time()
    executor = make_executor(tmp_path, real_ha, [HISTORY_SENSOR], clock=lambda: now)

    result = run(executor, GET_HISTORY, {"entity_id": HISTORY_SENSOR, "period": "hour"})

    end = datetime.fromtimestamp(now, UTC)
    start = end - timedelta(hours=1)
    rows = real_ha.history(HISTORY_SENSOR, start, end, minimal_response=True, no_attributes=True)
    expected = _reference(rows, start, end)
    # What was driven is what HA recorded last, in order, each a change.
    driven = [change["state"] for change in result["changes"][-len(DRIVEN_HUMIDITY):]]
    assert driven == [str(v) for v in DRIVEN_HUMIDITY]
    # ...and the result holds every change HA recorded in the hour, nothing more: restarts show as
    # a brief `unknown`; the row clamped to the window's start is the initial state, not a change.
    assert result["truncated"] is False
    assert result["changes"] == expected["changes"]
    assert result["total_changes"] == len(expected["changes"])
    assert result["initial_state"] == expected["initial_state"]
    summary = result["summary"]
    assert summary["kind"] == "numeric" and summary["unit"] == "%"
    assert (summary["min"], summary["max"]) == (min(DRIVEN_HUMIDITY), max(DRIVEN_HUMIDITY))
    assert (summary["min"], summary["max"]) == (expected["min"], expected["max"])
    assert summary["last"] == DRIVEN_HUMIDITY[-1] == expected["last"]
    # When the extremes were reached: the changes HA recorded for the driven 3 and 97.
    recorded_at = {row["state"]: seconds_z(row["last_changed"]) for row in rows}
    assert (summary["min_at"], summary["max_at"]) == (recorded_at["3"], recorded_at["97"])
    assert math.isclose(summary["mean"], expected["mean"], rel_tol=1e-5)
    assert result["friendly_name"] == "Kitchen humidity"
    assert (result["start"], result["end"]) == (seconds_z(start.isoformat()), seconds_z(end.isoformat()))


# --- failures at stage 5 -----------------------------------------------------------------------


def test_an_allowlisted_entity_home_assistant_lacks_passes_policy_then_fails_with_ha_not_found(
    real_ha: RealHomeAssistant, tmp_path: Path
) -> None:
    executor = make_executor(tmp_path, real_ha, [ABSENT_ENTITY])
    proposal = executor.propose(
        GET_HISTORY, {"entity_id": ABSENT_ENTITY, "period": "day"}, conversation_id=CONVERSATION
    )

    with pytest.raises(CapabilityError) as info:
        executor.answer(proposal.token, approve=True, conversation_id=CONVERSATION)

    assert (info.value.code, info.value.stage) == ("HA_NOT_FOUND", 5)
    events = [(e["event"], e["stage"], e.get("code")) for e in executor.audit.events()]
    assert events == [
        ("proposed", 1, None),
        ("confirmation_requested", 4, None),
        ("approved", 4, None),
        ("failed", 5, "HA_NOT_FOUND"),
    ]


def test_list_entities_names_an_allowlisted_entity_home_assistant_lacks(
    real_ha: RealHomeAssistant, tmp_path: Path
) -> None:
    executor = make_executor(tmp_path, real_ha, ["binary_sensor.front_door", ABSENT_ENTITY])

    result = run(executor, LIST_ENTITIES)

    assert [e["entity_id"] for e in result["entities"]] == ["binary_sensor.front_door"]
    assert result["missing_entities"] == [ABSENT_ENTITY]


@pytest.mark.parametrize(
    ("capability", "arguments"),
    [(LIST_ENTITIES, {}), (GET_HISTORY, {"entity_id": HISTORY_SENSOR, "period": "day"})],
    ids=["list_entities", "get_history"],
)
def test_a_wrong_token_fails_with_ha_unauthorized(
    real_ha: RealHomeAssistant, tmp_path: Path, capability: str, arguments: dict[str, Any]
) -> None:
    executor = make_executor(tmp_path, real_ha, [HISTORY_SENSOR], token="not-a-token-home-assistant-issued")

    with pytest.raises(CapabilityError) as info:
        run(executor, capability, arguments)

    assert (info.value.code, info.value.stage) == ("HA_UNAUTHORIZED", 5)


def test_a_stopped_home_assistant_fails_with_ha_unreachable_within_the_bound(
    real_ha: RealHomeAssistant, tmp_path: Path
) -> None:
    executor = make_executor(tmp_path, real_ha, [HISTORY_SENSOR])
    proposals = [
        executor.propose(LIST_ENTITIES, {}, conversation_id=CONVERSATION),
        executor.propose(GET_HISTORY, {"entity_id": HISTORY_SENSOR, "period": "week"}, conversation_id=CONVERSATION),
    ]
    outcomes = []
    real_ha.stop()
    try:
        for proposal in proposals:
            with pytest.raises(CapabilityError) as info:
                executor.answer(proposal.token, approve=True, conversation_id=CONVERSATION)
            outcomes.append((proposal.capability, info.value.code, info.value.stage))
    finally:
        real_ha.start()

    for capability, code, stage in outcomes:
        # A refused connection, not a bound waited out: that would have been HA_TIMEOUT.
        assert (code, stage) == ("HA_UNREACHABLE", 5), capability
