"""History digests: the initial state, counts, numeric statistics, 50-point downsampling, streaming."""

from __future__ import annotations

import io
import json
import math
import random
import socket
import tracemalloc
from collections.abc import Iterable, Iterator
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from console_ha.capabilities import get_history as capabilities
from console_ha.capabilities.get_history import CAPABILITY as GET_HISTORY_CAPABILITY
from console_ha.capabilities.get_history import HISTORY_FIELD_MEANINGS, read_history
from console_ha.deadline import Deadline
from console_ha.errors import HABadResponse, HABusy, HATimeout, HAUnauthorized, HomeAssistantError
from console_ha.ha import history, history_digest, history_rows
from console_ha.ha.call_limits import CallCaps, CallLimits
from console_ha.ha.history import HistoryDigest, fetch_history
from console_ha.ha.history_digest import DEFAULT_MAX_CHANGES, Digester
from console_ha.ha.history_rows import row_of
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from tests.result_schemas import assert_matches_result_schema
from tests.stub_ha import OUTLASTS_ANY_DEADLINE, StubHomeAssistant
from tests.stub_ha_ws import TOKEN as WS_TOKEN
from tests.stub_ha_ws import StubWebSocket
from tests.stub_ha_ws import running as running_ws

START = datetime(2025, 4, 1, tzinfo=UTC)
END = START + timedelta(days=7)
UNAVAILABLE = ("unavailable", "unknown")


def digest_history(rows: Iterable[object], *, start: datetime, end: datetime,
                   max_changes: int = DEFAULT_MAX_CHANGES, unit: str | None = None) -> HistoryDigest:
    """Parsed history rows ({"state", "last_changed"}, chronological) digested for the window [start, end), as
    the fetchers' Digester does with the rows it streams."""
    digester = Digester(start=start, end=end, max_changes=max_changes, unit=unit)
    digester.add(row_of(row) for row in rows)
    return digester.finish()


def row(moment: datetime, state: str) -> dict[str, str]:
    """A minimal_response row as HA writes it."""
    return {"state": state, "last_changed": moment.isoformat()}


def at(hours: float) -> datetime:
    return START + timedelta(hours=hours)


def digest(rows: list[dict[str, Any]], **kwargs: Any) -> HistoryDigest:
    return digest_history(rows, start=START, end=END, **kwargs)


# --- semantics -----------------------------------------------------------------------------------


def test_the_state_in_force_at_the_start_is_not_a_change() -> None:
    result = digest([row(START, "off"), row(at(1), "on"), row(at(2), "off")])
    assert result.initial_state == {"state": "off", "since": "2025-04-01T00:00:00Z"}
    assert result.total_changes == 2
    assert [c["state"] for c in result.changes] == ["on", "off"]


def test_counts_how_many_times_each_state_was_entered() -> None:
    """"How many times did the door open this week" is times_changed_to["on"]."""
    rows = [row(START, "off")]
    for day in range(5):
        rows += [row(at(24 * day + 8), "on"), row(at(24 * day + 8.01), "off")]
    result = digest(rows)
    assert result.summary == {"kind": "states", "states": {
        # The week less five 36-second openings; the door was closed when the window opened.
        "off": {"seconds_in_state": 7 * 86400 - 5 * 36, "times_changed_to": 5,
                "last_changed_to": "2025-04-05T08:00:36Z"},
        "on": {"seconds_in_state": 5 * 36, "times_changed_to": 5, "last_changed_to": "2025-04-05T08:00:00Z"},
    }}
    assert result.total_changes == 10 and not result.truncated


def test_repeated_states_are_not_changes() -> None:
    result = digest([row(START, "on"), row(at(1), "on"), row(at(2), "off"), row(at(3), "off")])
    assert result.total_changes == 1
    states = result.summary["states"]  # type: ignore[typeddict-item]
    assert {s: (t["times_changed_to"], t["seconds_in_state"]) for s, t in states.items()} == {
        "off": (1, 7 * 86400 - 2 * 3600), "on": (0, 2 * 3600)}
    assert states["on"]["last_changed_to"] is None  # in force since before the window opened


def test_no_rows_means_no_history() -> None:
    result = digest([])
    assert (result.initial_state, result.total_changes, result.changes, result.truncated) == (None, 0, [], False)
    assert result.summary == {"kind": "states", "states": {}}


def test_numeric_summary_is_time_weighted_and_skips_unavailable_stretches() -> None:
    """10 for a day, unavailable for two days, 20 for four days: the mean is (10*1 + 20*4) / 5."""
    rows = [row(START, "10"), row(at(24), "unavailable"), row(at(72), "20")]
    result = digest(rows, unit="W")
    assert result.summary == {"kind": "numeric", "min": 10.0, "min_at": "2025-04-01T00:00:00Z", "max": 20.0,
                              "max_at": "2025-04-04T00:00:00Z", "mean": 18.0, "first": 10.0, "last": 20.0,
                              "unit": "W"}
    assert result.total_changes == 2


def test_one_word_among_numbers_makes_the_entity_categorical() -> None:
    result = digest([row(START, "10"), row(at(1), "12"), row(at(2), "heating")])
    assert result.summary["kind"] == "states"


def test_an_entity_only_ever_unavailable_is_not_numeric() -> None:
    result = digest([row(START, "unavailable"), row(at(1), "unknown")])
    assert result.summary == {"kind": "states", "states": {
        "unknown": {"seconds_in_state": 7 * 86400 - 3600, "times_changed_to": 1,
                    "last_changed_to": "2025-04-01T01:00:00Z"},
        "unavailable": {"seconds_in_state": 3600, "times_changed_to": 0, "last_changed_to": None},
    }}


def test_the_result_is_plain_json() -> None:
    result = digest([row(START, "off"), row(at(1), "on")]).to_result()
    assert json.loads(json.dumps(result)) == result
    assert set(result) == {"start", "end", "initial_state", "total_changes", "truncated", "changes", "summary"}
    assert result["changes"] == [{"state": "on", "changed_at": "2025-04-01T01:00:00Z"}]


