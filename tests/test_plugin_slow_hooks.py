"""A slow plugin holds nobody up (issue 30): `before_toolcall` runs before the household queue takes its lock.

One program's held `before_toolcall` must not stall the household's answers, and a call that joins its program's
open card runs no plugin again. The refusal after a plugin moved a read to another Home Assistant names the one
the read would have gone to.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from console_ha.answers.household_queue import Asker, HouseholdQueue
from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.executor import Executor
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.errors import ConfirmationInvalid
from console_ha.hooks import hookimpl
from console_ha.mcp.server import _call
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.audit import AuditLog
from console_ha.store.datadir import DataDir
from console_ha.store.instances import Instances
from console_ha.store.plugin_switches import PluginSwitches
from tests.async_run import run_to_end
from tests.executors import refusal
from tests.held_hooks import PATIENCE, Held, hold_past_the_deadline
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant
from tests.two_instances import CABIN, seed_instance

ENTITY = "sensor.living_room_temperature"
HISTORY_ARGS = {"entity_id": ENTITY, "period": "day"}
DESK = Asker("desk", token_id="0123456789abcdef", answer_url="http://console/confirmations", patience=0.0)


def executor_with(data_dir: DataDir, stub: StubHomeAssistant, clock: Any = None, **given: object) -> Executor:
    """An executor over the stub with `ENTITY` allowed at `home`, and the plugins given (registered by keyword)."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub.base_url, "allowlisted_entities": [ENTITY]},
                  token=stub.token)
    plugins = Plugins(PluginSwitches(data_dir))
    for name, plugin in given.items():
        plugins.register(plugin, name)
    confirmations = ConfirmationStore(clock=clock) if clock is not None else ConfirmationStore()
    return Executor(Instances(data_dir), audit=AuditLog(data_dir), confirmations=confirmations, plugins=plugins)


def lines(data_dir: DataDir) -> list[dict[str, Any]]:
    return [json.loads(line) for line in data_dir.audit_log.read_text().splitlines()]


# --- the household's answer is not held up ----------------------------------------------------------------


def test_while_a_program_s_plugin_is_held_the_household_s_allow_of_another_card_goes_through(
        data_dir, stub_ha, clock, monkeypatch):
    hold_past_the_deadline(monkeypatch)
    held = Held("program:slow")
    queue = HouseholdQueue(executor_with(data_dir, stub_ha, clock, held=held))
    desk = queue.call(DESK, LIST_ENTITIES, {})
    with ThreadPoolExecutor(max_workers=2) as pool:
        asking = pool.submit(queue.ask, "slow", LIST_ENTITIES, {})
        try:
            assert held.entered.wait(PATIENCE), "the slow program's plugin was never called"
            # Before, the Allow waited for the queue's lock, which the slow program's proposal held.
            answered = pool.submit(queue.answer, desk.waiting.token, True).result(timeout=PATIENCE)
            assert answered.status == "approved"
            assert queue.collect(desk.waiting, desk.attachment)["entities"]
            assert queue.pending() == []  # the slow program has no card while its plugin is held
        finally:
            held.release.set()
        slow = asking.result(timeout=PATIENCE)
    assert queue.pending() == [slow] and slow.client == "slow"
    assert [line["event"] for line in lines(data_dir) if line["client"] == "slow"] == [
        "proposed", "confirmation_requested"]


# --- a call that joins asks nothing new -------------------------------------------------------------------


async def _no_report(waited: float, total: float) -> None:
    return None


def test_a_call_that_joins_its_program_s_card_runs_no_plugin_again_and_writes_no_second_proposed_line(
        data_dir, stub_ha, clock):
    seen = Held("nobody")  # never holds: it only counts the calls it is handed
    queue = HouseholdQueue(executor_with(data_dir, stub_ha, clock, seen=seen))
    for _ in range(3):  # no patience: each call returns at once, and the next joins the card
        result = run_to_end(_call(queue, DESK, GET_HISTORY, HISTORY_ARGS, _no_report, 15.0))
        assert "waiting_for_household" in (result.structuredContent or {})
    assert seen.calls == ["program:desk"]
    assert [line["event"] for line in lines(data_dir)] == ["proposed", "confirmation_requested"]
    (card,) = queue.pending()
    assert card.asked == 3


