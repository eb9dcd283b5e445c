"""on_card (issue 30): the household's plugins are told each card's life, waiting, allowed, denied, expired and
withdrawn, in order, for the conversation page's cards and the household queue's (MCP programs); they get the
card's title and where it reads, never the arguments, and never hold a card up."""

from __future__ import annotations

import json
import threading
from typing import Any

import pytest

from console_ha.answers.card_events import StageHookRunner
from console_ha.answers.household_queue import Asker, HouseholdQueue
from console_ha.capabilities.cards import Card
from console_ha.capabilities.executor import Proposal
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.console import Console, ConsoleOptions
from console_ha.conversation import ConversationService, ModelSettings, OpenAICompatibleModel, function_name
from console_ha.conversation.activity import summarise
from console_ha.conversation.conversations import ConversationStore
from console_ha.hooks import hookimpl
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.audit import AuditLog
from console_ha.store.plugin_switches import PluginSwitches
from tests.fake_model import text, tool_call
from tests.household_cards import withdraw
from tests.moving_clock import PATIENCE
from tests.seed import seed_settings

HISTORY = function_name(GET_HISTORY)
ENTITY = "sensor.living_room_temperature"
HISTORY_ARGS = {"entity_id": ENTITY, "period": "day"}
DESK = Asker("desk", token_id="0123456789abcdef")
CARD_KEYS = {"title", "title_in_language", "language", "capability", "instance", "expires_at"}


class Watcher:
    """Keeps every on_card it is told of, in order."""

    def __init__(self) -> None:
        self.told: list[tuple[str, dict[str, Any], str]] = []

    @hookimpl
    def on_card(self, event, card, principal):
        self.told.append((event, card, principal))


def runner(data_dir, language: str = "en", **given: object) -> StageHookRunner:
    plugins = Plugins(PluginSwitches(data_dir))
    for name, plugin in given.items():
        plugins.register(plugin, name)
    return StageHookRunner(plugins, AuditLog(data_dir), language=lambda: language)


def test_the_conversation_page_s_cards_are_told_in_order_waiting_allowed_denied_withdrawn_expired(
        configured, data_dir, executor, model, clock):
    watcher = Watcher()
    hooks = runner(data_dir, watcher=watcher)
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=5)),
                                  hooks=hooks)
    model.script(tool_call(HISTORY, HISTORY_ARGS), text("21 °C."), tool_call(HISTORY, HISTORY_ARGS), text("Denied."),
                 tool_call(HISTORY, HISTORY_ARGS), tool_call(HISTORY, HISTORY_ARGS), tool_call(HISTORY, HISTORY_ARGS))
    first = service.send(None, "how warm?")
    assert first.pending_confirmation is not None
    service.confirm(first.conversation_id, first.pending_confirmation.token, True)
    second = service.send(None, "and now?")
    assert second.pending_confirmation is not None
    service.confirm(second.conversation_id, second.pending_confirmation.token, False)
    third = service.send(None, "and now?")
    service.send(third.conversation_id, "never mind, something else")  # withdraws the third card
    clock.now += 301
    service.transcript(third.conversation_id)  # the page looks after its expiry
    service.transcript(third.conversation_id)  # and again: said once
    hooks.settled()
    assert [(event, principal) for event, _, principal in watcher.told] == [
        ("waiting", "household"), ("allowed", "household"), ("waiting", "household"), ("denied", "household"),
        ("waiting", "household"), ("withdrawn", "household"), ("waiting", "household"), ("expired", "household")]
    card = watcher.told[0][1]
    assert set(card) == CARD_KEYS
    assert (card["capability"], card["instance"], card["language"]) == (GET_HISTORY, "home", "en")
    assert card["title"] == card["title_in_language"] == first.pending_confirmation.card.title
    assert card["expires_at"] == first.pending_confirmation.expires_at
    assert ENTITY not in json.dumps([card for _, card, _ in watcher.told])


def test_the_household_queue_s_cards_are_told_in_order_as_the_program_s(data_dir, queue_executor, clock):
    watcher = Watcher()
    hooks = runner(data_dir, watcher=watcher)
    queue = HouseholdQueue(queue_executor, hooks=hooks)
    allowed = queue.call(DESK, GET_HISTORY, HISTORY_ARGS).waiting
    queue.answer(allowed.token, True)
    queue.collect(allowed)
    denied = queue.call(DESK, GET_HISTORY, {**HISTORY_ARGS, "period": "week"}).waiting
    queue.answer(denied.token, False)
    queue.call(DESK, GET_HISTORY, {**HISTORY_ARGS, "period": "hour"})
    clock.now += 3600
    queue.pending()  # a page's look ends it at its expiry
    withdrawn = queue.call(DESK, GET_HISTORY, HISTORY_ARGS).waiting
    withdraw(queue, withdrawn)
    hooks.settled()
    assert [(event, principal) for event, _, principal in watcher.told] == [
        ("waiting", "program:desk"), ("allowed", "program:desk"), ("waiting", "program:desk"),
        ("denied", "program:desk"), ("waiting", "program:desk"), ("expired", "program:desk"),
        ("waiting", "program:desk"), ("withdrawn", "program:desk")]
    titles = [card["title"] for _, card, _ in watcher.told]
    assert titles[:2] == [allowed.proposal.card.title] * 2 and titles[-1] == withdrawn.proposal.card.title
    assert all(set(card) == CARD_KEYS and ENTITY not in json.dumps(card) for _, card, _ in watcher.told)


