"""The one way the Console writes a moment: ISO 8601 in UTC with a Z, as results, audit lines and the API show it."""

from __future__ import annotations

from datetime import UTC, datetime, tzinfo
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError


def utc_z(moment: datetime) -> str:
    """A moment in UTC to the second, with Z ("2026-12-01T17:00:00Z"): short and unambiguous for a model and a person.

    A naive moment is taken as local time (datetime's own rule); the Console passes aware ones.
    """
    return moment.astimezone(UTC).isoformat(timespec="seconds").replace("+00:00", "Z")


def utc_z_now() -> str:
    """Now, as utc_z writes it."""
    return utc_z(datetime.now(UTC))


def utc_z_exact(moment: datetime) -> str:
    """A moment in UTC with Z and its microseconds kept: the form Home Assistant's history API takes in a URL.

    Z, never +00:00: in a query a raw "+" arrives as a space and Home Assistant rejects the time.
    """
    if moment.tzinfo is None:
        raise ValueError("times must be timezone-aware")
    return moment.astimezone(UTC).isoformat().replace("+00:00", "Z")


def time_zone(name: str | None) -> tzinfo | None:
    """The IANA zone of that name (`Europe/Paris`), or None for the machine's own zone when the name is empty.

    An unknown name is a ValueError naming it, so a typo stops the Console at start rather than showing
    every time an hour off.
    """
    if not name:
        return None
    try:
        return ZoneInfo(name)
    except (ZoneInfoNotFoundError, ValueError):
        raise ValueError(f"unknown time zone {name!r}: use an IANA name such as Europe/Paris or UTC") from None


def parse_utc_z(text: str) -> datetime | None:
    """A moment the Console wrote (utc_z, utc_z_exact, or an offset), aware; None when it is not one."""
    try:
        moment = datetime.fromisoformat(text.replace("Z", "+00:00"))
    except ValueError:
        return None
    return moment if moment.tzinfo is not None else None
