"""Reads asked for by clients other than the household's own page: each waits for the household's answer.

An MCP client's call, or a program's conversation message, passes stages 1-3 of the executor, then
waits here as a pending card until the household approves or denies it on the Console, it expires, or the
client withdraws it. The waiting side is any front end (the MCP server awaits `decision`; the conversation
blocks in `settle`); the answering side is only ever the household's browser.
"""

from __future__ import annotations

import secrets
import threading
import time
from collections import Counter
from collections.abc import Callable
from concurrent.futures import Future
from dataclasses import dataclass, field
from typing import Any

from console_ha.capabilities.cards import CARD_FOR_THE_ASKING_PROGRAM, destination_for
from console_ha.capabilities.executor import Executor, Proposal, Turn
from console_ha.errors import CapabilityError, ConfirmationInvalid, InvocationLimitExceeded, TokenRevoked
from console_ha.secret import find_by_token

# At most this many reads wait for the household at once, over every client. Each waiting MCP call or
# program's conversation message holds one of the web server's worker threads (its response stays open),
# so `console-ha serve` adds this many threads to its own: the household's pages always find a free one.
MAX_WAITING = 4


def _always() -> bool:
    return True


@dataclass(frozen=True)
class Asker:
    """A program asking for reads with an API token: its name on the card, and whether its token still holds."""

    client: str
    token_id: str = ""
    # Asked once the household has answered: a token revoked while its read waited gets no read.
    still_allowed: Callable[[], bool] = _always


@dataclass
class WaitingRead:
    """One client's read, past policy, waiting for the household."""

    client: str
    proposal: Proposal
    conversation_id: str
    deadline: float  # on the queue's timer; never before the confirmation store's own expiry
    decision: Future[bool] = field(default_factory=Future)

    @property
    def token(self) -> str:
        return self.proposal.token

    def to_dict(self) -> dict[str, Any]:
        """The contract's pending item: the conversation card plus who asked and where the answer goes."""
        return {**self.proposal.to_dict(), "client": self.client, "destination": destination_for(self.client)}

    def to_program_dict(self) -> dict[str, Any]:
        """The same item as the program that asked sees it: its own arguments, none of the card's facts."""
        return {**self.to_dict(), "card": CARD_FOR_THE_ASKING_PROGRAM.to_dict()}


