""""How long was it on?" and "when did it last change?" against history a real Home Assistant recorded.

The history is made through Home Assistant's own services (input_boolean.turn_on/turn_off, POSTed by the
test, never by the package) and recorded by its recorder; nothing is written into its database.
"""

from __future__ import annotations

import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from console_ha.capabilities import get_history as capabilities
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.get_history import read_history
from console_ha.deadline import Deadline
from console_ha.ha.history import fetch_history
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from tests.real_ha.harness import RealHomeAssistant
from tests.real_ha.test_capabilities_real import make_executor, run, seconds_z, wait_state

pytestmark = pytest.mark.real_ha

# Driven only by this module: a template binary sensor that follows its input_boolean.
MOTION = "binary_sensor.hallway_motion"
MOTION_INPUT = "input_boolean.hallway_motion_detected"
ON_SPELLS = (2.0, 1.0, 1.5)  # seconds on, each followed by a second off


def _switch(real_ha: RealHomeAssistant, on: bool) -> float:
    """Turn the input on or off through HA's service; when the sensor showed it (epoch seconds)."""
    real_ha.call_service("input_boolean", "turn_on" if on else "turn_off", {"entity_id": MOTION_INPUT})
    wait_state(real_ha, MOTION, "on" if on else "off")
    return time.time()


def _reference(rows: list[dict[str, Any]], start: datetime, end: datetime) -> dict[str, dict[str, Any]]:
    """Seconds in each state, changes into it and its last change, worked out plainly from HA's own rows."""
    timed = [(datetime.fromisoformat(r["last_changed"]), r["state"]) for r in rows]
    per_state: dict[str, dict[str, Any]] = {}
    bounds = [max(moment, start) for moment, _ in timed] + [end]
    for i, (moment, state) in enumerate(timed):
        entry = per_state.setdefault(state, {"micros": 0, "times_changed_to": 0, "last_changed_to": None})
        entry["micros"] += (bounds[i + 1] - bounds[i]) // timedelta(microseconds=1)
        if moment > start:
            entry["times_changed_to"] += 1
            entry["last_changed_to"] = seconds_z(moment.isoformat())
    # Whole seconds that add up to the rounded total: the running total rounded, the most time first.
    running = shown = 0
    for e in sorted(per_state.values(), key=lambda e: (e["micros"], e["last_changed_to"] or ""), reverse=True):
        running += e["micros"]
        e["seconds"] = (running + 500_000) // 1_000_000 - shown
        shown += e["seconds"]
    return {state: {"seconds_in_state": e["seconds"],
                    "times_changed_to": e["times_changed_to"], "last_changed_to": e["last_changed_to"]}
            for state, e in per_state.items()}


@pytest.fixture(scope="module")
def driven(real_ha: RealHomeAssistant) -> dict[str, Any]:
    """Motion on and off three times; the wall-clock length of each on spell, and when the last one ended."""
    _switch(real_ha, False)
    since = datetime.now(UTC)
    on_for = []
    for seconds in ON_SPELLS:
        began = _switch(real_ha, True)
        time.sleep(seconds)
        ended = _switch(real_ha, False)
        on_for.append(ended - began)
        time.sleep(1.0)
    # Every switch recorded: the row in force at `since`, then an on and an off row per spell.
    rows = real_ha.wait_recorded(MOTION, 1 + 2 * len(ON_SPELLS), since=since)
    assert [r["state"] for r in rows[-2 * len(ON_SPELLS):]] == ["on", "off"] * len(ON_SPELLS)
    return {"on_for": on_for, "last_off": rows[-1]["last_changed"]}


def test_how_long_was_it_on_and_when_did_it_last_change(real_ha: RealHomeAssistant, tmp_path: Path,
                                                         driven: dict[str, Any]) -> None:
    """Through the executor, as the model asks it: time in each state, changes into it, the last change."""
    now = time.time()
    executor = make_executor(tmp_path, real_ha, [MOTION], clock=lambda: now)

    result = run(executor, GET_HISTORY, {"entity_id": MOTION, "period": "hour"})

    end = datetime.fromtimestamp(now, UTC)
    start = end - timedelta(hours=1)
    rows = real_ha.history(MOTION, start, end, minimal_response=True, no_attributes=True)
    summary = result["summary"]
    assert summary["kind"] == "states"
    assert summary["states"] == _reference(rows, start, end)
    on = summary["states"]["on"]
    # "How long was it on?": the three spells, as long as the test held them (to the second).
    assert abs(on["seconds_in_state"] - sum(driven["on_for"])) <= 1
    assert on["times_changed_to"] >= len(ON_SPELLS)
    # "When did it last change?": to off, when HA recorded the last turn_off.
    last_off = seconds_z(driven["last_off"])
    assert summary["states"]["off"]["last_changed_to"] == last_off
    assert result["changes"][-1] == {"state": "off", "changed_at": last_off}
    # The state in force now ran up to now: all the states' time adds up to the hour since the first row.
    first = max(datetime.fromisoformat(rows[0]["last_changed"]), start)
    assert abs(sum(s["seconds_in_state"] for s in summary["states"].values()) - (end - first).total_seconds()) <= 2


def test_the_websocket_and_rest_give_the_same_digest(real_ha: RealHomeAssistant, driven: dict[str, Any],
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """Home Assistant 2025.4.4 answers over the WebSocket (REST is not asked), with what REST would give."""
    client = HomeAssistantClient(real_ha.base_url, Secret(real_ha.token))
    end = datetime.now(UTC)
    start = end - timedelta(hours=1)
    rest = fetch_history(client, MOTION, start=start, end=end, timeout=10, max_bytes=10_000_000)

    def no_rest(*args: Any, **kwargs: Any) -> None:
        raise AssertionError("REST was asked")

    monkeypatch.setattr(capabilities, "fetch_history", no_rest)
    over_websocket = read_history(client, MOTION, start=start, end=end, deadline=Deadline(10), unit=None)
    assert over_websocket == rest
    summary = over_websocket.summary
    assert summary["kind"] == "states"
    assert summary["states"]["on"]["times_changed_to"] >= len(ON_SPELLS)
