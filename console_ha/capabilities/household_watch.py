"""Waiting for a change in the cards waiting for the household: the long poll behind every page's count and alert.

An open Console page asks "has anything changed since what I last saw?" and is answered at once on a
change, or after `WATCH_SECONDS` otherwise. Each open question holds one of the web server's worker
threads, so they are bounded: `MAX_WATCHERS` over the whole Console and `MAX_WATCHERS_PER_SESSION` for one
browser session (several tabs of one household). A question past either bound is answered at once with
`busy`, and that page asks again after `BUSY_RETRY_SECONDS`: it still learns of a card, later.

The watch looks at the queue every `TICK_SECONDS` while a question is open, rather than being told by the
queue: a card also goes away by itself when its time runs out, which no call announces, and a look at an
in-memory list a few times a second costs nothing next to a page's request.
"""

from __future__ import annotations

import hashlib
import threading
import time
from collections import Counter
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

from console_ha.capabilities.household_queue import WaitingRead
from console_ha.words import NOTIFICATION_BODY, NOTIFICATION_TITLE

# How long one question stays open with nothing new: well under the 30-60 s after which proxies and
# browsers drop an idle request.
WATCH_SECONDS = 25.0
# How often an open question looks at the queue: a new card is seen within this (the target is 2 s).
TICK_SECONDS = 0.25
# Questions open at once: over the Console, and for one browser session.
MAX_WATCHERS = 6
MAX_WATCHERS_PER_SESSION = 2
# A page turned away (`busy`) asks again after this long.
BUSY_RETRY_SECONDS = 15


@dataclass(frozen=True)
class WatchAnswer:
    """What a page learns: the cards now (a version to send back, the count, each card's title), or busy."""

    version: str
    cards: tuple[dict[str, str], ...]
    busy: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON answer; `retry_after` (seconds) only when the page was turned away."""
        body: dict[str, Any] = {"version": self.version, "count": len(self.cards), "cards": list(self.cards),
                                "busy": self.busy}
        if self.busy:
            body["retry_after"] = BUSY_RETRY_SECONDS
        return body


def card_id(waiting: WaitingRead) -> str:
    """A handle for one card that says nothing of its confirmation token (a page tags its notification with it)."""
    return hashlib.sha256(waiting.token.encode("utf-8")).hexdigest()[:16]


def _answer(pending: Sequence[WaitingRead], *, busy: bool = False) -> WatchAnswer:
    cards = tuple({"id": card_id(w),
                   "notification_title": NOTIFICATION_TITLE.format(client=w.client),
                   "notification_body": NOTIFICATION_BODY.format(card_title=w.proposal.card.title.rstrip("."))}
                  for w in pending)
    version = hashlib.sha256(" ".join(card["id"] for card in cards).encode("ascii")).hexdigest()[:16]
    return WatchAnswer(version, cards, busy)


class HouseholdWatch:
    """Bounded long polls over the cards waiting for the household."""

    def __init__(self, pending: Callable[[], Sequence[WaitingRead]], *, max_watchers: int = MAX_WATCHERS,
                 per_session: int = MAX_WATCHERS_PER_SESSION, tick: float = TICK_SECONDS,
                 timer: Callable[[], float] = time.monotonic, sleep: Callable[[float], None] = time.sleep) -> None:
        self._pending = pending
        self._max = max_watchers
        self._per_session = per_session
        self._tick = tick
        self._timer = timer
        self._sleep = sleep
        self._open: Counter[str] = Counter()
        self._lock = threading.Lock()

    def now(self) -> WatchAnswer:
        """The cards waiting now, without waiting."""
        return _answer(self._pending())

    def wait(self, seen: str, session: str, timeout: float = WATCH_SECONDS) -> WatchAnswer:
        """The cards, as soon as their version differs from `seen`, or when `timeout` has passed; busy past a bound."""
        with self._lock:
            if sum(self._open.values()) >= self._max or self._open[session] >= self._per_session:
                return _answer(self._pending(), busy=True)
            self._open[session] += 1
        try:
            end = self._timer() + max(0.0, timeout)
            while True:
                answer = _answer(self._pending())
                left = end - self._timer()
                if answer.version != seen or left <= 0:
                    return answer
                self._sleep(min(self._tick, left))
        finally:
            with self._lock:
                self._open[session] -= 1
                if self._open[session] <= 0:
                    del self._open[session]

    def watching(self) -> int:
        """How many questions are open now."""
        with self._lock:
            return sum(self._open.values())