@pytest.mark.parametrize("bad", [
    "not a row",
    ["on", "2025-04-01T01:00:00+00:00"],
    {"last_changed": "2025-04-01T01:00:00+00:00"},
    {"state": "on"},
    {"state": 5, "last_changed": "2025-04-01T01:00:00+00:00"},
    {"state": "on", "last_changed": "yesterday"},
    {"state": "on", "last_changed": "2025-04-01T01:00:00"},
    {"state": "on", "last_changed": 1743469200},
], ids=["string", "list", "no-state", "no-time", "number-state", "bad-time", "naive-time", "epoch-time"])
def test_a_malformed_row_is_a_bad_response(bad: object) -> None:
    with pytest.raises(HABadResponse):
        digest([row(START, "off"), bad])  # type: ignore[list-item]


def test_rows_out_of_time_order_are_a_bad_response() -> None:
    with pytest.raises(HABadResponse):
        digest([row(at(2), "on"), row(at(1), "off")])


# --- downsampling --------------------------------------------------------------------------------


def numeric_rows(count: int, seed: int, *, hours: float = 24 * 7 - 1) -> list[dict[str, str]]:
    rng = random.Random(seed)
    values: list[str] = []
    while len(values) < count:
        value = f"{rng.uniform(-20, 40):.2f}"
        if not values or value != values[-1]:  # every row a change
            values.append(value)
    return [row(at(0.5 + hours * i / count), v) for i, v in enumerate(values)]


def test_fifty_points_at_most_with_first_last_min_and_max() -> None:
    rows = numeric_rows(10_000, seed=3)
    result = digest(rows)
    values = [float(r["state"]) for r in rows]
    picked = [float(c["state"]) for c in result.changes]
    assert len(result.changes) == 50 and result.truncated and result.total_changes == 10_000
    assert result.changes[0] == {"state": rows[0]["state"], "changed_at": result.changes[0]["changed_at"]}
    assert result.changes[-1]["state"] == rows[-1]["state"]
    assert min(values) in picked and max(values) in picked
    times = [c["changed_at"] for c in result.changes]
    assert times == sorted(times)


def test_points_are_spread_over_the_whole_period() -> None:
    result = digest(numeric_rows(10_000, seed=4))
    tenths = {int((datetime.fromisoformat(c["changed_at"]) - START) / (END - START) * 10) for c in result.changes}
    assert tenths == set(range(10))


def test_changes_bunched_in_one_hour_still_give_fifty_points() -> None:
    result = digest(numeric_rows(5_000, seed=5, hours=1))
    assert len(result.changes) == 50
    assert len({c["changed_at"] for c in result.changes}) > 40


def test_a_small_history_is_returned_whole() -> None:
    rows = numeric_rows(50, seed=6)
    result = digest(rows)
    assert not result.truncated
    assert [c["state"] for c in result.changes] == [r["state"] for r in rows]


# --- the summary against a brute-force computation ----------------------------------------------

STATE_POOLS = {
    "numeric": st.one_of(st.integers(-50, 50).map(str), st.floats(-1e3, 1e3).map(lambda v: f"{v:.2f}")),
    "mixed": st.sampled_from(["on", "off", "open", "closed", "12.5", "unavailable", "unknown"]),
}


@st.composite
def series(draw: st.DrawFn) -> tuple[str | None, list[tuple[int, str]], int]:
    """An initial state (or none), then changes at microsecond offsets into the week, in time order.

    Offsets may be 0 (a change exactly at the window's start) and the window's length (exactly "now");
    unavailable and unknown come in spells among the other states.
    """
    pool = draw(st.sampled_from(sorted(STATE_POOLS)))
    states = st.one_of(STATE_POOLS[pool], st.sampled_from(UNAVAILABLE)) if pool == "numeric" else STATE_POOLS[pool]
    initial = draw(st.one_of(st.none(), states))
    window_us = int((END - START) / timedelta(microseconds=1))
    offsets = sorted(draw(st.lists(st.one_of(st.integers(1, window_us - 1), st.sampled_from([0, 1, window_us])),
                                   max_size=120)))
    changes = [(offset, draw(states)) for offset in offsets]
    max_changes = draw(st.integers(4, 20))
    return initial, changes, max_changes


def _seconds(micros: int) -> int:
    return (micros + 500_000) // 1_000_000


def _stamp(offset: int) -> str:
    return (START + timedelta(microseconds=offset)).isoformat(timespec="seconds").replace("+00:00", "Z")


