"""One entity's history digest: its rows, in time order, folded into 50 points and a summary in bounded memory."""

from __future__ import annotations

import math
from collections.abc import Iterable, Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any, Literal, NotRequired, TypedDict, cast

from console_ha.errors import HABadResponse
from console_ha.ha.client import UNAVAILABLE_STATES
from console_ha.ha.history_rows import EPOCH, MICROS_PER_SECOND, MICROSECOND, Row, malformed, row_of
from console_ha.timestamps import utc_z

# A digest names at most this many states (the ones with the most time); the rest are summed. get_history's
# result schema declares the same bound from here.
MAX_REPORTED_STATES = 10
# A digest lists at most this many changes; get_history's words and result schema say the same from here.
MAX_CHANGES = 50
DEFAULT_MAX_CHANGES = MAX_CHANGES
MIN_MAX_CHANGES = 4  # room for the first, last, minimum and maximum changes
# Distinct states tracked by name; a free-text entity can have thousands, and memory stays bounded.
# States first seen after this many are folded into `other_states`.
MAX_COUNTED_STATES = 100
# No recorder has a row from before 1970; a time earlier than that is not a real history row.
_EARLIEST = 0
# Fed after the last row by finish(): it closes the last stretch at the window's end ("now"). Not a str,
# so no state Home Assistant sends can equal it.
_END = cast(str, object())

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
    min_at: str
    max: float
    max_at: str
    mean: float | None
    first: float
    last: float
    unit: str | None


class StateTime(TypedDict):
    """One state over the window: time spent in it, changes into it, and when it last began."""

    seconds_in_state: int
    times_changed_to: int
    last_changed_to: str | None


class OtherStates(TypedDict):
    """The states a result does not name, summed."""

    states: int
    seconds_in_state: int
    times_changed_to: int


class StatesSummary(TypedDict):
    """Per state: seconds in it within the window, changes into it, when it last began (most time first)."""

    kind: Literal["states"]
    states: dict[str, StateTime]
    other_states: NotRequired[OtherStates]


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


def digest_history(rows: Iterable[object], *, start: datetime, end: datetime,
                   max_changes: int = DEFAULT_MAX_CHANGES, unit: str | None = None) -> HistoryDigest:
    """Digest parsed history rows ({"state", "last_changed"}, chronological) for the window [start, end)."""
    digester = Digester(start=start, end=end, max_changes=max_changes, unit=unit)
    digester.add(row_of(row) for row in rows)
    return digester.finish()


