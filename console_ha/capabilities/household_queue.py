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
from concurrent.futures import Future, wait
from dataclasses import dataclass, field
from typing import Any

from console_ha.capabilities.cards import CARD_FOR_THE_ASKING_PROGRAM, destination_for
from console_ha.capabilities.confirmations import canonical_arguments
from console_ha.capabilities.executor import Executor, Proposal, Turn
from console_ha.capabilities.spec import Capability
from console_ha.errors import CapabilityError, ConfirmationInvalid, InvocationLimitExceeded, TokenRevoked
from console_ha.secret import find_by_token

# At most this many reads wait for the household at once, over every client. Each waiting MCP call or
# program's conversation message holds one of the web server's worker threads (its response stays open),
# so `console-ha serve` adds this many threads to its own: the household's pages always find a free one.
MAX_WAITING = 4
# How often a program's conversation message waiting in `settle` looks whether its program is still there.
PRESENCE_SECONDS = 1.0


def _always() -> bool:
    return True


@dataclass(frozen=True)
class ProgramGone(Exception):
    """The live call's program hung up before its read ran: nothing was read; the card waits for its return."""


@dataclass(frozen=True)
class Asker:
    """A program asking for reads with an API token: its name on the card, and whether its token still holds."""

    client: str
    token_id: str = ""
    # Asked once the household has answered: a token revoked while its read waited gets no read.
    still_allowed: Callable[[], bool] = _always
    # Whether the program's request is still connected: a program's conversation message whose client hung
    # up while its card waited gets no read (the web layer asks waitress; issue 20).
    present: Callable[[], bool] = _always


@dataclass(eq=False)
class Attachment:
    """One live call on a card: whether its program is still there, and a future set when it must let go."""

    present: Callable[[], bool] = _always
    let_go: Future[None] = field(default_factory=Future)


@dataclass
class WaitingRead:
    """One client's read, past policy, waiting for the household."""

    client: str
    proposal: Proposal
    conversation_id: str
    deadline: float  # on the queue's timer; never before the confirmation store's own expiry
    decision: Future[bool] = field(default_factory=Future)
    # -- issue 20: come back for the answer; read only for a live call --
    # What a later MCP call joins this card by: (API token id, capability, canonical arguments).
    joins: tuple[str, str, str] | None = None
    # The live calls attached now (a newer call of the program takes the card over from an older one).
    calls: list[Attachment] = field(default_factory=list)
    # Stages 4-6, run once by the first live call after the household's answer (a denial: at the answer).
    result: Future[dict[str, Any]] | None = None
    # Whether the asking program's API token still holds: a card of a revoked token is never "allowed".
    still_allowed: Callable[[], bool] = _always
    # The asking API token's id: two tokens may share a name, and each program sees only its own cards.
    token_id: str = ""

    @property
    def token(self) -> str:
        return self.proposal.token

    def to_dict(self) -> dict[str, Any]:
        """The contract's pending item: the conversation card plus who asked and where the answer goes."""
        return {**self.proposal.to_dict(), "client": self.client, "destination": destination_for(self.client)}

    def to_program_dict(self) -> dict[str, Any]:
        """The same item as the program that asked sees it: its own arguments, none of the card's facts."""
        return {**self.to_dict(), "card": CARD_FOR_THE_ASKING_PROGRAM.to_dict()}


@dataclass(frozen=True)
class Answered:
    """The household's answer as the Console tells it back: the contract's status, and what happens now."""

    status: str  # "approved" or "denied"
    message: str


@dataclass(frozen=True)
class Call:
    """One live MCP call attached to a card."""

    waiting: WaitingRead
    attachment: Attachment


# What the household is told after answering (words.py keeps the error codes' words; these are the queue's).
ALLOWED_NOW = "Allowed: the program gets this read once."
ALLOWED_LATER = ("Allowed; the program will get it when it asks again. Nothing is read until then, and "
                 "nothing at all if it does not ask before the card expires.")
NOT_ALLOWED = "Not allowed: nothing was read."
# A program may have this many cards of one tool open at once, each with other arguments (its calls
# with the same arguments join one card); MAX_WAITING bounds them over every program.
MAX_CARDS_PER_TOOL = 2


