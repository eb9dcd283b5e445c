"""Reads asked for by clients other than the household's own page: each waits for the household's answer.

An MCP client's call, or a program's conversation message, passes stages 1-3 of the executor, then waits
here as a card until the household allows or denies it on the Console, it expires, or the client withdraws
it. The waiting side is any front end (the MCP server awaits a card's `settled`; a conversation blocks in
`settle`); the answering side is only ever the household's browser.

A card's life is one state machine (`CardState`, `MOVES`, card_state.py): every change happens in `_move`, under
the queue's one lock, at one reading of the one clock (the executor's confirmation store's timer: the queue has no
clock of its own, so a card's expiry here and in the store is read off the same clock). The household's answer is
decided there once, and what the household is told and what the program gets both follow from it, to the
millisecond of the card's expiry: an Allow before the expiry uses the card's confirmation token up at that moment,
so nothing expires it after. The limits on waiting cards are the executor's stage-3 refusals (`_room`).
A waiting call learns of the answer at once, through its card's `settled` future, not at its next look.
"""

from __future__ import annotations

import secrets
import threading
from collections import Counter, OrderedDict
from collections.abc import Callable
from concurrent.futures import wait
from dataclasses import dataclass
from typing import Any

from console_ha.answers.card_events import StageHookRunner, Sweeper
from console_ha.answers.card_state import (
    AUDITED,
    CARD_EVENT,
    ENDED,
    GONE,
    NOT_YET,
    Attachment,
    CardState,
    Verdict,
    abandoned,
    always,
    expired,
    hung_up,
    revoked,
    withdrawn,
)

# page_watch, the front ends and the tests name the card and its asker from here, beside the queue that moves it.
from console_ha.answers.card_state import Asker as Asker
from console_ha.answers.card_state import WaitingRead as WaitingRead
from console_ha.capabilities.confirmations import canonical_arguments
from console_ha.capabilities.executor import Executor, Prepared
from console_ha.capabilities.spec import Capability
from console_ha.capabilities.stages import Room, Turn, always_room, principal_of
from console_ha.errors import (
    CapabilityError,
    ConfirmationDenied,
    ConfirmationInvalid,
    ConfirmationReason,
)
from console_ha.language import Words
from console_ha.secret import find_by_token
from console_ha.store.audit import AuditEvent

# At most this many reads wait for the household at once, over every client. Each waiting MCP call or
# program's conversation message holds one of the web server's worker threads (its response stays open),
# so `console-ha serve` adds this many threads to its own: the household's pages always find a free one.
MAX_WAITING = 4
# How often a program's conversation message waiting in `settle` looks whether its program is still there
# (waitress offers no callback for a closed connection). The household's answer wakes it at once.
PRESENCE_SECONDS = 1.0
# A program may have this many cards of one tool open at once, each with other arguments (its calls
# with the same arguments join one card); MAX_WAITING bounds them over every program.
MAX_CARDS_PER_TOOL = 2
# Cards whose time ran out are remembered this many at a time, so a late Allow is told "expired" even after
# the card left the queue (an open page's look at the queue ends it at its expiry).
EXPIRED_REMEMBERED = 64

# What the household is told after answering (words.py keeps the error codes' words; these are the queue's).
ALLOWED_NOW = Words("Allowed: the program gets this read once.")
ALLOWED_LATER = Words("Allowed; the program will get it when it asks again. Nothing is read until then, and "
                      "nothing at all if it does not ask before the card expires.")
NOT_ALLOWED = Words("Not allowed: nothing was read.")
# Allowed, but what the card showed (the address, the devices' names) changed while it waited: its read refuses.
CHANGED_SINCE_SHOWN = Words("Allowed, but your Home Assistant settings or your devices' names changed after this "
                            "card was shown, so nothing will be read. The program is told to ask again.")



class StillWaiting(Exception):  # a verdict, not a failure (hence no -Error suffix)
    """This call gets nothing now (its patience ran out, its program hung up, or a newer call of its program
    took the card over): the card stays for the program's next identical call."""


