"""Whole-call deadlines for streamed HTTP bodies: requests' own timeout bounds only each socket read."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import requests

from console_ha.errors import HATimeout

T = TypeVar("T")


def set_read_timeout(response: requests.Response, seconds: float) -> None:
    """Let the next socket read of `response` wait at most `seconds` (what is left of the call's budget)."""
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        try:
            sock.settimeout(max(seconds, 0.001))
        except OSError:
            pass


def call_before(deadline: float, call: Callable[[], T], abandon: Callable[[T], Any]) -> T:
    """`call()` (a request up to its response headers), given up with TimeoutError at `deadline`.

    A name lookup, or headers sent a byte at a time, are not bounded as a whole by socket timeouts, so the
    call runs on a worker thread; one given up on is left to end, and `abandon` is handed what it returns.
    """
    outcome: dict[str, Any] = {}
    done = threading.Event()
    given_up = threading.Event()

    def work() -> None:
        try:
            outcome["value"] = call()
        except BaseException as err:  # noqa: BLE001 - handed to the caller's own except clauses
            outcome["error"] = err
        finally:
            done.set()
            if given_up.is_set() and "value" in outcome:
                abandon(outcome["value"])

    threading.Thread(target=work, name="http-call", daemon=True).start()
    if not done.wait(max(deadline - time.monotonic(), 0.0)):
        given_up.set()
        if done.is_set() and "value" in outcome:
            abandon(outcome["value"])  # it finished between the wait and the flag
        raise TimeoutError
    if "error" in outcome:
        raise outcome["error"]
    return outcome["value"]


def shut_socket(response: requests.Response) -> None:
    """Shut the response's socket, so that a read blocked on it returns at once."""
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


@contextmanager
def shut_at(deadline: float, response: requests.Response) -> Iterator[None]:
    """Shut `response`'s socket at `deadline` while the block runs.

    Per-read timeouts cannot bound every read: http.client reads a chunk-size line whole, byte after byte,
    each within the socket timeout, before it returns anything to the caller's deadline check.
    """
    watchdog = threading.Timer(max(deadline - time.monotonic(), 0.0), shut_socket, args=(response,))
    watchdog.daemon = True
    watchdog.start()
    try:
        yield
    finally:
        watchdog.cancel()


class Deadline:
    """One time budget shared by every request an invocation makes."""

    def __init__(self, seconds: float) -> None:
        self.seconds = seconds
        self._end = time.monotonic() + seconds

    def remaining(self) -> float:
        """Seconds left; HATimeout when none are."""
        left = self._end - time.monotonic()
        if left <= 0:
            raise HATimeout(f"Home Assistant did not answer within {self.seconds:g} seconds.")
        return left