class HouseholdQueue:
    """The reads waiting for the household, bounded overall and to one per capability per client."""

    def __init__(self, executor: Executor, *, max_waiting: int = MAX_WAITING,
                 timer: Callable[[], float] = time.monotonic) -> None:
        self._executor = executor
        self._max_waiting = max_waiting
        self._timer = timer
        self._waiting: dict[str, WaitingRead] = {}
        self._lock = threading.Lock()

    def ask(self, client: str, capability: object, arguments: object, *, turn: Turn | None = None) -> WaitingRead:
        """Stages 1-4 for `client`: a CapabilityError at once, or a read waiting for the household.

        `turn` is the asking conversation's own (one read of each capability a turn); without it, MCP's
        rule holds: one waiting card per capability per client.
        """
        with self._lock:
            # Held across propose, so two calls at once cannot both find the slot free.
            own_turn = turn is not None
            turn = self._turn_for(client, capability, turn)
            # Each waiting read is its own "conversation" in the confirmation store: only its own wait
            # can consume its token, never another client's.
            conversation_id = "household-queue:" + secrets.token_hex(8)
            try:
                proposal = self._executor.propose(capability, arguments, conversation_id=conversation_id,
                                                  turn=turn, client=client)
            except CapabilityError as err:
                raise self._explain_limit(err, client, capability, own_turn) from None
            ttl = self._executor.confirmation_ttl
            waiting = WaitingRead(client, proposal, conversation_id, self._timer() + ttl)
            self._waiting[proposal.token] = waiting
        return waiting

    def pending(self, client: str | None = None) -> list[WaitingRead]:
        """The reads waiting now, oldest first; only `client`'s own when given."""
        now = self._timer()
        with self._lock:
            items = [w for w in self._waiting.values() if w.deadline > now]
        return [w for w in items if client is None or w.client == client]

    def remaining(self, waiting: WaitingRead) -> float:
        """Seconds until `waiting` expires (0 or less once it has)."""
        return waiting.deadline - self._timer()

    def count(self) -> int:
        """How many reads wait for the household now."""
        return len(self.pending())

    def answer(self, token: object, approve: bool) -> str:
        """The household's answer to one card: "approved" or "denied"; ConfirmationInvalid when not open."""
        with self._lock:
            waiting = self._find(token)
            if waiting is None:
                raise ConfirmationInvalid("unknown", "That request is not waiting any more: it was answered, "
                                          "withdrawn or never made.")
            if self._timer() >= waiting.deadline:
                # Its own wait ends it (and audits the expiry); the household is told it came too late.
                raise ConfirmationInvalid("expired", "That request has expired; nothing was read.")
            del self._waiting[waiting.token]
            if not waiting.decision.set_running_or_notify_cancel():
                raise ConfirmationInvalid("unknown", "The program withdrew that request.")
            waiting.decision.set_result(approve)
        return "approved" if approve else "denied"

    def settle(self, waiting: WaitingRead, asker: Asker) -> dict[str, Any]:
        """Wait in this thread for the household's answer, then stages 4-6: the shaped result or a CapabilityError.

        For a front end that answers in the same request (a program's conversation message); the MCP
        server awaits `decision` on its event loop instead. Never longer than the card stays open.
        """
        try:
            waiting.decision.result(timeout=max(self.remaining(waiting), 0.0))
        except TimeoutError:
            pass
        return self.outcome(waiting, asker.still_allowed)

    def outcome(self, waiting: WaitingRead, still_allowed: Callable[[], bool]) -> dict[str, Any]:
        """After the wait, for every front end: expired if unanswered, nothing for a revoked token, else stages 4-6."""
        if not waiting.decision.done():
            raise self.expire(waiting)
        if not still_allowed():
            # Revoked while it waited: the token is refused from then on, an approved read included.
            self.withdraw(waiting)
            raise TokenRevoked("This program's API token was revoked while the read waited; nothing was read.")
        return self.complete(waiting)

    def complete(self, waiting: WaitingRead) -> dict[str, Any]:
        """After the household's answer: stages 4-6, the shaped result or a CapabilityError."""
        approve = waiting.decision.result(timeout=0)
        return self._executor.answer(waiting.token, approve=approve, conversation_id=waiting.conversation_id)

    def expire(self, waiting: WaitingRead) -> ConfirmationInvalid:
        """The card's time ran out unanswered: audited as expired, the error the client gets."""
        with self._lock:
            self._waiting.pop(waiting.token, None)
            waiting.decision.cancel()
        try:
            # Past the store's expiry, so this audits "expired" and reads nothing.
            self._executor.answer(waiting.token, approve=False, conversation_id=waiting.conversation_id)
        except CapabilityError:
            pass
        return ConfirmationInvalid("expired", "The household did not answer in time; nothing was read.")

    def withdraw(self, waiting: WaitingRead) -> None:
        """The client cancelled before the read ran: the card goes away, a late answer is refused.

        Also when the household had just said yes: nobody would receive the read, so it is not made.
        """
        with self._lock:
            self._waiting.pop(waiting.token, None)
            waiting.decision.cancel()
        self._executor.withdraw(waiting.token, conversation_id=waiting.conversation_id)

    def _turn_for(self, client: str, capability: object, turn: Turn | None) -> Turn:
        # MCP has no conversation turn. Its "one invocation per turn" is one waiting card per capability
        # per client; and when the Console already holds its bound of waiting reads, none at all (a
        # conversation's own turn is then not touched: a copy says "no more").
        now = self._timer()
        open_reads = [w for w in self._waiting.values() if w.deadline > now]
        if turn is None:
            turn = Turn(Counter(w.proposal.capability for w in open_reads if w.client == client))
        if isinstance(capability, str) and len(open_reads) >= self._max_waiting:
            return Turn(Counter({**turn.counts, capability: max(turn.counts[capability], 1 << 16)}))
        return turn

    def _explain_limit(self, err: CapabilityError, client: str, capability: object, own_turn: bool) -> CapabilityError:
        now = self._timer()
        full = sum(w.deadline > now for w in self._waiting.values()) >= self._max_waiting
        if not isinstance(err, InvocationLimitExceeded) or (own_turn and not full):
            return err  # not a limit, or the conversation's own "once a turn", in the executor's words
        mine = not own_turn and any(w.client == client and w.proposal.capability == capability
                                    for w in self._waiting.values())
        message = ("A read of this kind from this program is already waiting for the household; wait for "
                   "their answer first." if mine else
                   f"The Console already has {self._max_waiting} reads waiting for the household; "
                   "try again once they are answered.")
        return err.reworded(message)

    def _find(self, token: object) -> WaitingRead | None:
        return find_by_token(self._waiting, token)

