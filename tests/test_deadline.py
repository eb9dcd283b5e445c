"""The one deadline module, against real sockets on loopback: slow, trickling and broken servers."""

from __future__ import annotations

import multiprocessing
import os
import queue
import socket
import threading
import time
from collections.abc import Callable, Iterator
from functools import partial
from typing import Any

import pytest
import requests
import urllib3

from console_ha.deadline import (
    WATCHDOG,
    BodyBroken,
    BodyTooLarge,
    Deadline,
    DeadlinePassed,
    Watchdog,
    Workers,
    is_timeout,
    shut_socket,
)
from console_ha.errors import HATimeout
from tests.moving_clock import PATIENCE, ClockReadings

# A loaded machine (the suite runs beside other work) gets this much beyond a bound before a test fails:
# only the two tests that hold the deadline to its moment on real threads and sockets use it.
MARGIN = 1.0
# A byte every TRICKLE_EVERY seconds for PATIENCE: what a test provokes is still going on when its deadline (under
# a second) ends it, and still ends, so a deadline that never fires fails the test (the server hangs up: an error
# that is not the deadline's) rather than holding it for hours.
TRICKLE_EVERY = 0.05
TRICKLE_BYTES = int(PATIENCE / TRICKLE_EVERY)
HEADERS = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"


class LateError(Exception):
    """A caller's own error for a passed deadline."""


class RawServer:
    """A TCP server on 127.0.0.1 that answers every request by running `script` on the connection."""

    def __init__(self, script: Callable[[socket.socket], None]) -> None:
        self.script = script
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}/"

    def __enter__(self) -> RawServer:
        thread = threading.Thread(target=self._serve, daemon=True)
        thread.start()
        self._threads.append(thread)
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._listener.close()

    def _serve(self) -> None:
        while not self._stop.is_set():
            try:
                conn, _ = self._listener.accept()
            except OSError:
                return
            threading.Thread(target=self._answer, args=(conn,), daemon=True).start()

    def _answer(self, conn: socket.socket) -> None:
        with conn:
            received = b""
            while b"\r\n\r\n" not in received:
                data = conn.recv(4096)
                if not data:
                    return
                received += data
            try:
                self.script(conn)
            except OSError:
                pass  # the client gave up and shut its side: what these tests provoke


def get(url: str) -> requests.Response:
    """A streamed GET whose per-read timeout alone would let a slow server hold it for a long time."""
    session = requests.Session()
    session.trust_env = False  # loopback only, never a proxy
    return session.get(url, stream=True, timeout=30)


def trickle(data: bytes, every: float = 0.05) -> Callable[[socket.socket], None]:
    def script(conn: socket.socket) -> None:
        for byte in data:
            conn.sendall(bytes([byte]))
            time.sleep(every)
    return script


@pytest.fixture
def serve() -> Iterator[Callable[[Callable[[socket.socket], None]], RawServer]]:
    servers: list[RawServer] = []

    def start(script: Callable[[socket.socket], None]) -> RawServer:
        server = RawServer(script).__enter__()
        servers.append(server)
        return server

    yield start
    for server in servers:
        server.__exit__()


# --- the budget --------------------------------------------------------------------------------

def test_remaining_counts_down_then_raises_home_assistant_s_timeout_by_default() -> None:
    deadline = Deadline(0.2, clock=ClockReadings([100.0, 100.05, 100.05, 100.25]))
    assert deadline.remaining() == pytest.approx(0.15) and not deadline.passed()
    assert deadline.passed() and deadline.left() == pytest.approx(-0.05)
    with pytest.raises(HATimeout) as caught:
        deadline.remaining()
    assert caught.value.code == "HA_TIMEOUT" and "0.2 seconds" in caught.value.message


def test_a_caller_s_own_error_replaces_the_default() -> None:
    deadline = Deadline(0, expired=lambda: LateError("too late"))
    with pytest.raises(LateError):
        deadline.remaining()
    assert isinstance(deadline.error(), LateError)


# --- call: up to the headers, on a thread of its own -------------------------------------------------

