"""Quiet hours, a console-ha plugin: no reads of Home Assistant between two times of day.

The household sets the two times on the Console's plugins page. A span over midnight (22:00 to 07:00) works;
the start is quiet, the end is not. Times are the household's local time: the zone named by
CONSOLE_HA_TIME_ZONE, as the Console's pages use, else the machine's own. Until both times are set (or when
they are equal) it refuses nothing.
"""

from __future__ import annotations

import os
from datetime import datetime, time, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from console_ha.hooks import hookimpl, settings

CONSOLE_HA_SETTINGS = [
    {"name": "start", "type": "time", "label": {
        "en": "Quiet from", "fr": "Silence à partir de", "de": "Ruhe ab", "es": "Silencio desde",
        "nl": "Stil vanaf", "zh-Hans": "安静开始时间"}},
    {"name": "end", "type": "time", "label": {
        "en": "Quiet until", "fr": "Silence jusqu’à", "de": "Ruhe bis", "es": "Silencio hasta",
        "nl": "Stil tot", "zh-Hans": "安静结束时间"}},
]

REFUSAL = "The household does not allow reads of Home Assistant during its quiet hours, from {start} to {end}."


def quiet_at(moment: time, start: time, end: time) -> bool:
    """Whether `moment` falls in the quiet span from `start` (quiet) to `end` (not), over midnight too."""
    if start == end:
        return False
    if start < end:
        return start <= moment < end
    return moment >= start or moment < end


def household_zone() -> tzinfo | None:
    """The zone the Console's pages show times in: CONSOLE_HA_TIME_ZONE, else (None) the machine's own."""
    name = os.environ.get("CONSOLE_HA_TIME_ZONE", "").strip()
    try:
        return ZoneInfo(name) if name else None
    except (ZoneInfoNotFoundError, ValueError):
        return None


def now() -> datetime:
    """The household's local time now (a test replaces this)."""
    return datetime.now(household_zone()) if household_zone() else datetime.now().astimezone()


@hookimpl
def before_toolcall(capability: str) -> str | None:
    """A refusal reason inside the quiet hours; nothing outside them or while they are not set."""
    values = settings()
    start, end = values.get("start"), values.get("end")
    if not start or not end:
        return None
    if quiet_at(now().time().replace(second=0, microsecond=0), time.fromisoformat(start), time.fromisoformat(end)):
        return REFUSAL.format(start=start, end=end)
    return None
