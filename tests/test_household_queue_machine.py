"""The household queue as one state machine, driven by hypothesis through random sequences of what its users do.

Programs call (MCP calls that join their open card by token, tool and arguments, and programs' conversation
messages), hang up, cancel, and finish their calls; the household allows and denies, twice and late; an API
token is revoked; the one clock moves, onto a card's expiry and past it. After every step: Home Assistant was
read at most once per allowed card and only for a live call; what the household was told matches what the
program got; every move each card made (recorded as `WaitingRead.move` makes it) is one MOVES lists, a read
only follows a move to READING made while a live call was attached, and no state was written past `move`; no
card leaked between tokens; a call joins a card only before its expiry; counts and the memory of expired cards stay
bounded; every ended invocation has exactly one final audit line and at most one `held` line (however often its read
waited for its program), and `asked_again` lines match the repeated calls that met a denial.
"""

from __future__ import annotations

import itertools
import weakref
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings
from hypothesis import strategies as st
from hypothesis.stateful import (
    Bundle,
    RuleBasedStateMachine,
    invariant,
    multiple,
    precondition,
    rule,
    run_state_machine_as_test,
)

from console_ha.answers import household_queue
from console_ha.answers.card_state import MOVES, CardState
from console_ha.answers.household_queue import (
    ALLOWED_LATER,
    ALLOWED_NOW,
    NOT_ALLOWED,
    Asker,
    Call,
    HouseholdQueue,
    StillWaiting,
    WaitingRead,
)
from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.stages import Turn
from console_ha.errors import CapabilityError
from console_ha.store.audit import AuditLog
from console_ha.store.datadir import DataDir
from tests.conftest import Clock
from tests.executors import executor_over
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

ENTITY = "sensor.living_room_temperature"
ARGUMENTS = ({"entity_id": ENTITY, "period": "day"}, {"entity_id": ENTITY, "period": "hour"},
             {"period": "day", "entity_id": ENTITY})  # the first, spelled otherwise: it joins the same card
TTL = 300.0
# Two tokens of the same name: each program sees, joins and is counted on only its own cards.
TOKENS = {"a": "a" * 16, "b": "b" * 16}
CLIENT = "desk"
FINAL = {"executed", "failed", "rejected", "denied", "expired", "cancelled", "abandoned", "asked_again"}


def _reachable() -> dict[CardState, set[CardState]]:
    closure = {state: {state} for state in CardState}
    changed = True
    while changed:
        changed = False
        for seen in closure.values():
            more = set().union(*(MOVES.get(s, frozenset()) for s in seen)) - seen
            if more:
                seen |= more
                changed = True
    return closure


REACHABLE = _reachable()


@dataclass(frozen=True)
class Moved:
    """One move a card made: from, to, and whether a live call (attached, its program there) was on it then."""

    start: CardState
    to: CardState
    live: bool


# Every move of every card, as `WaitingRead.move` made it (the test wraps it): a card's whole path.
PATHS: weakref.WeakKeyDictionary[WaitingRead, list[Moved]] = weakref.WeakKeyDictionary()
MOVE = WaitingRead.move


def recorded_move(card: WaitingRead, to: CardState) -> None:
    """`WaitingRead.move`, noted in PATHS once made."""
    start, live = card.state, any(call.present() for call in card.calls)
    MOVE(card, to)
    PATHS.setdefault(card, []).append(Moved(start, to, live))


@dataclass
class Program:
    """One live call of a program: an MCP call (it can join) or a conversation message (it cannot)."""

    token: str
    call: Call
    present: list[bool]
    conversation: bool = False
    done: bool = False
    taken_over: bool = False


@dataclass
class Story:
    """What happened to one card, as its users saw it."""

    card: WaitingRead
    told: list[str] = field(default_factory=list)  # what the household's answers were told
    got: list[str] = field(default_factory=list)  # what the program's calls got
    reads: int = 0
    calls: int = 1
    denied_joins: int = 0
    hung_up: bool = False
    last_state: CardState = CardState.WAITING


def outcome(run: Callable[[], object]) -> str:
    """"read", "still", or the error's code and reason."""
    try:
        result = run()
    except StillWaiting:
        return "still"
    except CapabilityError as err:
        return f"{err.code}:{err.detail.get('reason', '')}"
    assert isinstance(result, dict) and result["entity_id"] == ENTITY
    return "read"