def test_call_returns_the_value_or_raises_the_call_s_own_error() -> None:
    deadline = Deadline(5)
    assert deadline.call(lambda: 42, lambda _: None) == 42
    empty: dict[str, int] = {}
    with pytest.raises(KeyError):
        deadline.call(lambda: empty["missing"], lambda _: None)


def test_call_gives_up_at_the_deadline_and_hands_a_late_value_to_abandon() -> None:
    abandoned: list[str] = []
    finished = threading.Event()
    release = threading.Event()

    def slow() -> str:
        release.wait(PATIENCE)  # answers only once the test lets it: the deadline must give up first
        return "late response"

    def abandon(value: str) -> None:
        abandoned.append(value)
        finished.set()

    started = time.monotonic()
    with pytest.raises(DeadlinePassed):
        Deadline(0.1).call(slow, abandon)
    # Real time: this holds `call` to its moment on a real thread's wait, which no test clock can stand in for.
    assert time.monotonic() - started < 0.1 + MARGIN
    release.set()
    assert finished.wait(PATIENCE) and abandoned == ["late response"]


def test_call_bounds_headers_sent_a_byte_at_a_time(serve) -> None:
    """Each byte comes well within the socket timeout; only the whole-call bound stops it.

    The headers never end (no blank line, bytes for PATIENCE, then the server hangs up), so DeadlinePassed is the
    deadline's.
    """
    server = serve(trickle(HEADERS + b"X-Slow: " + b"y" * TRICKLE_BYTES, every=TRICKLE_EVERY))
    closed: list[requests.Response] = []
    with pytest.raises(DeadlinePassed):
        Deadline(0.5).call(lambda: get(server.url), closed.append)


def counting_thread_starts(monkeypatch: pytest.MonkeyPatch) -> list[str]:
    """The names of the threads the deadline module starts from now on (never a test server's)."""
    started: list[str] = []
    start = threading.Thread.start

    def counted(thread: threading.Thread) -> None:
        if thread.name.startswith("deadline-") or isinstance(thread, threading.Timer):
            started.append(thread.name)
        start(thread)

    monkeypatch.setattr(threading.Thread, "start", counted)
    return started


def test_calls_one_after_another_reuse_a_waiting_thread_rather_than_start_one_each(
        monkeypatch: pytest.MonkeyPatch) -> None:
    """Starting a thread waits until it runs: on a busy machine a scheduling round per request."""
    Deadline(5).call(lambda: None, lambda _: None)  # a thread waits from here on
    started = counting_thread_starts(monkeypatch)
    for value in range(20):
        assert Deadline(5).call(partial(int, value), lambda _: None) == value
    assert started == []


def test_a_call_given_up_on_keeps_its_thread_and_the_next_call_is_not_kept_waiting_behind_it() -> None:
    workers = Workers(idle_seconds=5)
    release = threading.Event()

    def hangs() -> None:  # a name lookup that hangs, until the test lets it go
        if not release.wait(PATIENCE):
            release.set()  # it ended on its own first: a call queued behind it must not look unblocked

    workers.run(hangs)
    ran = threading.Event()
    workers.run(ran.set)
    assert ran.wait(PATIENCE) and not release.is_set()  # ran while the hung call still held its thread
    release.set()


def test_an_idle_call_thread_ends_after_its_idle_time() -> None:
    workers = Workers(idle_seconds=0.1)
    done = threading.Event()
    workers.run(done.set)
    assert done.wait(PATIENCE)
    limit = time.monotonic() + PATIENCE
    while workers.idle() and time.monotonic() < limit:
        time.sleep(0.02)
    assert workers.idle() == 0


