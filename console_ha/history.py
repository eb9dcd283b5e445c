"""One entity's history from Home Assistant, parsed as a stream into a bounded digest: 50 points and a summary."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any, BinaryIO, Literal, NotRequired, TypedDict

import ijson

from .config_store import is_entity_id
from .errors import HABadResponse, HANotFound
from .ha_client import UNAVAILABLE_STATES, HomeAssistantClient

DEFAULT_MAX_CHANGES = 50
MIN_MAX_CHANGES = 4  # room for the first, last, minimum and maximum changes
# Distinct states counted by name; a free-text entity can have thousands, and memory stays bounded.
MAX_COUNTED_STATES = 100
# How deep a history body may nest: the body, an entity's list, a row, its (empty) attributes, and room.
MAX_ROW_DEPTH = 6
_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# No recorder has a row from before 1970; a time earlier than that is not a real history row.
_EARLIEST = 0
_MICROSECOND = timedelta(microseconds=1)


class Change(TypedDict):
    """A state the entity changed to, and when (ISO 8601 UTC)."""

    state: str
    changed_at: str


class InitialState(TypedDict):
    """The state already in force when the window opened; `since` is as Home Assistant reports it."""

    state: str
    since: str


class NumericSummary(TypedDict):
    """Statistics of a numeric entity over the window; the mean is weighted by time."""

    kind: Literal["numeric"]
    min: float
    max: float
    mean: float | None
    first: float
    last: float
    unit: str | None


class StatesSummary(TypedDict):
    """How many times the entity changed to each state (the initial state is not a change)."""

    kind: Literal["states"]
    times_changed_to: dict[str, int]
    other_states_changes: NotRequired[int]


@dataclass(frozen=True)
class HistoryDigest:
    """What a history question needs, bounded in size whatever the number of rows."""

    start: datetime
    end: datetime
    initial_state: InitialState | None
    changes: list[Change]
    total_changes: int
    truncated: bool
    summary: NumericSummary | StatesSummary

    def to_result(self) -> dict[str, Any]:
        """The digest as plain JSON-ready pieces of a capability result."""
        return {
            "start": _iso_z(_micros(self.start)),
            "end": _iso_z(_micros(self.end)),
            "initial_state": None if self.initial_state is None else dict(self.initial_state),
            "total_changes": self.total_changes,
            "truncated": self.truncated,
            "changes": [dict(change) for change in self.changes],
            "summary": dict(self.summary),
        }


def fetch_history(client: HomeAssistantClient, entity_id: str, *, start: datetime, end: datetime,
                  timeout: float, max_bytes: int, max_changes: int = DEFAULT_MAX_CHANGES,
                  unit: str | None = None) -> HistoryDigest:
    """Ask Home Assistant for one entity's history in [start, end) and digest it as it streams in."""
    if not is_entity_id(entity_id):
        raise ValueError("entity_id must look like domain.object_id")
    digester = _Digester(start=start, end=end, max_changes=max_changes, unit=unit)
    params = {
        "filter_entity_id": entity_id,
        # Z, never +00:00: in a query a raw "+" arrives as a space and HA rejects the time.
        "end_time": _iso_z_exact(end),
        "minimal_response": "",
        "no_attributes": "",
    }
    failure: HABadResponse | None = None
    try:
        with client.stream(f"/api/history/period/{_iso_z_exact(start)}", params=params,
                           timeout=timeout, max_bytes=max_bytes) as body:
            digester.add_rows(_history_rows(body), entity_id=entity_id)
    except HANotFound:
        return _Digester(start=start, end=end, max_changes=max_changes, unit=unit).finish()
    except ijson.JSONError:
        failure = HABadResponse("Home Assistant's history could not be read as JSON.", reason="invalid_json")
    if failure is not None:
        raise failure  # outside the except block: ijson's error quotes the body, which is household data
    return digester.finish()