# --- where a read moved by a plugin would have gone -------------------------------------------------------


class MovesTo:
    """Sends every read to another Home Assistant."""

    def __init__(self, instance: str) -> None:
        self.instance = instance

    @hookimpl(tryfirst=True)
    def before_toolcall(self, arguments):
        return {**arguments, "instance": self.instance}


class Refuses:
    @hookimpl
    def before_toolcall(self):
        return "not now"


class Raises:
    @hookimpl
    def before_toolcall(self):
        raise RuntimeError("broken")


def test_a_refusal_at_stage_3_after_a_plugin_moved_the_read_names_the_instance_it_would_have_gone_to(
        data_dir, two_homes):
    house, cabin = two_homes
    executor = executor_with(data_dir, house, moves=MovesTo(CABIN))
    seed_instance(data_dir, cabin, ["light.cabin_porch"])  # the cabin does not share the living room
    err = refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c"))
    assert err.code == "ENTITY_NOT_ALLOWLISTED"
    assert [(line["event"], line["instance"]) for line in lines(data_dir)] == [
        ("proposed", "home"), ("plugin_changed", "home"), ("rejected", CABIN)]


def test_a_plugin_s_refusal_and_skip_after_another_moved_the_read_name_the_instance_it_would_have_gone_to(
        data_dir, two_homes):
    house, cabin = two_homes
    executor = executor_with(data_dir, house, refuses=Refuses(), broken=Raises(), moves=MovesTo(CABIN))
    seed_instance(data_dir, cabin, [ENTITY])
    err = refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c"))
    assert err.code == "REFUSED_BY_PLUGIN"
    assert [(line["event"], line.get("plugin"), line["instance"]) for line in lines(data_dir)] == [
        ("proposed", None, "home"), ("plugin_changed", "moves", "home"), ("plugin_skipped", "broken", CABIN),
        ("rejected", "refuses", CABIN)]


def test_a_read_a_plugin_moved_and_allowed_there_is_carded_and_audited_at_that_instance(data_dir, two_homes):
    house, cabin = two_homes
    executor = executor_with(data_dir, house, moves=MovesTo(CABIN))
    seed_instance(data_dir, cabin, [ENTITY])
    proposal = executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c")
    assert proposal.arguments["instance"] == CABIN
    assert [(line["event"], line["instance"]) for line in lines(data_dir)] == [
        ("proposed", "home"), ("plugin_changed", "home"), ("confirmation_requested", CABIN)]


@pytest.mark.parametrize("given", [{"instance": "nowhere"}, {"period": "century"}])
def test_a_refusal_at_stage_2_of_a_plugin_s_arguments_names_the_instance_the_read_was_going_to(
        data_dir, two_homes, given):
    class Then:
        @hookimpl(trylast=True)
        def before_toolcall(self, arguments):
            return {**arguments, **given}

    house, cabin = two_homes
    executor = executor_with(data_dir, house, then=Then(), moves=MovesTo(CABIN))
    seed_instance(data_dir, cabin, [ENTITY])
    err = refusal(lambda: executor.propose(GET_HISTORY, HISTORY_ARGS, conversation_id="c"))
    assert (err.code, err.plugin) == ("INVALID_ARGUMENTS", "then")
    assert [(line["event"], line["instance"]) for line in lines(data_dir)][-1] == ("rejected", CABIN)


def test_a_call_whose_task_is_cancelled_while_its_plugin_is_held_makes_no_card_and_is_audited_cancelled_once(
        data_dir, stub_ha, clock, monkeypatch):
    """As the web layer ends the task of a request whose program hung up (`asyncio.Task.cancel`)."""
    hold_past_the_deadline(monkeypatch)
    held = Held("program:desk")
    queue = HouseholdQueue(executor_with(data_dir, stub_ha, clock, held=held))

    async def scenario() -> None:
        call = asyncio.create_task(_call(queue, DESK, LIST_ENTITIES, {}, _no_report, 15.0))
        try:
            assert await asyncio.to_thread(held.entered.wait, PATIENCE)
            call.cancel()
        finally:
            held.release.set()
        with pytest.raises(asyncio.CancelledError):
            await asyncio.wait_for(call, PATIENCE)

    run_to_end(scenario())
    for _ in range(int(PATIENCE / 0.05)):  # the plugin's thread may end after the task did
        if "cancelled" in [line["event"] for line in lines(data_dir)]:
            break
        time.sleep(0.05)
    assert [(line["event"], line["stage"]) for line in lines(data_dir)] == [("proposed", 1), ("cancelled", 3)]
    assert queue.pending() == []


