"""HouseholdQueue: reads from other front ends wait for the household, within bounds, withdrawable."""

from __future__ import annotations

import asyncio
import dataclasses

import pytest
from mcp.types import CallToolResult

from console_ha.answers.card_state import asked_words
from console_ha.answers.household_queue import (
    ALLOWED_LATER,
    ALLOWED_NOW,
    CHANGED_SINCE_SHOWN,
    NOT_ALLOWED,
    Answered,
    Asker,
    Call,
    HouseholdQueue,
    StillWaiting,
    WaitingRead,
)
from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.errors import CapabilityError, ConfirmationInvalid
from console_ha.mcp.server import _call
from console_ha.store.audit import AuditLog
from tests.async_run import run_to_end
from tests.executors import executor_over
from tests.household_cards import withdraw
from tests.seed import seed_settings

ENTITY = "sensor.living_room_temperature"
HISTORY_ARGS = {"entity_id": ENTITY, "period": "day"}


@pytest.fixture
def queue(data_dir, stub_ha, clock) -> HouseholdQueue:
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": [ENTITY]},
                  token=stub_ha.token)
    executor = executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock)
    return HouseholdQueue(executor, max_waiting=2)


def roomy_queue(data_dir, stub_ha, clock, max_waiting: int = 4) -> HouseholdQueue:
    """A queue over the stub, with room for more waiting cards than the fixture's."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": [ENTITY]},
                  token=stub_ha.token)
    executor = executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock)
    return HouseholdQueue(executor, max_waiting=max_waiting)


def events(data_dir) -> list[str]:
    return [e["event"] for e in AuditLog(data_dir).events()]


def test_an_approved_read_runs_once_and_is_audited_with_the_client(queue, data_dir, stub_ha):
    waiting = queue.ask("desk", GET_HISTORY, HISTORY_ARGS)
    assert queue.answer(waiting.token, True).status == "approved"
    result = queue.collect(waiting)
    assert result["entity_id"] == ENTITY
    assert events(data_dir) == ["proposed", "confirmation_requested", "approved", "executed"]
    assert {e["client"] for e in AuditLog(data_dir).events()} == {"desk"}


def test_a_withdrawn_read_cannot_be_answered_and_reads_nothing(queue, data_dir, stub_ha):
    waiting = queue.ask("desk", LIST_ENTITIES, {})
    withdraw(queue, waiting)
    with pytest.raises(ConfirmationInvalid) as refused:
        queue.answer(waiting.token, True)
    assert "gets this read" not in refused.value.message and "withdrawn" in refused.value.message
    assert queue.pending() == []
    assert events(data_dir)[-1] == "cancelled"
    assert stub_ha.requests_to("/api/states") == []


def test_withdrawn_just_after_the_household_said_yes_nothing_is_read(queue, data_dir, stub_ha):
    """The yes came, but the program already left: nobody would get the read, so it is not made."""
    waiting = queue.ask("desk", LIST_ENTITIES, {})
    queue.answer(waiting.token, True)
    withdraw(queue, waiting)
    with pytest.raises(ConfirmationInvalid):
        queue.collect(waiting)
    assert events(data_dir)[-1] == "cancelled" and "approved" not in events(data_dir)
    assert stub_ha.requests_to("/api/states") == []


def test_at_most_two_waiting_cards_per_capability_per_client(data_dir, stub_ha, clock):
    """Other arguments make a new card (issue 20), within two a tool per program."""
    queue = roomy_queue(data_dir, stub_ha, clock)
    queue.ask("desk", GET_HISTORY, HISTORY_ARGS)
    queue.ask("desk", GET_HISTORY, {"entity_id": ENTITY, "period": "hour"})
    with pytest.raises(CapabilityError) as refused:
        queue.ask("desk", GET_HISTORY, {"entity_id": ENTITY, "period": "week"})
    assert refused.value.code == "INVOCATION_LIMIT_EXCEEDED" and "already waiting" in refused.value.message
    queue.ask("tablet", GET_HISTORY, HISTORY_ARGS)  # another program may


def test_the_two_card_limit_is_each_api_token_s_own_even_when_two_tokens_share_a_name(data_dir, stub_ha, clock):
    """Two tokens named "desk" are two programs: one's two waiting cards never refuse the other's call (before,
    the limit counted cards by name, and the second was told to "call again to collect one" it could not join)."""
    queue = roomy_queue(data_dir, stub_ha, clock, max_waiting=5)
    first, second = Asker("desk", token_id="a" * 16), Asker("desk", token_id="b" * 16)
    queue.call(first, GET_HISTORY, HISTORY_ARGS)
    queue.call(first, GET_HISTORY, {"entity_id": ENTITY, "period": "hour"})
    with pytest.raises(CapabilityError) as refused:
        queue.call(first, GET_HISTORY, {"entity_id": ENTITY, "period": "week"})
    assert refused.value.code == "INVOCATION_LIMIT_EXCEEDED"
    other = queue.call(second, GET_HISTORY, HISTORY_ARGS)
    assert other.waiting.token_id == "b" * 16 and len(queue.pending()) == 3


def test_the_queue_is_bounded_overall_and_an_expired_card_frees_its_place(queue, clock, data_dir):
    first = queue.ask("desk", LIST_ENTITIES, {})
    queue.ask("tablet", LIST_ENTITIES, {})
    with pytest.raises(CapabilityError) as refused:
        queue.ask("phone", LIST_ENTITIES, {})
    assert refused.value.code == "INVOCATION_LIMIT_EXCEEDED" and "2 reads waiting" in refused.value.message
    clock.now += 301
    assert queue.pending() == []
    with pytest.raises(ConfirmationInvalid) as late:
        queue.answer(first.token, True)
    assert late.value.detail["reason"] == "expired"
    with pytest.raises(ConfirmationInvalid) as its_call:
        queue.collect(first)
    assert its_call.value.detail["reason"] == "expired"
    assert events(data_dir).count("expired") == 2  # one line each for the two cards, however found
    queue.ask("phone", LIST_ENTITIES, {})


def test_refusals_at_stages_one_to_three_make_no_card(queue, data_dir):
    for capability, arguments in (("home_assistant.call_service", {}), (GET_HISTORY, {"entity_id": "lock.door"}),
                                  (GET_HISTORY, {"entity_id": "lock.door", "period": "day"})):
        with pytest.raises(CapabilityError):
            queue.ask("desk", capability, arguments)
    assert queue.pending() == []
    assert "confirmation_requested" not in events(data_dir)


def test_pending_for_a_client_is_only_its_own(queue):
    mine = queue.ask("desk", LIST_ENTITIES, {})
    queue.ask("tablet", LIST_ENTITIES, {})
    assert [w.token for w in queue.pending("desk")] == [mine.token]
    assert len(queue.pending()) == 2


# --- issue 20: come back for the answer; read only for a live call ----------------------------------

DESK = Asker("desk", token_id="0123456789abcdef")


def test_an_approval_with_no_live_call_reads_nothing_until_the_program_calls_again(queue, data_dir, stub_ha):
    first = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    queue.detach(first.waiting, first.attachment)  # its patience ran out: it returned early
    answered = queue.answer(first.waiting.token, True)
    assert answered == Answered("approved", ALLOWED_LATER)
    assert events(data_dir)[-1] == "held" and stub_ha.requests_to("/api/history") == []
    again = queue.call(DESK, GET_HISTORY, {"period": "day", "entity_id": ENTITY})  # the same, spelled otherwise
    assert again.waiting is first.waiting
    assert queue.collect(again.waiting, again.attachment)["entity_id"] == ENTITY
    assert events(data_dir)[-2:] == ["approved", "executed"] and len(stub_ha.requests_to("/api/history")) == 1
    fresh = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)  # collected: the next call is a new card
    assert fresh.waiting is not first.waiting


def test_a_denial_is_settled_at_once_and_a_joining_call_gets_it(queue, data_dir):
    first = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    queue.detach(first.waiting, first.attachment)
    assert queue.answer(first.waiting.token, False) == Answered("denied", NOT_ALLOWED)
    assert events(data_dir)[-1] == "denied" and queue.pending() == []
    again = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    with pytest.raises(CapabilityError) as denied:
        queue.collect(again.waiting, again.attachment)
    assert denied.value.code == "CONFIRMATION_DENIED"


def test_other_arguments_or_another_token_make_a_new_card(queue):
    first = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    other = queue.call(DESK, GET_HISTORY, {"entity_id": ENTITY, "period": "hour"})
    assert other.waiting is not first.waiting
    with pytest.raises(CapabilityError):  # the fixture's bound of 2 waiting cards
        queue.call(Asker("desk", token_id="fedcba9876543210"), GET_HISTORY, HISTORY_ARGS)


def test_a_joining_call_takes_the_card_over_and_the_earlier_one_lets_go(queue):
    first = queue.call(DESK, LIST_ENTITIES, {})
    second = queue.call(DESK, LIST_ENTITIES, {})
    assert second.waiting is first.waiting and first.attachment.wake.done()
    assert first.waiting.calls == [second.attachment]


def test_a_call_whose_program_hung_up_reads_nothing_and_the_card_waits(queue, data_dir, stub_ha):
    gone = queue.call(dataclasses.replace(DESK, present=lambda: False), GET_HISTORY, HISTORY_ARGS)
    # The household is told the truth: no live call is there to receive the read now.
    assert queue.answer(gone.waiting.token, True).message == ALLOWED_LATER
    with pytest.raises(StillWaiting):
        queue.collect(gone.waiting, gone.attachment)
    queue.detach(gone.waiting, gone.attachment)
    assert events(data_dir)[-1] == "held" and stub_ha.requests_to("/api/history") == []


def test_a_held_read_nobody_came_back_for_expires_as_abandoned(queue, data_dir, stub_ha, clock):
    first = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    queue.detach(first.waiting, first.attachment)
    queue.answer(first.waiting.token, True)
    clock.now += 301
    assert queue.pending() == []  # a look at the queue sweeps it
    assert events(data_dir)[-2:] == ["held", "abandoned"]
    assert stub_ha.requests_to("/api/history") == []
    assert queue.call(DESK, GET_HISTORY, HISTORY_ARGS).waiting is not first.waiting


def test_an_allow_that_lands_as_the_patience_runs_out_is_told_as_it_happened(queue, data_dir, stub_ha, monkeypatch):
    """The household's Allow arriving between the call's last look and its early return: the page's words
    and the audit match what the call did (before, the page said "gets this read once" and the call
    returned `waiting_for_household`, the read held)."""
    told: list[Answered] = []
    original = HouseholdQueue.detach

    def allowed_just_now(self, waiting, attachment=None):
        if not told:
            told.append(self.answer(waiting.token, True))
        original(self, waiting, attachment)

    monkeypatch.setattr(HouseholdQueue, "detach", allowed_just_now)

    async def report(waited: float, total: float) -> None:
        return None

    caller = Asker(DESK.client, DESK.token_id, answer_url="http://console/confirmations", patience=0.05)
    result = run_to_end(_call(queue, caller, GET_HISTORY, HISTORY_ARGS, report, 15.0))
    assert told, "the call never let go of its card"
    if "waiting_for_household" in (result.structuredContent or {}):
        assert told[0].message == ALLOWED_LATER
        assert events(data_dir)[-1] == "held" and stub_ha.requests_to("/api/history") == []
    else:
        assert told[0].message == ALLOWED_NOW and events(data_dir)[-1] == "executed"


@pytest.mark.parametrize("returned_early", [False, True], ids=["waiting", "returned-early"])
def test_a_card_of_a_revoked_token_is_never_told_allowed(queue, data_dir, stub_ha, returned_early):
    """The token was revoked (on the page or with the CLI) while its card waited: Allow reads nothing, and
    the household is told that, not that the program gets the read."""
    revoked = {"yes": False}
    asker = Asker("desk", token_id="0123456789abcdef", still_allowed=lambda: not revoked["yes"])
    call = queue.call(asker, GET_HISTORY, HISTORY_ARGS)
    if returned_early:
        queue.detach(call.waiting, call.attachment)
    revoked["yes"] = True
    with pytest.raises(ConfirmationInvalid) as refused:
        queue.answer(call.waiting.token, True)
    assert "revoked" in refused.value.message and queue.pending() == []
    assert events(data_dir)[-1] == "cancelled" and stub_ha.requests_to("/api/history") == []


def test_a_cancelled_call_that_was_already_taken_over_does_not_withdraw_the_newer_call_s_card(queue, data_dir,
                                                                                                stub_ha):
    """The program called again (the new call took the card over) and cancelled the old call before that one
    noticed: the card is the new call's now, and stays open for it."""

    async def report(waited: float, total: float) -> None:
        return None

    async def scenario() -> tuple[WaitingRead, Call]:
        caller = Asker(DESK.client, DESK.token_id, answer_url="http://console/confirmations", patience=60)
        old = asyncio.ensure_future(_call(queue, caller, GET_HISTORY, HISTORY_ARGS, report, 15.0))
        await asyncio.sleep(0.05)  # the old call waits on its card
        (card,) = queue.pending()
        newer = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)  # the same call again: it takes the card over
        assert newer.waiting is card
        old.cancel()  # notifications/cancelled for the old call, before it ran again
        with pytest.raises(asyncio.CancelledError):
            await old
        return card, newer

    card, newer = run_to_end(scenario())
    assert queue.pending() == [card] and "cancelled" not in events(data_dir)
    assert queue.answer(card.token, True).message == ALLOWED_NOW
    assert queue.collect(card, newer.attachment)["entity_id"] == ENTITY