def test_a_held_read_told_allowed_is_not_told_again_when_its_program_comes_back(data_dir, queue_executor):
    watcher = Watcher()
    hooks = runner(data_dir, watcher=watcher)
    queue = HouseholdQueue(queue_executor, hooks=hooks)
    first = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    queue.detach(first.waiting, first.attachment)  # its program returned early
    queue.answer(first.waiting.token, True)  # held for its next call
    queue.collect(queue.call(DESK, GET_HISTORY, HISTORY_ARGS).waiting)
    hooks.settled()
    assert [event for event, _, _ in watcher.told] == ["waiting", "allowed"]


def test_the_card_s_title_is_handed_in_the_household_s_language_too(data_dir, queue_executor):
    watcher = Watcher()
    hooks = runner(data_dir, "fr", watcher=watcher)
    waiting = HouseholdQueue(queue_executor, hooks=hooks).ask("desk", GET_HISTORY, HISTORY_ARGS)
    hooks.settled()
    ((_, card, _),) = watcher.told
    assert card["language"] == "fr" and card["title"] == waiting.proposal.card.title
    assert card["title_in_language"] != card["title"]


def test_a_slow_or_broken_on_card_never_holds_a_card_up_and_is_recorded(data_dir, queue_executor):
    """Told by order: the household's answer returns before the plugin held by the card's first event is told the
    second; each event's slow and broken implementations are skipped and audited."""
    order: list[str] = []
    release = threading.Event()

    class Slow:
        @hookimpl
        def on_card(self, event):
            order.append(event)
            release.wait(PATIENCE)  # held past its deadline until the test ends

    class Broken:
        @hookimpl
        def on_card(self):
            raise RuntimeError("broken plugin")

    plugins = Plugins(PluginSwitches(data_dir))
    plugins.register(Slow(), "slow")
    plugins.register(Broken(), "broken")
    hooks = StageHookRunner(plugins, AuditLog(data_dir), hook_seconds=0.05)
    queue = HouseholdQueue(queue_executor, hooks=hooks)
    try:
        waiting = queue.ask("desk", GET_HISTORY, HISTORY_ARGS)
        queue.answer(waiting.token, False)
        order.append("answered")
        hooks.settled()
    finally:
        release.set()
        hooks.close()
    assert order.index("answered") < order.index("denied")  # never told on the answering thread
    skipped = [(e["plugin"], e["hook"], e["capability"], e["client"]) for e in AuditLog(data_dir).events()
               if e["event"] == "plugin_skipped"]
    assert skipped == [(plugin, "on_card", GET_HISTORY, "desk") for _ in ("waiting", "denied")
                       for plugin in ("broken", "slow")]


def test_a_plugin_turned_on_while_a_program_s_card_waits_is_not_told_its_end_alone(data_dir, queue_executor):
    """Each card is told `waiting` first: a plugin turned on after a card was made (it was off, so not told it
    waits) is told nothing of that card, not an end alone; the next card it is told whole."""
    watcher = Watcher()
    hooks = runner(data_dir, watcher=watcher)
    queue = HouseholdQueue(queue_executor, hooks=hooks)
    assert hooks.plugins is not None
    hooks.plugins.set_on("watcher", False)
    unseen = queue.ask("desk", GET_HISTORY, HISTORY_ARGS)
    hooks.plugins.set_on("watcher", True)
    queue.answer(unseen.token, False)
    queue.answer(queue.ask("desk", GET_HISTORY, HISTORY_ARGS).token, False)
    hooks.settled()
    assert [event for event, _, _ in watcher.told] == ["waiting", "denied"]


def test_a_plugin_turned_on_while_a_page_s_card_waits_is_not_told_its_end_alone(
        configured, data_dir, executor, model):
    watcher = Watcher()
    hooks = runner(data_dir, watcher=watcher)
    store = ConversationStore(max_conversations=1, closed=hooks.closed)
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=5)),
                                  hooks=hooks, store=store)
    assert hooks.plugins is not None
    hooks.plugins.set_on("watcher", False)
    model.script(tool_call(HISTORY, HISTORY_ARGS), tool_call(HISTORY, HISTORY_ARGS), tool_call(HISTORY, HISTORY_ARGS))
    first = service.send(None, "how warm?")
    hooks.plugins.set_on("watcher", True)
    service.send(first.conversation_id, "and now?")  # withdraws the first card, makes a second
    service.send(None, "something else")  # pushes that conversation out, its second card open
    hooks.settled()
    assert [event for event, _, _ in watcher.told] == ["waiting", "withdrawn", "waiting"]