def brute_force(initial: str | None, rows: list[tuple[int, str]]) -> dict[str, Any]:
    """The same answers computed the obvious way, holding everything."""
    end_us = int((END - START) / timedelta(microseconds=1))
    # The state in force when the window opened: the initial row, or a row exactly at the start.
    in_force = initial
    for offset, state in rows:
        if offset == 0:
            in_force = state
    timeline: list[tuple[int, str]] = [(0, in_force)] if in_force is not None else []
    changes: list[tuple[int, str]] = []
    for offset, state in rows:
        if offset == 0 or (timeline and timeline[-1][1] == state):
            continue
        timeline.append((offset, state))
        changes.append((offset, state))
    # Each state's stretches, the last one running to the window's end.
    stretches = list(zip(timeline, [t for t, _ in timeline[1:]] + [end_us], strict=False))
    per_state: dict[str, dict[str, Any]] = {}
    for (since, state), until in stretches:
        entry = per_state.setdefault(state, {"micros": 0, "times_changed_to": 0, "last_changed_to": None})
        entry["micros"] += until - since
    for offset, state in changes:
        per_state[state]["times_changed_to"] += 1
        per_state[state]["last_changed_to"] = _stamp(offset)
    available = [s for _, s in timeline if s not in UNAVAILABLE]

    def number(state: str) -> float | None:
        try:
            value = float(state)
        except ValueError:
            return None
        return value if math.isfinite(value) else None

    numeric = bool(available) and all(number(s) is not None for s in available)
    # Whole seconds that add up to the rounded total: the running total rounded, most time first.
    last_offset = {state: max((o for o, s in changes if s == state), default=-1) for state in per_state}
    ranked = sorted(per_state, key=lambda s: (per_state[s]["micros"], last_offset[s]), reverse=True)
    running = shown = 0
    for state in ranked:
        running += per_state[state]["micros"]
        per_state[state]["seconds"] = _seconds(running) - shown
        shown = _seconds(running)
        assert abs(per_state[state]["seconds"] * 1_000_000 - per_state[state]["micros"]) < 1_000_000
    result: dict[str, Any] = {"changes": changes, "numeric": numeric, "states": {
        state: {"seconds_in_state": e["seconds"], "times_changed_to": e["times_changed_to"],
                "last_changed_to": e["last_changed_to"]} for state, e in per_state.items()}}
    if numeric:
        values = [(since, float(s)) for since, s in timeline if s not in UNAVAILABLE]
        weighted = seconds = 0.0
        for (since, state), until in stretches:
            if state not in UNAVAILABLE and until > since:
                weighted += float(state) * (until - since)
                seconds += until - since
        low = min(v for _, v in values)
        high = max(v for _, v in values)
        result.update(min=low, max=high, first=values[0][1], last=values[-1][1],
                      min_at=_stamp(next(t for t, v in values if v == low)),
                      max_at=_stamp(next(t for t, v in values if v == high)),
                      mean=weighted / seconds if seconds else None,
                      change_values=[float(s) for _, s in changes if s not in UNAVAILABLE])
    return result


