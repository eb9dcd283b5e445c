"""One card, one state machine: MOVES is the only way a card's state changes, and the queue's limits are limits."""

from __future__ import annotations

import itertools
import json
from collections import deque

import pytest

from console_ha.answers.card_state import ENDED, GONE, MOVES, Attachment, CardState, IllegalMove, WaitingRead
from console_ha.answers.household_queue import ALLOWED_LATER, MAX_CARDS_PER_TOOL, Asker, HouseholdQueue, StillWaiting
from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.stages import Stage, Turn
from console_ha.errors import ConfirmationInvalid, ConfirmationReason, InvocationLimitExceeded
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.datadir import DataDir
from tests.conftest import Clock
from tests.executors import executor_over
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

ENTITY = "sensor.living_room_temperature"


def queue_over(data_dir: DataDir, stub_ha: StubHomeAssistant, clock: Clock, max_waiting: int = 2) -> HouseholdQueue:
    """A queue over the stub whose confirmation store runs on `clock`: the one clock of its cards."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": [ENTITY]},
                  token=stub_ha.token)
    executor = executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock)
    return HouseholdQueue(executor, max_waiting=max_waiting)


@pytest.fixture
def queue(data_dir: DataDir, stub_ha: StubHomeAssistant, clock: Clock) -> HouseholdQueue:
    return queue_over(data_dir, stub_ha, clock)


def path_to(state: CardState) -> list[CardState]:
    """The shortest series of moves MOVES allows from WAITING to `state` (breadth first)."""
    paths = deque([[CardState.WAITING]])
    while paths:
        path = paths.popleft()
        if path[-1] is state:
            return path[1:]
        paths.extend([*path, to] for to in MOVES.get(path[-1], frozenset()) if to not in path)
    raise AssertionError(f"{state.value} cannot be reached from waiting")


def a_card(queue: HouseholdQueue, state: CardState) -> WaitingRead:
    """A fresh card moved, by `move` alone, to `state`."""
    card = queue.ask("desk", LIST_ENTITIES, {})
    for step in path_to(state):
        card.move(step)
    return card


@pytest.mark.parametrize(("start", "to"), list(itertools.product(CardState, CardState)),
                         ids=lambda state: state.value)
def test_a_card_makes_exactly_the_moves_the_table_lists(queue: HouseholdQueue, start: CardState,
                                                        to: CardState) -> None:
    """Every pair of states: a move MOVES lists is made, any other raises IllegalMove and leaves the card as it was."""
    card = a_card(queue, start)
    assert card.may_move(to) is (to in MOVES.get(start, frozenset()))
    if card.may_move(to):
        card.move(to)
        assert card.state is to
    else:
        with pytest.raises(IllegalMove):
            card.move(to)
        assert card.state is start


def test_a_card_s_state_cannot_be_written_past_move(queue: HouseholdQueue) -> None:
    card = queue.ask("desk", LIST_ENTITIES, {})
    with pytest.raises(AttributeError):
        card.state = CardState.ALLOWED  # type: ignore[misc]
    assert card.state is CardState.WAITING


def test_a_newer_call_takes_the_card_over_and_the_last_to_let_go_leaves_none(queue: HouseholdQueue) -> None:
    card = queue.ask("desk", LIST_ENTITIES, {})
    (first,) = card.calls
    newer = Attachment()
    card.attach(newer)
    assert card.calls == [newer] and first.wake.done() and not newer.wake.done()  # the older call returns now
    assert card.live()
    assert card.let_go(first) is True  # not on the card any more: nothing changes
    assert card.let_go(newer) is False and not card.live()


def test_the_table_s_ends_are_the_states_it_leads_nowhere_from() -> None:
    """Each state is reached from WAITING; the states with no moves out are the ends the queue forgets or keeps."""
    ends = {state for state in CardState if not MOVES.get(state)}
    assert ends == GONE | ENDED == {CardState.READING, CardState.DENIED, CardState.EXPIRED, CardState.WITHDRAWN,
                                    CardState.ABANDONED}
    assert all(path_to(state) or state is CardState.WAITING for state in CardState)


def test_the_queue_has_no_clock_of_its_own(data_dir: DataDir, stub_ha: StubHomeAssistant, clock: Clock) -> None:
    """The store's clock alone moves a card to its expiry, and the store's card expires at the queue's instant."""
    store = ConfirmationStore(clock=clock)
    queue_over(data_dir, stub_ha, clock)  # its settings
    queue = HouseholdQueue(executor_over(data_dir, confirmations=store, clock=clock), max_waiting=2)
    card = queue.ask("desk", LIST_ENTITIES, {})
    issued = store.peek(card.token, card.conversation_id)
    assert issued is not None and issued.deadline == card.deadline
    clock.now = card.deadline - 0.001
    assert queue.pending() == [card]
    clock.now = card.deadline
    assert queue.pending() == [] and card.state is CardState.EXPIRED
    with pytest.raises(ConfirmationInvalid) as late:
        queue.answer(card.token, True)
    assert late.value.detail["reason"] is ConfirmationReason.EXPIRED
    expired = [line for line in AuditLog(data_dir).events() if line["event"] == "expired"]
    assert [(line["stage"], line["code"]) for line in expired] == [(Stage.CONFIRM, ConfirmationInvalid.code)]


def _rejections(data_dir: DataDir) -> list[tuple[int, str]]:
    return [(line["stage"], line["code"]) for line in AuditLog(data_dir).events() if line["event"] == "rejected"]


