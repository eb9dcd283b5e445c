"""What the settings page without JavaScript keeps per session (settings/held.py), in plain Python."""

from __future__ import annotations

from console_ha.secret import Secret
from console_ha.settings.held import HOLD_SECONDS, MAX_QUESTIONS, MAX_SESSIONS, SessionHolds

HOME = "http://127.0.0.1:8123"


class Clock:
    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_token_is_given_for_its_own_origin_and_session_only() -> None:
    holds = SessionHolds()
    holds.hold_token("session-a", Secret("tok"), HOME)
    assert holds.token_for("session-a", HOME) == Secret("tok")
    assert holds.token_for("session-a", "http://127.0.0.1:8124") is None
    assert holds.token_for("session-a", "") is None
    assert holds.token_for("session-b", HOME) is None


def test_a_token_expires_and_is_dropped() -> None:
    clock = Clock()
    holds = SessionHolds(clock=clock)
    holds.hold_token("s", Secret("tok"), HOME)
    clock.now = HOLD_SECONDS - 0.1
    assert holds.token_for("s", HOME) is not None
    clock.now = HOLD_SECONDS
    assert holds.token_for("s", HOME) is None
    holds.hold_token("s", Secret("tok"), HOME)
    holds.drop_token("s")
    assert holds.held_token("s") is None


def test_a_nonce_confirms_its_entities_once() -> None:
    holds = SessionHolds()
    nonce = holds.ask("s", ["lock.front_door"])
    assert holds.answer("other", nonce) is None
    assert holds.answer("s", nonce) == frozenset({"lock.front_door"})
    assert holds.answer("s", nonce) is None  # spent
    assert holds.answer("s", "made-up") is None


def test_what_is_held_is_bounded() -> None:
    """A session keeps its last MAX_QUESTIONS questions; at most MAX_SESSIONS sessions hold anything."""
    clock = Clock()
    holds = SessionHolds(clock=clock)
    nonces = [holds.ask("s", [f"lock.door_{i}"]) for i in range(MAX_QUESTIONS + 1)]
    assert holds.answer("s", nonces[0]) is None
    assert holds.answer("s", nonces[-1]) == frozenset({f"lock.door_{MAX_QUESTIONS}"})
    for i in range(MAX_SESSIONS + 5):
        clock.now += 1
        holds.hold_token(f"session-{i}", Secret("tok"), HOME)
    assert len(holds) == MAX_SESSIONS
    assert holds.token_for("session-0", HOME) is None and holds.token_for(f"session-{MAX_SESSIONS + 4}", HOME)


def test_reading_holds_nothing_and_forget_drops_all() -> None:
    holds = SessionHolds()
    assert holds.held_token("s") is None and len(holds) == 0
    holds.hold_token("s", Secret("tok"), HOME)
    holds.ask("s", ["camera.driveway"])
    holds.forget("s")
    assert len(holds) == 0 and holds.held_token("s") is None
    holds.forget(None)  # a request without a session id forgets nothing


def test_no_repr_shows_the_token() -> None:
    holds = SessionHolds()
    held = holds.hold_token("s", Secret("a-long-secret-token"), HOME)
    assert "a-long-secret-token" not in repr(held) and "a-long-secret-token" not in repr(holds.__dict__)
