""""How much electricity did we use last month?" and "how warm was it?" against a real Home Assistant's statistics.

A year of hourly statistics for an energy meter (sums, total_increasing) and a temperature (mean, min, max)
is imported in set-up through Home Assistant's own recorder import (`recorder/import_statistics`, sent by the
test over the harness's WebSocket, never by the package); the answers are then checked against figures
worked out plainly from what was imported, on Home Assistant's calendar (Europe/Amsterdam).
"""

from __future__ import annotations

import math
import random
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any
from zoneinfo import ZoneInfo

import pytest

from console_ha.capabilities.get_statistics import NAME as GET_STATISTICS
from console_ha.errors import CapabilityError
from console_ha.words import MODEL_WORDS
from tests.real_ha.harness import RealHomeAssistant
from tests.real_ha.test_capabilities_real import CONVERSATION, make_executor, run

pytestmark = pytest.mark.real_ha

ZONE = ZoneInfo("Europe/Amsterdam")  # the harness's configuration.yaml
# Statistics only: no state, no other writer, so the recorder's own hourly compile leaves them alone.
ENERGY = "sensor.console_test_energy"
TEMPERATURE = "sensor.console_test_outdoor_temperature"
YEAR_HOURS = 366 * 24
IMPORT_BATCH = 744  # a month of rows a message
# The import is queued and written a row at a time: about two minutes for the two years of rows here.
IMPORT_WAIT = 600


def hour_starts(hours: int) -> list[datetime]:
    """The whole hours before the current one, oldest first (the current hour's row does not exist yet)."""
    last = datetime.now(UTC).replace(minute=0, second=0, microsecond=0) - timedelta(hours=1)
    return [last - timedelta(hours=i) for i in range(hours - 1, -1, -1)]


def import_statistics(real_ha: RealHomeAssistant, metadata: dict[str, Any], stats: list[dict[str, Any]]) -> None:
    """Home Assistant's own import, a month a message, then wait until its recorder holds every row."""
    with real_ha.websocket() as ws:
        for i in range(0, len(stats), IMPORT_BATCH):
            batch = [{**row, "start": row["start"].isoformat()} for row in stats[i:i + IMPORT_BATCH]]
            ws.command("recorder/import_statistics", metadata=metadata, stats=batch)
        # The recorder takes the batches in order, one row at a time: the last row there means all are.
        deadline = time.monotonic() + IMPORT_WAIT
        while not _rows(ws, metadata["statistic_id"], stats[-1]["start"]):
            if time.monotonic() > deadline:
                raise TimeoutError(f"the recorder had not imported {metadata['statistic_id']} after {IMPORT_WAIT} s")
            time.sleep(2)
        assert len(_rows(ws, metadata["statistic_id"], stats[0]["start"])) == len(stats)


def _rows(ws: Any, statistic_id: str, since: datetime) -> list[dict[str, Any]]:
    answer = ws.command("recorder/statistics_during_period", start_time=since.isoformat(),
                        statistic_ids=[statistic_id], period="hour", types=["sum", "mean"])
    rows: list[dict[str, Any]] = answer.get(statistic_id, [])
    return rows


ENERGY_METADATA = {"has_mean": False, "has_sum": True, "name": "Console test energy", "source": "recorder",
                   "statistic_id": ENERGY, "unit_of_measurement": "kWh"}
TEMPERATURE_METADATA = {"has_mean": True, "has_sum": False, "name": "Console test outdoor temperature",
                        "source": "recorder", "statistic_id": TEMPERATURE, "unit_of_measurement": "°C"}


def year_of_statistics(hours: int = YEAR_HOURS) -> dict[str, list[dict[str, Any]]]:
    """Hourly energy sums (rising 0.05 to 2 kWh an hour) and temperature means, minima and maxima (a yearly
    and a daily swing, and noise), for the whole hours up to the last one."""
    rng = random.Random(19)
    energy, total = [], 1000.0
    temperature = []
    for start in hour_starts(hours):
        total = round(total + rng.uniform(0.05, 2.0), 3)
        energy.append({"start": start, "state": total, "sum": total})
        mean = round(10 + 8 * math.sin(2 * math.pi * start.timestamp() / 31_557_600)
                     + 3 * math.sin(2 * math.pi * start.timestamp() / 86_400) + rng.uniform(-1, 1), 2)
        temperature.append({"start": start, "mean": mean, "min": round(mean - rng.uniform(0, 1.5), 2),
                            "max": round(mean + rng.uniform(0, 1.5), 2)})
    return {"energy": energy, "temperature": temperature}