def digest_history(rows: Iterable[object], *, start: datetime, end: datetime,
                   max_changes: int = DEFAULT_MAX_CHANGES, unit: str | None = None) -> HistoryDigest:
    """Digest parsed history rows ({"state", "last_changed"}, chronological) for the window [start, end)."""
    digester = _Digester(start=start, end=end, max_changes=max_changes, unit=unit)
    digester.add_rows(rows)
    return digester.finish()


def _history_rows(body: BinaryIO) -> Iterator[dict[str, Any]]:
    """The rows of a `[[row, ...]]` body, built from parser events, refusing any other shape.

    ijson's prefix-based readers (`items`) keep a prefix string per level, so a small body nested
    thousands deep costs memory that grows with the square of its depth; `basic_parse` keeps none,
    and rows nested deeper than Home Assistant ever nests them are refused as they arrive.
    """
    depth = 0
    row: dict[str, Any] = {}
    key = ""
    for event, value in ijson.basic_parse(body, use_float=True):
        if event == "map_key":
            key = value
        elif event == "start_map" or event == "start_array":
            depth += 1
            if depth > MAX_ROW_DEPTH:
                raise _malformed()
            if depth <= 2 and event != "start_array":
                raise _wrong_shape()  # the body and each entity's history are lists
            if depth == 3:
                if event != "start_map":
                    raise _malformed()  # a row is an object
                row = {}
        elif event == "end_map" or event == "end_array":
            if depth == 3:
                yield row
            depth -= 1
        elif depth == 3:
            row[key] = value
        elif depth < 3:
            raise _wrong_shape() if depth < 2 else _malformed()


