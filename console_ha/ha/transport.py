"""The REST client's transport: the verified adapter, its pools (which record the connections a GET takes)
and the capped, deadline-bound body reader. Split from ha.client to keep each module short."""

from __future__ import annotations

import io
import ssl
import threading
from typing import Any

import requests
import urllib3
from requests.adapters import HTTPAdapter

from console_ha.deadline import BodyBroken, BodyTooLarge, Deadline
from console_ha.errors import HABadResponse, HomeAssistantError

READ_CHUNK_BYTES = 64 * 1024


# The urllib3 connections the current thread's GET has taken from a pool, so that `Deadline.call_here` can
# shut their sockets at the deadline. Per thread: a GET runs on one thread and nothing else reads it.
TAKEN = threading.local()


class WatchedPool(urllib3.HTTPConnectionPool):
    """A pool that adds each connection it hands out to the current thread's `TAKEN.connections`, if any."""

    def _get_conn(self, timeout: float | None = None) -> Any:
        connection = super()._get_conn(timeout)
        taken = getattr(TAKEN, "connections", None)
        if taken is not None:
            taken.append(connection)
        return connection


class VerifiedAdapter(HTTPAdapter):
    """An adapter that always verifies certificates, with the trust the household chose."""

    def __init__(self, ssl_context: ssl.SSLContext | None) -> None:
        self._ssl_context = ssl_context
        super().__init__(max_retries=0)

    def init_poolmanager(self, connections: int, maxsize: int, block: bool = False, **pool_kwargs: Any) -> None:
        if self._ssl_context is not None:
            pool_kwargs["ssl_context"] = self._ssl_context
        super().init_poolmanager(connections, maxsize, block, **pool_kwargs)
        # Plain http only: `Deadline.call_here` runs GETs to an IP address on the caller's thread (https keeps
        # the thread of `Deadline.call`: a handshake that trickles happens before a socket is there to shut).
        self.poolmanager.pool_classes_by_scheme = {**self.poolmanager.pool_classes_by_scheme, "http": WatchedPool}

    def cert_verify(self, conn: Any, url: str, verify: Any, cert: Any) -> None:
        # Whatever `verify` a caller or session says, certificates are required... (types-requests leaves
        # HTTPAdapter.cert_verify unannotated, hence the ignore.)
        super().cert_verify(conn, url, True, cert)  # type: ignore[no-untyped-call]
        # ...against our context's trust (system store, or only the household's bundle), not certifi's.
        conn.ca_certs = None
        conn.ca_cert_dir = None


class BodyReader(io.RawIOBase):
    """A file-like view of a response body that stops at the byte cap and at the call's deadline."""

    def __init__(self, response: requests.Response, *, deadline: Deadline, max_bytes: int) -> None:
        super().__init__()
        self._chunks = deadline.body(response, max_bytes=max_bytes, chunk_bytes=READ_CHUNK_BYTES)
        self._max_bytes = max_bytes
        self._pending = memoryview(b"")
        self._received = 0

    @property
    def bytes_received(self) -> int:
        """How many body bytes have been read so far."""
        return self._received

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        if not self._pending:
            chunk = self._next_chunk()
            if chunk is None:
                return 0
            self._pending = memoryview(chunk)
        size = min(len(buffer), len(self._pending))
        buffer[:size] = self._pending[:size]
        self._pending = self._pending[size:]
        return size

    def readall(self) -> bytes:
        parts = [bytes(self._pending)]
        self._pending = memoryview(b"")
        while (chunk := self._next_chunk()) is not None:
            parts.append(chunk)
        return b"".join(parts)

    def _next_chunk(self) -> bytes | None:
        """The next piece of the body, or None at its end; HATimeout past the deadline (the Deadline's own)."""
        failure: HomeAssistantError | None = None
        try:
            chunk = next(self._chunks, None)
        except BodyBroken:
            failure = HABadResponse("Home Assistant stopped in the middle of its answer.", reason="incomplete")
        except BodyTooLarge:
            failure = too_large(self._max_bytes)
        if failure is not None:
            raise failure
        if chunk is not None:
            self._received += len(chunk)
        return chunk


def too_large(max_bytes: int) -> HABadResponse:
    """The error for an answer past its byte cap."""
    return HABadResponse(
        f"Home Assistant's answer was larger than the {max_bytes:,} bytes allowed for it.", reason="too_large"
    )
