"""Pending confirmations: single-use tokens bound to a conversation, a capability and its arguments."""

from __future__ import annotations

import json
import secrets
import threading
import time
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from console_ha.errors import ConfirmationInvalid, ConfirmationReason
from console_ha.ha.areas import AreaIndex
from console_ha.secret import find_by_token

CONFIRMATION_TTL_SECONDS = 300
MAX_PENDING = 1000


def canonical_arguments(arguments: Mapping[str, Any]) -> str:
    """The one spelling of an argument object that a token is bound to."""
    return json.dumps(arguments, sort_keys=True, separators=(",", ":"), ensure_ascii=True)


@dataclass(frozen=True)
class PendingConfirmation:
    """One invocation waiting for the household's answer."""

    token: str
    conversation_id: str
    capability: str
    canonical_arguments: str
    invocation_id: str
    issued_at: float
    expires_at: float  # wall clock, for the card
    deadline: float  # the expiry itself, on the store's timer
    # What the card told the household beyond the arguments (where the read goes, which entities):
    # an approval holds only while that is still so.
    shown: str = ""
    # Who asked, when it is not the household's own conversation page: an API token's name.
    client: str | None = None
    # The areas its card named devices by (None: it knew none): its read reads no device the card did not name.
    card_areas: AreaIndex | None = None

    @property
    def arguments(self) -> dict[str, Any]:
        arguments: dict[str, Any] = json.loads(self.canonical_arguments)  # canonical: always an object
        return arguments


class ConfirmationStore:
    """In memory, as RFC-0018 accepts: a restart invalidates every pending token."""

    def __init__(self, *, ttl: float = CONFIRMATION_TTL_SECONDS, clock: Callable[[], float] = time.time,
                 timer: Callable[[], float] | None = None, max_pending: int = MAX_PENDING) -> None:
        self._ttl = ttl
        self._clock = clock
        # Expiry runs on the monotonic clock, so a wall-clock step (NTP on a device without a real-time
        # clock) can neither stretch nor cut a card's five minutes. A test's clock drives both.
        self._timer = timer or (time.monotonic if clock is time.time else clock)
        self._max_pending = max_pending
        self._pending: dict[str, PendingConfirmation] = {}
        self._lock = threading.Lock()

    @property
    def ttl(self) -> float:
        """How long a card stays open, in seconds."""
        return self._ttl

    @property
    def timer(self) -> Callable[[], float]:
        """The clock expiries are read off: the household queue reads the same one, never one of its own."""
        return self._timer

    def issue(self, conversation_id: str, capability: str, arguments: Mapping[str, Any],
              invocation_id: str, *, shown: str = "", client: str | None = None,
              card_areas: AreaIndex | None = None, at: float | None = None) -> PendingConfirmation:
        """Create a token for exactly this conversation, capability and arguments.

        `at`: the moment it is asked for, on this store's timer, when its front end read the clock itself (the
        household queue, under its lock): the card then expires exactly when the queue's own record of it does.
        """
        now = self._clock()
        pending = PendingConfirmation(
            token=secrets.token_urlsafe(24),
            conversation_id=conversation_id,
            capability=capability,
            canonical_arguments=canonical_arguments(arguments),
            invocation_id=invocation_id,
            issued_at=now,
            expires_at=now + self._ttl,
            deadline=(self._timer() if at is None else at) + self._ttl,
            shown=shown,
            client=client,
            card_areas=card_areas,
        )
        with self._lock:
            if len(self._pending) >= self._max_pending:
                # The oldest pending card is the least likely to be answered.
                oldest = min(self._pending.values(), key=lambda p: p.issued_at)
                del self._pending[oldest.token]
            self._pending[pending.token] = pending
        return pending

    def consume(self, token: object, conversation_id: str, *, at: float | None = None) -> PendingConfirmation:
        """Take the token once; ConfirmationInvalid if unknown, used, expired or foreign.

        `at`: the moment the answer came, on this store's timer, when its front end read the clock itself
        (the household queue decides a card's outcome at one reading, under its lock); else now.
        """
        if not isinstance(token, str) or not token:
            raise ConfirmationInvalid(ConfirmationReason.UNKNOWN, "That confirmation is not known. Ask again.")
        now = self._timer() if at is None else at
        with self._lock:
            pending = self._find(token)
            if pending is None:
                raise ConfirmationInvalid(ConfirmationReason.UNKNOWN,
                                          "That confirmation is not known or was already answered.")
            if pending.conversation_id != conversation_id:
                # A foreign conversation cannot answer, nor burn, another conversation's card.
                raise ConfirmationInvalid(ConfirmationReason.FOREIGN,
                                          "That confirmation belongs to another conversation.")
            del self._pending[pending.token]
        if now >= pending.deadline:
            raise ExpiredConfirmation(pending)
        return pending

    def peek(self, token: object, conversation_id: str) -> PendingConfirmation | None:
        """The open confirmation `token` names in `conversation_id`, left in place; None when there is none."""
        if not isinstance(token, str) or not token:
            return None
        with self._lock:
            pending = self._find(token)
        return pending if pending is not None and pending.conversation_id == conversation_id else None

    def expire(self) -> list[PendingConfirmation]:
        """Remove and return every pending confirmation past its expiry."""
        with self._lock:
            return self._drop_expired(self._timer())

    def pending_count(self) -> int:
        with self._lock:
            return len(self._pending)

    def _find(self, token: str) -> PendingConfirmation | None:
        return find_by_token(self._pending, token)

    def _drop_expired(self, now: float) -> list[PendingConfirmation]:
        expired = [p for p in self._pending.values() if now >= p.deadline]
        for pending in expired:
            del self._pending[pending.token]
        return expired


class ExpiredConfirmation(ConfirmationInvalid):
    """A token answered after its five minutes; carries the pending entry for the audit log."""

    def __init__(self, pending: PendingConfirmation) -> None:
        super().__init__(ConfirmationReason.EXPIRED, "That confirmation has expired. Ask again.")
        self.pending = pending
