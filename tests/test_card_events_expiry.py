"""on_card (issue 30) is told a card's expiry when it happens, with nobody looking: the plugins' worker wakes at
the next card's expiry (one thread per Console, no thread per card) and ends the cards due, each told `expired`
once whatever races (an Allow at the expiry's instant, a call's own sweep, the page's look).

Each expiry is read off the test's clock, moved by hand: the worker reads it again at least every LOOK_SECONDS,
and a sweeper of the test's own, watched after the front end's, says when the worker has looked (an event)."""

from __future__ import annotations

import threading
from collections.abc import Callable
from typing import Any

import pytest

from console_ha.answers.card_events import StageHookRunner, Sweeper
from console_ha.answers.household_queue import Asker, HouseholdQueue
from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.conversation import ConversationService, ModelSettings, OpenAICompatibleModel, function_name
from console_ha.conversation.conversations import ConversationStore
from console_ha.errors import ConfirmationInvalid
from console_ha.hooks import hookimpl
from console_ha.plugins.plugin_registry import Plugins
from console_ha.store.audit import AuditLog
from console_ha.store.plugin_switches import PluginSwitches
from tests.executors import executor_over
from tests.fake_model import text, tool_call
from tests.moving_clock import wait_for
from tests.seed import seed_settings

HISTORY = function_name(GET_HISTORY)
ENTITY = "sensor.living_room_temperature"
HISTORY_ARGS = {"entity_id": ENTITY, "period": "day"}
DESK = Asker("desk", token_id="0123456789abcdef")


class Watcher:
    """Keeps every on_card event it is told of, in order."""

    def __init__(self) -> None:
        self.told: list[tuple[str, str]] = []

    @hookimpl
    def on_card(self, event, card):
        self.told.append((event, card["title"]))

    def events(self) -> list[str]:
        return [event for event, _ in self.told]


class Looks:
    """A sweeper of the test's own, watched after the front end's: each pass of the worker counts one look."""

    def __init__(self, clock: Callable[[], float]) -> None:
        self.looks = 0
        self._clock = clock
        self._lock = threading.Lock()

    def sweeper(self) -> Sweeper:
        return Sweeper(self._clock, lambda: self._clock(), self._look)  # always due: looked at in every pass

    def _look(self) -> None:
        with self._lock:
            self.looks += 1

    def count(self) -> int:
        with self._lock:
            return self.looks

    def another_pass(self) -> None:
        """Wait until the worker has made a whole pass over the sweepers after this moment."""
        seen = self.count()
        wait_for(lambda: self.count() >= seen + 2, "a whole pass of the plugins' worker")


def runner(data_dir: Any, **given: object) -> StageHookRunner:
    plugins = Plugins(PluginSwitches(data_dir))
    for name, plugin in given.items():
        plugins.register(plugin, name)
    return StageHookRunner(plugins, AuditLog(data_dir))


@pytest.fixture
def hooks(data_dir):
    made: list[StageHookRunner] = []

    def make(**given: object) -> StageHookRunner:
        made.append(runner(data_dir, **given))
        return made[-1]

    yield make
    for each in made:
        each.close()


def test_a_program_s_card_nobody_looks_at_is_told_expired_at_its_expiry(hooks, queue_executor, clock):
    watcher = Watcher()
    runner_ = hooks(watcher=watcher)
    queue = HouseholdQueue(queue_executor, hooks=runner_)
    waiting = queue.call(DESK, GET_HISTORY, HISTORY_ARGS).waiting
    runner_.settled()
    assert watcher.events() == ["waiting"]
    clock.now = waiting.deadline - 0.001
    looks = Looks(clock)
    runner_.watch(looks.sweeper())
    looks.another_pass()
    assert watcher.events() == ["waiting"]  # not before its time
    clock.now = waiting.deadline
    wait_for(lambda: watcher.events() == ["waiting", "expired"], "the expiry told with nobody looking")
    assert watcher.told[1][1] == waiting.proposal.card.title
    queue.pending()  # a page's look after it, and a late Allow: told nothing more
    with pytest.raises(ConfirmationInvalid):
        queue.answer(waiting.token, True)
    looks.another_pass()
    runner_.settled()
    assert watcher.events() == ["waiting", "expired"]


def test_an_allow_at_the_expiry_s_instant_is_too_late_and_the_expiry_is_told_once(hooks, queue_executor, clock):
    watcher = Watcher()
    runner_ = hooks(watcher=watcher)
    queue = HouseholdQueue(queue_executor, hooks=runner_)
    waiting = queue.call(DESK, GET_HISTORY, HISTORY_ARGS).waiting
    looks = Looks(clock)
    runner_.watch(looks.sweeper())
    clock.now = waiting.deadline
    with pytest.raises(ConfirmationInvalid):  # the Allow and the worker race for the same instant: one ends it
        queue.answer(waiting.token, True)
    looks.another_pass()
    runner_.settled()
    assert watcher.events() == ["waiting", "expired"]


def test_an_allow_just_before_the_expiry_is_told_and_the_expiry_is_not(hooks, queue_executor, clock):
    watcher = Watcher()
    runner_ = hooks(watcher=watcher)
    queue = HouseholdQueue(queue_executor, hooks=runner_)
    call = queue.call(DESK, GET_HISTORY, HISTORY_ARGS)
    clock.now = call.waiting.deadline - 0.001
    queue.answer(call.waiting.token, True)
    queue.detach(call.waiting, call.attachment)  # held for its program's next call, which never comes
    looks = Looks(clock)
    runner_.watch(looks.sweeper())
    clock.now += 1
    looks.another_pass()  # the worker abandoned the held read at its expiry: no on_card event for that
    runner_.settled()
    assert watcher.events() == ["waiting", "allowed"]
    assert queue.pending() == []


