"""What a history digest gives back: the changes it lists, its numeric or per-state summary, and the digest."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal, NotRequired, TypedDict

from console_ha.ha.history_rows import iso_z, micros


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
            "start": iso_z(micros(self.start)),
            "end": iso_z(micros(self.end)),
            "initial_state": None if self.initial_state is None else dict(self.initial_state),
            "total_changes": self.total_changes,
            "truncated": self.truncated,
            "changes": [dict(change) for change in self.changes],
            "summary": dict(self.summary),
        }
