"""Whole-call deadlines for streamed HTTP bodies: requests' own timeout bounds only each socket read."""

from __future__ import annotations

import requests


def set_read_timeout(response: requests.Response, seconds: float) -> None:
    """Let the next socket read of `response` wait at most `seconds` (what is left of the call's budget)."""
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        try:
            sock.settimeout(max(seconds, 0.001))
        except OSError:
            pass