def test_two_identical_calls_of_a_program_at_once_share_one_card(data_dir, stub_ha, clock, monkeypatch):
    """The second found no card to join (the first was still in its plugins) and made it; the first, its plugins
    done, joins it under the lock: the household is asked once (docs/architecture.md, "A call that joins")."""
    hold_past_the_deadline(monkeypatch)
    held = Held("program:desk")  # holds the first call only
    queue = HouseholdQueue(executor_with(data_dir, stub_ha, clock, held=held))
    with ThreadPoolExecutor(max_workers=1) as pool:
        first = pool.submit(queue.call, DESK, LIST_ENTITIES, {})
        try:
            assert held.entered.wait(PATIENCE)
            second = queue.call(DESK, LIST_ENTITIES, {})
        finally:
            held.release.set()
        joined = first.result(timeout=PATIENCE)
    assert joined.waiting is second.waiting and queue.pending() == [second.waiting]
    assert second.waiting.asked == 2
    assert [line["event"] for line in lines(data_dir)].count("confirmation_requested") == 1


def test_a_call_whose_program_hung_up_while_its_plugin_was_held_makes_no_card_and_is_audited_cancelled(
        data_dir, stub_ha, clock, monkeypatch):
    """waitress says the program hung up (its response is not closed yet, so nothing cancels the task): once its
    plugins are done, the call ends before any card (docs/architecture.md, "A slow plugin holds nobody up").
    Before, it made the card and let go of it: the household was asked, until its expiry, for nobody."""
    hold_past_the_deadline(monkeypatch)
    held = Held("program:desk")
    queue = HouseholdQueue(executor_with(data_dir, stub_ha, clock, held=held))
    gone = threading.Event()
    asker = Asker("desk", token_id=DESK.token_id, present=lambda: not gone.is_set(), answer_url=DESK.answer_url,
                  patience=0.0)

    async def scenario() -> Any:
        call = asyncio.create_task(_call(queue, asker, LIST_ENTITIES, {}, _no_report, 15.0))
        try:
            assert await asyncio.to_thread(held.entered.wait, PATIENCE)
            gone.set()
        finally:
            held.release.set()
        return await asyncio.wait_for(call, PATIENCE)

    result = run_to_end(scenario())
    assert result.isError and queue.pending() == []
    assert [(line["event"], line["stage"]) for line in lines(data_dir)] == [("proposed", 1), ("cancelled", 3)]


def test_a_program_s_message_whose_program_hung_up_while_its_plugin_was_held_asks_the_household_nothing(
        data_dir, stub_ha, clock, monkeypatch):
    """The same for a program's conversation message (`HouseholdQueue.ask`): before, its card was made (and told
    `waiting` to the plugins: a phone rang) only to be withdrawn the moment its turn looked."""
    hold_past_the_deadline(monkeypatch)
    held = Held("program:desk")
    queue = HouseholdQueue(executor_with(data_dir, stub_ha, clock, held=held))
    gone = threading.Event()
    with ThreadPoolExecutor(max_workers=1) as pool:
        asked = pool.submit(queue.ask, "desk", LIST_ENTITIES, {}, present=lambda: not gone.is_set(),
                            token_id=DESK.token_id)
        try:
            assert held.entered.wait(PATIENCE)
            gone.set()
        finally:
            held.release.set()
        with pytest.raises(ConfirmationInvalid):
            asked.result(timeout=PATIENCE)
    assert queue.pending() == []
    assert [(line["event"], line["stage"]) for line in lines(data_dir)] == [("proposed", 1), ("cancelled", 3)]