def test_an_allowed_card_taken_over_at_the_same_moment_gives_its_read_to_one_call_only(queue, data_dir, stub_ha):
    """The household allows just as the program's same call again takes the card over: the newer call gets
    the read, the older returns early; the read is given once (before, both calls got it)."""

    async def report(waited: float, total: float) -> None:
        return None

    async def scenario() -> tuple[CallToolResult, Call]:
        caller = Asker(DESK.client, DESK.token_id, answer_url="http://console/confirmations", patience=60)
        old = asyncio.ensure_future(_call(queue, caller, GET_HISTORY, HISTORY_ARGS, report, 15.0))
        await asyncio.sleep(0.05)
        (card,) = queue.pending()
        queue.answer(card.token, True)
        newer = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)  # before the old call woke up
        return await old, newer

    old_result, newer = run_to_end(scenario())
    assert "waiting_for_household" in (old_result.structuredContent or {})
    assert queue.collect(newer.waiting, newer.attachment)["entity_id"] == ENTITY
    assert len(stub_ha.requests_to("/api/history")) == 1 and events(data_dir).count("executed") == 1


def test_a_call_arriving_while_an_allowed_read_runs_for_another_does_not_get_it_too(queue, data_dir, stub_ha,
                                                                                    monkeypatch):
    """The household allowed one read; it runs for the call attached. The program's same call again at that
    moment is a new question, not a second delivery of the read (before, it joined and got the same result)."""
    import threading

    first = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    assert queue.answer(first.waiting.token, True).message == ALLOWED_NOW
    reading, go_on = threading.Event(), threading.Event()
    original = queue._executor.run

    def slow_read(*args, **kwargs):
        reading.set()
        go_on.wait(10)
        return original(*args, **kwargs)

    monkeypatch.setattr(queue._executor, "run", slow_read)
    results: list[dict] = []
    runner = threading.Thread(target=lambda: results.append(queue.collect(first.waiting, first.attachment)))
    runner.start()
    assert reading.wait(10)
    again = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    go_on.set()
    runner.join(10)
    assert results and results[0]["entity_id"] == ENTITY
    assert again.waiting is not first.waiting and not again.waiting.settled.done()
    assert len(stub_ha.requests_to("/api/history")) == 1