def test_the_conversation_page_s_card_is_told_expired_with_no_page_open(
        hooks, configured, executor, model, clock):
    watcher = Watcher()
    runner_ = hooks(watcher=watcher)
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=5)),
                                  hooks=runner_)
    model.script(tool_call(HISTORY, HISTORY_ARGS))
    turn = service.send(None, "how warm?")
    assert turn.pending_confirmation is not None
    runner_.settled()
    clock.now += 301
    wait_for(lambda: watcher.events() == ["waiting", "expired"], "the page's card told expired with no page open")
    # The chat says so too, before any page reads it; a look and a late answer tell nothing more.
    assert service.expiry_said(turn.conversation_id, turn.pending_confirmation)
    service.transcript(turn.conversation_id)
    with pytest.raises(ConfirmationInvalid):
        service.confirm(turn.conversation_id, turn.pending_confirmation.token, True)
    looks = Looks(clock)
    runner_.watch(looks.sweeper())
    looks.another_pass()
    runner_.settled()
    assert watcher.events() == ["waiting", "expired"]


def test_a_card_answered_in_time_on_the_page_is_not_told_expired_later(hooks, configured, executor, model, clock):
    watcher = Watcher()
    runner_ = hooks(watcher=watcher)
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=5)),
                                  hooks=runner_)
    model.script(tool_call(HISTORY, HISTORY_ARGS), text("Not allowed."))
    turn = service.send(None, "how warm?")
    assert turn.pending_confirmation is not None
    service.confirm(turn.conversation_id, turn.pending_confirmation.token, False)
    looks = Looks(clock)
    runner_.watch(looks.sweeper())
    clock.now += 301
    looks.another_pass()
    runner_.settled()
    assert watcher.events() == ["waiting", "denied"]


def test_a_page_s_card_whose_conversation_was_pushed_out_is_told_expired_all_the_same(
        hooks, configured, data_dir, executor, model, clock):
    watcher = Watcher()
    runner_ = hooks(watcher=watcher)
    store = ConversationStore(max_conversations=1)
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=5)),
                                  hooks=runner_, store=store)
    model.script(tool_call(HISTORY, HISTORY_ARGS), text("Hello."))
    first = service.send(None, "how warm?")
    second = service.send(None, "hello")  # a new conversation pushes the first out, its card open
    assert store.peek(first.conversation_id) is None and second.reply == "Hello."
    clock.now += 301
    wait_for(lambda: watcher.events() == ["waiting", "expired"], "the pushed-out card told expired")
    assert [e["event"] for e in AuditLog(data_dir).events()][-1] == "expired"  # Activity said it first


def test_a_page_s_card_told_withdrawn_when_its_conversation_was_pushed_out_is_not_told_expired_too(
        hooks, configured, data_dir, executor, model, clock):
    """As the Console builds its store (`closed=hooks.closed`): the eviction tells the card's end; its expiry later
    tells nothing more. Before, the worker still swept it by its conversation's id and told `expired` too."""
    watcher = Watcher()
    runner_ = hooks(watcher=watcher)
    store = ConversationStore(max_conversations=1, closed=runner_.closed)
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=5)),
                                  hooks=runner_, store=store)
    model.script(tool_call(HISTORY, HISTORY_ARGS), text("Hello."))
    service.send(None, "how warm?")
    service.send(None, "hello")  # a new conversation pushes the first out, its card open
    runner_.settled()
    assert watcher.events() == ["waiting", "withdrawn"]
    clock.now += 301
    looks = Looks(clock)
    runner_.watch(looks.sweeper())
    looks.another_pass()
    runner_.settled()
    assert watcher.events() == ["waiting", "withdrawn"]
    assert [e["event"] for e in AuditLog(data_dir).events()][-1] == "expired"  # Activity still records its expiry


def test_the_worker_s_look_does_not_count_as_the_household_using_a_conversation(
        hooks, configured, executor, model, clock):
    watcher = Watcher()
    runner_ = hooks(watcher=watcher)
    store = ConversationStore(max_conversations=2)
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=5)),
                                  hooks=runner_, store=store)
    model.script(tool_call(HISTORY, HISTORY_ARGS), text("Hello."), text("Hi again."))
    older = service.send(None, "how warm?")  # its card expires while nobody looks
    newer = service.send(None, "hello")
    clock.now += 301
    wait_for(lambda: watcher.events() == ["waiting", "expired"], "the expiry told")
    service.send(None, "a third")  # pushes out the least recently used: the older, the worker's look not counted
    assert store.peek(older.conversation_id) is None and store.peek(newer.conversation_id) is not None


def test_on_the_real_clock_the_worker_wakes_by_itself_at_the_expiry(hooks, data_dir, stub_ha):
    """No clock moved by hand: a card of 50 ms is told expired by the worker's own wait (patience, not a bound)."""
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": [ENTITY]},
                  token=stub_ha.token)
    watcher = Watcher()
    runner_ = hooks(watcher=watcher)
    queue = HouseholdQueue(executor_over(data_dir, confirmations=ConfirmationStore(ttl=0.05)), hooks=runner_)
    queue.ask("desk", GET_HISTORY, HISTORY_ARGS)
    wait_for(lambda: watcher.events() == ["waiting", "expired"], "the expiry told on the real clock")
