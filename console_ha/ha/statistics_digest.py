"""Hourly statistics folded into calendar points (days or months) and one summary for the whole period.

Home Assistant's long-term statistics are hourly rows: a meter's change in each hour, or a measurement's
mean, minimum and maximum over each hour. The digest is handed the calendar already cut (the bounds of each
day or month in the household's time zone, as epoch milliseconds, and their labels) and folds the rows into
them in one pass, so a year of rows costs one comparison or two each.

How the figures are made (docs/capabilities.md, "get_statistics"):
- a point's and the period's mean is the mean of the hourly means over the hours that have one: each hour
  weighs the same, which is the time-weighted mean Home Assistant's own hours hold; hours without
  statistics are left out rather than counted as zero;
- a circular mean (a wind direction) is the direction of the summed unit vectors of the hourly means;
- a minimum or maximum is the lowest or highest hourly minimum or maximum, and `min_at`/`max_at` is the
  start of the first hour it was reached in (UTC, as every time the Console writes);
- a meter's change is the sum of its hourly changes (Home Assistant's first hourly change already counts
  from the sum before the period began).
"""

from __future__ import annotations

import math
from bisect import bisect_right
from collections.abc import Sequence
from datetime import UTC, datetime
from typing import Any

from console_ha.ha.statistics import StatisticsMeta, wrong_shape
from console_ha.timestamps import utc_z

# Figures keep six significant digits: more than any household meter or thermometer shows, and short.
SIGNIFICANT_DIGITS = 6


def figure(value: float) -> float:
    """A figure as results give it: six significant digits; one past a float's range is a wrong answer."""
    if not math.isfinite(value):
        raise wrong_shape()
    return float(f"{value:.{SIGNIFICANT_DIGITS}g}")


