"""get_statistics against the stub's recorder: calendar periods in Home Assistant's time zone, meters and
measurements worked out plainly from the rows, the refusal for an entity without statistics, and faults."""

from __future__ import annotations

import json
import math
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, date, datetime, timedelta
from typing import Any
from zoneinfo import ZoneInfo

import pytest
from hypothesis import given
from hypothesis import strategies as st

from console_ha.capabilities import get_statistics
from console_ha.capabilities.get_statistics import NAME as GET_STATISTICS
from console_ha.capabilities.get_statistics import PERIODS, RESULT_BUDGET_BYTES, calendar
from console_ha.deadline import Deadline
from console_ha.errors import CapabilityError, HABadResponse, HANoStatistics
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.ha.statistics import MEASUREMENT_TYPES, METER_TYPES, StatisticsMeta
from console_ha.ha.statistics_digest import StatisticsDigester, figure
from console_ha.secret import Secret
from console_ha.store.config import HomeAssistantConfig
from console_ha.store.datadir import DataDir
from console_ha.words import MODEL_WORDS
from tests.executors import executor_over
from tests.result_schemas import assert_matches_result_schema
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant
from tests.stub_ha_statistics import (
    energy_rows,
    hour_starts,
    measurement_metadata,
    meter_metadata,
    temperature_rows,
)

AMSTERDAM = ZoneInfo("Europe/Amsterdam")
# Mid-November 2026: last month is October, whose last Sunday turns the clocks back (a 25-hour day).
NOW = datetime(2026, 11, 15, 10, 30, tzinfo=UTC)
ENERGY = "sensor.energy_consumption"
TEMPERATURE = "sensor.living_room_temperature"
HOURS = 2 * 366 * 24


@pytest.fixture
def stub(stub_ha: StubHomeAssistant) -> StubHomeAssistant:
    """The stub with two years of hourly energy and temperature rows up to NOW."""
    statistics = stub_ha.serve_statistics(seeded=False)
    starts = hour_starts(NOW, HOURS)
    statistics.add(meter_metadata(ENERGY, "kWh"), energy_rows(starts, seed=3, first_sum=100.0))
    statistics.add(measurement_metadata(TEMPERATURE, "°C"), temperature_rows(starts, seed=4))
    return stub_ha


def read(stub: StubHomeAssistant, entity_id: str, period: str, now: datetime = NOW) -> dict[str, Any]:
    with HomeAssistantClient(stub.base_url, Secret(stub.token)) as client:
        result = get_statistics.execute(client, HomeAssistantConfig(), {"entity_id": entity_id, "period": period},
                                        Deadline(10), now)
    assert_matches_result_schema(GET_STATISTICS, result)
    return result


def local_day(start: int) -> date:
    return datetime.fromtimestamp(start, AMSTERDAM).date()


# --- the calendar ----------------------------------------------------------------------------------


@pytest.mark.parametrize(("period", "start", "end", "points"), [
    ("this_month", datetime(2026, 11, 1, tzinfo=AMSTERDAM), NOW, 15),
    ("last_month", datetime(2026, 10, 1, tzinfo=AMSTERDAM), datetime(2026, 11, 1, tzinfo=AMSTERDAM), 31),
    ("past_30_days", datetime(2026, 10, 17, tzinfo=AMSTERDAM), NOW, 30),
    ("this_year", datetime(2026, 1, 1, tzinfo=AMSTERDAM), NOW, 11),
    ("last_year", datetime(2025, 1, 1, tzinfo=AMSTERDAM), datetime(2026, 1, 1, tzinfo=AMSTERDAM), 12),
    ("past_12_months", datetime(2025, 12, 1, tzinfo=AMSTERDAM), NOW, 12),
])
def test_each_period_is_a_stretch_of_the_households_calendar(period: str, start: datetime, end: datetime,
                                                             points: int) -> None:
    window = PERIODS[period].window(NOW.astimezone(AMSTERDAM))
    assert window == (start, end)
    bounds, labels = calendar(PERIODS[period], *window)
    assert len(labels) == points and len(bounds) == points + 1


