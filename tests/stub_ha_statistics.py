"""Home Assistant's recorder statistics as the stub serves them over its WebSocket (issue 19's get_statistics).

As Home Assistant 2025.4 answers them (recorder/websocket_api.py and statistics.py): `get_statistics_metadata`
lists the metadata of the ids it knows; `statistics_during_period` with period `hour` gives the rows whose
start is in [start_time, end_time), `start` and `end` in epoch milliseconds and first, the asked types
after them, and `change` counted from the last sum before start_time (0 when there is none).
"""

from __future__ import annotations

import math
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

HOUR = 3600
_TYPE_ORDER = ("mean", "min", "max", "change")


@dataclass
class StubStatistic:
    """One entity's statistics: its metadata and its hourly rows ({"start": epoch s, "mean"/"min"/"max" or "sum"})."""

    metadata: dict[str, Any]
    rows: list[dict[str, Any]] = field(default_factory=list)


def measurement_metadata(entity_id: str, unit: str | None, *, circular: bool = False) -> dict[str, Any]:
    return {"statistic_id": entity_id, "display_unit_of_measurement": unit, "has_mean": not circular,
            "mean_type": 2 if circular else 1, "has_sum": False, "name": None, "source": "recorder",
            "statistics_unit_of_measurement": unit, "unit_class": None}


def meter_metadata(entity_id: str, unit: str | None) -> dict[str, Any]:
    return {"statistic_id": entity_id, "display_unit_of_measurement": unit, "has_mean": False, "mean_type": 0,
            "has_sum": True, "name": None, "source": "recorder", "statistics_unit_of_measurement": unit,
            "unit_class": "energy"}


def hour_starts(end: datetime, hours: int) -> list[int]:
    """The epoch seconds of the `hours` whole hours before `end`'s hour, oldest first."""
    last = int(end.replace(minute=0, second=0, microsecond=0).timestamp()) - HOUR
    return [last - HOUR * i for i in range(hours - 1, -1, -1)]


def temperature_rows(starts: list[int], seed: int = 0) -> list[dict[str, Any]]:
    """Hourly mean/min/max of a room's temperature: a daily and a yearly swing and some noise."""
    rng = random.Random(seed)
    rows = []
    for start in starts:
        day = math.sin(2 * math.pi * (start % 86400) / 86400)
        year = math.sin(2 * math.pi * (start % 31557600) / 31557600)
        mean = round(18 + 4 * year + 2 * day + rng.uniform(-0.5, 0.5), 2)
        rows.append({"start": start, "mean": mean, "min": round(mean - rng.uniform(0, 1), 2),
                     "max": round(mean + rng.uniform(0, 1), 2)})
    return rows


def energy_rows(starts: list[int], seed: int = 0, first_sum: float = 0.0) -> list[dict[str, Any]]:
    """Hourly sums of an energy meter (kWh), rising by 0.05 to 1.5 kWh an hour."""
    rng = random.Random(seed)
    total = first_sum
    rows = []
    for start in starts:
        total = round(total + rng.uniform(0.05, 1.5), 3)
        rows.append({"start": start, "sum": total})
    return rows


class StubStatistics:
    """The recorder's statistics, and the two read commands get_statistics sends."""

    COMMANDS = frozenset({"recorder/get_statistics_metadata", "recorder/statistics_during_period"})

    def __init__(self) -> None:
        self.entities: dict[str, StubStatistic] = {}
        # When set: the raw text sent for statistics_during_period, made from the message id (faults).
        self.raw_answer: Callable[[int], bytes] | None = None

    def add(self, metadata: dict[str, Any], rows: list[dict[str, Any]]) -> None:
        self.entities[metadata["statistic_id"]] = StubStatistic(metadata, sorted(rows, key=lambda r: r["start"]))

    def seed_year(self, entity_id: str, kind: str, *, unit: str, now: datetime | None = None, seed: int = 0) -> None:
        """Two years of hourly rows up to the last whole hour: a temperature ("measurement") or energy ("meter")."""
        starts = hour_starts(now or datetime.now(UTC), 2 * 366 * 24)
        if kind == "meter":
            self.add(meter_metadata(entity_id, unit), energy_rows(starts, seed))
        else:
            self.add(measurement_metadata(entity_id, unit), temperature_rows(starts, seed))

    def answer(self, message: dict[str, Any]) -> tuple[bool, Any]:
        """(success, result or error) for one command, as Home Assistant answers it."""
        if message.get("type") == "recorder/get_statistics_metadata":
            wanted = message.get("statistic_ids") or list(self.entities)
            return True, [self.entities[i].metadata for i in wanted if i in self.entities]
        start = _parse(message.get("start_time"))
        end = _parse(message.get("end_time")) if message.get("end_time") else datetime.max.replace(tzinfo=UTC)
        if start is None or end is None:
            return False, {"code": "invalid_start_time", "message": "Invalid start_time"}
        if message.get("period") != "hour":
            return False, {"code": "stub", "message": "the stub serves hourly statistics only"}
        types = set(message.get("types") or _TYPE_ORDER)
        result: dict[str, list[dict[str, Any]]] = {}
        for entity_id in message.get("statistic_ids") or []:
            statistic = self.entities.get(entity_id)
            if statistic is None:
                continue
            rows = self._rows(statistic, start.timestamp(), end.timestamp(), types)
            if rows:
                result[entity_id] = rows
        return True, result

    @staticmethod
    def _rows(statistic: StubStatistic, start: float, end: float, types: set[str]) -> list[dict[str, Any]]:
        before = [r for r in statistic.rows if r["start"] < start and r.get("sum") is not None]
        previous = before[-1]["sum"] if before else 0
        out = []
        for row in statistic.rows:
            if not start <= row["start"] < end:
                continue
            answer: dict[str, Any] = {"start": row["start"] * 1000, "end": (row["start"] + HOUR) * 1000}
            for name in _TYPE_ORDER:
                if name not in types:
                    continue
                if name == "change":
                    if "sum" in row:
                        answer["change"] = None if row["sum"] is None else row["sum"] - previous
                        previous = row["sum"] if row["sum"] is not None else previous
                    else:
                        answer["change"] = None
                else:
                    answer[name] = row.get(name)
            out.append(answer)
        return out


def _parse(text: Any) -> datetime | None:
    try:
        moment = datetime.fromisoformat(str(text).replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo else None