class StatisticsDigester:
    """Folds hourly rows into the points between `bounds` (epoch ms, ascending; one more than `labels`)."""

    def __init__(self, meta: StatisticsMeta, bounds: Sequence[int], labels: Sequence[str], *,
                 label_key: str) -> None:
        if len(bounds) != len(labels) + 1 or list(bounds) != sorted(bounds):
            raise ValueError("bounds must ascend, one more than the labels")
        self.meta = meta
        self._bounds = list(bounds)
        self._labels = list(labels)
        self._label_key = label_key
        count = len(labels)
        self._hours = [0] * count
        self._totals = [0.0] * count  # the sum of hourly means (or changes); for a circle, of their sines
        self._cosines = [0.0] * count
        self._mins: list[Any] = [None] * count
        self._min_at = [0] * count
        self._maxes: list[Any] = [None] * count
        self._max_at = [0] * count

    def add(self, rows: list[Any]) -> None:
        """Fold one batch of rows (Home Assistant's objects) in; a row that is not numbers, or is outside the
        period, is a wrong answer. Checked and folded in the one pass: a year is 8,760 rows."""
        if not self._labels:
            # An empty period (this month, asked at its very first instant): no row belongs to it.
            if rows:
                raise wrong_shape()
            return
        try:
            if self.meta.kind == "meter":
                self._add_meter(rows)
            else:
                self._add_measurement(rows)
        except (TypeError, KeyError, AttributeError):  # a row that is not an object, or without a start
            raise wrong_shape() from None

    def _point_of(self, start: Any) -> int:
        """The index of the point a row's start falls in (a JSON number, inside the period)."""
        if (type(start) is not int and type(start) is not float) or not self._bounds[0] <= start < self._bounds[-1]:
            raise wrong_shape()
        return bisect_right(self._bounds, start) - 1

    def _add_meter(self, rows: list[Any]) -> None:
        hours, totals = self._hours, self._totals
        index, low, high = 0, self._bounds[0], self._bounds[1]
        for row in rows:
            start, change = row["start"], row.get("change")
            # Rows come in order: the point the last one fell in usually holds this one too. Checked as
            # numbers first, so a comparison never meets text (and a bool is refused, not counted as 1).
            if type(start) is not int or not low <= start < high:
                index = self._point_of(start)
                low, high = self._bounds[index], self._bounds[index + 1]
            if change is not None:
                if type(change) is not float and type(change) is not int:
                    raise wrong_shape()
                hours[index] += 1
                totals[index] += change

    def _add_measurement(self, rows: list[Any]) -> None:
        hours, totals, mins, maxes = self._hours, self._totals, self._mins, self._maxes
        circular = self.meta.circular
        index, low, high = 0, self._bounds[0], self._bounds[1]
        for row in rows:
            start = row["start"]
            if type(start) is not int or not low <= start < high:
                index = self._point_of(start)
                low, high = self._bounds[index], self._bounds[index + 1]
            mean, lowest, highest = row.get("mean"), row.get("min"), row.get("max")
            for value in (mean, lowest, highest):
                if value is not None and type(value) is not float and type(value) is not int:
                    raise wrong_shape()
            if mean is not None:
                hours[index] += 1
                if circular:
                    totals[index] += math.sin(math.radians(mean))
                    self._cosines[index] += math.cos(math.radians(mean))
                else:
                    totals[index] += mean
            if lowest is not None and (mins[index] is None or lowest < mins[index]):
                mins[index], self._min_at[index] = lowest, start
            if highest is not None and (maxes[index] is None or highest > maxes[index]):
                maxes[index], self._max_at[index] = highest, start

    def finish(self) -> tuple[list[dict[str, Any]], dict[str, Any] | None]:
        """The points that have statistics, oldest first, and the period's summary (None without any)."""
        points = []
        for index, label in enumerate(self._labels):
            if self._hours[index] or self._mins[index] is not None or self._maxes[index] is not None:
                points.append({self._label_key: label, **self._figures(index)})
        if not points:
            return [], None
        if self.meta.kind == "meter":
            return points, {"change": figure(sum(self._totals)), "hours": sum(self._hours)}
        summary: dict[str, Any] = {"mean": self._mean(sum(self._totals), sum(self._cosines), sum(self._hours))}
        lowest = _extreme(self._mins, self._min_at, lambda a, b: a < b)
        highest = _extreme(self._maxes, self._max_at, lambda a, b: a > b)
        summary["min"], summary["min_at"] = self._with_time(lowest)
        summary["max"], summary["max_at"] = self._with_time(highest)
        summary["hours"] = sum(self._hours)
        return points, summary

    def _figures(self, index: int) -> dict[str, Any]:
        if self.meta.kind == "meter":
            return {"change": figure(self._totals[index])}
        low, high = self._mins[index], self._maxes[index]
        return {"mean": self._mean(self._totals[index], self._cosines[index], self._hours[index]),
                "min": None if low is None else figure(low), "max": None if high is None else figure(high)}

    def _mean(self, total: float, cosines: float, hours: int) -> float | None:
        if not hours:
            return None
        if not self.meta.circular:
            return figure(total / hours)
        if math.hypot(total, cosines) < 1e-9 * hours:
            return None  # directions that cancel out have no mean direction
        return figure(math.degrees(math.atan2(total, cosines)) % 360)

    def _with_time(self, found: tuple[float, int] | None) -> tuple[float | None, str | None]:
        if found is None:
            return None, None
        value, at = found
        try:
            moment = datetime.fromtimestamp(at / 1000, UTC)
        except (OverflowError, OSError, ValueError):
            raise wrong_shape() from None
        return figure(value), utc_z(moment)


def _extreme(values: Sequence[Any], times: Sequence[int], better: Any) -> tuple[float, int] | None:
    """The first (earliest) of the best values, with its time."""
    found: tuple[float, int] | None = None
    for value, at in zip(values, times, strict=True):
        if value is not None and (found is None or better(value, found[0])):
            found = (value, at)
    return found
