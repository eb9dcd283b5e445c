"""A recording TCP proxy for tests: what a client sent to one origin, as it crossed the wire (issue 29).

`RecordingProxy` listens on 127.0.0.1 and forwards every connection byte for byte to one upstream, keeping
what each client sent (responses are forwarded, not kept). It works below HTTP on purpose: the Console
reads Home Assistant over REST, where the token is a header, and over its WebSocket API, where the token is
inside the `auth` message of a masked frame. `saw` looks in both the raw bytes and what the upstream reads
(each WebSocket connection's frames unmasked, and inflated when compressed), so a test asks one question:
did this token reach this origin? Cleartext only: in front of a TLS upstream it would keep ciphertext.
"""

from __future__ import annotations

import re
import socket
import struct
import threading
import zlib
from collections.abc import Callable, Iterator
from itertools import count
from types import TracebackType
from urllib.parse import urlsplit

# Far more than any test sends; past it the recording can no longer prove that something was never sent.
RECORD_LIMIT = 4 * 1024 * 1024
CHUNK = 1 << 16
CONNECT_TIMEOUT = 5.0
# Patience, not a bound: a pump ends within milliseconds of its sockets being shut.
JOIN_PATIENCE = 10.0
_UPGRADE = re.compile(rb"\r\nupgrade:[ \t]*websocket[ \t]*(\r\n|$)", re.IGNORECASE)
_DEFLATE_TAIL = b"\x00\x00\xff\xff"  # RFC 7692: stripped from every compressed message by its sender
_proxy_ids = count(1)


class RecordingOverflow(RuntimeError):
    """The recording passed its limit and dropped bytes: it cannot say that something was never sent."""


class _Connection:
    """One client connection and its upstream; both closed when both directions have ended."""

    def __init__(self, client: socket.socket, upstream: socket.socket) -> None:
        self.client = client
        self.upstream = upstream
        self.sent = bytearray()
        self._open_directions = 2
        self._lock = threading.Lock()

    def direction_ended(self) -> None:
        """One pump is done; the second to finish closes both sockets."""
        with self._lock:
            self._open_directions -= 1
            last = self._open_directions == 0
        if last:
            self.client.close()
            self.upstream.close()

    def shut(self) -> None:
        """Wake both pumps (a shut socket's recv returns at once); they close the sockets as they end."""
        for sock in (self.client, self.upstream):
            try:
                sock.shutdown(socket.SHUT_RDWR)
            except OSError:
                pass  # already closed by its pumps