def test_a_waiting_call_whose_token_is_revoked_and_whose_card_is_then_allowed_ends_with_the_revocation(
        queue, data_dir, stub_ha):
    """The household revoked the program's token and then pressed Allow on its waiting card: the call ends at
    once with TOKEN_REVOKED's error result (not an internal error), and nothing is read."""
    revoked = {"yes": False}

    async def report(waited: float, total: float) -> None:
        return None

    async def scenario() -> CallToolResult:
        caller = Asker(DESK.client, DESK.token_id, answer_url="http://console/confirmations",
                        still_allowed=lambda: not revoked["yes"], patience=60)
        waiting_call = asyncio.ensure_future(_call(queue, caller, GET_HISTORY, HISTORY_ARGS, report, 15.0))
        await asyncio.sleep(0.05)
        (card,) = queue.pending()
        revoked["yes"] = True
        with pytest.raises(ConfirmationInvalid):
            queue.answer(card.token, True)
        return await asyncio.wait_for(waiting_call, 5)

    result = run_to_end(scenario())
    assert result.isError and (result.structuredContent or {})["error"]["code"] == "UNAUTHENTICATED"
    assert stub_ha.requests_to("/api/history") == []


def test_allowing_a_card_that_cannot_be_called_again_for_once_its_program_hung_up_withdraws_it(queue, data_dir,
                                                                                              stub_ha):
    """A program's conversation message has no "same call again": allowed the moment after its program hung
    up (before its wait noticed), the card is withdrawn and the household told so, never "the program will
    get it when it asks again"."""
    here = [True]
    card = queue.ask("desk", GET_HISTORY, HISTORY_ARGS, present=lambda: here[0])
    here[0] = False  # hung up once its card was made (one gone before gets none: test_plugin_slow_hooks)
    with pytest.raises(ConfirmationInvalid) as refused:
        queue.answer(card.token, True)
    assert "hung up" in refused.value.message and queue.pending() == []
    assert events(data_dir)[-1] == "cancelled" and stub_ha.requests_to("/api/history") == []


