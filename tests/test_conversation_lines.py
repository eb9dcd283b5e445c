"""Issue 21: the Console's own lines in a conversation, a card withdrawn by a new message, the recent conversations."""

from __future__ import annotations

import json

import pytest

from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.conversation import ConversationService, ModelSettings, OpenAICompatibleModel, function_name
from console_ha.conversation.activity import WITHDRAWN_BY_A_NEW_MESSAGE, summarise
from console_ha.conversation.conversations import ConversationStore
from console_ha.store.audit import AuditLog
from console_ha.words import CHAT_WORDS
from tests.conftest import CONVERSATION_ALLOWED
from tests.fake_model import answer_from_tool_result, status, text, tool_call, tool_calls
from tests.seed import seed_settings

ALLOWED = CONVERSATION_ALLOWED  # what `configured` and `chat` allow (conftest.py)
LIST = function_name(LIST_ENTITIES)
HISTORY = "home_assistant__get_history"
TITLE = "Read your Home Assistant devices?"


@pytest.fixture
def service(data_dir, executor, model) -> ConversationService:
    return ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "fake-model", timeout=5)))


def audit(data_dir) -> list[str]:
    return [json.loads(line)["event"] for line in data_dir.audit_log.read_text().splitlines()]


def notes(service: ConversationService, conversation_id: str) -> list[str]:
    found = service.transcript(conversation_id)
    assert found is not None
    return [m["content"] for m in found[0] if m["role"] == "note"]


def test_a_new_message_while_a_card_waits_withdraws_it_says_so_and_activity_records_it_at_once(
        data_dir, configured, service, model):
    model.script(tool_call(LIST, {}), text("Sure, what else?"))
    paused = service.send(None, "what's on?")
    assert paused.pending_confirmation is not None
    answered = service.send(paused.conversation_id, "never mind, is the door shut?")
    assert answered.reply == "Sure, what else?"
    assert "cancelled" in audit(data_dir)
    assert "expired" not in audit(data_dir)
    assert notes(service, paused.conversation_id) == [
        f"{TITLE} You asked something else, so the Console withdrew this question and nothing was read."]
    # The old card is gone: its token runs nothing.
    with pytest.raises(Exception) as caught:
        service.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
    assert getattr(caught.value, "code", None) == "CONFIRMATION_INVALID"
    assert configured.requests == []
    latest = summarise(AuditLog(data_dir).events()).latest
    assert latest[0].words == WITHDRAWN_BY_A_NEW_MESSAGE  # the page's words, the household's own page


def test_a_card_whose_time_had_come_is_said_expired_not_withdrawn(data_dir, configured, service, model, clock):
    model.script(tool_call(LIST, {}), text("Asked again."))
    paused = service.send(None, "what's on?")
    clock.now += 301
    service.send(paused.conversation_id, "and now?")
    assert notes(service, paused.conversation_id) == [
        f"{TITLE} This question expired before it was answered, so nothing was read."]
    assert "cancelled" not in audit(data_dir) and "expired" in audit(data_dir)


def test_a_refused_read_gets_the_console_s_own_line_beside_the_model_s_reply(configured, service, model):
    model.script(tool_call(HISTORY, {"entity_id": "lock.front_door", "period": "day"}),
                 text("I could not read that."))
    done = service.send(None, "is the door locked?")
    found = service.transcript(done.conversation_id)
    assert found is not None
    assert [(m["role"], m["content"]) for m in found[0]] == [
        ("user", "is the door locked?"),
        ("note", CHAT_WORDS["ENTITY_NOT_ALLOWLISTED"]),
        ("assistant", "I could not read that."),
    ]


def test_a_denial_and_a_failure_each_get_their_line(configured, service, model):
    model.script(tool_call(LIST, {}), text("OK, I won't."), tool_call(LIST, {}), text("It failed."))
    paused = service.send(None, "what's on?")
    service.confirm(paused.conversation_id, paused.pending_confirmation.token, False)
    assert notes(service, paused.conversation_id) == [f"{TITLE} You did not allow it, so nothing was read."]
    again = service.send(paused.conversation_id, "please, now")
    configured.token = "revoked"  # Home Assistant refuses the stored token after the household allowed the read
    service.confirm(again.conversation_id, again.pending_confirmation.token, True)
    assert notes(service, again.conversation_id)[-1] == f"{TITLE} You allowed it. {CHAT_WORDS['HA_UNAUTHORIZED']}"


def test_the_console_s_lines_never_reach_the_model(configured, service, model):
    model.script(tool_call(LIST, {}), text("Fine."), text("Hello."))
    paused = service.send(None, "what's on?")
    service.confirm(paused.conversation_id, paused.pending_confirmation.token, False)
    service.send(paused.conversation_id, "hi")
    sent = json.dumps([r.messages for r in model.requests])
    assert "You did not allow" not in sent and '"console"' not in sent


def test_a_failed_model_after_a_withdrawal_leaves_the_card_withdrawn_and_the_message_to_send_again(
        configured, service, model):
    model.script(tool_call(LIST, {}), status(500))
    paused = service.send(None, "what's on?")
    with pytest.raises(Exception) as caught:
        service.send(paused.conversation_id, "something else")
    assert getattr(caught.value, "code", None) == "MODEL_UNAVAILABLE"
    found = service.transcript(paused.conversation_id)
    assert found is not None and found[1] is None  # no dead card left on the page
    assert [m["content"] for m in found[0] if m["role"] == "user"] == ["what's on?"]
    assert len(notes(service, paused.conversation_id)) == 1