class QueueMachine(RuleBasedStateMachine):
    """The queue over a real executor, its stores on disk, the stub Home Assistant and a clock moved by hand."""

    programs = Bundle("programs")

    def __init__(self, root: Path, stub: StubHomeAssistant) -> None:
        super().__init__()
        self.data_dir = DataDir(root / f"data-{next(_EXAMPLES)}")
        seed_settings(self.data_dir, {"enabled": True, "base_url": stub.base_url,
                                      "allowlisted_entities": [ENTITY]}, token=stub.token)
        self.clock = Clock()
        executor = executor_over(self.data_dir, confirmations=ConfirmationStore(ttl=TTL, clock=self.clock),
                                 clock=self.clock)
        self.queue = HouseholdQueue(executor, max_waiting=3)
        self.stub = stub
        self.reads_before = len(stub.requests_to("/api/history"))
        self.revoked: set[str] = set()
        self.stories: dict[str, Story] = {}
        self.live: list[Program] = []
        self.allowlisted = True

    # --- the programs -----------------------------------------------------------------------------------------

    def _asker(self, token: str, present: list[bool]) -> Asker:
        return Asker(CLIENT, TOKENS[token], lambda: token not in self.revoked, lambda: present[0])

    @rule(target=programs, token=st.sampled_from(sorted(TOKENS)), arguments=st.sampled_from(ARGUMENTS))
    def mcp_call(self, token: str, arguments: dict[str, str]) -> Program | object:
        if token in self.revoked:  # the web layer refuses a revoked token before the queue
            return multiple()  # nothing to add
        present = [True]
        known = {id(s.card): s for s in self.stories.values()}
        attached = {id(program): program for program in self.live if program.call.attachment in
                    program.call.waiting.calls}
        try:
            call = self.queue.call(self._asker(token, present), GET_HISTORY, dict(arguments))
        except CapabilityError as err:
            assert err.code == "INVOCATION_LIMIT_EXCEEDED" or (err.code == "ENTITY_NOT_ALLOWLISTED"
                                                               and not self.allowlisted)
            if err.code == "INVOCATION_LIMIT_EXCEEDED":
                self._limit_is_its_own(token)
            return multiple()
        card = call.waiting
        assert card.token_id == TOKENS[token], "a call joined another token's card"
        assert card.proposal.arguments == {"entity_id": ENTITY, "period": arguments["period"]}
        story = known.get(id(card))
        if story is None:
            story = self.stories[card.token] = Story(card)
        else:
            # A card is joined only before its expiry (an allowed one still waiting for its call included).
            assert self.clock() < card.deadline, "a call joined a card past its expiry"
            story.calls += 1
            if card.state is CardState.DENIED:
                story.denied_joins += 1
        for earlier in attached.values():
            if earlier.call.waiting is card and earlier.call.attachment not in card.calls:
                earlier.taken_over = True  # a newer call of its program has the card now
        program = Program(token, call, present)
        self.live.append(program)
        return program

    def _limit_is_its_own(self, token: str) -> None:
        """A program is refused for its own waiting cards, or a full Console: never for another token's."""
        waiting = self.queue.pending()
        mine = [card for card in waiting if card.token_id == TOKENS[token]]
        assert len(mine) >= household_queue.MAX_CARDS_PER_TOOL or len(waiting) >= 3, \
            "refused for cards of another API token of the same name"

    @rule(target=programs, token=st.sampled_from(sorted(TOKENS)), arguments=st.sampled_from(ARGUMENTS[:2]))
    def conversation_message(self, token: str, arguments: dict[str, str]) -> Program | object:
        if token in self.revoked:
            return multiple()
        present = [True]
        try:
            card = self.queue.ask(CLIENT, GET_HISTORY, dict(arguments), turn=Turn(), present=lambda: present[0],
                                  still_allowed=lambda: token not in self.revoked, token_id=TOKENS[token])
        except CapabilityError as err:
            assert err.code == "INVOCATION_LIMIT_EXCEEDED" or (err.code == "ENTITY_NOT_ALLOWLISTED"
                                                               and not self.allowlisted)
            return multiple()
        assert card.token not in self.stories and card.joins is None
        self.stories[card.token] = Story(card)
        program = Program(token, Call(card, card.calls[0]), present, conversation=True)
        self.live.append(program)
        return program

    def _a_live_call(self, data: st.DataObject) -> Program:
        # Drawn from the calls still running, not from every call ever made: the steps go where things happen.
        return data.draw(st.sampled_from([program for program in self.live if not program.done]))

    @precondition(lambda self: any(not program.done for program in self.live))
    @rule(data=st.data())
    def hang_up(self, data: st.DataObject) -> None:
        program = self._a_live_call(data)
        program.present[0] = False
        self.stories[program.call.waiting.token].hung_up = True

    @precondition(lambda self: any(not program.done for program in self.live))
    @rule(data=st.data())
    def cancel(self, data: st.DataObject) -> None:
        program = self._a_live_call(data)
        if program.conversation:
            return
        program.done = True
        self.queue.cancel(program.call.waiting, program.call.attachment)

    @precondition(lambda self: any(not program.done for program in self.live))
    @rule(data=st.data())
    def a_call_finishes(self, data: st.DataObject) -> None:
        self.finish(self._a_live_call(data))

    def finish(self, program: Program) -> None:
        """The call stops waiting (answered, its patience out, taken over) and asks what it gets, as `_call` does."""
        if program.done:
            return
        card, attachment = program.call.waiting, program.call.attachment
        story = self.stories[card.token]
        promised = (ALLOWED_NOW in story.told or ALLOWED_LATER in story.told) and story.reads == 0
        owed = (promised and attachment in card.calls and program.present[0] and program.token not in self.revoked
                and card.state in (CardState.ALLOWED, CardState.HELD) and self.allowlisted)
        if program.conversation:
            settled = card.settled.done() or not program.present[0] or self.queue.remaining(card) <= 0
            if not settled:
                return  # `settle` would block for the household's answer
            got = outcome(lambda: self.queue.settle(card, self._asker(program.token, program.present)))
        else:
            try:
                got = outcome(lambda: self.queue.collect(card, attachment))
            finally:
                self.queue.detach(card, attachment)
        program.done = True
        self.live.remove(program)
        story.got.append(got)
        if got == "read":
            story.reads += 1
            assert promised, f"read without the household's Allow: told {story.told}"
            assert program.present[0], "read for a program that hung up"
            assert program.token not in self.revoked, "read for a program whose API token was revoked"
        if owed:
            assert got == "read", f"the household was told {story.told}, the attached live call got {got}"
        if got == "CONFIRMATION_DENIED:":
            assert NOT_ALLOWED in story.told
        taken_over = program.taken_over
        if taken_over:
            assert got != "read", "a call another call of its program took the card over from got the read"
        if got == "CONFIRMATION_INVALID:expired" and program.present[0] and not taken_over:
            # (A call whose program hung up, or that was taken over, returns within a second; it gets nothing.)
            assert ALLOWED_NOW not in story.told and ALLOWED_LATER not in story.told, story.told
        if got == "UNAUTHENTICATED:":  # TokenRevoked
            assert program.token in self.revoked

    # --- the household --------------------------------------------------------------------------------------

    @rule(program=programs, approve=st.booleans())
    def household_answers(self, program: Program, approve: bool) -> None:
        """The household answers a program's card: open, answered already (a replay), or past its expiry."""
        token = program.call.waiting.token
        story = self.stories[token]
        card = story.card
        was_open = card.state is CardState.WAITING and self.clock() < card.deadline
        try:
            told = self.queue.answer(token, approve).message
        except CapabilityError as err:
            told = f"{err.code}:{err.detail.get('reason', '')}"
        story.told.append(told)
        if told in (ALLOWED_NOW, ALLOWED_LATER, NOT_ALLOWED):
            assert was_open, "an answer was taken for a card that was not open"
            assert story.told.count(told) == 1 and len([t for t in story.told if t in
                                                         (ALLOWED_NOW, ALLOWED_LATER, NOT_ALLOWED)]) == 1
        if told == ALLOWED_NOW:
            assert card.state is CardState.ALLOWED and any(call.present() for call in card.calls)
        if told == ALLOWED_LATER:
            assert card.state is CardState.HELD and not any(call.present() for call in card.calls)
        if card.state is CardState.EXPIRED or (not was_open and self.clock() >= card.deadline
                                               and card.state is CardState.WAITING):
            assert told == "CONFIRMATION_INVALID:expired", told

    @rule(token=st.sampled_from(sorted(TOKENS)))
    def revoke(self, token: str) -> None:
        self.revoked.add(token)

    @rule(allowed=st.booleans())
    def household_changes_the_allowlist(self, allowed: bool) -> None:
        """An allowed read then finds the entity no longer allowed: refused at stage 3, nothing read."""
        seed_settings(self.data_dir, {"allowlisted_entities": [ENTITY] if allowed else ["sensor.other"]})
        self.allowlisted = allowed

    @rule(seconds=st.sampled_from([0.001, 1.0, 30.0, 120.0]))
    def time_passes(self, seconds: float) -> None:
        self.clock.now += seconds

    @rule(program=programs, offset=st.sampled_from([-0.001, 0.0, 0.001]))
    def to_the_expiry(self, program: Program, offset: float) -> None:
        deadline = program.call.waiting.deadline + offset
        self.clock.now = max(self.clock.now, deadline)

    @rule()
    def a_page_looks(self) -> None:
        now = self.clock()
        for card in self.queue.pending():
            assert card.state is CardState.WAITING and now < card.deadline

    @rule(token=st.sampled_from(sorted(TOKENS)))
    def a_program_lists_its_cards(self, token: str) -> None:
        assert all(card.token_id == TOKENS[token] for card in self.queue.pending(CLIENT, TOKENS[token]))

    # --- after every step -----------------------------------------------------------------------------------

    @invariant()
    def cards_move_only_as_moves_allows(self) -> None:
        for story in self.stories.values():
            state = story.card.state
            assert state in REACHABLE[story.last_state], f"{story.last_state.value} -> {state.value}"
            story.last_state = state

    @invariant()
    def each_path_is_made_of_moves_the_table_lists(self) -> None:
        """Move by move, not only the states seen between steps: a card passes through states within one step."""
        for story in self.stories.values():
            path = PATHS.get(story.card, [])
            reached = [CardState.WAITING, *(moved.to for moved in path)]
            assert [moved.start for moved in path] == reached[:-1], "a state was written past `move`"
            assert reached[-1] is story.card.state, "a state was written past `move`"
            assert all(moved.to in MOVES.get(moved.start, frozenset()) for moved in path), path

    @invariant()
    def a_read_follows_one_move_to_reading_made_for_a_live_call(self) -> None:
        for story in self.stories.values():
            readings = [moved for moved in PATHS.get(story.card, []) if moved.to is CardState.READING]
            assert story.reads <= len(readings) <= 1
            assert all(moved.live for moved in readings), "a read was taken with no live call on its card"

    @invariant()
    def home_assistant_is_read_once_per_allowed_card_at_most(self) -> None:
        reads = len(self.stub.requests_to("/api/history")) - self.reads_before
        assert reads == sum(story.reads for story in self.stories.values())
        assert all(story.reads <= 1 for story in self.stories.values())

    @invariant()
    def counts_and_memory_stay_bounded(self) -> None:
        assert len(self.queue._expired) <= household_queue.EXPIRED_REMEMBERED
        assert len(self.queue.pending()) <= 3
        for story in self.stories.values():
            assert story.card.asked == story.calls, "asked counts a call that did not join"

    @invariant()
    def one_final_line_per_invocation(self) -> None:
        lines = list(AuditLog(self.data_dir).events())
        finals = Counter(line["invocation"] for line in lines if line["event"] in FINAL)
        assert all(count == 1 for count in finals.values()), finals
        held = Counter(line["invocation"] for line in lines if line["event"] == "held")
        assert all(count == 1 for count in held.values()), f"`held` audited more than once: {held}"
        assert sum(1 for line in lines if line["event"] == "asked_again") == \
            sum(story.denied_joins for story in self.stories.values())

    def teardown(self) -> None:
        """Every call ends and the clock passes every expiry: each invocation then has its one final line."""
        for program in list(self.live):
            self.finish(program)
        for program in list(self.live):  # a conversation message still waiting: its program goes
            program.present[0] = False
            self.finish(program)
        self.clock.now += TTL + 1
        self.queue.pending()
        lines = list(AuditLog(self.data_dir).events())
        finals = Counter(line["invocation"] for line in lines if line["event"] in FINAL)
        asked = {line["invocation"] for line in lines if line["event"] == "confirmation_requested"}
        missing = [i for i in asked if finals[i] != 1]
        assert not missing, f"{len(missing)} invocation(s) without one final line: {lines}"
        for story in self.stories.values():
            assert story.card.state not in (CardState.WAITING, CardState.ALLOWED, CardState.HELD)


_EXAMPLES = itertools.count()


def test_the_queue_keeps_its_promises_in_any_order_of_events(tmp_path: Path, stub_ha: StubHomeAssistant,
                                                             monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(WaitingRead, "move", recorded_move)

    class Machine(QueueMachine):
        def __init__(self) -> None:
            super().__init__(tmp_path, stub_ha)

    run_state_machine_as_test(Machine, settings=settings(
        max_examples=400, stateful_step_count=40, deadline=None, derandomize=True,
        suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much]))
