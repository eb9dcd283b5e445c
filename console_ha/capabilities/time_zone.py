"""The household's time zone, as Home Assistant's configuration names it: the calendar the dated reads keep."""

from __future__ import annotations

import re
from typing import Any
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

from console_ha.errors import HABadResponse

# An IANA zone's name (the longest is about 30 characters): anything else is not looked up at all. zoneinfo
# turns each "/" of a name into a package to import, so a name a thousand levels deep recursed past
# Python's limit (a crash where a bad answer belongs).
_ZONE_NAME = re.compile(r"[A-Za-z0-9_+-]+(?:/[A-Za-z0-9_+-]+){0,3}")
_ZONE_NAME_CHARS = 64


def household_zone(answer: Any) -> ZoneInfo:
    """The time zone Home Assistant reports in its configuration; a missing or unknown one is a bad answer."""
    name = answer.get("time_zone") if isinstance(answer, dict) else None
    try:
        if not isinstance(name, str) or len(name) > _ZONE_NAME_CHARS or not _ZONE_NAME.fullmatch(name):
            raise ValueError(name)
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise HABadResponse("Home Assistant did not report a time zone the Console knows.",
                            reason="wrong_shape") from None
