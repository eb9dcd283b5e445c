"""The one way the Console writes a moment: UTC with Z, to the second (results, audit, API) or exact (HA's URLs)."""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta, timezone

import pytest

from console_ha.timestamps import utc_z, utc_z_exact, utc_z_now

MOMENT = datetime(2026, 12, 1, 17, 0, 5, 987_654, tzinfo=UTC)


@pytest.mark.parametrize("moment", [MOMENT, MOMENT.astimezone(timezone(timedelta(hours=-5, minutes=-30)))])
def test_utc_z_is_utc_to_the_second_with_z_whatever_the_offset(moment: datetime) -> None:
    assert utc_z(moment) == "2026-12-01T17:00:05Z"


def test_utc_z_exact_keeps_the_microseconds_and_never_writes_a_plus() -> None:
    assert utc_z_exact(MOMENT.astimezone(timezone(timedelta(hours=2)))) == "2026-12-01T17:00:05.987654Z"


def test_utc_z_exact_refuses_a_naive_moment() -> None:
    with pytest.raises(ValueError):
        utc_z_exact(MOMENT.replace(tzinfo=None))


def test_now_is_written_the_same_way() -> None:
    before = datetime.now(UTC).replace(microsecond=0)
    written = utc_z_now()
    after = datetime.now(UTC)
    assert re.fullmatch(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\dZ", written)
    assert before <= datetime.fromisoformat(written) <= after