class RecordingProxy:
    """127.0.0.1:<free port> → one upstream (host, port), recording every byte clients send; a context manager."""

    def __init__(self, upstream: tuple[str, int], *, limit: int = RECORD_LIMIT) -> None:
        self.upstream = upstream
        self.port = 0
        self.name = f"wire-proxy-{next(_proxy_ids)}"
        self._limit = limit
        self._lock = threading.Lock()
        self._connections: list[_Connection] = []
        self._recorded = 0
        self._overflowed = False
        self._stopping = False
        self._threads: list[threading.Thread] = []
        self._listener: socket.socket | None = None
        self._acceptor: threading.Thread | None = None

    @classmethod
    def in_front_of(cls, base_url: str, *, limit: int = RECORD_LIMIT) -> RecordingProxy:
        """A proxy (not started) for an http:// base URL's host and port."""
        parts = urlsplit(base_url)
        if parts.scheme != "http" or parts.hostname is None:
            raise ValueError(f"a recording proxy needs a cleartext http:// URL, not {base_url!r}")
        return cls((parts.hostname, parts.port or 80), limit=limit)

    @property
    def url(self) -> str:
        """The proxy's own base URL: give it to a client in place of the upstream's."""
        return f"http://127.0.0.1:{self.port}"

    # --- lifecycle ---------------------------------------------------------------------------

    def start(self) -> RecordingProxy:
        """Listen on a free loopback port and accept in a background thread."""
        listener = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        listener.bind(("127.0.0.1", 0))
        listener.listen(16)
        self._listener = listener
        self.port = listener.getsockname()[1]
        self._acceptor = self._spawn(self._accept_loop, "accept")
        return self

    def stop(self) -> None:
        """Stop listening, cut every open connection, and wait for every thread; RuntimeError if one lingers."""
        with self._lock:
            self._stopping = True
        if self._listener is not None:
            try:
                self._listener.shutdown(socket.SHUT_RDWR)  # on Linux this is what wakes a blocked accept()
            except OSError:
                pass
            self._listener.close()
        if self._acceptor is not None:
            self._acceptor.join(JOIN_PATIENCE)  # it opens connections: once it is done, no new one comes
        with self._lock:
            connections = list(self._connections)
            threads = list(self._threads)
        for connection in connections:
            connection.shut()
        for thread in threads:
            thread.join(JOIN_PATIENCE)
        lingering = [thread.name for thread in threads if thread.is_alive()]
        if lingering:
            raise RuntimeError(f"{self.name}: threads still running after stop: {lingering}")

    def alive_threads(self) -> list[str]:
        """The names of this proxy's threads still running (none once `stop` returned)."""
        with self._lock:
            return [thread.name for thread in self._threads if thread.is_alive()]

    def __enter__(self) -> RecordingProxy:
        return self.start()

    def __exit__(
        self, kind: type[BaseException] | None, error: BaseException | None, trace: TracebackType | None
    ) -> None:
        self.stop()

    # --- forwarding --------------------------------------------------------------------------

    def _spawn(self, target: Callable[..., None], role: str, *args: object) -> threading.Thread:
        thread = threading.Thread(target=target, args=args, name=f"{self.name}-{role}", daemon=True)
        with self._lock:
            self._threads = [t for t in self._threads if t.is_alive()]
            self._threads.append(thread)
        thread.start()
        return thread

    def _accept_loop(self) -> None:
        assert self._listener is not None
        while True:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return  # the listener was shut by stop()
            self._open(client)

    def _open(self, client: socket.socket) -> None:
        try:
            upstream = socket.create_connection(self.upstream, timeout=CONNECT_TIMEOUT)
        except OSError:
            # The origin is down: the client sees its connection closed; nothing reached any origin.
            client.close()
            return
        upstream.settimeout(None)
        connection = _Connection(client, upstream)
        with self._lock:
            if self._stopping:
                client.close()
                upstream.close()
                return
            self._connections.append(connection)
        self._spawn(self._pump, "up", connection, client, upstream, True)
        self._spawn(self._pump, "down", connection, upstream, client, False)

    def _pump(
        self, connection: _Connection, source: socket.socket, target: socket.socket, record: bool
    ) -> None:
        try:
            while chunk := source.recv(CHUNK):
                if record:
                    self._record(connection, chunk)  # before it goes: what the upstream may have read is kept
                target.sendall(chunk)
            target.shutdown(socket.SHUT_WR)  # pass the half-close on, as TCP would
        except OSError:
            pass  # a reset on either side, or stop() shut the sockets: this direction is over
        finally:
            connection.direction_ended()

    def _record(self, connection: _Connection, chunk: bytes) -> None:
        with self._lock:
            room = self._limit - self._recorded
            kept = chunk[: max(room, 0)]
            connection.sent += kept
            self._recorded += len(kept)
            if len(kept) < len(chunk):
                self._overflowed = True

    # --- what was sent -----------------------------------------------------------------------

    def _streams(self) -> list[bytes]:
        with self._lock:
            return [bytes(connection.sent) for connection in self._connections]

    @property
    def connections(self) -> int:
        """How many client connections reached the upstream."""
        with self._lock:
            return len(self._connections)

    def sent_bytes(self) -> bytes:
        """Every byte clients sent, as on the wire, connection after connection."""
        self._check_complete()
        return b"".join(self._streams())

    def sent_plain(self) -> bytes:
        """What the upstream read: as `sent_bytes`, with each WebSocket connection's frames unmasked (and
        inflated), one message a line."""
        self._check_complete()
        return b"".join(readable(stream) for stream in self._streams())

    def saw(self, needle: bytes) -> bool:
        """Whether any one connection carried `needle`, raw or in a WebSocket message.

        A needle found is proof; an absence is proof only while nothing was dropped (else RecordingOverflow).
        """
        if any(needle in stream or needle in readable(stream) for stream in self._streams()):
            return True
        self._check_complete()
        return False

    def clear(self) -> None:
        """Forget what was recorded so far: closed connections go, open ones stay and record afresh."""
        with self._lock:
            for connection in self._connections:
                connection.sent.clear()
            self._connections = [c for c in self._connections if c.client.fileno() != -1]
            self._recorded = 0
            self._overflowed = False

    def _check_complete(self) -> None:
        with self._lock:
            if self._overflowed:
                raise RecordingOverflow(f"{self.name} recorded over {self._limit} bytes and dropped the rest")


# --- reading a client's WebSocket stream -------------------------------------------------------


def readable(stream: bytes) -> bytes:
    """A client's stream as its server reads it: unchanged, unless it upgrades to a WebSocket, whose frames
    are then unmasked (and inflated, RFC 7692) into one message a line after the request head."""
    head, blank, frames = stream.partition(b"\r\n\r\n")
    if not blank or not _UPGRADE.search(head):
        return stream
    return b"\n".join([head + blank, *_messages(frames)])


def _frames(data: bytes) -> Iterator[tuple[int, bytes]]:
    """(first header byte, unmasked payload) of each frame; a frame cut short yields what arrived of it."""
    position = 0
    while position + 2 <= len(data):
        first, second = data[position], data[position + 1]
        position += 2
        size = second & 0x7F
        if size >= 126:
            width = 2 if size == 126 else 8
            if position + width > len(data):
                return
            (size,) = struct.unpack("!H" if width == 2 else "!Q", data[position : position + width])
            position += width
        mask = data[position : position + 4] if second & 0x80 else b""
        position += len(mask)
        yield first, _unmask(data[position : position + size], mask)
        position += size


def _messages(frames: bytes) -> Iterator[bytes]:
    """Each data message of a client's frames, continuations joined, control frames as they are."""
    inflater = zlib.decompressobj(-zlib.MAX_WBITS)  # one per connection: context takeover needs its window
    message, compressed = bytearray(), False
    for first, payload in _frames(frames):
        opcode = first & 0x0F
        if opcode >= 0x8:
            yield payload
            continue
        if opcode != 0x0:
            message, compressed = bytearray(), bool(first & 0x40)  # RSV1 marks a compressed message
        message += payload
        if first & 0x80:
            yield _inflated(inflater, bytes(message)) if compressed else bytes(message)
            message = bytearray()
    if message:
        yield bytes(message)


def _inflated(inflater: zlib._Decompress, message: bytes) -> bytes:
    try:
        return inflater.decompress(message + _DEFLATE_TAIL)
    except zlib.error:
        return message


def _unmask(payload: bytes, mask: bytes) -> bytes:
    if not mask or not payload:
        return payload
    repeated = (mask * (len(payload) // 4 + 1))[: len(payload)]
    return (int.from_bytes(payload, "big") ^ int.from_bytes(repeated, "big")).to_bytes(len(payload), "big")