class Digester:
    """Consumes (moment, state) rows in time order, keeping O(max_changes) state; finish() gives the digest."""

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
        self._finished = False
        self._last_time = -(2**63)
        self._total = 0
        # The row in force when the window opened (moment, state); its statistics start at the first
        # change (or at finish), since a later row at or before the start replaces it.
        self._initial: Row | None = None
        self._opened = False
        # The state in force, since when (clamped to the window), its number if it is one, and its tally.
        self._in_force: str | None = None
        self._since = self._start
        self._value: float | None = None
        self._tally: list[Any] = []
        # Per state: [microseconds in it, changes into it, moment of the last change into it (or None)].
        self._states: dict[str, list[Any]] = {}
        # States first seen once MAX_COUNTED_STATES are tracked, summed: the same three fields.
        self._other: list[Any] = [0, 0, None]
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
        # Numeric statistics, kept while every available state so far is a number. The extremes are
        # those of the changes (for the points); the initial value joins them in finish().
        self._all_numeric = True
        self._initial_value: float | None = None
        self._first_value: float | None = None
        self._last_value: float | None = None
        self._min_change: tuple[int, int, str, float] | None = None
        self._max_change: tuple[int, int, str, float] | None = None
        self._weighted_sum = 0.0
        self._weighted_time = 0

    def add(self, rows: Iterable[Row]) -> None:
        """Take (microseconds, state) rows in time order.

        The one place the statistics are kept: finish() feeds the end of the window through here too.
        The hot loop of a week of a chatty sensor (100,000 rows and more), written for speed: the
        digest's state sits in locals and goes back to the instance when the loop ends, and a change's
        (index, time, state) tuple is only built where it is kept.
        """
        if self._finished:
            raise ValueError("the digest is finished")
        start, end, max_changes = self._start, self._end, self._max_changes
        buckets, bucket_edge = self._buckets, self._bucket_edge_at
        isfinite = math.isfinite
        unavailable = UNAVAILABLE_STATES
        last_time, total, initial, opened = self._last_time, self._total, self._initial, self._opened
        in_force, since, value, tally = self._in_force, self._since, self._value, self._tally
        states, other = self._states, self._other
        states_full = len(states) >= MAX_COUNTED_STATES
        changes, first = self._all, self._first
        sample, stride = self._sample, self._stride
        all_numeric, initial_value = self._all_numeric, self._initial_value
        first_value, last_value = self._first_value, self._last_value
        low_change, high_change = self._min_change, self._max_change
        weighted_sum, weighted_time = self._weighted_sum, self._weighted_time
        # The extremes' values on their own, so the loop compares floats rather than indexing tuples.
        low = low_change[3] if low_change else math.inf
        high = high_change[3] if high_change else -math.inf
        earliest, end_of_rows = _EARLIEST, _END
        try:
            for moment, state in rows:
                if moment < last_time:
                    raise HABadResponse("Home Assistant's history was not in time order.", reason="wrong_shape")
                if moment > end or moment < earliest:
                    raise malformed()  # a change after the window it was asked for, or before any clock
                last_time = moment
                if not opened and moment <= start:
                    # The state in force when the window opens (HA stamps it with the start; a change
                    # exactly at the start is this too): not a change. Should more rows precede the
                    # start, the last one is the state in force.
                    initial, in_force = (moment, state), state
                    continue
                if state == in_force:
                    continue  # the same state again (an attribute-only update): not a change
                if not opened:
                    # The first row past the start (or the end of the window): the initial state's
                    # stretch opens at the window's start.
                    opened = True
                    if in_force is not None:
                        tally = states.setdefault(in_force, [0, 0, None])
                        states_full = len(states) >= MAX_COUNTED_STATES
                        if in_force not in unavailable:
                            value = _as_number(in_force)
                            if value is None:
                                all_numeric = False
                            else:
                                initial_value = first_value = last_value = value
                if in_force is not None:
                    # Close the stretch of the state in force: it lasted until this row.
                    duration = moment - since
                    tally[0] += duration
                    if value is not None:
                        weighted_sum += value * duration
                        weighted_time += duration
                if state is end_of_rows:
                    break
                index = total
                total += 1
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
                found = states.get(state)
                if found is not None:
                    tally = found
                elif states_full:
                    tally = other
                else:
                    tally = states[state] = [0, 0, None]
                    states_full = len(states) >= MAX_COUNTED_STATES
                tally[1] += 1
                tally[2] = moment
                value = None
                if all_numeric and state not in unavailable:
                    # _as_number(state), written out: it runs once a change; a call here measured slower (issue 17).
                    try:
                        value = float(state)
                    except ValueError:
                        value = None
                    if value is None or not isfinite(value):
                        value = None
                        all_numeric = False
                    else:
                        if first_value is None:
                            first_value = value
                        last_value = value
                        if value < low:
                            low = value
                            low_change = (index, moment, state, value)
                        if value > high:
                            high = value
                            high_change = (index, moment, state, value)
                if not all_numeric:
                    value = None
                in_force, since = state, moment
        finally:
            self._last_time, self._total, self._initial, self._opened = last_time, total, initial, opened
            self._in_force, self._since, self._value, self._tally = in_force, since, value, tally
            self._bucket_edge_at = bucket_edge
            self._all, self._first = changes, first
            if total and in_force is not None:
                self._last = (total - 1, since, in_force)  # the latest change: the state in force since then
            self._sample, self._stride = sample, stride
            self._all_numeric, self._initial_value = all_numeric, initial_value
            self._first_value, self._last_value = first_value, last_value
            self._min_change, self._max_change = low_change, high_change
            self._weighted_sum, self._weighted_time = weighted_sum, weighted_time

    def finish(self) -> HistoryDigest:
        """The digest of every row taken; the state in force at the end runs to the window's end."""
        self.add(((self._end, _END),))
        self._finished = True
        numeric = self._all_numeric and self._first_value is not None
        summary = self._numeric_summary() if numeric else self._states_summary()
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

    def _numeric_summary(self) -> NumericSummary:
        """Min and max (with when they were first reached), time-weighted mean, first and last."""
        assert self._first_value is not None and self._last_value is not None
        extremes = []
        for change, better in ((self._min_change, float.__lt__), (self._max_change, float.__gt__)):
            # The initial value was reached by the window's start, before any change.
            if self._initial_value is not None and (change is None or not better(change[3], self._initial_value)):
                extremes.append((self._initial_value, self._start))
            else:
                assert change is not None
                extremes.append((change[3], change[1]))
        (low, low_at), (high, high_at) = extremes
        mean = (float(f"{self._weighted_sum / self._weighted_time:.6g}")
                if self._weighted_time > 0 else None)
        if mean is not None and not math.isfinite(mean):
            mean = None  # values near the float limits overflow the weighted sum: no mean, not NaN
        return NumericSummary(kind="numeric", min=low, min_at=_iso_z(low_at), max=high, max_at=_iso_z(high_at),
                              mean=mean, first=self._first_value, last=self._last_value, unit=self._unit)

    def _states_summary(self) -> StatesSummary:
        """The states with the most time in the window (and the one in force at the end), the rest summed."""
        ranked = sorted(self._states.items(), key=lambda item: (item[1][0], item[1][2] or 0), reverse=True)
        named = ranked[:MAX_REPORTED_STATES]
        current = self._in_force
        if current is not None and current in self._states and all(s != current for s, _ in named):
            # "When did it last change, and to what?" needs the state in force now, whatever its time.
            named[-1] = (current, self._states[current])
        named_states = {state for state, _ in named}
        left_out = [tally for state, tally in ranked if state not in named_states]
        others = bool(left_out or self._other[1])
        seconds = _apportioned([tally[0] for _, tally in named]
                               + ([sum(t[0] for t in left_out) + self._other[0]] if others else []))
        summary = StatesSummary(kind="states", states={
            state: StateTime(seconds_in_state=in_state, times_changed_to=tally[1],
                             last_changed_to=None if tally[2] is None else _iso_z(tally[2]))
            for (state, tally), in_state in zip(named, seconds, strict=False)
        })
        if others:
            summary["other_states"] = OtherStates(
                # States past MAX_COUNTED_STATES are not told apart: they count once, as at least one.
                states=len(left_out) + (1 if self._other[1] else 0),
                seconds_in_state=seconds[-1],
                times_changed_to=sum(t[1] for t in left_out) + self._other[1],
            )
        return summary

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


def _seconds(micros: int) -> int:
    """Microseconds as whole seconds, rounded to the nearest."""
    return (micros + MICROS_PER_SECOND // 2) // MICROS_PER_SECOND


def _apportioned(micros: list[int]) -> list[int]:
    """Durations as whole seconds that add up to their rounded total, each its own rounded down or up.

    Rounding each on its own can make an hour's states add up to 3,601 seconds; rounding the running
    total and taking differences keeps the sum exact and moves no figure by a whole second.
    """
    seconds: list[int] = []
    running = shown = 0
    for duration in micros:
        running += duration
        total = _seconds(running)
        seconds.append(total - shown)
        shown = total
    return seconds


def _as_number(state: str) -> float | None:
    """The state's number, or None when it is not a finite one."""
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
    return (moment - EPOCH) // MICROSECOND


def _iso_z(micros: int) -> str:
    """Microseconds since the epoch as utc_z writes a moment."""
    return utc_z(EPOCH + timedelta(microseconds=micros))
