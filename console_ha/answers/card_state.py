"""One card of the household queue: the states of its life, the moves between them, what it holds, who asks.

The queue (household_queue.py) decides every move, under its lock, at one reading of its one clock; this module
says which moves exist, and a card refuses any other (`WaitingRead.move`): an illegal move cannot be written.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Mapping
from concurrent.futures import Future, InvalidStateError
from contextlib import AbstractContextManager
from dataclasses import dataclass, field
from enum import Enum
from types import MappingProxyType
from typing import Any

from console_ha.capabilities.cards import CARD_FOR_THE_ASKING_PROGRAM, destination_for
from console_ha.capabilities.confirmations import PendingConfirmation
from console_ha.capabilities.executor import Proposal
from console_ha.errors import CapabilityError, ConfirmationInvalid, ConfirmationReason, TokenRevoked
from console_ha.language import Words
from console_ha.store.audit import AuditEvent
from console_ha.store.console_secrets import DEFAULT_PATIENCE_SECONDS


def asked_words(asked: int) -> Words | None:
    """How often a program asked for its card, in the household's words; None while it asked only once.

    Issue 25: a program's card once the program asked for it more than once (each call that joins it counts).
    """
    if asked <= 1:
        return None
    return Words.counted("Asked {count} time.", "Asked {count} times.", asked)


def always() -> bool:
    """The default of a presence or token check nobody supplied: yes."""
    return True


class CardState(Enum):
    """Where a card is in its life; `MOVES` says where each state may go."""

    WAITING = "waiting"  # open: the household has not answered
    ALLOWED = "allowed"  # allowed in time with a live call attached: the read is that call's to collect
    HELD = "held"  # allowed in time with no live call: read for the program's next call before the expiry
    READING = "reading"  # a live call collected the allowed read: stages 5-6 run once, for that call
    DENIED = "denied"  # the household said no: a call joining it before the expiry gets the denial again
    EXPIRED = "expired"  # unanswered at its expiry: nothing was read
    WITHDRAWN = "withdrawn"  # cancelled, hung up for good, or its API token revoked: nothing was read
    ABANDONED = "abandoned"  # allowed, but no call of its program came before the expiry: nothing was read


_S = CardState  # short, for the tables below
# The only moves a card makes; the states not listed are ends. `WaitingRead.move` refuses any other.
MOVES: Mapping[CardState, frozenset[CardState]] = MappingProxyType({
    _S.WAITING: frozenset({_S.ALLOWED, _S.HELD, _S.DENIED, _S.EXPIRED, _S.WITHDRAWN}),
    _S.ALLOWED: frozenset({_S.READING, _S.HELD, _S.WITHDRAWN}),
    # A call of its program that joins before the expiry makes the read its own again.
    _S.HELD: frozenset({_S.ALLOWED, _S.ABANDONED, _S.WITHDRAWN}),
})
# Ends whose card no call can join any more: forgotten at once. A denial stays until its expiry, to be joined.
GONE = frozenset({_S.READING, _S.EXPIRED, _S.WITHDRAWN, _S.ABANDONED})
ENDED = (GONE - {_S.READING}) | {_S.DENIED}
# The audit line a move of a card whose token was taken writes (reads and denials write the executor's own).
AUDITED: Mapping[CardState, AuditEvent] = MappingProxyType({
    _S.HELD: AuditEvent.HELD, _S.WITHDRAWN: AuditEvent.CANCELLED, _S.ABANDONED: AuditEvent.ABANDONED})


class IllegalMove(RuntimeError):
    """A move of a card that MOVES does not list: a bug in the queue, never anything a household or program did."""


@dataclass(frozen=True)
class Asker:
    """A program asking for reads with its API token: an MCP call, or a program's conversation message.

    Its name on the card, its token's id, whether the token still holds, whether it is still connected; and,
    for an MCP call, where the household answers, how long the call waits, and what keeps its request in flight.
    """

    client: str
    token_id: str = ""
    # Asked once the household has answered: a token revoked while its read waited gets no read.
    still_allowed: Callable[[], bool] = always
    # Whether the program's request is still connected: a call whose client hung up while its card waited is
    # let go of, and gets no read (the web layer asks waitress; issue 20).
    present: Callable[[], bool] = always
    # MCP: the page where the household answers, which a call still unanswered names.
    answer_url: str = ""
    # MCP, issue 20: how long a call waits before it returns `waiting_for_household` (the token's patience).
    patience: float = DEFAULT_PATIENCE_SECONDS
    # MCP: held while the call runs; the web layer keeps the request's id in flight until the call ends, not
    # only until its response does (a client that hung up closed that, and the call answers later).
    running: Callable[[], AbstractContextManager[None]] = contextlib.nullcontext


@dataclass(eq=False)
class Attachment:
    """One live call on a card: whether its program is still there, and a future set when it must stop waiting."""

    present: Callable[[], bool] = always
    # Set when the card moves or a newer call of its program takes the card over: the call then asks for its
    # verdict. The call's own, not the card's `settled`: each waiting call hooked onto that one future stayed
    # hooked for the card's life, so a program repeating its call grew it without bound (issue 25 review).
    wake: Future[None] = field(default_factory=Future)

    def stop_waiting(self) -> None:
        """Wake the call, once; a call that already ended (its future cancelled) is left alone."""
        with contextlib.suppress(InvalidStateError):  # done meanwhile, from the event loop's thread
            if not self.wake.done():
                self.wake.set_result(None)


@dataclass(eq=False)
class WaitingRead:
    """One client's card, past policy: where it is in its life, and the live calls on it."""

    client: str
    proposal: Proposal
    conversation_id: str
    deadline: float  # on the queue's timer; never after the confirmation store's own expiry
    # What a later MCP call joins this card by: (API token id, capability, canonical arguments).
    joins: tuple[str, str, str] | None = None
    # The live calls attached now (a newer call of the program takes the card over from an older one).
    calls: list[Attachment] = field(default_factory=list)
    # Whether the asking program's API token still holds: a card of a revoked token is never "allowed".
    still_allowed: Callable[[], bool] = always
    # The asking API token's id: two tokens may share a name, and each program sees only its own cards.
    token_id: str = ""
    # Where the card is in its life: read as `state`, changed only by `move`.
    _state: CardState = field(default=CardState.WAITING, init=False)
    # Set at the card's first move out of WAITING: a waiting call wakes at once (an event, not a poll).
    settled: Future[CardState] = field(default_factory=Future)
    # The confirmation store's entry, used up at the household's answer: the store's clock has no say after.
    taken: PendingConfirmation | None = None
    # What a call finding the card ended gets: the denial, the expiry or the withdrawal.
    error: CapabilityError | None = None
    # How many calls asked for this card: the first, and each that joined it (issue 25).
    asked: int = 1
    # `held` is audited once, however often the read waits for its program.
    held_noted: bool = False
    # Whether the plugins were told it waits (`on_card`): only then are they told its end.
    told_waiting: bool = False

    @property
    def token(self) -> str:
        """The card's confirmation token: what the household's answer names it by."""
        return self.proposal.token

    @property
    def state(self) -> CardState:
        """Where the card is in its life."""
        return self._state

    def may_move(self, to: CardState) -> bool:
        """Whether MOVES lets the card go to `to` from where it is now."""
        return to in MOVES.get(self._state, frozenset())

    def check_move(self, to: CardState) -> None:
        """IllegalMove unless MOVES lets the card go to `to` from where it is now."""
        if not self.may_move(to):
            raise IllegalMove(f"a card cannot go from {self._state.value} to {to.value}")

    def move(self, to: CardState) -> None:
        """The one write of a card's state: to `to`, or IllegalMove where MOVES does not list that move."""
        self.check_move(to)
        self._state = to

    def attach(self, call: Attachment) -> None:
        """`call` is the card's live call now: one a program makes again takes the card over (the older wakes)."""
        for earlier in self.calls:
            earlier.stop_waiting()
        self.calls = [call]

    def let_go(self, call: Attachment | None) -> bool:
        """`call` (None: every call) is no longer on the card; whether a live call is left to receive a read."""
        if call is None:
            self.calls.clear()
        elif call in self.calls:
            self.calls.remove(call)
        return bool(self.calls)

    def live(self) -> bool:
        """Whether a call on the card is live now: attached, and its program still there."""
        return any(call.present() for call in self.calls)

    def to_dict(self) -> dict[str, Any]:
        """The contract's pending item: the conversation card plus who asked, where the answer goes, and how
        often the program asked (`asked_words` only once it asked again)."""
        return {**self.proposal.to_dict(), "client": self.client, "destination": destination_for(self.client),
                "asked": self.asked, "asked_words": asked_words(self.asked)}

    def to_program_dict(self) -> dict[str, Any]:
        """The same item as the program that asked sees it: its own arguments, none of the card's facts."""
        return {**self.to_dict(), "card": CARD_FOR_THE_ASKING_PROGRAM.to_dict()}


