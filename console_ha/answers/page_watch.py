"""Waiting for a change in the cards waiting for the household: the long poll behind every page's count and alert.

An open Console page asks "has anything changed since what I last saw?" and is answered at once on a
change, or after `WATCH_SECONDS` otherwise. Each open question holds one of the web server's worker
threads, so they are bounded: `MAX_WATCHERS` over the whole Console and `MAX_WATCHERS_PER_SESSION` for one
browser session (several tabs of one household). A question past either bound is answered at once with
`busy`, and that page asks again after `BUSY_RETRY_SECONDS`: it still learns of a card, later.

A page's place is freed as soon as the page goes, not when its question would have timed out (issue 25):
each question names its browser tab (`page`) and that page load (`load`). A newer question from the same
tab ends the older one and takes its place, so a reload or a move to another page is never turned away
by the question it left behind; and a page that goes says so (`leave`, a beacon sent on `pagehide`), which
ends its question at once. A question without a tab is counted alone, as before. A logout ends every
question of its session (`end_session`), so the session's other pages ask again at once, are refused, and go
to the login page, rather than up to `WATCH_SECONDS` later.

The watch looks at the queue every `TICK_SECONDS` while a question is open, rather than being told by the
queue: a card also goes away by itself when its time runs out, which no call announces, and a look at an
in-memory list a few times a second costs nothing next to a page's request.
"""

from __future__ import annotations

import hashlib
import itertools
import re
import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any

from console_ha.answers.household_queue import WaitingRead
from console_ha.language import Words
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
# What a page may call its tab and its load: a page's own random ids, never anything of the household's.
PAGE_ID = re.compile(r"^[A-Za-z0-9_-]{8,64}$")


@dataclass(frozen=True)
class WatchAnswer:
    """What a page learns: the cards now (a version to send back, the count, each card's title), or busy.

    `replaced`: a newer question with the same tab id ended this one (a page of the tab that is gone, or a
    duplicated tab sharing the id, which then takes an id of its own).
    """

    version: str
    cards: tuple[dict[str, str], ...]
    busy: bool = False
    replaced: bool = False

    def to_dict(self) -> dict[str, Any]:
        """The JSON answer; `retry_after` (seconds) only when the page was turned away, `replaced` only when true."""
        body: dict[str, Any] = {"version": self.version, "count": len(self.cards), "cards": list(self.cards),
                                "busy": self.busy}
        if self.busy:
            body["retry_after"] = BUSY_RETRY_SECONDS
        if self.replaced:
            body["replaced"] = True
        return body


def card_id(waiting: WaitingRead) -> str:
    """A handle for one card that says nothing of its confirmation token (a page tags its notification with it)."""
    return hashlib.sha256(waiting.token.encode("utf-8")).hexdigest()[:16]


def _answer(pending: Sequence[WaitingRead], *, busy: bool = False) -> WatchAnswer:
    cards = tuple({"id": card_id(w),
                   "notification_title": Words(NOTIFICATION_TITLE, client=w.client),
                   "notification_body": Words(NOTIFICATION_BODY, card_title=w.proposal.card.title)}
                  for w in pending)
    version = hashlib.sha256(" ".join(card["id"] for card in cards).encode("ascii")).hexdigest()[:16]
    return WatchAnswer(version, cards, busy)


@dataclass
class _Question:
    """One open question: whose it is, which page load asked it, and the event that ends it early."""

    session: str
    load: str
    ended: threading.Event
    replaced: bool = False


class HouseholdWatch:
    """Bounded long polls over the cards waiting for the household, one place per open browser tab."""

    def __init__(self, pending: Callable[[], Sequence[WaitingRead]], *, max_watchers: int = MAX_WATCHERS,
                 per_session: int = MAX_WATCHERS_PER_SESSION, tick: float = TICK_SECONDS,
                 timer: Callable[[], float] = time.monotonic) -> None:
        self._pending = pending
        self._max = max_watchers
        self._per_session = per_session
        self._tick = tick
        self._timer = timer
        # Open questions by (session, tab); a question without a tab gets a key of its own.
        self._open: dict[tuple[str, str], _Question] = {}
        self._anonymous = itertools.count()
        self._lock = threading.Lock()

    def now(self) -> WatchAnswer:
        """The cards waiting now, without waiting."""
        return _answer(self._pending())

    def wait(self, seen: str, session: str, timeout: float = WATCH_SECONDS, *, page: str = "",
             load: str = "") -> WatchAnswer:
        """The cards, as soon as their version differs from `seen`, or when `timeout` has passed; busy past a bound.

        `page` names the browser tab and `load` the page load asking: an older question of the same tab ends
        at once and this one takes its place (the bounds count tabs, not requests left behind).
        """
        key = (session, page) if PAGE_ID.match(page) else (session, f" {next(self._anonymous)}")
        question = self._enter(key, session, load)
        if question is None:
            return _answer(self._pending(), busy=True)
        try:
            end = self._timer() + max(0.0, timeout)
            while True:
                answer = _answer(self._pending())
                left = end - self._timer()
                if answer.version != seen or left <= 0 or question.ended.is_set():
                    return replace(answer, replaced=question.replaced)
                question.ended.wait(min(self._tick, left))
        finally:
            with self._lock:
                if self._open.get(key) is question:
                    del self._open[key]

    def _enter(self, key: tuple[str, str], session: str, load: str) -> _Question | None:
        """This question's place: the one its tab held before, else a new one within the bounds; None when busy."""
        with self._lock:
            older = self._open.get(key)
            if older is None:
                mine = sum(1 for question in self._open.values() if question.session == session)
                if len(self._open) >= self._max or mine >= self._per_session:
                    return None
            else:
                older.replaced = True
                older.ended.set()  # the tab has moved on: its earlier question answers now, to nobody
            question = _Question(session, load, threading.Event())
            self._open[key] = question
            return question

    def leave(self, session: str, page: str, load: str) -> bool:
        """A page has gone: end its question now, freeing the place (only that load's; a newer one stays)."""
        with self._lock:
            question = self._open.get((session, page))
            if question is None or not PAGE_ID.match(load) or question.load != load:
                return False
            question.ended.set()
            del self._open[(session, page)]
            return True

    def end_session(self, session: str) -> int:
        """A session has ended (a logout): its questions answer now and free their places; how many there were."""
        with self._lock:
            keys = [key for key, question in self._open.items() if question.session == session]
            for key in keys:
                self._open.pop(key).ended.set()
            return len(keys)

    def watching(self) -> int:
        """How many questions are open now."""
        with self._lock:
            return len(self._open)