def test_watching_a_body_starts_no_thread_and_leaves_nothing_pending(serve, monkeypatch: pytest.MonkeyPatch) -> None:
    body = b'{"state": "on"}'
    server = serve(lambda conn: conn.sendall(HEADERS + b"Content-Length: %d\r\n\r\n" % len(body) + body))
    deadline = Deadline(5)
    response = deadline.call(lambda: get(server.url), requests.Response.close)
    with response, deadline.watch(response):  # the watchdog's one thread runs from here on
        b"".join(deadline.body(response, max_bytes=100, chunk_bytes=64))
    started = counting_thread_starts(monkeypatch)
    for _ in range(5):
        response = deadline.call(lambda: get(server.url), requests.Response.close)
        with response, deadline.watch(response):
            assert b"".join(deadline.body(response, max_bytes=100, chunk_bytes=64)) == body
    assert started == [] and WATCHDOG.pending() == 0


def test_the_watchdog_runs_each_action_at_its_moment_in_order_and_never_a_cancelled_one() -> None:
    watchdog = Watchdog()
    ran: list[str] = []
    now = time.monotonic()
    watchdog.at(now + 0.3, lambda: ran.append("late"))
    cancelled = watchdog.at(now + 0.1, lambda: ran.append("cancelled"))
    watchdog.at(now + 0.2, lambda: ran.append("soon"))

    def fails() -> None:  # a failing action ends neither the watchdog nor the others
        raise RuntimeError("shutting failed")

    watchdog.at(now + 0.05, fails)
    watchdog.cancel(cancelled)
    limit = time.monotonic() + PATIENCE
    while len(ran) < 2 and time.monotonic() < limit:
        time.sleep(0.02)
    assert ran == ["soon", "late"] and watchdog.pending() == 0


# --- the body ----------------------------------------------------------------------------------

def test_a_whole_body_in_time_is_read_piece_by_piece(serve) -> None:
    body = b'{"state": "21.4"}' * 1000
    server = serve(lambda conn: conn.sendall(HEADERS + b"Content-Length: %d\r\n\r\n" % len(body) + body))
    deadline = Deadline(5)
    response = deadline.call(lambda: get(server.url), requests.Response.close)
    with response, deadline.watch(response):
        assert b"".join(deadline.body(response, max_bytes=len(body), chunk_bytes=4096)) == body


def test_a_trickling_body_is_cut_off_at_the_deadline_with_the_caller_s_error(serve) -> None:
    """The whole body would come, a byte every 0.05 s, long after the deadline: LateError can only be the deadline's."""
    server = serve(lambda conn: (conn.sendall(HEADERS + b"Content-Length: %d\r\n\r\n" % TRICKLE_BYTES),
                                 trickle(b"x" * TRICKLE_BYTES, every=TRICKLE_EVERY)(conn)))
    deadline = Deadline(0.6, expired=lambda: LateError("cut off"))
    response = deadline.call(lambda: get(server.url), requests.Response.close)
    received = 0
    with response, deadline.watch(response), pytest.raises(LateError):
        for chunk in deadline.body(response, max_bytes=10 * TRICKLE_BYTES, chunk_bytes=4096):
            received += len(chunk)
    assert received < TRICKLE_BYTES


def test_a_chunk_size_line_sent_a_byte_at_a_time_is_cut_off_by_the_watchdog(serve) -> None:
    """http.client reads a size line whole before read1 returns: only shutting the socket ends it."""
    server = serve(lambda conn: (conn.sendall(HEADERS + b"Transfer-Encoding: chunked\r\n\r\n"),
                                 trickle(b"0" * 1000)(conn)))
    deadline = Deadline(0.6)
    response = deadline.call(lambda: get(server.url), requests.Response.close)
    started = time.monotonic()
    with response, deadline.watch(response), pytest.raises(HATimeout):
        for _ in deadline.body(response, max_bytes=10_000, chunk_bytes=4096):
            pass
    # Real time: the watchdog shuts a real socket at its moment; every other deadline test leans on this one.
    assert time.monotonic() - started < 0.6 + MARGIN


def test_a_body_past_its_cap_stops_there(serve) -> None:
    server = serve(lambda conn: conn.sendall(HEADERS + b"Content-Length: 5000\r\n\r\n" + b"x" * 5000))
    deadline = Deadline(5)
    response = deadline.call(lambda: get(server.url), requests.Response.close)
    with response, deadline.watch(response), pytest.raises(BodyTooLarge) as caught:
        b"".join(deadline.body(response, max_bytes=1000, chunk_bytes=512))
    assert caught.value.max_bytes == 1000