def test_a_day_is_local_midnight_to_midnight_even_when_the_clocks_go_back() -> None:
    start, end = PERIODS["last_month"].window(NOW.astimezone(AMSTERDAM))
    bounds, labels = calendar(PERIODS["last_month"], start, end)
    lengths = dict(zip(labels, (b - a for a, b in zip(bounds, bounds[1:], strict=False)), strict=True))
    assert lengths["2026-10-25"] == 25 * 3600 * 1000  # summer time ends
    assert lengths["2026-10-24"] == 24 * 3600 * 1000
    assert bounds[0] == int(datetime(2026, 9, 30, 22, tzinfo=UTC).timestamp() * 1000)


def test_january_looks_back_to_december_of_the_year_before() -> None:
    january = datetime(2027, 1, 10, 9, tzinfo=AMSTERDAM)
    assert PERIODS["last_month"].window(january)[0] == datetime(2026, 12, 1, tzinfo=AMSTERDAM)
    assert PERIODS["past_12_months"].window(january)[0] == datetime(2026, 2, 1, tzinfo=AMSTERDAM)


# --- meters and measurements, worked out plainly from the stub's rows ---------------------------------


def test_last_months_energy_is_the_meters_rise_over_october_day_by_day(stub: StubHomeAssistant) -> None:
    result = read(stub, ENERGY, "last_month")
    rows = stub.statistics.entities[ENERGY].rows  # type: ignore[union-attr]
    start = datetime(2026, 10, 1, tzinfo=AMSTERDAM).timestamp()
    end = datetime(2026, 11, 1, tzinfo=AMSTERDAM).timestamp()
    before = [r["sum"] for r in rows if r["start"] < start][-1]
    last = [r["sum"] for r in rows if r["start"] < end][-1]
    per_day: dict[date, float] = defaultdict(float)
    previous = before
    for r in rows:
        if start <= r["start"] < end:
            per_day[local_day(r["start"])] += r["sum"] - previous
            previous = r["sum"]
    assert (result["kind"], result["unit"], result["time_zone"]) == ("meter", "kWh", "Europe/Amsterdam")
    assert (result["start"], result["end"]) == ("2026-09-30T22:00:00Z", "2026-10-31T23:00:00Z")
    assert result["summary"]["change"] == pytest.approx(last - before, rel=1e-5)
    assert result["summary"]["hours"] == 31 * 24 + 1
    assert [p["date"] for p in result["points"]] == [d.isoformat() for d in sorted(per_day)]
    assert [p["change"] for p in result["points"]] == pytest.approx([per_day[d] for d in sorted(per_day)], rel=1e-5)


def test_a_year_period_has_a_point_a_month(stub: StubHomeAssistant) -> None:
    result = read(stub, ENERGY, "last_year")
    assert [p["month"] for p in result["points"]] == [f"2025-{m:02d}" for m in range(1, 13)]
    assert sum(p["change"] for p in result["points"]) == pytest.approx(result["summary"]["change"], rel=1e-5)
    assert result["summary"]["hours"] == 365 * 24


def test_a_temperature_months_mean_min_and_max_with_when_they_were_reached(stub: StubHomeAssistant) -> None:
    result = read(stub, TEMPERATURE, "last_month")
    rows = stub.statistics.entities[TEMPERATURE].rows  # type: ignore[union-attr]
    start = datetime(2026, 10, 1, tzinfo=AMSTERDAM).timestamp()
    end = datetime(2026, 11, 1, tzinfo=AMSTERDAM).timestamp()
    october = [r for r in rows if start <= r["start"] < end]
    coldest = min(october, key=lambda r: (r["min"], r["start"]))
    warmest = min(october, key=lambda r: (-r["max"], r["start"]))
    assert (result["kind"], result["unit"]) == ("measurement", "°C")
    summary = result["summary"]
    assert summary["mean"] == pytest.approx(sum(r["mean"] for r in october) / len(october), rel=1e-5)
    assert (summary["min"], summary["max"]) == (coldest["min"], warmest["max"])
    assert summary["min_at"] == datetime.fromtimestamp(coldest["start"], UTC).isoformat().replace("+00:00", "Z")
    assert summary["max_at"] == datetime.fromtimestamp(warmest["start"], UTC).isoformat().replace("+00:00", "Z")
    first_day = [r for r in october if local_day(r["start"]) == date(2026, 10, 1)]
    assert result["points"][0] == {
        "date": "2026-10-01", "mean": pytest.approx(sum(r["mean"] for r in first_day) / 24, rel=1e-5),
        "min": min(r["min"] for r in first_day), "max": max(r["max"] for r in first_day)}


