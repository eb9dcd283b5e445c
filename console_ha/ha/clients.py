"""One Home Assistant client per URL, token and CA bundle, kept between requests."""

from __future__ import annotations

import hashlib
import os
import threading

from console_ha.ha.client import HomeAssistantClient
from console_ha.secret import Secret


class HomeAssistantClients:
    """Hands out one Home Assistant client per URL, token and CA bundle, kept between requests.

    Making a client loads the system CA store (tens of milliseconds, more than the picker's whole
    narrowing), and a kept client keeps its connections to Home Assistant alive.
    """

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._key: tuple[str, str, str, float] | None = None
        self._client: HomeAssistantClient | None = None

    def __call__(self, base_url: str, token: Secret, ca_bundle: str | None) -> HomeAssistantClient:
        key = (base_url, hashlib.sha256(token.reveal().encode()).hexdigest(), ca_bundle or "",
               _mtime(ca_bundle))
        with self._lock:
            if self._client is None or key != self._key:
                # The one it replaces may still be in use by another request; it is closed when collected.
                self._client = HomeAssistantClient(base_url, token, ca_bundle=ca_bundle)
                self._key = key
            return self._client


def _mtime(path: str | None) -> float:
    # A replaced CA bundle file means a new client with the new trust.
    try:
        return os.stat(path).st_mtime if path else 0.0
    except OSError:
        return 0.0
