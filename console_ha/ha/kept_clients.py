"""Where the executor gets its Home Assistant clients: kept between requests, or one per use."""

from __future__ import annotations

import os
import threading
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret

# Makes one client: (base URL, token, CA bundle path or None).
MakeClient = Callable[[str, Secret, str | None], HomeAssistantClient]
# Lends a client for one use (a `with` block): whoever made it decides whether leaving the block closes it.
LendClient = Callable[[str, Secret, str | None], AbstractContextManager[HomeAssistantClient]]


def new_client(base_url: str, token: Secret, ca_bundle: str | None) -> HomeAssistantClient:
    """A fresh client with the process's defaults."""
    return HomeAssistantClient(base_url, token, ca_bundle=ca_bundle)


def reading(reads: Reads) -> MakeClient:
    """A maker of clients that read `reads` and nothing else (the composition root hands the Console's own)."""
    def make(base_url: str, token: Secret, ca_bundle: str | None) -> HomeAssistantClient:
        return HomeAssistantClient(base_url, token, ca_bundle=ca_bundle, reads=reads)
    return make


@contextmanager
def one_client(base_url: str, token: Secret, ca_bundle: str | None) -> Iterator[HomeAssistantClient]:
    """A client made for one use and closed after it (plain Python without a kept cache)."""
    client = new_client(base_url, token, ca_bundle)
    try:
        yield client
    finally:
        client.close()


class HomeAssistantClients:
    """Hands out one Home Assistant client per URL, token and CA bundle, kept between requests.

    Making a client loads the system CA store (tens of milliseconds, more than the picker's whole
    narrowing), and a kept client keeps its connections to Home Assistant alive.
    """

    def __init__(self, make: MakeClient = new_client) -> None:
        self._make = make
        self._lock = threading.Lock()
        self._key: tuple[str, str, str, float] | None = None
        self._client: HomeAssistantClient | None = None

    def __call__(self, base_url: str, token: Secret, ca_bundle: str | None) -> HomeAssistantClient:
        key = (base_url, token.digest(), ca_bundle or "", _mtime(ca_bundle))
        with self._lock:
            if self._client is None or key != self._key:
                # The one it replaces may still be in use by another request; it is closed when collected.
                self._client = self._make(base_url, token, ca_bundle)
                self._key = key
            return self._client

    @contextmanager
    def lend(self, base_url: str, token: Secret, ca_bundle: str | None) -> Iterator[HomeAssistantClient]:
        """The kept client for one use; leaving the block leaves it open for the next."""
        yield self(base_url, token, ca_bundle)


def _mtime(path: str | None) -> float:
    # A replaced CA bundle file means a new client with the new trust.
    try:
        return os.stat(path).st_mtime if path else 0.0
    except OSError:
        return 0.0