def test_only_the_statistics_read_is_sent_with_the_fields_of_its_kind(stub: StubHomeAssistant) -> None:
    read(stub, ENERGY, "this_month")
    read(stub, TEMPERATURE, "this_year")
    sent = [json.loads(m) for m in stub.ws_messages if '"auth"' not in m]
    assert [m["type"] for m in sent] == ["get_config", "recorder/get_statistics_metadata",
                                         "recorder/statistics_during_period"] * 2
    assert [m["types"] for m in sent[2::3]] == [list(METER_TYPES), list(MEASUREMENT_TYPES)]
    assert {m["period"] for m in sent[2::3]} == {"hour"}
    assert [m["statistic_ids"] for m in sent if "statistic_ids" in m] == [[ENERGY]] * 2 + [[TEMPERATURE]] * 2
    assert [r.path for r in stub.requests] == ["/api/websocket"] * 2  # one connection a read, nothing else


def test_an_ongoing_period_ends_now_and_the_result_stays_small(stub: StubHomeAssistant) -> None:
    result = read(stub, TEMPERATURE, "this_month")
    assert result["end"] == "2026-11-15T10:30:00Z" and result["points"][-1]["date"] == "2026-11-15"
    assert len(json.dumps(result).encode()) < RESULT_BUDGET_BYTES


def test_thirty_one_days_of_the_longest_figures_stay_under_8_kib(stub: StubHomeAssistant) -> None:
    """The worst a month can be: every figure negative, six digits and a fraction, min and max present."""
    starts = hour_starts(NOW, 50 * 24)
    stub.statistics.add(  # type: ignore[union-attr]
        measurement_metadata("sensor.long_figures", "°C"),
        [{"start": s, "mean": -1.23456789e-5, "min": -123456.789012, "max": -1234567.89012} for s in starts])
    result = read(stub, "sensor.long_figures", "last_month")
    assert len(result["points"]) == 31
    size = len(json.dumps(result, ensure_ascii=False).encode())
    assert size < RESULT_BUDGET_BYTES


@pytest.mark.parametrize("unit", ["k" * 9000, "kWh\u202e\x00" + "h" * 70_000])
def test_a_unit_home_assistant_makes_long_or_odd_is_cut_and_the_result_stays_under_8_kib(
        stub: StubHomeAssistant, unit: str) -> None:
    stub.statistics.add(meter_metadata("sensor.odd_unit", unit),  # type: ignore[union-attr]
                        energy_rows(hour_starts(NOW, 50 * 24), seed=5))
    result = read(stub, "sensor.odd_unit", "last_month")
    assert len(json.dumps(result, ensure_ascii=False).encode()) < RESULT_BUDGET_BYTES
    assert result["unit"].startswith(unit[:3]) and result["unit"].endswith("…")
    assert "\u202e" not in result["unit"] and "\x00" not in result["unit"]


def test_this_month_asked_at_its_first_instant_is_empty_not_a_crash(stub: StubHomeAssistant) -> None:
    first_instant = datetime(2026, 12, 1, tzinfo=AMSTERDAM).astimezone(UTC)
    result = read(stub, ENERGY, "this_month", now=first_instant)
    assert (result["start"], result["end"], result["points"], result["summary"]) == (
        "2026-11-30T23:00:00Z", "2026-11-30T23:00:00Z", [], None)