@pytest.fixture(scope="module")
def imported(real_ha: RealHomeAssistant) -> dict[str, list[dict[str, Any]]]:
    """A year and a day of hourly energy sums and temperature means, minima and maxima, imported."""
    year = year_of_statistics()
    import_statistics(real_ha, ENERGY_METADATA, year["energy"])
    import_statistics(real_ha, TEMPERATURE_METADATA, year["temperature"])
    return year


def _last_month() -> tuple[datetime, datetime]:
    """Last month on Home Assistant's calendar, as the test works it out: [its first midnight, this month's)."""
    now = datetime.now(ZONE)
    this_month = datetime(now.year, now.month, 1, tzinfo=ZONE)
    before = this_month - timedelta(days=1)
    return datetime(before.year, before.month, 1, tzinfo=ZONE), this_month


def _z(moment: datetime) -> str:
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def test_last_months_energy_is_the_sum_computed_from_what_was_imported(
        real_ha: RealHomeAssistant, imported: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    start, end = _last_month()
    rows = imported["energy"]
    before = [r["sum"] for r in rows if r["start"] < start][-1]
    in_month = [r for r in rows if start <= r["start"] < end]
    executor = make_executor(tmp_path, real_ha, [ENERGY])

    result = run(executor, GET_STATISTICS, {"entity_id": ENERGY, "period": "last_month"})

    assert (result["kind"], result["unit"], result["time_zone"]) == ("meter", "kWh", "Europe/Amsterdam")
    assert (result["start"], result["end"]) == (_z(start), _z(end))
    assert result["summary"]["change"] == pytest.approx(in_month[-1]["sum"] - before, rel=1e-5)
    assert result["summary"]["hours"] == len(in_month)
    days = {r["start"].astimezone(ZONE).date().isoformat() for r in in_month}
    assert [p["date"] for p in result["points"]] == sorted(days)
    assert sum(p["change"] for p in result["points"]) == pytest.approx(result["summary"]["change"], rel=1e-4)


def test_a_temperature_months_mean_min_and_max_are_those_of_what_was_imported(
        real_ha: RealHomeAssistant, imported: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    start, end = _last_month()
    month = [r for r in imported["temperature"] if start <= r["start"] < end]
    coldest = min(month, key=lambda r: (r["min"], r["start"]))
    warmest = min(month, key=lambda r: (-r["max"], r["start"]))
    executor = make_executor(tmp_path, real_ha, [TEMPERATURE])

    result = run(executor, GET_STATISTICS, {"entity_id": TEMPERATURE, "period": "last_month"})

    summary = result["summary"]
    assert (result["kind"], result["unit"]) == ("measurement", "°C")
    assert summary["mean"] == pytest.approx(sum(r["mean"] for r in month) / len(month), rel=1e-5)
    assert (summary["min"], summary["max"]) == (coldest["min"], warmest["max"])
    assert (summary["min_at"], summary["max_at"]) == (_z(coldest["start"]), _z(warmest["start"]))
    first_day = [r for r in month if r["start"].astimezone(ZONE).date() == start.date()]
    assert result["points"][0]["date"] == start.date().isoformat()
    assert result["points"][0]["mean"] == pytest.approx(sum(r["mean"] for r in first_day) / len(first_day), rel=1e-5)


def test_the_past_12_months_have_a_point_a_month_adding_up_to_the_total(
        real_ha: RealHomeAssistant, imported: dict[str, list[dict[str, Any]]], tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, [ENERGY])

    result = run(executor, GET_STATISTICS, {"entity_id": ENERGY, "period": "past_12_months"})

    now = datetime.now(ZONE)
    assert len(result["points"]) == 12 and result["points"][-1]["month"] == f"{now.year:04d}-{now.month:02d}"
    assert sum(p["change"] for p in result["points"]) == pytest.approx(result["summary"]["change"], rel=1e-4)


def test_an_entity_that_keeps_no_statistics_is_refused_with_words_that_point_to_get_history(
        real_ha: RealHomeAssistant, tmp_path: Path) -> None:
    executor = make_executor(tmp_path, real_ha, ["binary_sensor.front_door"])
    proposal = executor.propose(GET_STATISTICS, {"entity_id": "binary_sensor.front_door", "period": "this_month"},
                                conversation_id=CONVERSATION)
    with pytest.raises(CapabilityError) as caught:
        executor.answer(proposal.token, approve=True, conversation_id=CONVERSATION)
    assert (caught.value.code, caught.value.stage) == ("HA_NO_STATISTICS", 5)
    assert caught.value.message == MODEL_WORDS["HA_NO_STATISTICS"]
