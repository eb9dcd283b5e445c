"""Confirmation tokens: single use, five minutes, bound to conversation, capability and arguments."""

from __future__ import annotations

import pytest

from console_ha.capabilities.confirmations import ConfirmationStore, canonical_arguments
from console_ha.errors import ConfirmationInvalid
from tests.conftest import Clock


@pytest.fixture
def store(clock) -> ConfirmationStore:
    return ConfirmationStore(clock=clock)


ARGS = {"period": "day", "entity_id": "sensor.kitchen"}


def test_token_is_bound_to_what_it_was_issued_for(store):
    pending = store.issue("conv-1", "home_assistant.get_history", ARGS, "inv")
    taken = store.consume(pending.token, "conv-1")
    assert (taken.capability, taken.arguments, taken.conversation_id) == (
        "home_assistant.get_history", ARGS, "conv-1")


def test_token_is_single_use(store):
    pending = store.issue("conv-1", "home_assistant.list_entities", {}, "inv")
    store.consume(pending.token, "conv-1")
    with pytest.raises(ConfirmationInvalid) as caught:
        store.consume(pending.token, "conv-1")
    assert caught.value.code == "CONFIRMATION_INVALID" and caught.value.stage is None  # no executor, no stage


def test_token_expires_after_five_minutes(store, clock):
    pending = store.issue("conv-1", "home_assistant.list_entities", {}, "inv")
    clock.now += 299
    assert store.consume(pending.token, "conv-1")
    late = store.issue("conv-1", "home_assistant.list_entities", {}, "inv")
    clock.now += 300
    with pytest.raises(ConfirmationInvalid) as caught:
        store.consume(late.token, "conv-1")
    assert caught.value.detail["reason"] == "expired"


def test_foreign_conversation_can_neither_use_nor_burn_a_token(store):
    pending = store.issue("conv-1", "home_assistant.list_entities", {}, "inv")
    with pytest.raises(ConfirmationInvalid) as caught:
        store.consume(pending.token, "conv-2")
    assert caught.value.detail["reason"] == "foreign"
    assert store.consume(pending.token, "conv-1")


@pytest.mark.parametrize("bad", ["", "nope", None, 42, "é", ["x"]])
def test_unknown_tokens_are_invalid(store, bad):
    with pytest.raises(ConfirmationInvalid):
        store.consume(bad, "conv-1")


def test_canonical_arguments_ignore_key_order():
    assert canonical_arguments({"a": 1, "b": 2}) == canonical_arguments({"b": 2, "a": 1})


def test_expire_returns_what_nobody_answered(store, clock):
    store.issue("conv-1", "home_assistant.list_entities", {}, "inv-a")
    clock.now += 301
    assert [p.invocation_id for p in store.expire()] == ["inv-a"]
    assert store.pending_count() == 0


def test_pending_count_is_bounded(clock):
    store = ConfirmationStore(clock=clock, max_pending=3)
    tokens = []
    for i in range(5):
        clock.now += 1
        tokens.append(store.issue("c", "home_assistant.list_entities", {}, str(i)).token)
    assert store.pending_count() == 3
    with pytest.raises(ConfirmationInvalid):
        store.consume(tokens[0], "c")
    assert store.consume(tokens[-1], "c")


def test_a_wall_clock_step_neither_stretches_nor_cuts_the_five_minutes(clock):
    timer = Clock(start=100.0)
    store = ConfirmationStore(clock=clock, timer=timer)
    pending = store.issue("c", "home_assistant.list_entities", {}, "inv")
    clock.now += 3600  # NTP steps the wall clock forward an hour
    assert store.consume(pending.token, "c")
    late = store.issue("c", "home_assistant.list_entities", {}, "inv")
    clock.now -= 7200  # and back two
    timer.now += 300
    with pytest.raises(ConfirmationInvalid) as caught:
        store.consume(late.token, "c")
    assert caught.value.detail["reason"] == "expired"