@settings(max_examples=300, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(series())
def test_summary_matches_a_brute_force_computation(case: tuple[str | None, list[tuple[int, str]], int]) -> None:
    """Time in each state, changes into it, when it last began; min/max with when; mean; the points."""
    initial, changes, max_changes = case
    rows = ([row(START, initial)] if initial is not None else []) + [
        row(START + timedelta(microseconds=offset), state) for offset, state in changes]
    result = digest(rows, max_changes=max_changes)
    expected = brute_force(initial, changes)

    assert result.total_changes == len(expected["changes"])
    assert result.truncated == (len(expected["changes"]) > max_changes)
    assert len(result.changes) == min(max_changes, len(expected["changes"]))
    times = [c["changed_at"] for c in result.changes]
    assert times == sorted(times)
    if expected["changes"]:
        assert result.changes[0]["state"] == expected["changes"][0][1]
        assert result.changes[-1]["state"] == expected["changes"][-1][1]
    if expected["numeric"]:
        summary = result.summary
        assert summary["kind"] == "numeric"
        for key in ("min", "max", "first", "last", "min_at", "max_at"):
            assert summary[key] == expected[key], key  # type: ignore[literal-required]
        if expected["mean"] is None:
            assert summary["mean"] is None  # type: ignore[typeddict-item]
        else:
            assert summary["mean"] == pytest.approx(expected["mean"], rel=1e-5, abs=1e-9)  # type: ignore[typeddict-item]
        picked = [float(c["state"]) for c in result.changes if c["state"] not in UNAVAILABLE]
        if expected["change_values"]:
            assert min(expected["change_values"]) in picked
            assert max(expected["change_values"]) in picked
    else:
        assert result.summary == {"kind": "states", "states": expected["states"]}


def test_a_free_text_entity_stays_within_8_kib() -> None:
    """5,000 changes among 300 distinct 32-character states: 50 points and 10 named states, under 8 KiB."""
    rng = random.Random(11)
    names = [f"{i:03d} " + "".join(rng.choice("abcdefghij ") for _ in range(28)) for i in range(300)]
    rows = [row(at(0.03 * i + 0.01), rng.choice(names)) for i in range(5000)]
    result = _as_result(digest(rows))
    assert len(result["changes"]) == 50 and len(result["summary"]["states"]) == 10
    assert len(json.dumps(result).encode()) < 8 * 1024


def test_unavailable_and_unknown_are_their_own_states_never_off() -> None:
    """A switch off for 2 h, unavailable 1 h, on 3 h, unknown 30 min, then off to the end."""
    rows = [row(START, "off"), row(at(2), "unavailable"), row(at(3), "on"), row(at(6), "unknown"),
            row(at(6.5), "off")]
    states = digest(rows).summary["states"]  # type: ignore[typeddict-item]
    assert {s: t["seconds_in_state"] for s, t in states.items()} == {
        "off": 7 * 86400 - 4.5 * 3600, "on": 3 * 3600, "unavailable": 3600, "unknown": 1800}


def test_the_state_in_force_at_the_end_runs_to_now() -> None:
    """"How long has the heating been on?": the last change's state counts up to the window's end."""
    end = START + timedelta(hours=5)
    result = digest_history([row(START, "idle"), row(START + timedelta(hours=4, minutes=20), "heating")],
                            start=START, end=end)
    heating = result.summary["states"]["heating"]  # type: ignore[typeddict-item]
    assert heating == {"seconds_in_state": 40 * 60, "times_changed_to": 1, "last_changed_to": "2025-04-01T04:20:00Z"}


def test_a_change_exactly_at_the_start_is_the_state_in_force() -> None:
    """A change stamped with the window's start is in force from the start; it is not a change in the window."""
    result = digest([row(START, "off"), row(START, "on"), row(at(1), "off")])
    assert result.initial_state == {"state": "on", "since": "2025-04-01T00:00:00Z"}
    assert result.total_changes == 1
    states = result.summary["states"]  # type: ignore[typeddict-item]
    assert states["on"] == {"seconds_in_state": 3600, "times_changed_to": 0, "last_changed_to": None}


def test_seconds_in_state_add_up_to_the_window() -> None:
    """Half-second spells each rounded up would give a 3,601-second hour: the figures add up to the window."""
    end = START + timedelta(hours=1)
    rows = [row(START, "off"), row(START + timedelta(seconds=0.5), "on"), row(START + timedelta(seconds=1), "off"),
            row(START + timedelta(seconds=1.5), "unknown"), row(START + timedelta(seconds=2), "off")]
    states = digest_history(rows, start=START, end=end).summary["states"]  # type: ignore[typeddict-item]
    assert sum(t["seconds_in_state"] for t in states.values()) == 3600
    # Each figure is its exact time rounded down or up, never further off.
    assert states["off"]["seconds_in_state"] in (3598, 3599)
    assert states["on"]["seconds_in_state"] in (0, 1) and states["unknown"]["seconds_in_state"] in (0, 1)


def test_many_distinct_states_name_ten_and_sum_the_rest() -> None:
    """A free-text entity with 300 states: the ten with most time (the current one among them), the rest summed."""
    rows = [row(START, "state 0")]
    hours = 0.0
    for i in range(1, 300):
        hours += 0.01 if i % 7 else 2.0  # every seventh state holds for two hours
        rows.append(row(at(hours), f"state {i}"))
    rows.append(row(at(hours + 0.01), "state 1"))  # back to a short-lived early state, in force at the end
    result = digest(rows)
    summary = result.summary
    assert summary["kind"] == "states"
    named = summary["states"]  # type: ignore[typeddict-item]
    assert len(named) == history.MAX_REPORTED_STATES
    assert named["state 1"]["times_changed_to"] == 2  # the state in force now is always named
    other = summary["other_states"]  # type: ignore[typeddict-item]
    assert other["times_changed_to"] + sum(t["times_changed_to"] for t in named.values()) == 300
    total = other["seconds_in_state"] + sum(t["seconds_in_state"] for t in named.values())
    assert abs(total - 7 * 86400) <= len(named) + 1  # each figure is rounded to the second
    assert len(json.dumps(result.to_result())) < 8 * 1024


# --- over HTTP -----------------------------------------------------------------------------------


def client_for(stub: StubHomeAssistant) -> HomeAssistantClient:
    return HomeAssistantClient(stub.base_url, Secret(stub.token))


def fetch(stub: StubHomeAssistant, entity_id: str, *, days: float = 7, **kwargs: Any) -> HistoryDigest:
    end = datetime.now(UTC)
    options: dict[str, Any] = {"timeout": 5, "max_bytes": 50_000_000}
    options.update(kwargs)
    return fetch_history(client_for(stub), entity_id, start=end - timedelta(days=days), end=end, **options)


def test_asks_ha_for_one_entity_minimal_and_without_attributes(stub_ha: StubHomeAssistant) -> None:
    fetch(stub_ha, "binary_sensor.front_door")
    (request,) = stub_ha.requests
    assert request.method == "GET"
    assert request.path.startswith("/api/history/period/") and request.path.endswith("Z")
    assert request.query["filter_entity_id"] == ["binary_sensor.front_door"]
    assert request.query["end_time"][0].endswith("Z") and "+" not in request.query["end_time"][0]
    assert request.query["minimal_response"] == [""] and request.query["no_attributes"] == [""]


def test_counts_door_openings_over_a_week(stub_ha: StubHomeAssistant) -> None:
    end = datetime.now(UTC)
    start = end - timedelta(days=2)
    stub_ha.history["binary_sensor.front_door"] = [(start - timedelta(hours=5), "off")] + [
        (start + timedelta(hours=h, minutes=m), s) for h in range(1, 40, 3) for m, s in ((0, "on"), (1, "off"))]
    result = fetch_history(client_for(stub_ha), "binary_sensor.front_door", start=start, end=end, timeout=5,
                           max_bytes=1_000_000)
    assert result.initial_state is not None and result.initial_state["state"] == "off"
    states = result.summary["states"]  # type: ignore[typeddict-item]
    assert {s: t["times_changed_to"] for s, t in states.items()} == {"on": 13, "off": 13}
    assert states["on"]["seconds_in_state"] == 13 * 60


def test_an_entity_without_history_has_no_changes(stub_ha: StubHomeAssistant) -> None:
    result = fetch(stub_ha, "sensor.never_recorded")
    assert (result.total_changes, result.changes, result.initial_state) == (0, [], None)


def test_a_404_means_no_history(stub_ha: StubHomeAssistant) -> None:
    stub_ha.fault("404", "/api/history/")
    assert fetch(stub_ha, "binary_sensor.front_door").total_changes == 0


@pytest.mark.parametrize("body", [
    b'{"message": "API running."}',
    b'[{"state": "on", "last_changed": "2025-04-01T00:00:00+00:00"}]',
    b'[["on", "off"]]',
    b'[[{"state": "on"}]]',
    b'[[{"state": "on", "last_changed": "2025-04-01T00:00:00+00:00"},',
    b'[[{"entity_id": "light.other", "state": "on", "last_changed": "2025-04-01T00:00:00+00:00"}]]',
    b'',
    b'[[], {"x": 1}]',
    b'[[], "junk"]',
    b'[[' + b'[' * 16_000 + b']' * 16_002,
    b'[[{"state": ' + b'[' * 16_000 + b']' * 16_000 + b', "last_changed": "2025-04-01T00:00:00+00:00"}]]',
], ids=["object", "flat-list", "strings", "no-time", "truncated", "other-entity", "empty", "object-after-list",
        "text-after-list", "deep-rows", "deep-state"])
def test_a_body_that_is_not_a_history_is_a_bad_response(stub_ha: StubHomeAssistant, body: bytes) -> None:
    end = datetime.now(UTC)
    stub_ha.override(f"/api/history/period/{(end - timedelta(days=1)).isoformat().replace('+00:00', 'Z')}", body)
    with pytest.raises(HABadResponse):
        fetch_history(client_for(stub_ha), "binary_sensor.front_door", start=end - timedelta(days=1), end=end,
                      timeout=5, max_bytes=1_000_000)


def test_a_deeply_nested_body_is_refused_in_little_memory(stub_ha: StubHomeAssistant) -> None:
    """24 KB nested 24,000 deep once cost 1.4 GB through ijson's prefixes; it must cost next to nothing."""
    import tracemalloc

    end = datetime.now(UTC)
    stub_ha.override(f"/api/history/period/{(end - timedelta(days=1)).isoformat().replace('+00:00', 'Z')}",
                     b"[[" + b"[" * 24_000)
    tracemalloc.start()
    try:
        with pytest.raises(HABadResponse):
            fetch_history(client_for(stub_ha), "binary_sensor.front_door", start=end - timedelta(days=1), end=end,
                          timeout=5, max_bytes=1_000_000)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


def test_the_deadline_covers_a_slow_history(stub_ha: StubHomeAssistant) -> None:
    """The whole history would come a minute on: a timeout is the deadline's."""
    stub_ha.fault("slow_body", "/api/history/", delay=OUTLASTS_ANY_DEADLINE)
    with pytest.raises(HATimeout) as caught:
        fetch(stub_ha, "binary_sensor.front_door", timeout=0.5)
    assert "within 0.5 seconds" in caught.value.message


def test_the_byte_cap_covers_a_large_history(stub_ha: StubHomeAssistant) -> None:
    end = datetime.now(UTC)
    stub_ha.add_numeric_history("sensor.power", 20_000, end - timedelta(days=7), end, seed=1)
    with pytest.raises(HABadResponse) as caught:
        fetch(stub_ha, "sensor.power", max_bytes=100_000)
    assert caught.value.detail["reason"] == "too_large"


def test_streams_200000_rows(stub_ha: StubHomeAssistant) -> None:
    """A week of a chatty sensor: every row is counted and 50 points come back, min and max among them."""
    end = datetime.now(UTC)
    start = end - timedelta(days=7)
    stub_ha.add_numeric_history("sensor.grid_power", 200_000, start, end, seed=7, low=0, high=5000)
    values = [float(state) for _, state in stub_ha.history["sensor.grid_power"]]
    result = fetch_history(client_for(stub_ha), "sensor.grid_power", start=start, end=end, timeout=20,
                           max_bytes=64_000_000, unit="W")
    assert result.total_changes == 200_000 and len(result.changes) == 50 and result.truncated
    assert result.summary["kind"] == "numeric" and result.summary["unit"] == "W"
    assert (result.summary["min"], result.summary["max"]) == (min(values), max(values))  # type: ignore[typeddict-item]
    assert {min(values), max(values)} <= {float(c["state"]) for c in result.changes}


def test_memory_does_not_grow_with_the_number_of_rows(stub_ha: StubHomeAssistant) -> None:
    """Parsing 40,000 rows (a 2.7 MB body) peaks under a megabyte, the stub's own work included."""
    end = datetime.now(UTC)
    start = end - timedelta(days=7)
    stub_ha.add_numeric_history("sensor.grid_power", 40_000, start, end, seed=8, low=0, high=5000)
    tracemalloc.start()
    try:
        result = fetch_history(client_for(stub_ha), "sensor.grid_power", start=start, end=end, timeout=20,
                               max_bytes=64_000_000)
        _, peak = tracemalloc.get_traced_memory()
    finally:
        tracemalloc.stop()
    assert result.total_changes == 40_000
    # requests' .json() of the same body peaks near 19 MB. The digest itself keeps O(max_changes);
    # most of what is traced here is the stub's serving thread and the 64 KiB read buffers.
    assert peak < 1_500_000


@pytest.mark.parametrize("values", [["1e300", "-1e300"], ["1.7e308", "1.7e308", "1e308"]])
def test_values_near_the_float_limits_give_no_mean_rather_than_nan(values: list[str]) -> None:
    rows = [row(at(i + 1), value) for i, value in enumerate(values)]
    result = digest(rows)
    assert result.summary["kind"] == "numeric" and result.summary["mean"] is None
    json.dumps(result.to_result(), allow_nan=False)


@pytest.mark.parametrize("stamp", ["9999-12-31T23:00:00-14:00", "0001-01-01T00:00:00+14:00",
                                   "1969-12-31T23:59:59+00:00"])
def test_a_row_outside_the_window_or_the_calendar_is_a_bad_response(stamp: str) -> None:
    with pytest.raises(HABadResponse):
        digest([{"state": "on", "last_changed": stamp}])


# --- over the WebSocket, with REST as the fallback -------------------------------------------------


@pytest.fixture
def ws_stub() -> Iterator[StubWebSocket]:
    with running_ws() as server:
        yield server


def iso_z(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def compressed(rows: list[tuple[datetime, str]]) -> list[dict[str, Any]]:
    """Rows as HA's history/history_during_period writes them with minimal_response and no_attributes."""
    return [{"s": state, "lu": moment.timestamp()} for moment, state in rows]


def ws_client(server: StubWebSocket, token: str = WS_TOKEN) -> HomeAssistantClient:
    return HomeAssistantClient(server.base_url, Secret(token))


def read(client: HomeAssistantClient, entity_id: str, start: datetime, end: datetime,
         seconds: float = 5) -> HistoryDigest:
    return read_history(client, entity_id, start=start, end=end, deadline=Deadline(seconds), unit=None)


@pytest.mark.parametrize("compact", [True, False], ids=["split-by-rows", "parser-events"])
def test_the_websocket_gives_the_same_digest_as_the_rows(ws_stub: StubWebSocket, compact: bool) -> None:
    """One request/response: the rows' digest, with exactly the auth message and one allowlisted read.

    HA's compact answer is cut into rows for orjson; any other layout goes through parser events.
    """
    ws_stub.compact = compact
    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(days=1)
    rows = [(start, "off")] + [(start + timedelta(minutes=7 * i + 3), "on" if i % 2 == 0 else "off")
                               for i in range(150)]
    ws_stub.history["binary_sensor.front_door"] = compressed(rows)
    result = read(ws_client(ws_stub), "binary_sensor.front_door", start, end)
    expected = digest_history([row(moment, state) for moment, state in rows], start=start, end=end)
    assert result == expected
    auth, command = ws_stub.received
    (handshake,) = ws_stub.handshakes
    assert handshake.startswith("GET /api/websocket HTTP/1.1\r\n")
    assert f"host: 127.0.0.1:{ws_stub.server_address[1]}\r\n" in handshake.lower()
    assert WS_TOKEN not in handshake  # the token is in the auth message only
    assert auth == {"type": "auth", "access_token": WS_TOKEN}
    assert command == {"id": 1, "type": "history/history_during_period", "start_time": iso_z(start),
                       "end_time": iso_z(end), "entity_ids": ["binary_sensor.front_door"],
                       "minimal_response": True, "no_attributes": True}


def test_a_row_that_last_changed_before_it_was_updated_counts_from_its_change(ws_stub: StubWebSocket) -> None:
    """`lc` (last changed) wins over `lu` (last updated) where HA sends both."""
    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(hours=1)
    ws_stub.history["climate.hall"] = [
        {"s": "heat", "lu": start.timestamp()},
        {"s": "off", "lu": (start + timedelta(minutes=30)).timestamp(),
         "lc": (start + timedelta(minutes=20)).timestamp()}]
    states = read(ws_client(ws_stub), "climate.hall", start, end).summary["states"]  # type: ignore[typeddict-item]
    assert states["heat"]["seconds_in_state"] == 20 * 60 and states["off"]["seconds_in_state"] == 40 * 60


def test_no_websocket_means_the_rest_api(stub_ha: StubHomeAssistant) -> None:
    """The stub HA serves REST only: the upgrade is refused, and the same history comes over REST."""
    end = datetime.now(UTC)
    start = end - timedelta(days=1)
    stub_ha.history["binary_sensor.front_door"] = [(start - timedelta(hours=1), "off"),
                                                   (start + timedelta(hours=2), "on")]
    result = read(HomeAssistantClient(stub_ha.base_url, Secret(stub_ha.token)), "binary_sensor.front_door",
                  start, end)
    assert result.total_changes == 1 and result.changes[0]["state"] == "on"
    assert [r.path.split("/")[2] for r in stub_ha.requests] == ["websocket", "history"]


def test_a_hang_up_on_the_upgrade_means_the_rest_api(ws_stub: StubWebSocket,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    ws_stub.behaviour = "hang_up"
    monkeypatch.setattr(capabilities, "fetch_history", lambda *a, **k: "from REST")
    end = datetime.now(UTC)
    assert read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=1), end) == "from REST"  # type: ignore[comparison-overlap]


def test_a_huge_greeting_is_refused_before_it_is_held(ws_stub: StubWebSocket) -> None:
    """The history's byte cap is for the history: the auth messages have their own small one."""
    ws_stub.behaviour = "huge_greeting"
    end = datetime.now(UTC)
    with pytest.raises(HABadResponse) as caught:
        read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=1), end)
    assert caught.value.detail["reason"] == "too_large"
    assert ws_stub.received == []  # the token was never sent


