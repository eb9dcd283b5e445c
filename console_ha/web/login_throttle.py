"""Login throttling: counts real password checks per client, atomically, and makes each wait grow.

Hand-written rather than flask-limiter: a limiter counts *requests* and decides before the view runs,
so it cannot tell a real password check from a request refused earlier (no CSRF token, a foreign
Origin, a malformed body), and parallel requests all pass its check before the first failure is
counted. Here a check is admitted and counted in one step under a lock, and only a check counts.
"""

from __future__ import annotations

import ipaddress
import math
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass

from console_ha.errors import RateLimited
from console_ha.language import Words

# Wrong passwords a client may try without waiting.
FREE_ATTEMPTS = 5
# After the free attempts: wait 1 s, then 2, 4, 8 … up to MAX_DELAY before each further check.
FIRST_DELAY = 1.0
MAX_DELAY = 300.0
# A client quiet this long starts afresh (the free attempts come back).
FORGET_AFTER = 900.0
# Clients remembered at once; past it the longest-quiet one is forgotten.
MAX_CLIENTS = 10_000


class LoginThrottled(RateLimited):
    """Too many wrong passwords from this client: it must wait `retry_after` seconds."""

    def __init__(self, retry_after: int) -> None:
        super().__init__(Words.counted("Too many wrong passwords. Wait {count} second, then try again.",
                                       "Too many wrong passwords. Wait {count} seconds, then try again.", retry_after))
        self.retry_after = retry_after


@dataclass
class _Client:
    failures: int = 0
    in_flight: int = 0
    not_before: float = 0.0
    last: float = 0.0


def client_key(address: str | None) -> str:
    """Whom a login attempt is counted against: its IPv4 address, or its IPv6 /64 (one household's network).

    A single IPv6 host can pick any address in its /64, so counting per address would give it billions
    of fresh starts.
    """
    try:
        ip = ipaddress.ip_address(address or "")
    except ValueError:
        return address or "unknown"
    if isinstance(ip, ipaddress.IPv6Address):
        if ip.ipv4_mapped is not None:
            return str(ip.ipv4_mapped)
        return str(ipaddress.ip_network(f"{ip}/64", strict=False))
    return str(ip)


class LoginThrottle:
    """Admits password checks per client; beyond the free attempts one at a time, after a growing delay."""

    def __init__(
        self,
        *,
        free_attempts: int = FREE_ATTEMPTS,
        first_delay: float = FIRST_DELAY,
        max_delay: float = MAX_DELAY,
        forget_after: float = FORGET_AFTER,
        max_clients: int = MAX_CLIENTS,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.free_attempts = free_attempts
        self.first_delay = first_delay
        self.max_delay = max_delay
        self.forget_after = forget_after
        self.max_clients = max_clients
        self._clock = clock
        self._lock = threading.Lock()
        self._clients: dict[str, _Client] = {}

    def delay_after(self, failures: int) -> float:
        """Seconds a client waits after `failures` wrong passwords in a row."""
        if failures < self.free_attempts:
            return 0.0
        return min(self.first_delay * 2.0 ** (failures - self.free_attempts), self.max_delay)

    def attempt(self, client: str, check: Callable[[], bool]) -> bool:
        """Run `check` (the password check) if `client` may try now, and count it; LoginThrottled if not."""
        self._admit(client)
        succeeded = False
        try:
            succeeded = check()
        finally:
            # An exception inside the check counts as a failure: it was a check, and it did not succeed.
            self._record(client, succeeded)
        return succeeded

    def _admit(self, client: str) -> None:
        now = self._clock()
        with self._lock:
            record = self._record_for(client, now)
            pending = record.failures + record.in_flight
            if now < record.not_before:
                raise LoginThrottled(math.ceil(record.not_before - now))
            # Every check in flight is counted as if it had failed: a burst in parallel gets the free
            # attempts and no more, and past them only one check runs at a time.
            if pending >= self.free_attempts and record.in_flight:
                raise LoginThrottled(max(1, math.ceil(self.delay_after(pending))))
            record.in_flight += 1
            record.last = now

    def _record(self, client: str, succeeded: bool) -> None:
        now = self._clock()
        with self._lock:
            record = self._clients.setdefault(client, _Client())
            record.in_flight = max(0, record.in_flight - 1)
            record.last = now
            if succeeded:
                record.failures, record.not_before = 0, 0.0
            else:
                record.failures += 1
                record.not_before = now + self.delay_after(record.failures)
            if not record.failures and not record.in_flight:
                del self._clients[client]

    def _record_for(self, client: str, now: float) -> _Client:
        record = self._clients.get(client)
        if record is not None and not record.in_flight and now - record.last >= self.forget_after:
            record = None
            del self._clients[client]
        if record is None:
            if len(self._clients) >= self.max_clients:
                self._forget_oldest(now)
            record = self._clients[client] = _Client(last=now)
        return record

    def _forget_oldest(self, now: float) -> None:
        idle = [k for k, r in self._clients.items() if not r.in_flight and now - r.last >= self.forget_after]
        for key in idle:
            del self._clients[key]
        if len(self._clients) >= self.max_clients:
            oldest = min((k for k, r in self._clients.items() if not r.in_flight),
                         key=lambda k: self._clients[k].last, default=None)
            if oldest is not None:
                del self._clients[oldest]
