"""Whole-call deadlines for every outbound call: Home Assistant's REST API and WebSocket, and the language model.

requests' and the socket's timeouts bound each read, not a call as a whole: a name lookup, headers sent a
byte at a time, or a body that trickles in can each outlast them. A `Deadline` is one budget on the
monotonic clock that every step of a call spends: the request up to its headers (`call`), each read of
the body (`body`), and a watchdog that shuts the socket when the time is up (`watch`). This is the one
module that reaches into a response's socket.
"""

from __future__ import annotations

import heapq
import itertools
import os
import queue
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
# How long a worker thread of `Deadline.call` waits for the next call before it ends.
IDLE_WORKER_SECONDS = 60.0


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

    def __init__(self, seconds: float, *, expired: Callable[[], Exception] | None = None,
                 clock: Callable[[], float] = time.monotonic) -> None:
        self.seconds = seconds
        # A test's own clock moves the budget's arithmetic (`left`, `remaining`); the watchdog that shuts a
        # socket at `end` keeps the real monotonic clock, so only budgets without a socket take another one.
        self._clock = clock
        self.end = clock() + seconds
        self._expired = expired or self._home_assistant_timeout

    def _home_assistant_timeout(self) -> Exception:
        return HATimeout(f"Home Assistant did not answer within {self.seconds:g} seconds.")

    def left(self) -> float:
        """Seconds left: zero or less once the deadline has passed."""
        return self.end - self._clock()

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
        the call runs on another thread (a kept one, `WORKERS`); one given up on is left to end, and
        `abandon` is handed what it returns (a response or socket to close).
        """
        outcome: dict[str, Any] = {}
        done = threading.Event()
        given_up = threading.Event()

        def work() -> None:
            try:
                outcome["value"] = call()
            except BaseException as err:  # handed to the caller's own except clauses
                outcome["error"] = err
            finally:
                done.set()
                if given_up.is_set() and "value" in outcome:
                    abandon(outcome["value"])

        WORKERS.run(work)
        if not done.wait(max(self.left(), 0.0)):
            given_up.set()
            if done.is_set() and "value" in outcome:
                abandon(outcome["value"])  # it finished between the wait and the flag
            raise DeadlinePassed
        if "error" in outcome:
            raise outcome["error"]
        value: T = outcome["value"]
        return value

    def call_here(self, call: Callable[[], T], connections: list[Any]) -> T:
        """`call()` (a GET up to its headers) on this thread; at the deadline the watchdog shuts the sockets of
        the urllib3 `connections` it has taken (the caller's pool adds each as it hands it out).

        For a request that needs no name lookup (an IP address over plain http: the connect is one attempt,
        bounded by its timeout), so nothing but the socket can hold it; shutting the socket ends a wait for
        headers sent a byte at a time, as `call`'s thread would. No handoff to another thread.
        """
        ticket = WATCHDOG.at(self.end, lambda: _shut_connections(connections))
        try:
            return call()
        finally:
            WATCHDOG.cancel(ticket)

    @contextmanager
    def watch(self, response: requests.Response) -> Iterator[None]:
        """Shut `response`'s socket at the deadline while the block runs.

        Per-read timeouts cannot bound every read: http.client reads a chunk-size line whole, byte after
        byte, each within the socket timeout, before it returns anything to the caller's deadline check.
        """
        ticket = WATCHDOG.at(self.end, lambda: shut_socket(response))
        try:
            yield
        finally:
            WATCHDOG.cancel(ticket)

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


class Workers:
    """The threads `Deadline.call` runs its calls on: an idle one takes the next call, else a new one starts.

    Kept rather than started per call: starting a thread waits until the new thread runs, which on a
    busy machine costs a scheduling round, and a read of Home Assistant makes a call per request. Never
    a fixed number: a call given up on (a name lookup that hangs) keeps its thread until it ends, and
    the next call must not wait behind it. A thread idle for IDLE_WORKER_SECONDS ends.
    """

    def __init__(self, idle_seconds: float = IDLE_WORKER_SECONDS) -> None:
        self._idle_seconds = idle_seconds
        self.forget()

    def forget(self) -> None:
        """Start afresh with no thread (a forked child has none of its parent's)."""
        self._lock = threading.Lock()
        self._idle: list[queue.SimpleQueue[Callable[[], None]]] = []

    def run(self, work: Callable[[], None]) -> None:
        """Start `work` (which handles its own errors) on an idle thread, or on a new one."""
        with self._lock:
            inbox = self._idle.pop() if self._idle else None
        if inbox is None:
            inbox = queue.SimpleQueue()
            threading.Thread(target=self._serve, args=(inbox,), name="deadline-call", daemon=True).start()
        inbox.put(work)

    def idle(self) -> int:
        """How many threads wait for a call."""
        with self._lock:
            return len(self._idle)

    def _serve(self, inbox: queue.SimpleQueue[Callable[[], None]]) -> None:
        while True:
            try:
                work = inbox.get(timeout=self._idle_seconds)
            except queue.Empty:
                with self._lock:
                    if inbox in self._idle:
                        self._idle.remove(inbox)
                        return
                continue  # taken by `run` just as the wait ended: its call is on the way
            work()
            with self._lock:
                self._idle.append(inbox)


class Watchdog:
    """One thread that runs actions at their moments (shutting a socket at its deadline), for every call.

    One thread for all, rather than a Timer per call: starting a thread waits until it runs, and every
    request to Home Assistant is watched. `at` and `cancel` only take a lock; the caller never waits.
    """

    def __init__(self) -> None:
        self.forget()

    def forget(self) -> None:
        """Start afresh with no thread and nothing due (a forked child has none of its parent's)."""
        self._wake = threading.Condition()
        self._due: list[tuple[float, int]] = []
        self._actions: dict[int, Callable[[], None]] = {}
        self._tickets = itertools.count()
        self._thread: threading.Thread | None = None

    def at(self, moment: float, action: Callable[[], None]) -> int:
        """Run `action` at `moment` (the monotonic clock) unless cancelled; a ticket for `cancel`."""
        with self._wake:
            ticket = next(self._tickets)
            self._actions[ticket] = action
            heapq.heappush(self._due, (moment, ticket))
            if self._thread is None:
                self._thread = threading.Thread(target=self._serve, name="deadline-watchdog", daemon=True)
                self._thread.start()
            elif self._due[0][1] == ticket:
                self._wake.notify()  # sooner than what the thread sleeps towards
        return ticket

    def cancel(self, ticket: int) -> None:
        """The action of `ticket` will not run (it may be running now)."""
        with self._wake:
            self._actions.pop(ticket, None)

    def pending(self) -> int:
        """How many actions wait for their moment."""
        with self._wake:
            return len(self._actions)

    def _serve(self) -> None:
        while True:
            with self._wake:
                while self._due and self._due[0][1] not in self._actions:
                    heapq.heappop(self._due)  # cancelled
                if not self._due:
                    self._wake.wait()
                    continue
                moment, ticket = self._due[0]
                left = moment - time.monotonic()
                if left > 0:
                    self._wake.wait(left)
                    continue
                heapq.heappop(self._due)
                action = self._actions.pop(ticket)
            try:
                action()
            except Exception:  # one failed action must not end the watchdog for every call
                pass


# The process's one watchdog and its call threads, shared by every Deadline. A forked child (a server that
# forks its workers after the app was used) forgets its parent's: their threads do not run in the child, and
# an idle thread that is not there would leave every call to wait for its deadline and no socket shut.
WATCHDOG = Watchdog()
WORKERS = Workers()


def _forget_threads() -> None:
    WATCHDOG.forget()
    WORKERS.forget()


os.register_at_fork(after_in_child=_forget_threads)


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


def _shut_connections(connections: list[Any]) -> None:
    """Shut the socket of each urllib3 connection (one not yet connected has none)."""
    for connection in list(connections):
        sock = getattr(connection, "sock", None)
        if isinstance(sock, socket.socket):
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
