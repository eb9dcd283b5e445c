"""The one way the Console writes a moment: ISO 8601 in UTC with a Z, as results, audit lines and the API show it."""

from __future__ import annotations

from datetime import UTC, datetime


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