def test_a_connection_lost_mid_body_is_body_broken_and_keeps_no_transport_error(serve) -> None:
    server = serve(lambda conn: conn.sendall(HEADERS + b"Content-Length: 1000\r\n\r\n" + b"x" * 10))
    deadline = Deadline(5)
    response = deadline.call(lambda: get(server.url), requests.Response.close)
    with response, pytest.raises(BodyBroken) as caught:
        b"".join(deadline.body(response, max_bytes=10_000, chunk_bytes=4096))
    # Nothing of the transport's exception (which holds the request and its headers) rides along.
    assert caught.value.__cause__ is None and caught.value.__context__ is None and caught.value.cause


# --- the socket --------------------------------------------------------------------------------

def test_shut_socket_wakes_a_read_blocked_on_a_silent_server(serve) -> None:
    quiet = threading.Event()

    def silent(conn: socket.socket) -> None:
        conn.sendall(HEADERS + b"Content-Length: 10\r\n\r\n")
        # Never a byte of the body until the test ends. A quiet that runs out ends itself before the server hangs
        # up, so a read woken by the hang-up and not by shut_socket is seen.
        if not quiet.wait(PATIENCE):
            quiet.set()

    server = serve(silent)
    response = get(server.url)
    outcome: list[object] = []

    def read() -> None:
        try:
            outcome.append(response.raw.read1(10))
        except Exception as err:  # either way the read returned
            outcome.append(err)

    reader = threading.Thread(target=read, daemon=True)
    reader.start()
    time.sleep(0.2)
    assert outcome == [], "the read waits on the silent server"
    shut_socket(response)
    reader.join(PATIENCE)
    assert not reader.is_alive() and not quiet.is_set()  # woken by the shut socket: the server never spoke
    quiet.set()
    response.close()


@pytest.mark.parametrize(("error", "timeout"), [
    (requests.exceptions.ConnectTimeout("connect"), True),
    # urllib3 names the pool or connection that failed in the message; making one opens no socket.
    (requests.exceptions.ConnectionError(
        urllib3.exceptions.ReadTimeoutError(urllib3.HTTPConnectionPool("127.0.0.1"), "/", "read")), True),
    (requests.exceptions.ConnectionError(
        urllib3.exceptions.NewConnectionError(urllib3.connection.HTTPConnection("127.0.0.1"), "refused")), False),
    (ConnectionResetError(), False),
])
def test_is_timeout_looks_beneath_requests_wrapping(error: BaseException, timeout: bool) -> None:
    assert is_timeout(error) is timeout


def _call_and_watch_in_a_forked_child(url: str, outcome: Any) -> None:
    deadline = Deadline(5)
    response = deadline.call(lambda: get(url), requests.Response.close)
    with response, deadline.watch(response):
        outcome.put(b"".join(deadline.body(response, max_bytes=100, chunk_bytes=64)).decode())


@pytest.mark.skipif(not hasattr(os, "fork"), reason="forking is POSIX's")
def test_a_forked_child_runs_calls_and_its_watchdog_on_threads_of_its_own(serve) -> None:
    """The parent's kept threads do not exist in a child: without forgetting them, its calls wait out the deadline."""
    body = b'{"state": "on"}'
    server = serve(lambda conn: conn.sendall(HEADERS + b"Content-Length: %d\r\n\r\n" % len(body) + body))
    _call_and_watch_in_a_forked_child(server.url, queue.SimpleQueue())  # the parent's threads wait, idle
    forked = multiprocessing.get_context("fork")
    outcome = forked.SimpleQueue()
    child = forked.Process(target=_call_and_watch_in_a_forked_child, args=(server.url, outcome))
    child.start()
    child.join(PATIENCE)
    # A call handed to a thread that is not there waits out its 5 s deadline and fails: exit code 1, no body.
    assert child.exitcode == 0 and outcome.get() == body.decode()