def test_with_no_plugin_no_thread_is_made(data_dir, queue_executor):
    hooks = runner(data_dir)
    before = threading.active_count()
    queue = HouseholdQueue(queue_executor, hooks=hooks)
    queue.answer(queue.ask("desk", GET_HISTORY, HISTORY_ARGS).token, False)
    assert threading.active_count() == before


def test_with_no_plugin_the_conversation_page_s_card_takes_no_look_at_the_confirmation_store(
        configured, data_dir, executor, model, monkeypatch):
    """A read of the household's page with no plugin costs what it did before the hooks (docs/benchmarks.md): the
    look at the store for its expiry (a lock) is only for the plugins' worker. Before, every card took it."""
    looked: list[str] = []
    peek = executor.confirmations.peek

    def looking(token: str, conversation_id: str) -> object:
        looked.append(token)
        return peek(token, conversation_id)

    monkeypatch.setattr(executor.confirmations, "peek", looking)
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=5)),
                                  hooks=runner(data_dir))
    model.script(tool_call(HISTORY, HISTORY_ARGS))
    assert service.send(None, "how warm?").pending_confirmation is not None
    assert looked == []


def test_console_open_hands_the_same_plugins_to_the_conversation_and_the_household_queue(data_dir, stub_ha, model):
    """The composition root: a Console's own plugins are told of the household page's cards and a program's."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": [ENTITY]},
                  token=stub_ha.token)
    watcher = Watcher()
    plugins = Plugins(PluginSwitches(data_dir))
    plugins.register(watcher, "watcher")
    environment = {"CONSOLE_HA_LLM_URL": model.url, "CONSOLE_HA_LLM_MODEL": "m", "CONSOLE_HA_LLM_TIMEOUT": 5}
    console = Console.open(data_dir, ConsoleOptions(plugins=plugins, model_environment=lambda: environment))
    assert console.plugins is plugins
    model.script(tool_call(HISTORY, HISTORY_ARGS))
    console.conversation.send(None, "how warm?")
    console.household.call(DESK, GET_HISTORY, HISTORY_ARGS)
    console.stage_hooks.settled()
    assert [(event, principal) for event, _, principal in watcher.told] == [
        ("waiting", "household"), ("waiting", "program:desk")]


@pytest.mark.parametrize("expired", [False, True])
def test_a_card_a_restart_closed_is_told_withdrawn_or_expired_once_with_its_card(data_dir, stub_ha, model, expired):
    """The conversation store closes a card left open at start (the chat says so): the plugins, told it was
    waiting, are told it ended; they were never told before."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": [ENTITY]},
                  token=stub_ha.token)
    environment = {"CONSOLE_HA_LLM_URL": model.url, "CONSOLE_HA_LLM_MODEL": "m", "CONSOLE_HA_LLM_TIMEOUT": 5}

    def opened(watcher: Watcher) -> Console:
        plugins = Plugins(PluginSwitches(data_dir))
        plugins.register(watcher, "watcher")
        return Console.open(data_dir, ConsoleOptions(plugins=plugins, model_environment=lambda: environment))

    before = Watcher()
    console = opened(before)
    model.script(tool_call(HISTORY, HISTORY_ARGS))
    paused = console.conversation.send(None, "how warm?")
    assert paused.pending_confirmation is not None
    console.stage_hooks.settled()
    [(_, waiting, _)] = before.told
    if expired:  # the Console was down past the card's expiry
        kept = data_dir.root / "conversations" / f"{paused.conversation_id}.json"
        record = json.loads(kept.read_text())
        record["open"]["card"]["expires_at"] = "2026-01-01T00:00:00Z"
        kept.write_text(json.dumps(record))
    after = Watcher()
    restarted = opened(after)
    restarted.stage_hooks.settled()
    ended = "expired" if expired else "withdrawn"
    assert after.told == [(ended, {**waiting, "expires_at": "2026-01-01T00:00:00Z"} if expired else waiting,
                           "household")]
    again = Watcher()
    opened(again).stage_hooks.settled()  # the file now says the card is closed: told once
    assert again.told == []