def test_an_unknown_command_means_the_rest_api(ws_stub: StubWebSocket, stub_ha: StubHomeAssistant,
                                               monkeypatch: pytest.MonkeyPatch) -> None:
    """An older HA without the command answers unknown_command: REST is asked, within the same deadline."""
    ws_stub.history_error = "unknown_command"
    asked: list[str] = []

    def rest(client: Any, entity_id: str, **kwargs: Any) -> str:
        asked.append(entity_id)
        return "from REST"

    monkeypatch.setattr(capabilities, "fetch_history", rest)
    end = datetime.now(UTC)
    assert read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=1), end) == "from REST"  # type: ignore[comparison-overlap]
    assert asked == ["sensor.x"]


@pytest.mark.parametrize(("setup", "error", "reason"), [
    (lambda s: setattr(s, "history_error", "home_assistant_error"), HABadResponse, "command_failed"),
    (lambda s: setattr(s, "history_body", lambda i: b'{"id": %d, "type": "result", "success": true, "result": '
                       b'{"light.other": []}}' % i), HABadResponse, "wrong_shape"),
    (lambda s: setattr(s, "history_body", lambda i: b'{"id": %d, "type": "result", "success": true, "result": '
                       b'{"sensor.x": [{"s": "1", "lu": "yesterday"}]}}' % i), HABadResponse, "wrong_shape"),
    (lambda s: setattr(s, "history_body", lambda i: b'{"id": %d, "type": "result", "success": true, "result": '
                       b'{"sensor.x": [{"s": "1", "lu": 1}' % i), HABadResponse, "invalid_json"),
    (lambda s: setattr(s, "history_body", lambda i: b'{"id": 77, "type": "result", "success": true, "result": {}}'),
     HABadResponse, "wrong_shape"),
], ids=["command-failed", "other-entity", "bad-time", "cut-short", "other-id"])
def test_a_bad_websocket_answer_is_a_bad_response_not_a_fallback(ws_stub: StubWebSocket, setup: Any,
                                                                  error: type[Exception], reason: str) -> None:
    setup(ws_stub)
    end = datetime.now(UTC)
    with pytest.raises(error) as caught:
        read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=1), end)
    assert caught.value.detail["reason"] == reason  # type: ignore[attr-defined]