class _Digester:
    """Consumes rows one at a time, keeping O(max_changes) state."""

    def __init__(self, *, start: datetime, end: datetime, max_changes: int, unit: str | None) -> None:
        if start.tzinfo is None or end.tzinfo is None:
            raise ValueError("start and end must be timezone-aware")
        if not start < end:
            raise ValueError("start must be before end")
        if max_changes < MIN_MAX_CHANGES:
            raise ValueError(f"max_changes must be at least {MIN_MAX_CHANGES}")
        self.start = start
        self.end = end
        # Times are whole microseconds since the epoch: exact, where float seconds since 1970 are not.
        self._start = _micros(start)
        self._end = _micros(end)
        self._max_changes = max_changes
        self._unit = unit
        self._initial: tuple[int, str] | None = None
        self._last_time = -(2**63)
        # The state in force, since when (clamped to the window) and its number if it is one:
        # the stretch the next row closes.
        self._current: tuple[int, str, float | None] | None = None
        self._initial_tracked = False
        self._total = 0
        # Each change is kept as (index, time, state); the index identifies it when picking points.
        self._all: list[tuple[int, int, str]] | None = []
        self._first: tuple[int, int, str] | None = None
        self._last: tuple[int, int, str] | None = None
        self._buckets: list[tuple[int, int, str] | None] = [None] * max_changes
        # The first moment past the bucket of the latest change (see _bucket_edge).
        self._bucket_edge_at = -(2**63)
        # Every stride-th change, the stride doubling whenever the list outgrows 2 * max_changes:
        # evenly spread points for when the changes crowd into a few time buckets.
        self._sample: list[tuple[int, int, str]] = []
        self._stride = 1
        self._counts: dict[str, int] = {}
        self._other_counts = 0
        # Numeric statistics, kept while every available state so far is a number.
        self._all_numeric = True
        self._min: float | None = None
        self._max: float | None = None
        self._first_value: float | None = None
        self._last_value: float | None = None
        self._min_change: tuple[int, int, str, float] | None = None
        self._max_change: tuple[int, int, str, float] | None = None
        self._weighted_sum = 0.0
        self._weighted_time = 0.0

    def add(self, row: object) -> None:
        """Take the next row (chronological order)."""
        self.add_rows((row,))

    def add_rows(self, rows: Iterable[object], *, entity_id: str | None = None) -> None:
        """Take rows in chronological order; with `entity_id`, a row naming another entity is a bad answer."""
        # The hot loop of a week of a chatty sensor (100,000 rows and more), written for speed: the
        # digest's state sits in locals and goes back to the instance when the loop ends; the steps
        # that are methods elsewhere (_track_initial, _close_stretch, _track_value, _as_number) are
        # written out inline; and a change's (index, time, state) tuple is only built where it is kept.
        start, end, max_changes = self._start, self._end, self._max_changes
        buckets, bucket_edge = self._buckets, self._bucket_edge_at
        isfinite = math.isfinite
        last_time, total, initial = self._last_time, self._total, self._initial
        # The state in force (None before the first row), since when, and its number if it is one.
        since, in_force, in_force_value = self._current or (start, None, None)
        changes, first = self._all, self._first
        _, last_moment, last_state = self._last or (0, 0, "")
        sample, stride = self._sample, self._stride
        counts, other_counts = self._counts, self._other_counts
        counts_full = len(counts) >= MAX_COUNTED_STATES
        all_numeric, initial_tracked = self._all_numeric, self._initial_tracked
        low, high, first_value, last_value = self._min, self._max, self._first_value, self._last_value
        low_change, high_change = self._min_change, self._max_change
        weighted_sum, weighted_time = self._weighted_sum, self._weighted_time
        taken = total
        try:
            for row in rows:
                # The row: an object with a text state and an ISO 8601 time with its offset.
                if not isinstance(row, dict):
                    raise _malformed()
                if entity_id is not None and "entity_id" in row and row["entity_id"] != entity_id:
                    raise HABadResponse("Home Assistant answered with the history of another entity.",
                                        reason="wrong_shape")
                state = row.get("state")
                stamp = row.get("last_changed")
                if not isinstance(state, str) or not isinstance(stamp, str):
                    raise _malformed()
                try:
                    parsed = datetime.fromisoformat(stamp)
                except ValueError:
                    parsed = None
                if parsed is None or parsed.tzinfo is None:
                    raise _malformed()
                moment = (parsed - _EPOCH) // _MICROSECOND
                if moment < last_time:
                    raise HABadResponse("Home Assistant's history was not in time order.", reason="wrong_shape")
                if moment > end or moment < _EARLIEST:
                    raise _malformed()  # a change after the window it was asked for, or before any clock
                last_time = moment
                if moment <= start and total == 0:
                    # The state in force when the window opens (HA stamps it with the start): not a
                    # change. Should more rows precede the start, the last one is the state in force.
                    initial = (moment, state)
                    since, in_force, in_force_value = start, state, None
                    continue
                if state == in_force:
                    continue  # the same state again (an attribute-only update): not a change
                if total == 0 and not initial_tracked and in_force is not None:
                    # _track_initial(): the initial state counts into the statistics, once.
                    initial_tracked = True
                    if all_numeric and in_force not in UNAVAILABLE_STATES:
                        in_force_value = _as_number(in_force)
                        if in_force_value is None:
                            all_numeric = False
                        else:
                            low = high = first_value = last_value = in_force_value
                if in_force_value is not None and all_numeric:
                    # _close_stretch(moment)
                    duration = (moment if moment < end else end) - since
                    if duration > 0:
                        weighted_sum += in_force_value * duration
                        weighted_time += duration
                index = total
                total += 1
                last_moment, last_state = moment, state
                if changes is not None:
                    changes.append((index, moment, state))
                    if len(changes) > max_changes:
                        changes = None
                if first is None:
                    first = (index, moment, state)
                if moment >= bucket_edge:
                    # A change in a later bucket than the last one; every change before the edge
                    # falls in the bucket already filled, since changes come in time order.
                    bucket = self._bucket_of(moment)
                    if buckets[bucket] is None:
                        buckets[bucket] = (index, moment, state)
                    bucket_edge = self._bucket_edge(bucket)
                if index % stride == 0:
                    sample.append((index, moment, state))
                    if len(sample) > 2 * max_changes:
                        stride *= 2
                        sample = [c for c in sample if c[0] % stride == 0]
                if state in counts:
                    counts[state] += 1
                elif counts_full:
                    other_counts += 1
                else:
                    counts[state] = 1
                    counts_full = len(counts) >= MAX_COUNTED_STATES
                value = None
                if all_numeric and state not in UNAVAILABLE_STATES:
                    # _track_value(state, change), with _as_number(state) written out
                    try:
                        value = float(state)
                    except ValueError:
                        value = None
                    if value is None or not isfinite(value):
                        value = None
                        all_numeric = False
                    else:
                        if low is None or value < low:
                            low = value
                        if high is None or value > high:
                            high = value
                        if first_value is None:
                            first_value = value
                        last_value = value
                        if low_change is None or value < low_change[3]:
                            low_change = (index, moment, state, value)
                        if high_change is None or value > high_change[3]:
                            high_change = (index, moment, state, value)
                since, in_force, in_force_value = (moment if moment > start else start), state, value
        finally:
            self._last_time, self._total, self._initial = last_time, total, initial
            self._current = None if in_force is None else (since, in_force, in_force_value)
            self._bucket_edge_at = bucket_edge
            self._all, self._first = changes, first
            if total > taken:
                self._last = (total - 1, last_moment, last_state)
            self._sample, self._stride = sample, stride
            self._counts, self._other_counts = counts, other_counts
            self._all_numeric, self._initial_tracked = all_numeric, initial_tracked
            self._min, self._max, self._first_value, self._last_value = low, high, first_value, last_value
            self._min_change, self._max_change = low_change, high_change
            self._weighted_sum, self._weighted_time = weighted_sum, weighted_time

    def finish(self) -> HistoryDigest:
        """The digest of every row taken."""
        self._track_initial()
        self._close_stretch(self._end)
        self._current = None
        numeric = self._all_numeric and self._min is not None
        summary: NumericSummary | StatesSummary
        if numeric:
            assert self._min is not None and self._max is not None
            assert self._first_value is not None and self._last_value is not None
            mean = (float(f"{self._weighted_sum / self._weighted_time:.6g}")
                    if self._weighted_time > 0 else None)
            if mean is not None and not math.isfinite(mean):
                mean = None  # values near the float limits overflow the weighted sum: no mean, not NaN
            summary = NumericSummary(kind="numeric", min=self._min, max=self._max, mean=mean,
                                     first=self._first_value, last=self._last_value, unit=self._unit)
        else:
            summary = StatesSummary(kind="states", times_changed_to=dict(self._counts))
            if self._other_counts:
                summary["other_states_changes"] = self._other_counts
        picked = self._all if self._all is not None else self._pick(numeric)
        initial = None
        if self._initial is not None:
            initial = InitialState(state=self._initial[1], since=_iso_z(self._initial[0]))
        return HistoryDigest(
            start=self.start,
            end=self.end,
            initial_state=initial,
            changes=[Change(state=state, changed_at=_iso_z(moment)) for _, moment, state in picked],
            total_changes=self._total,
            truncated=self._total > self._max_changes,
            summary=summary,
        )

    def _pick(self, numeric: bool) -> list[tuple[int, int, str]]:
        """At most max_changes changes spread over the window, always with first, last, min and max."""
        chosen: dict[int, tuple[int, int, str]] = {}
        required = [self._first, self._last]
        if numeric:
            required += [c[:3] if c else None for c in (self._min_change, self._max_change)]
        for change in required:
            if change is not None:
                chosen[change[0]] = change
        slots = self._max_changes - len(chosen)
        buckets = [c for c in self._buckets if c is not None and c[0] not in chosen]
        for change in _spread(buckets, slots):
            chosen[change[0]] = change
        # Changes bunched into few time buckets leave slots: fill them from the evenly-strided sample.
        slots = self._max_changes - len(chosen)
        spare = [c for c in self._sample if c[0] not in chosen]
        for change in _spread(spare, slots):
            chosen[change[0]] = change
        return sorted(chosen.values())

    def _bucket_of(self, moment: int) -> int:
        position = (moment - self._start) / (self._end - self._start)
        return min(len(self._buckets) - 1, max(0, int(position * len(self._buckets))))

    def _bucket_edge(self, bucket: int) -> int:
        """The first moment whose bucket (as _bucket_of computes it, float rounding and all) is past `bucket`."""
        count = len(self._buckets)
        if bucket >= count - 1:
            return 2**63
        start, span = self._start, self._end - self._start
        edge = start - (-(bucket + 1) * span // count)  # the exact boundary, rounded up to a microsecond
        # _bucket_of divides and multiplies in floating point, which can move the boundary a microsecond:
        # step to where it really is (it only ever grows with the moment).
        while edge > start and self._bucket_of(edge - 1) > bucket:
            edge -= 1
        while self._bucket_of(edge) <= bucket:
            edge += 1
        return edge

    def _track_initial(self) -> None:
        """Count the initial state into the statistics, once, before any change."""
        if self._initial_tracked or self._current is None or self._total:
            return
        self._initial_tracked = True
        since, state, _ = self._current
        self._current = (since, state, self._track_value(state, None))

    def _track_value(self, state: str, change: tuple[int, int, str] | None) -> float | None:
        """Update the numeric statistics; the state's number, or None when it is not one."""
        if state in UNAVAILABLE_STATES or not self._all_numeric:
            return None
        value = _as_number(state)
        if value is None:
            self._all_numeric = False
            return None
        if self._min is None or value < self._min:
            self._min = value
        if self._max is None or value > self._max:
            self._max = value
        if self._first_value is None:
            self._first_value = value
        self._last_value = value
        if change is not None:
            if self._min_change is None or value < self._min_change[3]:
                self._min_change = (*change, value)
            if self._max_change is None or value > self._max_change[3]:
                self._max_change = (*change, value)
        return value

    def _close_stretch(self, until: int) -> None:
        """Count the state in force up to `until` into the time-weighted mean."""
        if self._current is None or not self._all_numeric:
            return
        since, _, value = self._current
        duration = min(until, self._end) - since
        if value is not None and duration > 0:
            self._weighted_sum += value * duration
            self._weighted_time += duration


def _as_number(state: str) -> float | None:
    try:
        value = float(state)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


def _spread(items: list[tuple[int, int, str]], count: int) -> Iterator[tuple[int, int, str]]:
    """`count` items evenly spaced through `items` (all of them when there are no more than that)."""
    if count <= 0:
        return
    if len(items) <= count:
        yield from items
        return
    if count == 1:
        yield items[len(items) // 2]
        return
    step = (len(items) - 1) / (count - 1)
    for i in range(count):
        yield items[round(i * step)]


def _micros(moment: datetime) -> int:
    return (moment - _EPOCH) // _MICROSECOND


def _iso_z(micros: int) -> str:
    """A UTC time to the second, with Z: short and unambiguous for a model and a person."""
    moment = _EPOCH + timedelta(microseconds=micros)
    return moment.isoformat(timespec="seconds").replace("+00:00", "Z")


def _iso_z_exact(moment: datetime) -> str:
    """A UTC time as HA's history API wants it in a URL: ISO 8601 with Z, microseconds kept."""
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def _malformed() -> HABadResponse:
    return HABadResponse("Home Assistant's history had a row without a state or a valid time.",
                         reason="wrong_shape")


def _wrong_shape() -> HABadResponse:
    return HABadResponse("Home Assistant answered the history request with something other than a history.",
                         reason="wrong_shape")