def test_a_console_closed_with_cards_waiting_tells_nothing_more_and_the_next_start_tells_the_page_s_only(
        data_dir, stub_ha, model):
    """docs/plugins.md, "Ends with the Console": a program's card still waiting at the close is never told its end
    (the queue is in memory; its program's call ends with the server), the household page's is told `withdrawn`
    at the next start, from its conversation's file."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": [ENTITY]},
                  token=stub_ha.token)
    environment = {"CONSOLE_HA_LLM_URL": model.url, "CONSOLE_HA_LLM_MODEL": "m", "CONSOLE_HA_LLM_TIMEOUT": 5}

    def opened(watcher: Watcher) -> Console:
        plugins = Plugins(PluginSwitches(data_dir))
        plugins.register(watcher, "watcher")
        return Console.open(data_dir, ConsoleOptions(plugins=plugins, model_environment=lambda: environment))

    before = Watcher()
    console = opened(before)
    model.script(tool_call(HISTORY, HISTORY_ARGS))
    console.conversation.send(None, "how warm?")
    program_s = console.household.call(DESK, GET_HISTORY, HISTORY_ARGS).waiting
    console.stage_hooks.settled()
    console.close()
    console.household.answer(program_s.token, False)  # a front end still serving after the close: told nothing
    assert [(event, principal) for event, _, principal in before.told] == [
        ("waiting", "household"), ("waiting", "program:desk")]
    after = Watcher()
    restarted = opened(after)
    try:
        restarted.stage_hooks.settled()
        assert [(event, principal) for event, _, principal in after.told] == [("withdrawn", "household")]
    finally:
        restarted.close()


def test_a_card_answered_the_moment_it_is_asked_is_still_told_waiting_first(data_dir, queue_executor):
    """`waiting` is told under the queue's lock, as every later move is: an answer (or a program's cancel) on
    another thread the moment the card is asked, before its `waiting` was handed on, is told after it."""
    told: list[str] = []
    tokens: list[str] = []
    entered, go = threading.Event(), threading.Event()

    class Runner(StageHookRunner):
        def card(self, event, proposal, principal, *, client=None):
            if event == "waiting":
                tokens.append(proposal.token)
                entered.set()
                go.wait(5)  # a hang guard only: the test sets it
            told.append(event)
            return True  # handed to a plugin

    queue = HouseholdQueue(queue_executor, hooks=Runner(None, AuditLog(data_dir)))
    asked: list[Any] = []
    asking = threading.Thread(target=lambda: asked.append(queue.ask("desk", GET_HISTORY, HISTORY_ARGS)))
    asking.start()
    assert entered.wait(5)
    answering = threading.Thread(target=lambda: queue.answer(tokens[0], False))  # `waiting` is being handed on
    answering.start()
    answering.join(0.5)  # with `waiting` told outside the lock, the denial is told now; else it waits for it
    go.set()
    asking.join(5)
    answering.join(5)
    assert told == ["waiting", "denied"]


def test_a_card_whose_conversation_is_evicted_is_told_withdrawn_once(configured, data_dir, executor, model):
    """Its conversation gone (past the store's count), the card can never be answered: the plugins, told it was
    waiting, are told it ended. Before, they never were."""
    watcher = Watcher()
    hooks = runner(data_dir, watcher=watcher)
    store = ConversationStore(max_conversations=1, closed=hooks.closed)
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=5)),
                                  hooks=hooks, store=store)
    model.script(tool_call(HISTORY, HISTORY_ARGS), text("Hello."), text("Hello again."))
    paused = service.send(None, "how warm?")
    assert paused.pending_confirmation is not None
    service.send(None, "something else")  # a new conversation pushes the first out
    service.send(None, "and another")  # and that one, which had no card, tells nothing
    hooks.settled()
    [(_, waiting, _), *ended] = watcher.told
    assert ended == [("withdrawn", waiting, "household")]
    assert waiting["title"] == paused.pending_confirmation.card.title


def test_a_broken_on_card_is_recorded_under_the_home_assistant_its_card_reads(data_dir):
    """With several Home Assistants, Activity shows each line under its own: a skipped on_card of a card of the
    cabin's was written with no instance, so it showed under `home`, and not at all when the cabin's were chosen."""
    class Broken:
        @hookimpl
        def on_card(self):
            raise RuntimeError("broken plugin")

    hooks = runner(data_dir, broken=Broken())
    card = Proposal("t" * 43, GET_HISTORY, {**HISTORY_ARGS, "instance": "cabin"},
                    Card(title="Cabin: Read the history of Living room temperature?", body=""), "2026-12-05T08:00:00Z")
    hooks.card("waiting", card, "household")
    hooks.settled()
    [line] = AuditLog(data_dir).events()
    assert (line["event"], line["plugin"], line["hook"], line.get("instance")) == (
        "plugin_skipped", "broken", "on_card", "cabin")
    names = {"home": "Home", "cabin": "Cabin"}
    [shown] = summarise(AuditLog(data_dir).events(), names=names, instance="cabin").latest
    assert shown.instance_name == "Cabin"
    assert summarise(AuditLog(data_dir).events(), names=names, instance="home").latest == []