def test_a_refused_token_is_unauthorized_and_no_command_is_sent(ws_stub: StubWebSocket) -> None:
    end = datetime.now(UTC)
    with pytest.raises(HAUnauthorized):
        read(ws_client(ws_stub, token="not-the-token"), "sensor.x", end - timedelta(hours=1), end)
    assert [m["type"] for m in ws_stub.received] == ["auth"]


def test_the_deadline_covers_the_whole_websocket_call(ws_stub: StubWebSocket) -> None:
    """A Home Assistant slow to answer the read: HA_TIMEOUT at the deadline, not the (empty) answer 3 s on."""
    ws_stub.history_delay = 3
    end = datetime.now(UTC)
    with pytest.raises(HATimeout):
        read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=1), end, seconds=0.5)


def test_the_deadline_holds_for_an_answer_sent_a_byte_at_a_time(ws_stub: StubWebSocket) -> None:
    """The frame (3000 bytes, one every 0.05 s) would take minutes: a timeout is the deadline's."""
    ws_stub.trickle = True
    end = datetime.now(UTC)
    with pytest.raises(HATimeout):
        read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=1), end, seconds=0.6)


def test_a_redirected_upgrade_sends_the_token_nowhere(ws_stub: StubWebSocket) -> None:
    """A 302 on the upgrade is no WebSocket: nothing is sent to where it points, and REST (no redirects) answers."""
    elsewhere = socket.socket()
    elsewhere.bind(("127.0.0.1", 0))
    elsewhere.listen()
    elsewhere.settimeout(0.3)
    ws_stub.behaviour = "redirect"
    ws_stub.redirect_to = f"http://127.0.0.1:{elsewhere.getsockname()[1]}/api/websocket"
    end = datetime.now(UTC)
    try:
        with pytest.raises(HomeAssistantError):  # REST at the same address is no Home Assistant either
            read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=1), end)
        with pytest.raises(TimeoutError):
            elsewhere.accept()
    finally:
        elsewhere.close()
    assert ws_stub.received == []


