"""How many calls one Console may have in flight to each Home Assistant, and to all of them: caps and counts."""

from __future__ import annotations

import logging
import threading
from collections import Counter
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

from console_ha.errors import HABusy
from console_ha.ha.addresses import origin_of
from console_ha.words import BUSY_MESSAGE

log = logging.getLogger(__name__)

# How many calls the Console may have in flight to one Home Assistant (one origin), and to all of them.
# Each call can hold a server worker thread until its deadline (8-10 s) when Home Assistant hangs;
# `console-ha serve` runs 8 waitress threads, so at most 6 wait on Home Assistant and 2 are always
# free for /health and the pages (docs/security.md). A household's busiest moment, the
# picker (states plus the area WebSocket) beside a capability and a connection test, needs 4.
MAX_CALLS_PER_ORIGIN = 4
MAX_CALLS_IN_ALL = 6
# Worker threads no Home Assistant call may take: /health and the pages answer on these.
RESERVED_THREADS = 2


@dataclass(frozen=True)
class CallCaps:
    """The two caps, a Console option (`ConsoleOptions.call_caps`): per Home Assistant, and in all."""

    per_origin: int = MAX_CALLS_PER_ORIGIN
    in_all: int = MAX_CALLS_IN_ALL

    def __post_init__(self) -> None:
        if self.per_origin < 1 or self.in_all < 1:
            raise ValueError("each cap must allow at least one call")

    @classmethod
    def for_threads(cls, threads: int) -> CallCaps:
        """Caps that leave RESERVED_THREADS of a server's `threads` free whatever Home Assistant does."""
        if threads <= RESERVED_THREADS:
            raise ValueError(f"the server needs more than {RESERVED_THREADS} threads")
        in_all = min(MAX_CALLS_IN_ALL, threads - RESERVED_THREADS)
        return cls(per_origin=min(MAX_CALLS_PER_ORIGIN, in_all), in_all=in_all)


class CallLimits:
    """Counts one Console's calls in flight to each Home Assistant; one past a cap is refused at once.

    Refused, not queued: a queued call would hold its worker thread just the same. A lock and two
    counters rather than a semaphore per origin, so that both caps are checked in one step and no
    per-origin object outlives its last call. The counts are keyed by origin, the Home Assistant a call
    goes to; the caps are the Console's, since its worker threads are shared by all of them.
    """

    def __init__(self, caps: CallCaps | None = None) -> None:
        self.caps = caps or CallCaps()
        self._lock = threading.Lock()
        self._counts: Counter[str] = Counter()

    @property
    def per_origin(self) -> int:
        """The most calls in flight to one Home Assistant."""
        return self.caps.per_origin

    @property
    def in_all(self) -> int:
        """The most calls in flight to every Home Assistant together."""
        return self.caps.in_all

    def in_flight(self, base_url: str | None = None) -> int:
        """Calls in flight to the origin of `base_url`, or to every Home Assistant."""
        with self._lock:
            if base_url is None:
                return sum(self._counts.values())
            return self._counts[origin_of(base_url)]

    @contextmanager
    def slot(self, base_url: str) -> Iterator[None]:
        """Hold one place for a call to `base_url`'s Home Assistant; HABusy at once when none is free."""
        origin = origin_of(base_url)
        with self._lock:
            here, everywhere = self._counts[origin], sum(self._counts.values())
            busy = here >= self.caps.per_origin or everywhere >= self.caps.in_all
            if not busy:
                self._counts[origin] += 1
        if busy:
            log.info("not calling %s: %d calls to it and %d in all already in flight", origin, here, everywhere)
            raise HABusy(BUSY_MESSAGE)
        try:
            yield
        finally:
            with self._lock:
                self._counts[origin] -= 1
                if self._counts[origin] <= 0:
                    del self._counts[origin]