def test_recent_lists_the_household_s_conversations_by_their_last_message_within_the_bound(clock):
    """Issue 25: reopening a conversation to read it does not move it up; a new message of the household does."""
    store = ConversationStore(max_conversations=3, clock=clock)
    made = []
    for n in range(4):
        conversation = store.create()
        conversation.messages.append({"role": "user", "content": f"question {n}"})
        conversation.touch()
        made.append(conversation)
    store.create()  # empty: nothing to reopen, not listed (and it evicts the oldest)
    store.create("program:abc").messages.append({"role": "user", "content": "a program's"})
    store.get(made[2].id)  # read again, written nothing
    assert [c.first_question() for c in store.recent()] == ["question 3", "question 2"]
    made[2].touch()
    assert [c.first_question() for c in store.recent()] == ["question 2", "question 3"]
    assert [c.first_question() for c in store.recent(limit=1)] == ["question 2"]


def test_several_calls_dropped_with_the_open_card_are_said_too(configured, service, model):
    model.script(tool_calls((LIST, {}, "a"),
                            (HISTORY, {"entity_id": "sensor.living_room_temperature", "period": "day"}, "b")),
                 answer_from_tool_result)
    paused = service.send(None, "everything?")
    model.script(text("OK."))
    service.send(paused.conversation_id, "no, stop")
    assert notes(service, paused.conversation_id)[-1] == (
        "The assistant's other reads for that question were not asked either.")


def test_the_household_s_pages_never_show_a_program_s_conversation(service: ConversationService) -> None:
    """A conversation belongs to whoever started it: its id on /conversation or the lines endpoint shows nothing."""
    from console_ha.answers.household_queue import Asker
    from console_ha.conversation.conversations import owner_of

    program = service.store.create(owner_of(Asker("script", "0123456789abcdef")))
    program.messages.append({"role": "user", "content": "what the program asked"})
    assert service.transcript(program.id) is None
    assert service.recent() == []


def test_a_card_that_expires_with_the_page_open_gets_its_line_when_the_conversation_is_read(
        data_dir, configured, service, model, clock):
    """No new message needed: the next read of the conversation after the expiry says it, once, and Activity
    has recorded "expired" by then (the page's script rereads the lines when its card's time comes)."""
    model.script(tool_call(LIST, {}), text("Asked again."))
    paused = service.send(None, "what's on?")
    assert paused.pending_confirmation is not None
    clock.now += 299
    assert notes(service, paused.conversation_id) == []  # still open: nothing said, nothing audited
    assert "expired" not in audit(data_dir)
    found = service.transcript(paused.conversation_id, open_only=True)
    assert found is not None and found[1] is not None
    clock.now += 2
    expired_line = f"{TITLE} This question expired before it was answered, so nothing was read."
    assert notes(service, paused.conversation_id) == [expired_line]
    assert audit(data_dir).count("expired") == 1
    for _ in range(3):  # said once, however often it is read
        assert notes(service, paused.conversation_id) == [expired_line]
    # The card stays the conversation's, to show expired; only an open one is given to the page's script.
    found = service.transcript(paused.conversation_id)
    assert found is not None and found[1] is not None and found[1].token == paused.pending_confirmation.token
    found = service.transcript(paused.conversation_id, open_only=True)
    assert found is not None and found[1] is None
    # A late answer is told it expired; a new message says nothing more about the old card.
    with pytest.raises(Exception) as caught:
        service.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
    assert getattr(caught.value, "detail", {}).get("reason") == "expired"
    service.send(paused.conversation_id, "and now?")
    assert notes(service, paused.conversation_id) == [expired_line]
    assert audit(data_dir).count("expired") == 1 and "cancelled" not in audit(data_dir)
    assert configured.requests == []


def test_a_running_turn_is_not_waited_for_when_the_lines_are_read(data_dir, configured, service, model, clock):
    """A reload must not wait behind a model that is still answering: the expiry is said by whoever holds the
    conversation (the turn), or at the next read."""
    model.script(tool_call(LIST, {}))
    paused = service.send(None, "what's on?")
    clock.now += 301
    conversation = service.store.get(paused.conversation_id)
    assert conversation is not None
    with conversation.lock:  # a turn in progress
        assert notes(service, paused.conversation_id) == []
    assert len(notes(service, paused.conversation_id)) == 1


def test_an_allowed_card_whose_names_changed_says_so_not_expired_and_the_turn_goes_on(
        data_dir, configured, service, model):
    """The approval covers the names the card showed: renamed while it was open, nothing is read, the chat says
    why in the household's words (never "expired"), and the model is told, so the turn ends rather than hangs."""
    model.script(tool_call(LIST, {}), text("The names changed; I will ask again."))
    paused = service.send(None, "what's on?")
    seed_settings(data_dir, {"entity_names": {"binary_sensor.front_door": "Back door"}})
    result = service.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
    assert result.pending_confirmation is None
    assert notes(service, paused.conversation_id) == [f"{TITLE} You allowed it. {CHAT_WORDS['CONFIRMATION_INVALID']}"]
    assert "names changed after you were asked" in CHAT_WORDS["CONFIRMATION_INVALID"]
    assert audit(data_dir)[-1] == "rejected" and configured.requests == []
    told = json.loads(model.requests[-1].last("tool")["content"])  # type: ignore[index]
    assert told["error"]["code"] == "CONFIRMATION_INVALID"