# --- issue 25: a program that asks again ---------------------------------------------------------------------


def test_each_call_that_joins_a_waiting_card_is_counted_on_the_household_s_card(queue):
    """The program's same call made again joins its card; the card the household sees says how often it asked."""
    first = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    (card,) = queue.pending()
    assert card.to_dict()["asked"] == 1 and card.to_dict()["asked_words"] is None
    queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    queue.call(DESK, GET_HISTORY, {"period": "day", "entity_id": ENTITY})
    assert queue.pending() == [first.waiting]
    shown = first.waiting.to_dict()
    assert shown["asked"] == 3 and shown["asked_words"] == asked_words(3) == "Asked 3 times."
    assert queue.call(DESK, GET_HISTORY, {"entity_id": ENTITY, "period": "hour"}).waiting.to_dict()["asked"] == 1


def test_a_call_repeated_after_a_denial_is_denied_again_each_time_with_a_line_of_its_own(queue, data_dir, stub_ha):
    """Before, a program repeating a denied call was answered "denied" again with no line in Activity: the
    household never learnt it kept asking. Each such call is now its own invocation, audited `asked_again`."""
    first = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    queue.detach(first.waiting, first.attachment)
    queue.answer(first.waiting.token, False)
    for _ in range(2):
        again = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
        assert again.waiting is first.waiting and queue.pending() == []  # no new card: the household said no
        with pytest.raises(CapabilityError) as denied:
            queue.collect(again.waiting, again.attachment)
        assert denied.value.code == "CONFIRMATION_DENIED"
    lines = list(AuditLog(data_dir).events())
    assert [line["event"] for line in lines][-3:] == ["denied", "asked_again", "asked_again"]
    denial, *repeats = lines[-3:]
    for line in repeats:
        assert (line["code"], line["stage"], line["client"], line["capability"]) == \
            ("CONFIRMATION_DENIED", 4, "desk", GET_HISTORY)
    invocations = {line["invocation"] for line in lines[-3:]}
    assert len(invocations) == 3  # each repeated call is an invocation of its own, not the denied one's
    assert stub_ha.requests_to("/api/history") == []