@dataclass(frozen=True)
class Answered:
    """The household's answer as the Console tells it back: the contract's status, and what happens now."""

    status: str  # "approved" or "denied"
    message: str  # a Words: the household reads it in the language of the request that answered


@dataclass(frozen=True)
class Call:
    """One live MCP call attached to a card."""

    waiting: WaitingRead
    attachment: Attachment


def join_key(token_id: str, capability: object, arguments: object) -> tuple[str, str, str] | None:
    """What a call joins an open card by: the same token, tool and arguments (canonical JSON); None if unkeyable."""
    if not token_id or not isinstance(capability, str) or not isinstance(arguments, dict):
        return None
    try:
        return token_id, capability, canonical_arguments(arguments)
    except (TypeError, ValueError):  # not JSON (stage 2 will say so)
        return None


class HouseholdQueue:
    """The reads waiting for the household, bounded overall and per capability per client."""

    def __init__(self, executor: Executor, *, max_waiting: int = MAX_WAITING,
                 hooks: StageHookRunner | None = None) -> None:
        self._executor = executor
        # Tells the household's plugins of each card's life (`on_card`); None: a Console without plugins (tests).
        self._hooks = hooks
        self._max_waiting = max_waiting
        # The one clock of every card's life: the confirmation store's, so the store and the queue cannot
        # disagree on an expiry (time.monotonic in the Console; a test's clock, handed to the store, drives both).
        self._timer = executor.confirmations.timer
        self._waiting: dict[str, WaitingRead] = {}
        self._expired: OrderedDict[str, WaitingRead] = OrderedDict()
        self._lock = threading.Lock()
        if hooks is not None:
            # A card nobody looks at is still told `expired` at its expiry: the plugins' worker sweeps then.
            hooks.watch(Sweeper(self._timer, self._next_expiry, self._expire_due))

    def offered(self) -> tuple[Capability, ...]:
        """The capabilities an allowlisted entity can answer: what MCP clients are listed."""
        return self._executor.offered()

    def ask(self, client: str, capability: object, arguments: object, *, turn: Turn | None = None,
            joins: tuple[str, str, str] | None = None, present: Callable[[], bool] = always,
            still_allowed: Callable[[], bool] = always, token_id: str = "") -> WaitingRead:
        """Stages 1-4 for `client`: a CapabilityError at once, or a read waiting for the household.

        `turn` is the asking conversation's own (one read of each capability a turn); without it, MCP's
        rule holds: at most MAX_CARDS_PER_TOOL open cards per capability per client. The caller is the
        card's one live call (`detach` when it goes). The plugins' `before_toolcall` runs first, outside the lock;
        a program that hung up meanwhile gets no card (the household is asked nothing for nobody).
        """
        prepared = self.prepare(client, capability, arguments)
        if not present():
            self.drop(prepared)
            raise hung_up()
        with self._lock:
            waiting = self._issue(prepared, client, turn=turn, joins=joins, present=present,
                                  still_allowed=still_allowed, token_id=token_id)
        return waiting

    def prepare(self, client: str, capability: object, arguments: object) -> Prepared:
        """The first step of a read (`Executor.prepare`: stages 1-2 and the plugins' `before_toolcall`), outside the
        lock: a plugin's second holds up no other program's call, and no Allow or denial of the household's."""
        return self._executor.prepare(capability, arguments, client=client)

    def drop(self, prepared: Prepared) -> None:
        """A prepared read whose call ended before its card was made: audited so (`Executor.drop`), nothing else."""
        self._executor.drop(prepared)

    def _issue(self, prepared: Prepared, client: str, *, turn: Turn | None, joins: tuple[str, str, str] | None,
               present: Callable[[], bool], still_allowed: Callable[[], bool], token_id: str) -> WaitingRead:
        # Under the lock, held across stages 3-4, so two calls at once cannot both find the room free.
        # The card's one reading: the store issues it at this moment, so both expire at the same instant.
        now = self._timer()
        self._sweep(now)
        # Each waiting read is its own "conversation" in the confirmation store: only its own wait
        # can consume its token, never another client's.
        conversation_id = "household-queue:" + secrets.token_hex(8)
        proposal = self._executor.issue(prepared, conversation_id=conversation_id, turn=turn or Turn(),
                                        room=self._room(client, token_id, own_turn=turn is not None, now=now), at=now)
        waiting = WaitingRead(client, proposal, conversation_id, now + self._executor.confirmation_ttl, joins=joins,
                              still_allowed=still_allowed, token_id=token_id)
        waiting.attach(Attachment(present))
        self._waiting[proposal.token] = waiting
        # Under the lock, as every move's: an answer or a cancel the moment it is open is told after it.
        self._tell(waiting, CardState.WAITING)
        return waiting

    def join(self, asker: Asker, capability: object, arguments: object) -> Call | None:
        """The call joined to its program's open card for the same tool and arguments, or None when there is none
        (then it asks anew: `call`). A call that joins runs no plugin and writes no `proposed` line: it asks nothing
        new. Quick, under the lock: the MCP server asks it on its event loop before preparing a read."""
        key = join_key(asker.token_id, capability, arguments)
        if key is None:
            return None
        with self._lock:
            return self._joined(key, asker, self._timer())

    def call(self, asker: Asker, capability: object, arguments: object, prepared: Prepared | None = None) -> Call:
        """An MCP call: it joins its program's open card for the same tool and arguments, else asks anew.

        A call that joins takes the card over from a call of the same program still attached to it (that
        one lets go and returns early): a program that gave up on its first call and asked again is waiting
        on the second, and only one thread is held for the card. `prepared` is the read's first step, run by a
        caller that cannot wait for the plugins where it calls this (the MCP server, in a worker thread, after
        `join` found no card); without it, it runs here, outside the lock. A card of the same key made meanwhile
        (the program's identical call at the same moment) is joined: the household sees one card.
        """
        key = join_key(asker.token_id, capability, arguments)
        if prepared is None:
            joined = self.join(asker, capability, arguments)
            if joined is not None:
                return joined
            prepared = self.prepare(asker.client, capability, arguments)
        with self._lock:
            now = self._timer()
            joined = self._joined(key, asker, now) if key is not None else None
            if joined is not None:
                return joined
            waiting = self._issue(prepared, asker.client, turn=None, joins=key, present=asker.present,
                                  still_allowed=asker.still_allowed, token_id=asker.token_id)
            return Call(waiting, waiting.calls[0])

    def _joined(self, key: tuple[str, str, str], asker: Asker, now: float) -> Call | None:
        # Under the lock. Not a card whose allowed read runs (or ran) for another call: given once, it is a new
        # question now. A denial stays to be joined until its expiry.
        self._sweep(now)
        joined = next((w for w in self._waiting.values() if w.joins == key and now < w.deadline), None)
        return self._join(joined, asker.present, now) if joined is not None else None

    def _join(self, card: WaitingRead, present: Callable[[], bool], now: float) -> Call:
        # Under the lock. Each call that joins is counted on the card the household sees.
        card.asked += 1
        attachment = Attachment(present)
        if card.state is CardState.DENIED:
            # Answered already: this call gets the denial, and Activity a line of its own for it.
            assert card.taken is not None  # a denial takes the card's token (`_take`)
            self._executor.record(AuditEvent.ASKED_AGAIN, card.taken, code=ConfirmationDenied.code,
                                  invocation=secrets.token_hex(8))
            return Call(card, attachment)
        card.attach(attachment)
        if card.state is CardState.HELD:
            self._move(card, CardState.ALLOWED, now)  # it came back before the expiry: the read is this call's
        return Call(card, attachment)

    def collect(self, waiting: WaitingRead, attachment: Attachment | None = None) -> dict[str, Any]:
        """A live call done waiting: the read if the household allowed it in time (stages 5-6 run once, for
        this call), else the denial, expiry or withdrawal raised; StillWaiting when this call gets nothing now.

        `attachment` names the call; None is the card's only call (a conversation's).
        """
        with self._lock:
            call = attachment if attachment is not None else next(iter(waiting.calls), None)
            verdict = self._verdict(waiting, call, self._timer())
        if verdict.error is not None:
            raise verdict.error
        if verdict.read is None:
            raise StillWaiting()
        return self._executor.run(verdict.read)

    def _verdict(self, card: WaitingRead, call: Attachment | None, now: float) -> Verdict:
        """What `call` gets from `card` now (under the lock): the one place a call's outcome is decided."""
        if card.state is CardState.WAITING and now >= card.deadline:
            self._move(card, CardState.EXPIRED, now, error=expired())
        if card.state in ENDED:
            assert card.error is not None  # each end names its error (`_move`)
            return Verdict(error=card.error.reworded(card.error.message))  # a copy: one raise each
        if call is None or call not in card.calls:
            return NOT_YET  # a newer call of its program took the card over: that one collects
        if card.state in (CardState.WAITING, CardState.HELD) or not call.present():
            # Unanswered before the expiry (its patience ran out, or its program is going), or allowed with
            # its program gone: it lets go in the same step, so an Allow a moment later says what happens. A held
            # read is the program's next call's, as the household was told (its Allow found this call gone); never
            # read from HELD, which MOVES does not allow, even by a call whose program seems back.
            return self._let_go(card, call, now)
        if not card.still_allowed():
            # Revoked while it waited: the token is refused from then on, an allowed read included.
            self._move(card, CardState.WITHDRAWN, now, error=revoked())
            return Verdict(error=revoked())
        self._move(card, CardState.READING, now)
        return Verdict(read=card.taken)

    def _let_go(self, card: WaitingRead, call: Attachment, now: float) -> Verdict:
        if card.joins is None:
            # A conversation message cannot be called again for its read: its card goes (audited as withdrawn),
            # and an answer the household gives later is told so.
            self._move(card, CardState.WITHDRAWN, now, error=hung_up())
            return Verdict(error=hung_up())
        self._detach(card, call, now)
        return NOT_YET

    def detach(self, waiting: WaitingRead, attachment: Attachment | None = None) -> None:
        """A live call is gone (returned early, hung up, or done): an allowed read then waits for the next one.

        `attachment` names the call; None is every call on the card (a conversation's only one).
        """
        with self._lock:
            self._detach(waiting, attachment, self._timer())

    def _detach(self, card: WaitingRead, call: Attachment | None, now: float) -> None:
        if not card.let_go(call) and card.state is CardState.ALLOWED:
            self._move(card, CardState.HELD, now)

    def cancel(self, waiting: WaitingRead, attachment: Attachment) -> None:
        """A call ended by its client (`notifications/cancelled`, its session closed): the card goes, unless a
        newer call of its program has it, or the program hung up (which is no withdrawal: the card stays)."""
        with self._lock:
            now = self._timer()
            if attachment in waiting.calls and attachment.present():
                self._withdraw(waiting, now, withdrawn())
            else:
                self._detach(waiting, attachment, now)

    def _withdraw(self, card: WaitingRead, now: float, error: CapabilityError) -> None:
        # Also when the household had just said yes: nobody would receive the read, so it is not made.
        if card.may_move(CardState.WITHDRAWN):
            self._move(card, CardState.WITHDRAWN, now, error=error)

    def pending(self, client: str | None = None, token_id: str | None = None) -> list[WaitingRead]:
        """The reads waiting for the household's answer now, oldest first; only `client`'s own when given
        (and of its API token `token_id`, when the card knows its token)."""
        with self._lock:
            self._sweep(self._timer())
            items = [w for w in self._waiting.values() if w.state is CardState.WAITING]
        return [w for w in items if (client is None or w.client == client)
                and (token_id is None or not w.token_id or w.token_id == token_id)]

    def remaining(self, waiting: WaitingRead) -> float:
        """Seconds until `waiting` expires (0 or less once it has)."""
        return waiting.deadline - self._timer()

    def answer(self, token: object, approve: bool) -> Answered:
        """The household's answer to one card, and what happens now; ConfirmationInvalid when not open.

        Decided here once, under the lock, at one reading of the timer. Nothing is read here: an allowed read
        runs for the live call attached to the card (the waiting call, or the program's next one before the
        expiry); with none attached now it is held for the next. A denial is settled at once.
        """
        with self._lock:
            now = self._timer()
            card = self._find(token)
            if card is not None and card.state is CardState.WAITING and now >= card.deadline:
                self._move(card, CardState.EXPIRED, now, error=expired())  # this answer came too late
            if card is None or card.state is not CardState.WAITING:
                raise self._not_open(token)
            if not card.still_allowed():
                # Revoked while its card waited (on the page, or with the CLI in another process): nothing is
                # read for it, whether its call waits or returned early, and the household is told so.
                self._move(card, CardState.WITHDRAWN, now, error=revoked())
                raise ConfirmationInvalid(ConfirmationReason.UNKNOWN,
                                          Words("That program's API token was revoked; nothing was read."))
            # A call whose program hung up a moment ago is not a live one (its verdict would find it so too).
            live = card.live()
            if card.joins is None and not live:
                # A card no call can join (a program's conversation message) whose program hung up: it can
                # never be collected, so it goes now rather than being held for a return that cannot come.
                self._move(card, CardState.WITHDRAWN, now, error=hung_up())
                raise ConfirmationInvalid(ConfirmationReason.UNKNOWN,
                                          Words("The program hung up before its read ran; nothing was read."))
            to = (CardState.ALLOWED if live else CardState.HELD) if approve else CardState.DENIED
            if self._move(card, to, now) is CardState.EXPIRED:
                raise self._not_open(token)
            if not approve:
                return Answered("denied", NOT_ALLOWED)
            if card.taken is not None and not self._executor.still_as_shown(card.taken):
                return Answered("approved", CHANGED_SINCE_SHOWN)  # not "the program gets this read": it will not
            return Answered("approved", ALLOWED_NOW if live else ALLOWED_LATER)

    def settle(self, waiting: WaitingRead, asker: Asker) -> dict[str, Any]:
        """Wait in this thread for the household's answer, then stages 4-6: the shaped result or a CapabilityError.

        For a front end that answers in the same request (a program's conversation message); the MCP
        server awaits `settled` on its event loop instead. Never longer than the card stays open.
        """
        try:
            while not waiting.settled.done() and asker.present():
                left = self.remaining(waiting)
                if left <= 0:
                    break
                wait([waiting.settled], timeout=min(left, PRESENCE_SECONDS))
            return self.collect(waiting)
        finally:
            self.detach(waiting)

    def _move(self, card: WaitingRead, to: CardState, now: float, *,
              error: CapabilityError | None = None) -> CardState:
        """The one place a card changes state (under the lock): checked against MOVES, then what the move writes;
        the state it reached."""
        card.check_move(to)  # before anything is written for it
        was = card.state
        if card.state is CardState.WAITING and not self._take(card, to, now):
            # Not in the store any more (swept at the same expiry by another call's look): the card ends unanswered.
            to, error = CardState.EXPIRED, expired()
        if to is CardState.DENIED:
            assert card.taken is not None
            error = self._executor.deny(card.taken)
        elif card.taken is not None and to in AUDITED and not (to is CardState.HELD and card.held_noted):
            self._executor.record(AUDITED[to], card.taken)
            card.held_noted = card.held_noted or to is CardState.HELD
        card.move(to)
        card.error = error or card.error
        if was is CardState.WAITING or to is CardState.WITHDRAWN:  # a held read asked for again is no new answer
            self._tell(card, to)
        if not card.settled.done():
            card.settled.set_result(to)
        for call in card.calls:  # each waiting call asks for its verdict now (an event, not its next look)
            call.stop_waiting()
        if to in GONE:
            self._waiting.pop(card.token, None)
        if to in (CardState.EXPIRED, CardState.ABANDONED):
            self._expired[card.token] = card
            while len(self._expired) > EXPIRED_REMEMBERED:
                self._expired.popitem(last=False)
        return to

    def _tell(self, card: WaitingRead, state: CardState) -> None:
        """Tell the plugins of a card's move (`on_card`); queued for them, never waited for."""
        event = CARD_EVENT.get(state)
        if self._hooks is None or event is None or not (card.told_waiting or state is CardState.WAITING):
            return  # not told it waits (no plugin was on then): told no end alone
        told = self._hooks.card(event, card.proposal, principal_of(card.client), client=card.client)
        card.told_waiting = card.told_waiting or told

    def _take(self, card: WaitingRead, to: CardState, now: float) -> bool:
        # The household's answer (or the card's end) uses the store's token up at the queue's own reading,
        # so the store judges the moment the queue decided, never a later one. False: the store had no card.
        # The store's expiry is the card's own (issued at the queue's reading): a card the queue expires, the
        # store refuses as expired too, and audits it so, once.
        try:
            card.taken = self._executor.take(card.token, conversation_id=card.conversation_id, at=now)
        except CapabilityError:
            # Expired (audited `expired` as it was found), or already swept and audited.
            return to in (CardState.EXPIRED, CardState.WITHDRAWN)
        return True

    def _sweep(self, now: float) -> None:
        # Under the lock. Cards past their expiry: unanswered ones expire (a call still waiting on one learns
        # it at once), held reads nobody came back for are abandoned, denials are forgotten.
        for card in [w for w in self._waiting.values() if now >= w.deadline]:
            if card.state is CardState.WAITING:
                self._move(card, CardState.EXPIRED, now, error=expired())
            elif card.state is CardState.HELD:
                self._move(card, CardState.ABANDONED, now, error=abandoned())
            elif card.state is CardState.DENIED:
                del self._waiting[card.token]

    def _next_expiry(self) -> float | None:
        """When the next card ends at its expiry (an open one expires, a held one is abandoned), on the timer."""
        with self._lock:
            return min((w.deadline for w in self._waiting.values()
                        if w.state in (CardState.WAITING, CardState.HELD)), default=None)

    def _expire_due(self) -> None:
        """End the cards whose expiry has come, as any call's look would: each told `expired` once (`_move`)."""
        with self._lock:
            self._sweep(self._timer())

    def _room(self, client: str, token_id: str, *, own_turn: bool, now: float) -> Room:
        """The queue's bounds on waiting cards, for the executor's stage 3 (under the lock, across `propose`).

        At most `max_waiting` unanswered cards over every asker. MCP has no conversation turn: its "one
        invocation per turn" is at most MAX_CARDS_PER_TOOL unanswered cards per capability per program (its
        API token, else its name; two tokens may share a name, and one program's cards must not refuse the
        other's calls, issue 25 review). A conversation's own turn says the rest (its count is not touched).
        """
        open_reads = self._open(now)
        if len(open_reads) >= self._max_waiting:
            full = (f"The Console already has {self._max_waiting} reads waiting for the household; "
                    "try again once they are answered.")
            return lambda capability: full
        if own_turn:
            return always_room
        mine = Counter(w.proposal.capability for w in open_reads
                       if (w.token_id == token_id if token_id else w.client == client))
        per_tool = (f"{MAX_CARDS_PER_TOOL} reads of this kind from this program are already waiting for the "
                    "household; wait for their answer first, or call again with the same arguments to collect one.")
        return lambda capability: per_tool if mine[capability.name] >= MAX_CARDS_PER_TOOL else None

    def _open(self, now: float) -> list[WaitingRead]:
        return [w for w in self._waiting.values() if w.state is CardState.WAITING and now < w.deadline]

    def _find(self, token: object) -> WaitingRead | None:
        return find_by_token(self._waiting, token)

    def _not_open(self, token: object) -> ConfirmationInvalid:
        # Under the lock. A card whose time ran out is said to have expired, even once it left the queue.
        if find_by_token(self._expired, token) is not None:
            return ConfirmationInvalid(ConfirmationReason.EXPIRED,
                                       Words("That request has expired; nothing was read."))
        return ConfirmationInvalid(ConfirmationReason.UNKNOWN, Words("That request is not waiting any more: it was "
                                                                     "answered, withdrawn or never made."))
