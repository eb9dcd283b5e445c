"""One entity's history digest: its rows, in time order, folded into 50 points and a summary in bounded memory.

What the digest gives back, its changes and summaries, is declared in `history_result`.
"""

from __future__ import annotations

import itertools
import math
from bisect import bisect_left
from collections.abc import Iterable, Iterator
from datetime import datetime
from operator import itemgetter
from typing import Any, NamedTuple, cast

from console_ha.errors import HABadResponse
from console_ha.ha.history_result import (
    Change,
    HistoryDigest,
    InitialState,
    NumericSummary,
    OtherStates,
    StatesSummary,
    StateTime,
)
from console_ha.ha.history_rows import MICROS_PER_SECOND, Row, iso_z, malformed, micros
from console_ha.ha.rest_client import UNAVAILABLE_STATES

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
# Rows from an iterator (REST, the general WebSocket path) are taken this many at a time, so the changes a
# slice keeps for _keep_points stay bounded; a list (a compact batch) is taken whole.
_SLICE_ROWS = 512
_moment_of = itemgetter(0)


class _Numbers(NamedTuple):
    """A digest's numeric statistics, kept while every available state so far is a number.

    The extremes are those of the changes, as (index, time, state, value), for the points; the initial
    value joins them in finish(). The mean is weighted by time: the sum of value x microseconds, and those.
    """

    all_numeric: bool
    first_value: float | None
    last_value: float | None
    min_change: tuple[int, int, str, float] | None
    max_change: tuple[int, int, str, float] | None
    weighted_sum: float
    weighted_time: int


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
        self._start = micros(start)
        self._end = micros(end)
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
        # The initial state's number, if it is one; then the statistics of the changes' numbers.
        self._initial_value: float | None = None
        self._numbers = _Numbers(all_numeric=True, first_value=None, last_value=None, min_change=None,
                                 max_change=None, weighted_sum=0.0, weighted_time=0)

    def add(self, rows: Iterable[Row]) -> None:
        """Take (microseconds, state) rows in time order.

        The one place the statistics are kept: finish() feeds the end of the window through here too. The
        rows before the window opens go to _open_window, the changes to _take; a list (a compact batch) is
        taken whole, any other iterable in slices of _SLICE_ROWS, so a slice's changes stay bounded.
        """
        if self._finished:
            raise ValueError("the digest is finished")
        try:
            if not self._opened:
                rows = self._open_window(iter(rows))
            if type(rows) is list:
                self._take(rows)
            else:
                rest = iter(rows)
                while self._take(itertools.islice(rest, _SLICE_ROWS)):
                    pass
        except BaseException:
            self._finished = True  # a refused row leaves no digest to finish
            raise

    def _open_window(self, rows: Iterator[Row]) -> Iterable[Row]:
        """Read the rows up to the first change past the window's start; the rest, that change first.

        A row at or before the start is the state in force when the window opens (HA stamps it with the
        start; a change exactly at the start is this too): not a change. Should more rows precede the
        start, the last one is the state in force.
        """
        start, end, last_time = self._start, self._end, self._last_time
        initial, in_force = self._initial, self._in_force
        opening: Row | None = None
        for row in rows:
            moment, state = row
            if moment < last_time:
                raise out_of_order()
            if moment > end or moment < _EARLIEST:
                raise malformed()  # a change after the window it was asked for, or before any clock
            last_time = moment
            if moment <= start:
                initial, in_force = (moment, state), state
            elif state != in_force:  # the same state again (an attribute-only update) is not a change
                opening = row
                break
        self._last_time, self._initial, self._in_force = last_time, initial, in_force
        if opening is None:
            return ()
        # The first change past the start (or the end of the window): the initial state's stretch opens
        # at the window's start, and its number is the first value.
        self._opened = True
        if in_force is not None:
            self._tally = self._states.setdefault(in_force, [0, 0, None])
            if in_force not in UNAVAILABLE_STATES:
                self._value = _as_number(in_force)
                if self._value is None:
                    self._numbers = self._numbers._replace(all_numeric=False)
                else:
                    self._initial_value = self._value
                    self._numbers = self._numbers._replace(first_value=self._value, last_value=self._value)
        return itertools.chain((opening,), rows)

    def _take(self, rows: Iterable[Row]) -> bool:
        """Take rows once the window is open (stretches, tallies, numbers), then _keep_points; any rows taken?

        The hot loop of a chatty sensor's week (100,000 rows and more): its state sits in locals for the slice,
        and each step of a change is written out (a call per change, even _as_number's, measured slower).
        """
        end, earliest, end_of_rows = self._end, _EARLIEST, _END
        isfinite, unavailable = math.isfinite, UNAVAILABLE_STATES
        last_time, total, in_force, since, value, tally = (self._last_time, self._total, self._in_force,
                                                           self._since, self._value, self._tally)
        states, other, states_full = self._states, self._other, len(self._states) >= MAX_COUNTED_STATES
        all_numeric, first_value, last_value, low_change, high_change, weighted_sum, weighted_time = self._numbers
        low, high = (low_change[3] if low_change else math.inf), (high_change[3] if high_change else -math.inf)
        base, fresh = total, list[Row]()  # the slice's changes, for _keep_points
        keep = fresh.append
        row: Row | None = None
        for row in rows:
            moment, state = row
            if moment < last_time:
                raise out_of_order()
            if moment > end or moment < earliest:
                raise malformed()
            last_time = moment
            if state == in_force:
                continue  # the same state again (an attribute-only update): not a change
            if in_force is not None:  # close the stretch of the state in force: it lasted until this row
                duration = moment - since
                tally[0] += duration
                if value is not None:
                    weighted_sum += value * duration
                    weighted_time += duration
            if state is end_of_rows:
                break
            total += 1
            keep(row)
            found = states.get(state)
            if found is not None:
                tally = found
            else:  # a state not seen before: tracked by name, or summed once MAX_COUNTED_STATES are
                tally = other if states_full else states.setdefault(state, [0, 0, None])
                states_full = len(states) >= MAX_COUNTED_STATES
            tally[1] += 1
            tally[2] = moment
            value = None
            if all_numeric and state not in unavailable:
                try:
                    value = float(state)
                except ValueError:
                    value = math.nan
                if not isfinite(value):
                    value, all_numeric = None, False
                else:
                    if first_value is None:
                        first_value = value
                    last_value = value
                    if value < low:
                        low, low_change = value, (total - 1, moment, state, value)
                    if value > high:
                        high, high_change = value, (total - 1, moment, state, value)
            in_force, since = state, moment
        self._last_time, self._total, self._in_force, self._since, self._value, self._tally = (
            last_time, total, in_force, since, value, tally)
        self._numbers = _Numbers(all_numeric, first_value, last_value, low_change, high_change, weighted_sum,
                                 weighted_time)
        self._keep_points(fresh, base)
        return row is not None and row[1] is not end_of_rows

    def _keep_points(self, fresh: list[Row], base: int) -> None:
        """Of a slice's changes (numbered from `base`), keep those that may become points.

        Every change while there are no more than max_changes, the first and the latest, the first of each
        time bucket, and every stride-th. Once a slice, not once a change: the changes are in time order, so
        bisection finds the first past each bucket's edge.
        """
        count = len(fresh)
        if not count:
            return
        if self._all is not None:
            room = self._max_changes + 1 - len(self._all)
            self._all += [(base + i, moment, state) for i, (moment, state) in enumerate(fresh[:room])]
            if len(self._all) > self._max_changes:
                self._all = None
        if self._first is None:
            self._first = (base, *fresh[0])
        self._last = (base + count - 1, *fresh[-1])
        at = bisect_left(fresh, self._bucket_edge_at, key=_moment_of)
        while at < count:
            moment, state = fresh[at]
            bucket = self._bucket_of(moment)
            if self._buckets[bucket] is None:
                self._buckets[bucket] = (base + at, moment, state)
            self._bucket_edge_at = self._bucket_edge(bucket)  # every change before it falls in this bucket
            at = bisect_left(fresh, self._bucket_edge_at, lo=at + 1, key=_moment_of)
        stride, sample = self._stride, self._sample
        at = -base % stride  # the first change whose number is a multiple of the stride
        while at < count:
            sample.append((base + at, *fresh[at]))
            if len(sample) > 2 * self._max_changes:
                stride *= 2
                sample = [c for c in sample if c[0] % stride == 0]
            at += 1
            at += -(base + at) % stride
        self._stride, self._sample = stride, sample

    def finish(self) -> HistoryDigest:
        """The digest of every row taken; the state in force at the end runs to the window's end."""
        self.add(((self._end, _END),))
        self._finished = True
        numeric = self._numbers.all_numeric and self._numbers.first_value is not None
        summary = self._numeric_summary() if numeric else self._states_summary()
        picked = self._all if self._all is not None else self._pick(numeric)
        initial = None
        if self._initial is not None:
            initial = InitialState(state=self._initial[1], since=iso_z(self._initial[0]))
        return HistoryDigest(
            start=self.start,
            end=self.end,
            initial_state=initial,
            changes=[Change(state=state, changed_at=iso_z(moment)) for _, moment, state in picked],
            total_changes=self._total,
            truncated=self._total > self._max_changes,
            summary=summary,
        )

    def _numeric_summary(self) -> NumericSummary:
        """Min and max (with when they were first reached), time-weighted mean, first and last."""
        numbers = self._numbers
        assert numbers.first_value is not None and numbers.last_value is not None
        extremes = []
        for change, better in ((numbers.min_change, float.__lt__), (numbers.max_change, float.__gt__)):
            # The initial value was reached by the window's start, before any change.
            if self._initial_value is not None and (change is None or not better(change[3], self._initial_value)):
                extremes.append((self._initial_value, self._start))
            else:
                assert change is not None
                extremes.append((change[3], change[1]))
        (low, low_at), (high, high_at) = extremes
        mean = (float(f"{numbers.weighted_sum / numbers.weighted_time:.6g}")
                if numbers.weighted_time > 0 else None)
        if mean is not None and not math.isfinite(mean):
            mean = None  # values near the float limits overflow the weighted sum: no mean, not NaN
        return NumericSummary(kind="numeric", min=low, min_at=iso_z(low_at), max=high, max_at=iso_z(high_at),
                              mean=mean, first=numbers.first_value, last=numbers.last_value, unit=self._unit)

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
                             last_changed_to=None if tally[2] is None else iso_z(tally[2]))
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
            required += [c[:3] if c else None for c in (self._numbers.min_change, self._numbers.max_change)]
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


def out_of_order() -> HABadResponse:
    return HABadResponse("Home Assistant's history was not in time order.", reason="wrong_shape")