def join_key(token_id: str, capability: object, arguments: object) -> tuple[str, str, str] | None:
    """What a call joins an open card by: the same token, tool and arguments (canonical JSON); None if unkeyable."""
    if not token_id or not isinstance(capability, str) or not isinstance(arguments, dict):
        return None
    try:
        return token_id, capability, canonical_arguments(arguments)
    except (TypeError, ValueError):  # not JSON (stage 2 will say so)
        return None


def _read_given(waiting: WaitingRead) -> bool:
    """Whether the household allowed `waiting` and its read runs, or ran, for a live call (called under the lock)."""
    decision = waiting.decision
    return waiting.result is not None and decision.done() and not decision.cancelled() and decision.result() is True


class HouseholdQueue:
    """The reads waiting for the household, bounded overall and to one per capability per client."""

    def __init__(self, executor: Executor, *, max_waiting: int = MAX_WAITING,
                 timer: Callable[[], float] = time.monotonic) -> None:
        self._executor = executor
        self._max_waiting = max_waiting
        self._timer = timer
        self._waiting: dict[str, WaitingRead] = {}
        self._lock = threading.Lock()

    def offered(self) -> tuple[Capability, ...]:
        """The capabilities an allowlisted entity can answer: what MCP clients are listed."""
        return self._executor.offered()

    def ask(self, client: str, capability: object, arguments: object, *, turn: Turn | None = None,
            joins: tuple[str, str, str] | None = None, present: Callable[[], bool] = _always,
            still_allowed: Callable[[], bool] = _always, token_id: str = "") -> WaitingRead:
        """Stages 1-4 for `client`: a CapabilityError at once, or a read waiting for the household.

        `turn` is the asking conversation's own (one read of each capability a turn); without it, MCP's
        rule holds: at most MAX_CARDS_PER_TOOL open cards per capability per client. The caller is the
        card's one live call (`detach` when it goes).
        """
        self._sweep()
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
            waiting = WaitingRead(client, proposal, conversation_id, self._timer() + ttl, joins=joins,
                                  still_allowed=still_allowed, token_id=token_id)
            waiting.calls.append(Attachment(present))
            self._waiting[proposal.token] = waiting
        return waiting

    def call(self, asker: Asker, capability: object, arguments: object,
             present: Callable[[], bool] = _always) -> Call:
        """An MCP call: it joins its program's open card for the same tool and arguments, else asks anew.

        A call that joins takes the card over from a call of the same program still attached to it (that
        one lets go and returns early): a program that gave up on its first call and asked again is waiting
        on the second, and only one thread is held for the card.
        """
        key = join_key(asker.token_id, capability, arguments)
        if key is not None:
            self._sweep()
            with self._lock:
                now = self._timer()
                # Not a card whose allowed read already runs (or ran) for another call: given once, it is a
                # new question now. A denial stays to be joined (its result is set at the answer).
                joined = next((w for w in self._waiting.values() if w.joins == key and w.deadline > now
                               and not _read_given(w)), None)
                if joined is not None:
                    for earlier in joined.calls:
                        if not earlier.let_go.done():  # its call may have ended meanwhile
                            earlier.let_go.set_result(None)
                    joined.calls = [Attachment(present)]
                    return Call(joined, joined.calls[0])
        waiting = self.ask(asker.client, capability, arguments, joins=key, present=present,
                           still_allowed=asker.still_allowed, token_id=asker.token_id)
        return Call(waiting, waiting.calls[0])

    def answered_or_let_go(self, waiting: WaitingRead, attachment: Attachment) -> bool:
        """A live call done waiting: True if it collects (the household answered, or the card expired), else
        it is detached in the same step, so an answer a moment later finds no live call and says so. False
        too for a call a newer call of its program took the card over from: that one collects, and the read
        is given once."""
        with self._lock:
            if attachment not in waiting.calls:
                return False
            if waiting.decision.done() or self._timer() >= waiting.deadline:
                return True
            waiting.calls.remove(attachment)
            return False

    def detach(self, waiting: WaitingRead, attachment: Attachment | None = None) -> None:
        """A live call is gone (returned early, hung up, or done): an allowed read then waits for the next one.

        `attachment` names the call; None is the card's only call (a conversation's).
        """
        held = False
        with self._lock:
            if attachment is None:
                waiting.calls.clear()
            elif attachment in waiting.calls:
                waiting.calls.remove(attachment)
            approved = waiting.decision.done() and not waiting.decision.cancelled() and waiting.decision.result()
            if approved and not waiting.calls and waiting.result is None and waiting.token in self._waiting:
                held = True
        if held:
            self._executor.hold(waiting.token, conversation_id=waiting.conversation_id)

    def collect(self, waiting: WaitingRead, still_allowed: Callable[[], bool],
                present: Callable[[], bool] = _always) -> dict[str, Any]:
        """After the household's answer, for a live call: stages 4-6 run once, and every joined call gets it.

        A call whose program is not `present` any more (it hung up) reads nothing: it is detached, and an
        allowed read waits for the program's next call. ProgramGone then says so to the front end.
        """
        with self._lock:
            running = waiting.result
            if running is None and not present():
                gone = True
            else:
                gone = False
                if running is None:
                    running = waiting.result = Future()
                    mine = True
                else:
                    mine = False
        if gone:
            raise ProgramGone()
        assert running is not None
        if mine:
            try:
                running.set_result(self.outcome(waiting, still_allowed))
            except CapabilityError as err:
                running.set_exception(err)
            finally:
                with self._lock:
                    self._waiting.pop(waiting.token, None)
        return running.result(timeout=max(self.remaining(waiting), 0.0) + self._executor.confirmation_ttl)

    def pending(self, client: str | None = None, token_id: str | None = None) -> list[WaitingRead]:
        """The reads waiting for the household's answer now, oldest first; only `client`'s own when given
        (and of its API token `token_id`, when the card knows its token)."""
        self._sweep()
        now = self._timer()
        with self._lock:
            items = [w for w in self._waiting.values() if w.deadline > now and not w.decision.done()]
        return [w for w in items if (client is None or w.client == client)
                and (token_id is None or not w.token_id or w.token_id == token_id)]

    def remaining(self, waiting: WaitingRead) -> float:
        """Seconds until `waiting` expires (0 or less once it has)."""
        return waiting.deadline - self._timer()

    def count(self) -> int:
        """How many reads wait for the household now."""
        return len(self.pending())

    def answer(self, token: object, approve: bool) -> Answered:
        """The household's answer to one card, and what happens now; ConfirmationInvalid when not open.

        Nothing is read here. An allowed read runs for the live call attached to the card (the waiting
        call, or the program's next one); with none attached now, it is held for the next. A denial is
        settled at once (it reads nothing), and the program's next call gets it.
        """
        with self._lock:
            found = self._find(token)
        if found is not None and not found.decision.done() and not found.still_allowed():
            # Revoked while its card waited (on the page, or with the CLI in another process): nothing is read
            # for it, whether its call waits or returned early, so the card goes and the household is told so.
            self.withdraw(found)
            raise ConfirmationInvalid("unknown", "That program's API token was revoked; nothing was read.")
        if found is not None and not found.decision.done() and found.joins is None and found.calls \
                and not any(call.present() for call in found.calls):
            # A card no call can join (a program's conversation message) whose program hung up a moment ago:
            # it can never be collected, so it goes now rather than being held for a return that cannot come.
            self.withdraw(found)
            raise ConfirmationInvalid("unknown", "The program hung up before its read ran; nothing was read.")
        with self._lock:
            waiting = self._find(token)
            if waiting is None or waiting.decision.done():
                raise ConfirmationInvalid("unknown", "That request is not waiting any more: it was answered, "
                                          "withdrawn or never made.")
            if self._timer() >= waiting.deadline:
                # Its own wait ends it (and audits the expiry); the household is told it came too late.
                raise ConfirmationInvalid("expired", "That request has expired; nothing was read.")
            if not waiting.decision.set_running_or_notify_cancel():
                raise ConfirmationInvalid("unknown", "The program withdrew that request.")
            waiting.decision.set_result(approve)
            # A call whose program hung up a moment ago is not a live one (collect would find it so too).
            live = any(call.present() for call in waiting.calls)
            denial: Future[dict[str, Any]] = Future()
            if not approve:
                waiting.result = denial
        if not approve:
            try:
                denial.set_result(self.complete(waiting))  # raises the denial, and audits it
            except CapabilityError as err:
                denial.set_exception(err)
            return Answered("denied", NOT_ALLOWED)
        if not live:
            self._executor.hold(waiting.token, conversation_id=waiting.conversation_id)
            return Answered("approved", ALLOWED_LATER)
        return Answered("approved", ALLOWED_NOW)

    def settle(self, waiting: WaitingRead, asker: Asker) -> dict[str, Any]:
        """Wait in this thread for the household's answer, then stages 4-6: the shaped result or a CapabilityError.

        For a front end that answers in the same request (a program's conversation message); the MCP
        server awaits `decision` on its event loop instead. Never longer than the card stays open.
        """
        try:
            # Looked at every PRESENCE_SECONDS: a program that hung up withdraws its card, and nothing is read.
            while not waiting.decision.done() and self.remaining(waiting) > 0:
                if not asker.present():
                    raise self._hung_up(waiting)
                wait([waiting.decision], timeout=min(max(self.remaining(waiting), 0.0), PRESENCE_SECONDS))
            try:
                return self.collect(waiting, asker.still_allowed, asker.present)
            except ProgramGone:
                raise self._hung_up(waiting) from None
        finally:
            self.detach(waiting)

    def _hung_up(self, waiting: WaitingRead) -> ConfirmationInvalid:
        # A conversation message cannot be called again to collect its read: its card goes (audited as
        # withdrawn), and an answer the household gives later is told so.
        self.withdraw(waiting)
        return ConfirmationInvalid(None, "The program hung up before its read ran; nothing was read.")

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

    def _sweep(self) -> None:
        # Cards past their expiry that no live call waits on (a program that returned early and did not
        # come back): forgotten here; the executor's sweep audits each, `expired` or, allowed, `abandoned`.
        now = self._timer()
        with self._lock:
            gone = [w for w in self._waiting.values() if w.deadline <= now and not w.calls]
            for waiting in gone:
                del self._waiting[waiting.token]
                waiting.decision.cancel()
        if gone:
            self._executor.sweep_expired()

    def _turn_for(self, client: str, capability: object, turn: Turn | None) -> Turn:
        # MCP has no conversation turn. Its "one invocation per turn" is at most MAX_CARDS_PER_TOOL
        # unanswered cards per capability per client; and when the Console already holds its bound of
        # waiting reads, none at all (a conversation's own turn is then not touched: a copy says "no more").
        now = self._timer()
        open_reads = [w for w in self._waiting.values() if w.deadline > now and not w.decision.done()]
        if turn is None:
            mine = Counter(w.proposal.capability for w in open_reads if w.client == client)
            turn = Turn(Counter({name: 1 for name, count in mine.items() if count >= MAX_CARDS_PER_TOOL}))
        if isinstance(capability, str) and len(open_reads) >= self._max_waiting:
            return Turn(Counter({**turn.counts, capability: max(turn.counts[capability], 1 << 16)}))
        return turn

    def _explain_limit(self, err: CapabilityError, client: str, capability: object, own_turn: bool) -> CapabilityError:
        now = self._timer()
        full = sum(w.deadline > now and not w.decision.done() for w in self._waiting.values()) >= self._max_waiting
        if not isinstance(err, InvocationLimitExceeded) or (own_turn and not full):
            return err  # not a limit, or the conversation's own "once a turn", in the executor's words
        mine = not own_turn and not full
        message = (f"{MAX_CARDS_PER_TOOL} reads of this kind from this program are already waiting for the "
                   "household; wait for their answer first, or call again with the same arguments to "
                   "collect one." if mine else
                   f"The Console already has {self._max_waiting} reads waiting for the household; "
                   "try again once they are answered.")
        return err.reworded(message)

    def _find(self, token: object) -> WaitingRead | None:
        return find_by_token(self._waiting, token)