def test_hours_with_extremes_but_no_mean_keep_the_result_within_its_schema(stub: StubHomeAssistant) -> None:
    starts = hour_starts(NOW, 24 * 50)
    rows = [{"start": s, "mean": None, "min": 1.0, "max": 2.0} for s in starts]
    stub.statistics.add(measurement_metadata("sensor.no_means", "°C"), rows)  # type: ignore[union-attr]
    summary = read(stub, "sensor.no_means", "last_month")["summary"]
    assert (summary["mean"], summary["min"], summary["max"], summary["hours"]) == (None, 1.0, 2.0, 0)


def test_a_period_before_the_statistics_began_has_no_points_and_no_summary(stub: StubHomeAssistant) -> None:
    result = read(stub, ENERGY, "last_year", now=NOW + timedelta(days=5 * 365))
    assert (result["points"], result["summary"]) == ([], None)


def test_hours_without_a_value_are_left_out_of_the_mean_not_counted_as_zero(stub: StubHomeAssistant) -> None:
    starts = hour_starts(NOW, 24 * 50)
    rows = [{"start": s, "mean": None if i % 2 else 20.0, "min": None if i % 2 else 19.0, "max": 21.0}
            for i, s in enumerate(starts)]
    stub.statistics.add(measurement_metadata("sensor.gappy", "°C"), rows)  # type: ignore[union-attr]
    summary = read(stub, "sensor.gappy", "last_month")["summary"]
    assert (summary["mean"], summary["min"], summary["max"]) == (20.0, 19.0, 21.0)


def test_a_wind_direction_averages_as_a_direction(stub: StubHomeAssistant) -> None:
    """350° and 10° average to north (0°), not to 180°."""
    starts = hour_starts(NOW, 24 * 50)
    rows = [{"start": s, "mean": 350.0 if i % 2 else 10.0, "min": None, "max": None} for i, s in enumerate(starts)]
    stub.statistics.add(measurement_metadata("sensor.wind_direction", "°", circular=True), rows)  # type: ignore[union-attr]
    summary = read(stub, "sensor.wind_direction", "last_month")["summary"]
    assert min(summary["mean"], 360 - summary["mean"]) < 0.1
    assert (summary["min"], summary["min_at"]) == (None, None)


# --- no statistics: a refusal the model can act on -------------------------------------------------


def configured(data_dir: DataDir, stub: StubHomeAssistant, allowlist: list[str]) -> Any:
    seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": allowlist},
                  token=stub.token)
    return executor_over(data_dir, clock=NOW.timestamp)


def test_an_entity_without_statistics_is_refused_with_words_that_point_to_get_history(
        stub: StubHomeAssistant, data_dir: DataDir) -> None:
    executor = configured(data_dir, stub, ["binary_sensor.front_door"])
    proposal = executor.propose(GET_STATISTICS, {"entity_id": "binary_sensor.front_door", "period": "last_month"},
                                conversation_id="c")
    with pytest.raises(CapabilityError) as caught:
        executor.answer(proposal.token, approve=True, conversation_id="c")
    assert (caught.value.code, caught.value.stage) == ("HA_NO_STATISTICS", 5)
    assert caught.value.message == MODEL_WORDS["HA_NO_STATISTICS"] and "get_history" in caught.value.message
    audit = (data_dir.root / "capabilities" / "audit.jsonl").read_text().splitlines()
    assert '"HA_NO_STATISTICS"' in audit[-1]


def test_an_entity_through_the_executor_reads_its_statistics(stub: StubHomeAssistant, data_dir: DataDir) -> None:
    executor = configured(data_dir, stub, [ENERGY])
    proposal = executor.propose(GET_STATISTICS, {"entity_id": ENERGY, "period": "last_month"}, conversation_id="c")
    assert "last month" in proposal.card.title
    # No read of its state yet: the card cannot tell a meter from a measurement, and says both as conditions.
    assert "for a meter they say how much it counted last month" in proposal.card.body
    result = executor.answer(proposal.token, approve=True, conversation_id="c")
    assert result["kind"] == "meter" and len(result["points"]) == 31


