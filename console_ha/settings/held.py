"""What the settings page without JavaScript keeps on the server for one browser session, between two posts.

Two things a plain form cannot carry itself: the access token the household pasted (a page never sends a
token back, so without this it must be pasted again after every answer in place), bound to the origin it was
typed for; and the sensitive question's confirmations, each good once (a nonce, not a hash of the content:
a replayed "Save anyway" must not re-add an entity removed since). Held in memory, keyed by a digest of the
session's id, for HOLD_SECONDS at most and dropped at logout: a restart costs a paste or a question, never a save.
"""

from __future__ import annotations

import hashlib
import secrets
import threading
import time
from collections.abc import Callable, Iterable
from dataclasses import dataclass, field

from console_ha.secret import Secret

# How long a pasted token or a question's confirmation is kept: long enough to tick entities and save,
# short enough that a forgotten tab does not keep a token in memory.
HOLD_SECONDS = 15 * 60
# Sessions held at once (the oldest is dropped first), and open questions per session.
MAX_SESSIONS = 64
MAX_QUESTIONS = 8
NONCE_BYTES = 16


@dataclass(frozen=True)
class HeldToken:
    """A pasted token, the one origin it may be sent to, and until when (the holds' clock) it is kept."""

    token: Secret
    origin: str
    until: float


@dataclass
class _Session:
    token: HeldToken | None = None
    questions: dict[str, tuple[frozenset[str], float]] = field(default_factory=dict)
    touched: float = 0.0


def _key(session_id: str) -> str:
    # The session's id is a credential: only its digest is kept as a key.
    return hashlib.sha256(session_id.encode("utf-8")).hexdigest()


class SessionHolds:
    """The pasted tokens and open sensitive questions of the page without JavaScript, per browser session."""

    def __init__(self, clock: Callable[[], float] = time.monotonic, hold_seconds: float = HOLD_SECONDS) -> None:
        self._clock = clock
        self.hold_seconds = hold_seconds
        self._sessions: dict[str, _Session] = {}
        self._lock = threading.Lock()

    def _session(self, session_id: str, now: float, *, create: bool = False) -> _Session:
        """The session's holds (made when absent if `create`), after dropping what expired; under the lock."""
        for key in [k for k, held in self._sessions.items() if held.touched + self.hold_seconds <= now]:
            del self._sessions[key]
        key = _key(session_id)
        if key not in self._sessions and not create:
            return _Session()  # nothing held: a reader gets an empty one, and nothing is kept for it
        held = self._sessions.setdefault(key, _Session())
        held.touched = now
        if held.token is not None and held.token.until <= now:
            held.token = None
        held.questions = {n: q for n, q in held.questions.items() if q[1] > now}
        if len(self._sessions) > MAX_SESSIONS:
            oldest = min(self._sessions, key=lambda k: self._sessions[k].touched)
            del self._sessions[oldest]
        return held

    # --- the pasted token ------------------------------------------------------------------------------

    def hold_token(self, session_id: str, token: Secret, origin: str) -> HeldToken:
        """Keep `token` for this session, to be sent to `origin` only (replacing any token held before)."""
        with self._lock:
            now = self._clock()
            held = HeldToken(token, origin, now + self.hold_seconds)
            self._session(session_id, now, create=True).token = held
            return held

    def held_token(self, session_id: str) -> HeldToken | None:
        """The token this session holds, whatever its origin (to say so on the page), or None."""
        with self._lock:
            return self._session(session_id, self._clock()).token

    def token_for(self, session_id: str, origin: str) -> Secret | None:
        """The held token when it was pasted for `origin`; None otherwise: it never goes to another origin."""
        held = self.held_token(session_id)
        return held.token if held is not None and origin and held.origin == origin else None

    def drop_token(self, session_id: str) -> None:
        """Forget the session's token (it was saved, refused, or replaced by a choice to forget it)."""
        with self._lock:
            self._session(session_id, self._clock()).token = None

    # --- the sensitive question's confirmations -----------------------------------------------------------

    def ask(self, session_id: str, entity_ids: Iterable[str]) -> str:
        """A nonce for a question about `entity_ids`: the one value "Save anyway" may post to confirm them."""
        nonce = secrets.token_urlsafe(NONCE_BYTES)
        with self._lock:
            now = self._clock()
            held = self._session(session_id, now, create=True)
            if len(held.questions) >= MAX_QUESTIONS:
                del held.questions[min(held.questions, key=lambda n: held.questions[n][1])]
            held.questions[nonce] = (frozenset(entity_ids), now + self.hold_seconds)
        return nonce

    def answer(self, session_id: str, nonce: str) -> frozenset[str] | None:
        """The entities a question's nonce confirms, spent at once; None when unknown, spent or expired."""
        with self._lock:
            found = self._session(session_id, self._clock()).questions.pop(nonce, None)
        return found[0] if found is not None else None

    def __len__(self) -> int:
        """How many sessions hold something now."""
        with self._lock:
            return len(self._sessions)

    def forget(self, session_id: object) -> None:
        """Drop everything a session holds (its logout)."""
        if isinstance(session_id, str):
            with self._lock:
                self._sessions.pop(_key(session_id), None)
