"""Where the executor gets its Home Assistant clients: kept between requests, or one per use."""

from __future__ import annotations

import os
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager

from console_ha.ha.per_home_assistant import PerHomeAssistant
from console_ha.ha.rest_client import HomeAssistantClient, cache_key
from console_ha.secret import Secret

# Makes one client: (base URL, token, CA bundle path or None).
MakeClient = Callable[[str, Secret, str | None], HomeAssistantClient]
# Lends a client for one use (a `with` block): whoever made it decides whether leaving the block closes it.
LendClient = Callable[[str, Secret, str | None], AbstractContextManager[HomeAssistantClient]]


def new_client(base_url: str, token: Secret, ca_bundle: str | None) -> HomeAssistantClient:
    """A fresh client with a client's defaults: no declared reads, its own call limits, no kept areas."""
    return HomeAssistantClient(base_url, token, ca_bundle=ca_bundle)


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
    narrowing), and a kept client keeps its connections to Home Assistant alive. Each Home Assistant keeps
    its own (`PerHomeAssistant`): a second one no longer replaces the first, and only the least recently used
    of more than the table holds (picker previews of other URLs or tokens among them) is let go.
    """

    def __init__(self, make: MakeClient = new_client) -> None:
        self._make = make
        self._clients: PerHomeAssistant[tuple[str, str, str, float], HomeAssistantClient] = PerHomeAssistant()

    def __call__(self, base_url: str, token: Secret, ca_bundle: str | None) -> HomeAssistantClient:
        """The kept client for this URL, token and CA bundle (its file as it is now), made at its first use."""
        # One pushed out (a new token, a replaced CA file) may still be in use by another request; it is
        # closed when collected.
        key = (*cache_key(base_url, token, ca_bundle), _mtime(ca_bundle))
        return self._clients.get_or_make(key, lambda: self._make(base_url, token, ca_bundle))

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