def test_metadata_without_a_mean_or_a_sum_is_no_statistics(stub: StubHomeAssistant) -> None:
    meta = {**meter_metadata("sensor.odd", "kWh"), "has_sum": False}
    stub.statistics.add(meta, [])  # type: ignore[union-attr]
    with pytest.raises(HANoStatistics):
        read(stub, "sensor.odd", "last_month")


# --- faults: a bad answer is HA_BAD_RESPONSE, never a crash or a wrong figure ----------------------


@pytest.fixture
def raw(stub: StubHomeAssistant) -> Iterator[Any]:
    def answer_with(make: Any) -> None:
        stub.statistics.raw_answer = make  # type: ignore[union-attr]
    yield answer_with


def _compact(message_id: int, rows: str, entity: str = ENERGY) -> bytes:
    return f'{{"id":{message_id},"type":"result","success":true,"result":{{"{entity}":[{rows}]}}}}'.encode()


_MS = int(datetime(2026, 10, 10, tzinfo=UTC).timestamp() * 1000)


@pytest.mark.parametrize("answer", [
    pytest.param(lambda i: _compact(i, f'{{"start":{_MS},"change":"1.5"}}'), id="text-figure"),
    pytest.param(lambda i: _compact(i, f'{{"start":{_MS},"change":true}}'), id="bool-figure"),
    pytest.param(lambda i: _compact(i, '{"start":null,"change":1}'), id="no-start"),
    pytest.param(lambda i: _compact(i, '{"start":1000,"change":1}'), id="outside-the-period"),
    pytest.param(lambda i: _compact(i, f'{{"start":{_MS},"change":1e308}},{{"start":{_MS},"change":1e308}}'),
                 id="overflowing-sum"),
    pytest.param(lambda i: _compact(i, f'{{"start":{_MS},"change":1}}', entity="sensor.other"), id="other-entity"),
    pytest.param(lambda i: _compact(i, f'{{"start":{_MS},"change":1')[:-5], id="cut-short"),
    pytest.param(lambda i: _compact(i, f'{{"start":{_MS},"change":1}},[]'), id="not-an-object"),
    pytest.param(lambda i: f'{{"id":{i},"type":"result","success":true,"result":[]}}'.encode(), id="list-result"),
    pytest.param(lambda i: f'{{"id":{i},"type":"result","success":true,"result":{{"sensor.x":[]}}}}'.encode(),
                 id="other-entity-empty"),
    pytest.param(lambda i: f'{{"id":{i + 1},"type":"result","success":true,"result":{{}}}}'.encode(), id="other-id"),
    pytest.param(lambda i: f'{{"id":{i},"type":"result","success":false,"error":{{"code":"x"}}}}'.encode(),
                 id="error"),
    pytest.param(lambda i: b"not json", id="not-json"),
])
def test_an_answer_that_is_not_statistics_is_a_bad_response(stub: StubHomeAssistant, raw: Any, answer: Any) -> None:
    raw(answer)
    with pytest.raises(HABadResponse) as caught:
        read(stub, ENERGY, "last_month")
    assert caught.value.code == "HA_BAD_RESPONSE"


def test_an_empty_result_in_home_assistants_layout_is_no_points(stub: StubHomeAssistant, raw: Any) -> None:
    raw(lambda i: f'{{"id":{i},"type":"result","success":true,"result":{{}}}}'.encode())
    assert read(stub, ENERGY, "last_month")["points"] == []


# "a/a/.../b" (a thousand levels) made zoneinfo's lookup recurse past Python's limit: a crash, not a refusal.
@pytest.mark.parametrize("zone", [None, "", "Mars/Olympus_Mons", "../../etc/passwd", 5, "a/" * 1000 + "b",
                                  "Europe/" + "x" * 100_000])