def test_a_full_queue_refuses_at_stage_three_and_leaves_a_conversation_s_turn_alone(
        queue: HouseholdQueue, data_dir: DataDir) -> None:
    """The Console's bound on waiting reads is InvocationLimitExceeded in the queue's words, audited at stage 3;
    the conversation's own count of the turn is not spent on a read that never became a card."""
    queue.ask("desk", LIST_ENTITIES, {})
    queue.ask("tablet", LIST_ENTITIES, {})
    turn = Turn()
    with pytest.raises(InvocationLimitExceeded) as refused:
        queue.ask("phone", LIST_ENTITIES, {}, turn=turn)
    assert refused.value.message == ("The Console already has 2 reads waiting for the household; "
                                     "try again once they are answered.")
    assert refused.value.stage is Stage.POLICY and not turn.counts
    assert _rejections(data_dir) == [(3, InvocationLimitExceeded.code)]


def test_a_conversation_s_turn_keeps_its_own_words_below_the_bound(data_dir: DataDir, stub_ha: StubHomeAssistant,
                                                                   clock: Clock) -> None:
    """Room in the queue: the turn's own limit refuses in the executor's words, not the queue's."""
    queue = queue_over(data_dir, stub_ha, clock, max_waiting=4)
    turn = Turn()
    queue.ask("desk", LIST_ENTITIES, {}, turn=turn)
    with pytest.raises(InvocationLimitExceeded) as refused:
        queue.ask("desk", LIST_ENTITIES, {}, turn=turn)
    assert refused.value.message == "This capability was already used in this turn for this Home Assistant."


def test_a_program_s_cards_of_one_tool_are_bounded_in_the_queue_s_words(data_dir: DataDir, stub_ha: StubHomeAssistant,
                                                                        clock: Clock) -> None:
    queue = queue_over(data_dir, stub_ha, clock, max_waiting=MAX_CARDS_PER_TOOL + 2)
    desk = Asker("desk", token_id="d" * 16)
    for domain in ("sensor", "light")[:MAX_CARDS_PER_TOOL]:
        queue.call(desk, LIST_ENTITIES, {"domain": domain})
    with pytest.raises(InvocationLimitExceeded) as refused:
        queue.call(desk, LIST_ENTITIES, {"domain": "switch"})
    assert refused.value.message.startswith(f"{MAX_CARDS_PER_TOOL} reads of this kind from this program are already "
                                            "waiting for the household")
    assert _rejections(data_dir) == [(3, InvocationLimitExceeded.code)]


def test_stages_and_reasons_keep_their_numbers_and_words(data_dir: DataDir) -> None:
    """The audit log's stage numbers and the error body's reasons are what they were as bare values."""
    assert [int(stage) for stage in Stage] == [1, 2, 3, 4, 5, 6]
    assert {reason.value for reason in ConfirmationReason} == {"unknown", "expired", "foreign", "settings_changed"}
    log = AuditLog(data_dir)
    log.record(AuditEvent.REJECTED, capability="x", classification="unknown", stage=Stage.POLICY, invocation="i")
    assert '"stage":3,' in log.path.read_text(encoding="utf-8")
    assert json.dumps(ConfirmationInvalid(ConfirmationReason.EXPIRED, "late").to_dict()) == \
        '{"error": {"code": "CONFIRMATION_INVALID", "message": "late", "reason": "expired"}}'


def test_a_read_held_twice_for_its_program_is_audited_held_once(queue: HouseholdQueue, data_dir: DataDir) -> None:
    """Allowed with no call there, joined by the program's next call, then let go again (that call hung up): the
    read waits for the program a second time, and Activity still says "Allowed, waiting for the program" once."""
    desk = Asker("desk", token_id="d" * 16)
    first = queue.call(desk, LIST_ENTITIES, {})
    queue.detach(first.waiting, first.attachment)  # its patience ran out: it returned early
    queue.answer(first.waiting.token, True)
    seen = [first.waiting.state]
    again = queue.call(desk, LIST_ENTITIES, {})
    seen.append(again.waiting.state)
    queue.detach(again.waiting, again.attachment)  # that call's program hung up before it collected
    seen.append(again.waiting.state)
    assert again.waiting is first.waiting and seen == [CardState.HELD, CardState.ALLOWED, CardState.HELD]
    held = [line for line in AuditLog(data_dir).events() if line["event"] == AuditEvent.HELD]
    assert len(held) == 1


def test_a_call_seen_back_on_a_held_read_gets_no_illegal_move_and_the_program_s_next_call_the_read(
        queue: HouseholdQueue, stub_ha: StubHomeAssistant) -> None:
    """Allowed while the call's program seemed gone ("the program will get it when it asks again"), then that call
    looks again and its program answers: it gets nothing now (not an IllegalMove, HELD -> READING, which a request
    would see as a 500), and the program's next call gets the read, once."""
    present = [True]
    desk = Asker("desk", token_id="d" * 16, present=lambda: present[0])
    first = queue.call(desk, GET_HISTORY, {"entity_id": ENTITY, "period": "day"})
    present[0] = False
    assert queue.answer(first.waiting.token, True).message == ALLOWED_LATER
    present[0] = True  # a presence that comes back (waitress's does not; the Asker's contract does not say so)
    with pytest.raises(StillWaiting):
        queue.collect(first.waiting, first.attachment)
    queue.detach(first.waiting, first.attachment)
    again = queue.call(desk, GET_HISTORY, {"entity_id": ENTITY, "period": "day"})
    assert again.waiting is first.waiting
    assert queue.collect(again.waiting, again.attachment)["entity_id"] == ENTITY
    assert len(stub_ha.requests_to("/api/history")) == 1