def test_the_websocket_holds_one_of_the_places_calls_to_home_assistant_share(ws_stub: StubWebSocket) -> None:
    """While the read is in flight its WebSocket counts against the per-origin cap; none free is HA_BUSY."""
    limits = CallLimits(CallCaps(per_origin=1, in_all=4))
    client = HomeAssistantClient(ws_stub.base_url, Secret(WS_TOKEN), limits=limits)
    end = datetime.now(UTC)
    with limits.slot(ws_stub.base_url), pytest.raises(HABusy):
        read(client, "sensor.x", end - timedelta(hours=1), end)
    assert ws_stub.handshakes == []  # refused before connecting
    read(client, "sensor.x", end - timedelta(hours=1), end)  # the place is free again: the read runs
    assert [m["type"] for m in ws_stub.received] == ["auth", "history/history_during_period"]


def test_the_byte_cap_covers_the_websocket(ws_stub: StubWebSocket, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(capabilities, "MAX_HISTORY_BYTES", 50_000)
    end = datetime.now(UTC)
    ws_stub.history["sensor.x"] = compressed([(end - timedelta(seconds=i), str(i)) for i in range(5000, 0, -1)])
    with pytest.raises(HABadResponse) as caught:
        read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=2), end)
    assert caught.value.detail["reason"] == "too_large"


def test_a_deeply_nested_websocket_answer_is_refused_in_little_memory(ws_stub: StubWebSocket) -> None:
    """The same safety as over REST: nesting deeper than a history is refused as it arrives."""
    body = b'{"id": 1, "type": "result", "success": true, "result": {"sensor.x": [' + b"[" * 1_000_000
    ws_stub.history_body = lambda i: body  # built before tracing: only the client's memory is measured
    end = datetime.now(UTC)
    tracemalloc.start()
    try:
        with pytest.raises(HABadResponse):
            read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=1), end)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


@pytest.mark.parametrize(("separators", "limit"), [((",", ":"), 4), ((", ", ": "), 2)],
                         ids=["split-by-rows", "parser-events"])
def test_a_large_websocket_answer_is_never_held_whole(ws_stub: StubWebSocket, separators: tuple[str, str],
                                                      limit: int) -> None:
    """100,000 rows (about 4 MB) stream through in far less memory than the message itself."""
    end = datetime.now(UTC).replace(microsecond=0)
    start = end - timedelta(days=7)
    step = (end - start - timedelta(minutes=1)) / 100_000
    rows = [{"s": f"{i % 5000}.5", "lu": (start + step * (i + 1)).timestamp()} for i in range(100_000)]
    # Built before tracing starts, so that only the client's memory is measured.
    body = json.dumps({"id": 1, "type": "result", "success": True, "result": {"sensor.grid_power": rows}},
                      separators=separators).encode()
    del rows
    ws_stub.history_body = lambda i: body
    client = ws_client(ws_stub)
    read(client, "sensor.grid_power", end - timedelta(hours=1), end)  # warm: imports and the like
    tracemalloc.start()
    try:
        result = read(client, "sensor.grid_power", start, end, seconds=30)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert result.total_changes == 100_000
    assert len(body) > 3_500_000 and peak < limit * 1024 * 1024


# --- the result against its declared schema ---------------------------------------------------------


def _as_result(result: HistoryDigest) -> dict[str, Any]:
    return {"entity_id": "sensor.x", "friendly_name": "X", "period": "week", **result.to_result(),
            "retrieved_at": "2025-04-08T00:00:00Z"}


@settings(max_examples=100, deadline=None)
@given(series())
def test_every_result_matches_the_declared_schema(case: tuple[str | None, list[tuple[int, str]], int]) -> None:
    initial, changes, _ = case
    rows = ([row(START, initial)] if initial is not None else []) + [
        row(START + timedelta(microseconds=offset), state) for offset, state in changes]
    assert_matches_result_schema(GET_HISTORY_CAPABILITY.name, _as_result(digest(rows)))