def test_a_denial_is_not_joined_past_its_expiry_nor_by_other_arguments(queue, data_dir, clock):
    first = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    queue.answer(first.waiting.token, False)
    other = queue.call(DESK, GET_HISTORY, {"entity_id": ENTITY, "period": "hour"})
    assert other.waiting is not first.waiting and "asked_again" not in events(data_dir)
    clock.now = first.waiting.deadline
    later = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    assert later.waiting is not first.waiting and later.waiting in queue.pending()
    assert "asked_again" not in events(data_dir)


def test_an_allow_after_the_names_changed_says_nothing_will_be_read_and_nothing_is(data_dir, stub_ha, clock):
    """The approval binds the names a list card showed: renamed while it waited, the household is told at its
    Allow that nothing will be read (not "the program gets this read once"), and the program gets nothing."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url,
                             "allowlisted_entities": ["light.living_room", "light.bedroom"]}, token=stub_ha.token)
    queue = HouseholdQueue(executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock))
    waiting = queue.ask("desk", LIST_ENTITIES, {"domain": "light"})
    seed_settings(data_dir, {"entity_names": {"light.bedroom": "Guest room"}})
    assert queue.answer(waiting.token, True) == Answered("approved", CHANGED_SINCE_SHOWN)
    with pytest.raises(ConfirmationInvalid):
        queue.collect(waiting)
    assert events(data_dir)[-1] == "rejected" and stub_ha.requests == []