def test_a_time_zone_the_console_does_not_know_is_a_bad_response(stub: StubHomeAssistant, zone: Any) -> None:
    stub.config["time_zone"] = zone
    with pytest.raises(HABadResponse):
        read(stub, ENERGY, "last_month")


def test_the_calendar_follows_home_assistants_time_zone(stub: StubHomeAssistant) -> None:
    stub.config["time_zone"] = "America/New_York"
    result = read(stub, ENERGY, "last_month")
    assert (result["time_zone"], result["start"]) == ("America/New_York", "2026-10-01T04:00:00Z")
    assert math.isclose(sum(p["change"] for p in result["points"]), result["summary"]["change"], rel_tol=1e-5)


def test_the_two_small_reads_are_answered_in_any_order(stub: StubHomeAssistant) -> None:
    """Home Assistant answers each command when it is ready: the time zone may come after the metadata."""
    stub.ws_config_late = True
    stub.config["time_zone"] = "America/New_York"
    result = read(stub, ENERGY, "last_month")
    assert (result["time_zone"], result["kind"], len(result["points"])) == ("America/New_York", "meter", 31)


# --- the digest against a plain fold, over random rows -----------------------------------------------

_BOUNDS = [0, 10_000, 25_000, 26_000, 90_000]
_LABELS = ["a", "b", "c", "d"]
_FIGURE = st.one_of(st.none(), st.floats(-1e6, 1e6, allow_nan=False), st.integers(-10**6, 10**6))


@given(st.lists(st.tuples(st.integers(0, 89_999), _FIGURE, _FIGURE, _FIGURE), max_size=60), st.integers(1, 3))
def test_the_digest_agrees_with_a_plain_fold(rows: list[tuple[int, Any, Any, Any]], batches: int) -> None:
    """Any rows in the period, in order and in any batches: each point's mean, min, max (and when) as folded plainly."""
    rows.sort(key=lambda r: r[0])
    objects = [{"start": start, "mean": mean, "min": low, "max": high} for start, mean, low, high in rows]
    digester = StatisticsDigester(StatisticsMeta("measurement", "°C"), _BOUNDS, _LABELS, label_key="date")
    size = max(1, len(objects) // batches)
    for i in range(0, len(objects), size):
        digester.add(objects[i:i + size])
    points, summary = digester.finish()
    expected = []
    for label, low_bound, high_bound in zip(_LABELS, _BOUNDS, _BOUNDS[1:], strict=False):
        inside = [r for r in rows if low_bound <= r[0] < high_bound]
        means = [r[1] for r in inside if r[1] is not None]
        lows = [r[2] for r in inside if r[2] is not None]
        highs = [r[3] for r in inside if r[3] is not None]
        if means or lows or highs:
            expected.append({"date": label, "mean": figure(sum(means) / len(means)) if means else None,
                             "min": figure(min(lows)) if lows else None, "max": figure(max(highs)) if highs else None})
    assert [{**p, "mean": p["mean"] and pytest.approx(p["mean"], rel=1e-5, abs=1e-6)} for p in expected] == points
    if summary is not None:
        lows = [(r[2], r[0]) for r in rows if r[2] is not None]
        if lows:
            value, at = min(lows, key=lambda pair: (pair[0], pair[1]))
            assert summary["min"] == figure(value)
            assert summary["min_at"] == datetime.fromtimestamp(at / 1000, UTC).isoformat(timespec="seconds").replace(
                "+00:00", "Z")


@given(st.lists(st.one_of(st.integers(-5, 90_005), st.text(max_size=3), st.booleans(), st.none(), st.floats()),
                min_size=1, max_size=5))
def test_a_row_the_digest_cannot_use_is_a_bad_response_never_a_crash(starts: list[Any]) -> None:
    digester = StatisticsDigester(StatisticsMeta("meter", "kWh"), _BOUNDS, _LABELS, label_key="date")
    try:
        digester.add([{"start": start, "change": 1.0} for start in starts])
    except HABadResponse:
        return
    assert all(type(s) in (int, float) and 0 <= s < 90_000 for s in starts)