@dataclass(frozen=True)
class Verdict:
    """What one call gets from its card, decided under the lock: the read to run, an error, or neither (it
    returns early and the card stays for the program's next call)."""

    read: PendingConfirmation | None = None
    error: CapabilityError | None = None


NOT_YET = Verdict()


# The `on_card` event of each state a card's move reaches; a held read is an allowed one (the household said yes).
CARD_EVENT: Mapping[CardState, str] = MappingProxyType({
    CardState.WAITING: "waiting", CardState.ALLOWED: "allowed", CardState.HELD: "allowed",
    CardState.DENIED: "denied", CardState.EXPIRED: "expired", CardState.WITHDRAWN: "withdrawn"})


# What a card's end tells the call that asks for it (the queue raises them).

def expired() -> ConfirmationInvalid:
    return ConfirmationInvalid(ConfirmationReason.EXPIRED, "The household did not answer in time; nothing was read.")


def abandoned() -> ConfirmationInvalid:
    # The household did answer: a held read ends because its program did not come back, not for want of an answer.
    return ConfirmationInvalid(ConfirmationReason.EXPIRED, "The household allowed this read, but the program did not "
                               "ask for it again before the request expired; nothing was read.")


def hung_up() -> ConfirmationInvalid:
    return ConfirmationInvalid(None, "The program hung up before its read ran; nothing was read.")


def withdrawn() -> ConfirmationInvalid:
    return ConfirmationInvalid(ConfirmationReason.UNKNOWN, "The program withdrew that request; nothing was read.")


def revoked() -> TokenRevoked:
    return TokenRevoked("This program's API token was revoked while the read waited; nothing was read.")
