"""Whole-call deadlines for every outbound call: Home Assistant's REST API and WebSocket, and the language model.

requests' and the socket's timeouts bound each read, not a call as a whole: a name lookup, headers sent a
byte at a time, or a body that trickles in can each outlast them. A `Deadline` is one budget on the
monotonic clock that every step of a call spends: the request up to its headers (`call`), each read of
the body (`body`), and a watchdog that shuts the socket when the time is up (`watch`). This is the one
module that reaches into a response's socket.
"""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any, TypeVar

import requests
import urllib3

from console_ha.errors import HATimeout

T = TypeVar("T")

# A read that failed this close to the deadline failed because of it: the watchdog shut its socket.
SLACK_SECONDS = 0.01


class DeadlinePassed(TimeoutError):
    """`Deadline.call` gave up: the request had no answer when the deadline came."""


class BodyBroken(ConnectionError):
    """The connection failed in the middle of a body, before the deadline; `cause` names the transport's error.

    Raised fresh, never chained: the transport's exception holds the request, and with it its headers.
    """

    def __init__(self, cause: str) -> None:
        super().__init__(f"the connection failed in the middle of the answer ({cause})")
        self.cause = cause


class BodyTooLarge(ValueError):
    """A body went past its byte cap; reading stopped there."""

    def __init__(self, max_bytes: int) -> None:
        super().__init__(f"the answer was larger than {max_bytes} bytes")
        self.max_bytes = max_bytes


class Deadline:
    """One time budget on the monotonic clock, shared by every step of a call (or by several calls).

    `expired` makes the error a caller's own when the time is up; by default Home Assistant's HATimeout,
    since a capability's reads of Home Assistant share one Deadline between their requests.
    """

    def __init__(self, seconds: float, *, expired: Callable[[], Exception] | None = None) -> None:
        self.seconds = seconds
        self.end = time.monotonic() + seconds
        self._expired = expired or self._home_assistant_timeout

    def _home_assistant_timeout(self) -> Exception:
        return HATimeout(f"Home Assistant did not answer within {self.seconds:g} seconds.")

    def left(self) -> float:
        """Seconds left: zero or less once the deadline has passed."""
        return self.end - time.monotonic()

    def passed(self) -> bool:
        """Whether the deadline has passed."""
        return self.left() <= 0

    def remaining(self) -> float:
        """Seconds left; the `expired` error when none are."""
        left = self.left()
        if left <= 0:
            raise self.error()
        return left

    def error(self) -> Exception:
        """The caller's own error for a call that ran out of time."""
        return self._expired()

    def call(self, call: Callable[[], T], abandon: Callable[[T], Any]) -> T:
        """`call()` (a request up to its response headers, a connect), given up with DeadlinePassed at the deadline.

        A name lookup, or headers sent a byte at a time, are not bounded as a whole by socket timeouts, so
        the call runs on a thread of its own; one given up on is left to end, and `abandon` is handed what
        it returns (a response or socket to close).
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

        threading.Thread(target=work, name="deadline-call", daemon=True).start()
        if not done.wait(max(self.left(), 0.0)):
            given_up.set()
            if done.is_set() and "value" in outcome:
                abandon(outcome["value"])  # it finished between the wait and the flag
            raise DeadlinePassed
        if "error" in outcome:
            raise outcome["error"]
        value: T = outcome["value"]
        return value

    @contextmanager
    def watch(self, response: requests.Response) -> Iterator[None]:
        """Shut `response`'s socket at the deadline while the block runs.

        Per-read timeouts cannot bound every read: http.client reads a chunk-size line whole, byte after
        byte, each within the socket timeout, before it returns anything to the caller's deadline check.
        """
        watchdog = threading.Timer(max(self.left(), 0.0), shut_socket, args=(response,))
        watchdog.daemon = True
        watchdog.start()
        try:
            yield
        finally:
            watchdog.cancel()

    def read1(self, response: requests.Response, size: int) -> bytes:
        """What one socket read of `response`'s body brings, at most `size` bytes; b"" at the body's end.

        The read waits at most until the deadline (read1 returns what one read brings, where
        iter_content would wait to fill its chunk). The `expired` error when the deadline passes before,
        during or (the watchdog having shut the socket) at the end of the read; BodyBroken when the
        connection fails otherwise.
        """
        left = self.remaining()
        _set_read_timeout(response, left)
        chunk: bytes = b""
        failed: str | None = None
        try:
            chunk = response.raw.read1(size, decode_content=True)
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError) as err:
            failed = "timeout" if is_timeout(err) or self.left() <= SLACK_SECONDS else type(err).__name__
        # Raised here, outside the except block: the transport's exception is neither chained nor kept.
        if failed == "timeout" or self.passed():
            raise self.error()  # late, or cut off at the deadline by the watchdog: not a whole body
        if failed is not None:
            raise BodyBroken(failed)
        return chunk

    def body(self, response: requests.Response, *, max_bytes: int, chunk_bytes: int) -> Iterator[bytes]:
        """`response`'s body piece by piece as it comes, within the deadline; BodyTooLarge past `max_bytes`."""
        received = 0
        while chunk := self.read1(response, chunk_bytes):
            received += len(chunk)
            if received > max_bytes:
                raise BodyTooLarge(max_bytes)
            yield chunk


def is_timeout(err: BaseException) -> bool:
    """Whether a transport error (requests wraps urllib3's in its own) was a timeout underneath."""
    seen: set[int] = set()
    current: BaseException | None = err
    while current is not None and id(current) not in seen:
        seen.add(id(current))
        if isinstance(current, urllib3.exceptions.NewConnectionError):
            return False  # a refused connection, though urllib3 files it under its timeouts
        if isinstance(current, (TimeoutError, urllib3.exceptions.TimeoutError, requests.exceptions.Timeout)):
            return True
        inner = current.args[0] if current.args and isinstance(current.args[0], BaseException) else None
        current = inner or getattr(current, "reason", None) or current.__cause__
    return False


def shut_socket(response: requests.Response) -> None:
    """Shut the response's socket, so that a read blocked on it returns at once."""
    sock = _socket_of(response)
    if sock is not None:
        try:
            sock.shutdown(socket.SHUT_RDWR)
        except OSError:
            pass


def _set_read_timeout(response: requests.Response, seconds: float) -> None:
    """Let the next socket read of `response` wait at most `seconds` (what is left of the budget)."""
    sock = _socket_of(response)
    if sock is not None:
        try:
            sock.settimeout(max(seconds, 0.001))
        except OSError:
            pass


def _socket_of(response: requests.Response) -> socket.socket | None:
    # urllib3 keeps the connection (and its socket) on the raw response while the body is read.
    connection = getattr(response.raw, "connection", None)
    sock = getattr(connection, "sock", None)
    return sock if isinstance(sock, socket.socket) else None