def test_a_result_with_many_states_matches_the_declared_schema() -> None:
    rows = [row(at(i / 10), f"mode {i % 40}") for i in range(1, 1000)]
    result = _as_result(digest(rows))
    assert_matches_result_schema(GET_HISTORY_CAPABILITY.name, result)
    assert "other_states" in result["summary"]


def test_the_schema_describes_each_field_as_the_system_prompt_does() -> None:
    schema = json.dumps(GET_HISTORY_CAPABILITY.result_schema)
    for meaning in HISTORY_FIELD_MEANINGS.values():
        assert json.dumps(meaning) in schema


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(states=st.lists(st.one_of(st.sampled_from(['x},{"s":"y', ']}}', '},{"s":', "\\", '"', "on", "é☃"]),
                                 st.text(max_size=12)), min_size=1, max_size=60),
       batch=st.sampled_from([8, 64, 4096]))
def test_cutting_the_answer_at_row_boundaries_never_changes_a_row(states: list[str], batch: int) -> None:
    """States holding `},{"s":`, brackets, quotes or backslashes come through the split as they went in."""
    end = datetime(2025, 4, 8, tzinfo=UTC)
    start = end - timedelta(days=1)
    rows = [(start + timedelta(minutes=10 * i + 1), state) for i, state in enumerate(states)]
    body = json.dumps({"id": 3, "type": "result", "success": True, "result": {"sensor.x": compressed(rows)}},
                      separators=(",", ":")).encode()
    pieces = iter([body[i:i + 7] for i in range(0, len(body), 7)])
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(history_rows, "_BATCH_BYTES", batch)
        digester = history_digest.Digester(start=start, end=end, max_changes=50, unit=None)
        for taken in history_rows.ws_row_batches(pieces, "sensor.x", 3):
            digester.add(taken)
    assert digester.finish() == digest_history([row(moment, state) for moment, state in rows], start=start, end=end)


def test_a_deeply_nested_compact_answer_is_refused_in_little_memory(ws_stub: StubWebSocket) -> None:
    """HA's own head, then brackets: no row boundary within a megabyte is no history, refused as it arrives."""
    body = b'{"id":1,"type":"result","success":true,"result":{"sensor.x":[' + b"[" * 3_000_000
    ws_stub.history_body = lambda i: body  # built before tracing: only the client's memory is measured
    end = datetime.now(UTC)
    tracemalloc.start()
    try:
        with pytest.raises(HABadResponse):
            read(ws_client(ws_stub), "sensor.x", end - timedelta(hours=1), end)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 4 * 1024 * 1024


@pytest.mark.parametrize("rows", [
    b'{"s":"1","lu":1},{"s":' + b"[" * 5000 + b"]" * 5000 + b',"lu":2}',
    b'{"s":"1","lu":1},{"s":2,"lu":2}',
    b'{"s":"1"}',
    b'{"s":"1","lu":"1"}',
    b'{"s":"1","lu":1}],"light.other":[{"s":"1","lu":2}',
], ids=["deep-state", "number-state", "no-time", "text-time", "second-entity"])
def test_a_bad_row_in_a_compact_answer_is_a_bad_response(ws_stub: StubWebSocket, rows: bytes) -> None:
    ws_stub.history_body = lambda i: (b'{"id":%d,"type":"result","success":true,"result":{"sensor.x":[' % i
                                      + rows + b"]}}")
    end = datetime.now(UTC)
    with pytest.raises(HABadResponse):
        read(ws_client(ws_stub), "sensor.x", datetime(1970, 1, 1, tzinfo=UTC), end)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(rows=st.lists(st.tuples(st.integers(-10**9, 6 * 3600 * 10**6),
                               st.sampled_from(["on", "off", "unavailable", "unknown", "1.5", "2", "nan", "inf",
                                                "-inf", "1e3", "heat"])), max_size=40),
       hours=st.sampled_from([0, 2, -5, 5.5]), batch=st.sampled_from([8, 64, 4096]))
def test_rest_and_websocket_rows_give_the_same_digest(rows: list[tuple[int, str]], hours: float, batch: int) -> None:
    """REST's ISO times with any offset and WebSocket epoch floats, around a window starting mid-second."""
    start = datetime(2025, 4, 1, 0, 0, 0, 250_000, tzinfo=UTC)
    end = start + timedelta(hours=6)
    rows = sorted(rows)
    zone = timezone(timedelta(hours=hours))
    body = json.dumps([[{"state": s, "last_changed": (start + timedelta(microseconds=o)).astimezone(zone).isoformat()}
                        for o, s in rows]]).encode()
    by_rest = history_digest.Digester(start=start, end=end, max_changes=10, unit=None)
    by_rest.add(history_rows.rest_rows(io.BytesIO(body), "sensor.x"))
    answer = json.dumps({"id": 1, "type": "result", "success": True, "result": {"sensor.x": [
        {"s": s, "lu": (start + timedelta(microseconds=o)).timestamp()} for o, s in rows]}}, separators=(",", ":"))
    by_ws = history_digest.Digester(start=start, end=end, max_changes=10, unit=None)
    with pytest.MonkeyPatch.context() as patch:
        patch.setattr(history_rows, "_BATCH_BYTES", batch)
        pieces = iter([answer.encode()[i:i + 5] for i in range(0, len(answer), 5)])
        for taken in history_rows.ws_row_batches(pieces, "sensor.x", 1):
            by_ws.add(taken)
    rest_result, ws_result = by_rest.finish().to_result(), by_ws.finish().to_result()
    assert rest_result == ws_result
    summary = rest_result["summary"]
    if summary["kind"] == "states":
        # The states' seconds add up to the time the entity had a state in the window, to the second.
        covered = (end - start) // timedelta(microseconds=1) - max(0, rows[0][0]) if rows else 0
        total = sum(t["seconds_in_state"] for t in summary["states"].values())
        assert abs(total * 1_000_000 - covered) <= 500_000
