"""The turn loop, driven from plain Python: a scripted model over real HTTP, a stub Home Assistant on loopback."""

from __future__ import annotations

import json
import logging
import threading
import time
from datetime import UTC, datetime
from functools import partial
from typing import Any

import pytest

from console_ha.capabilities.executor import Executor
from console_ha.capabilities.get_history import HISTORY_FIELD_MEANINGS
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.capabilities.registry import REGISTRY
from console_ha.conversation import (
    ConversationService,
    ConversationStore,
    ModelNotConfigured,
    ModelSettings,
    ModelUnavailable,
    OpenAICompatibleModel,
    capability_name,
    function_name,
    tool_definitions,
)
from console_ha.conversation.model import parse_reply
from console_ha.conversation.turn_loop import MAX_TOOL_CALLS_PER_MESSAGE, STOPPED_REPLY
from console_ha.secret import Secret
from console_ha.words import CHAT_EXPIRED
from tests.conftest import CONVERSATION_ALLOWED
from tests.executors import refusal
from tests.fake_model import (
    FakeModel,
    Hang,
    Raw,
    Trickle,
    TrickleChunkSize,
    answer_from_tool_result,
    status,
    text,
    tool_call,
    tool_calls,
    unused_loopback_url,
)
from tests.moving_clock import PATIENCE
from tests.seed import seed_settings

ALLOWED = CONVERSATION_ALLOWED  # what `configured` and `chat` allow (conftest.py)
NOT_ALLOWED = ["lock.front_door", "person.alex", "camera.driveway", "sensor.outdoor_humidity"]
LIST = function_name(LIST_ENTITIES)
HISTORY = function_name(GET_HISTORY)
HISTORY_ARGS = {"entity_id": "sensor.living_room_temperature", "period": "day"}
# The RFC-0018 criterion: one confirmation mechanism, exercised for both capabilities.
BOTH = [pytest.param(LIST, {}, id="list_entities"), pytest.param(HISTORY, HISTORY_ARGS, id="get_history")]


def make_service(data_dir, executor: Executor, fake: FakeModel | None, **kwargs) -> ConversationService:
    settings = ModelSettings((fake.url,), "fake-model", timeout=5) if fake else None
    return ConversationService(executor, OpenAICompatibleModel(settings),
                               **kwargs)


@pytest.fixture
def service(data_dir, executor, model) -> ConversationService:
    return make_service(data_dir, executor, model)


def tool_results(request) -> list[dict]:
    """The decoded tool messages the model was sent, in order."""
    return [json.loads(m["content"]) for m in request.messages if m["role"] == "tool"]


def audit(data_dir) -> list[tuple[str, str, str | None]]:
    path = data_dir.audit_log
    lines = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return [(e["event"], e["capability"], e.get("code")) for e in lines]


# --- the model adapter -------------------------------------------------------------------------

def test_tools_offer_each_capability_under_a_valid_function_name_with_its_schema():
    tools = tool_definitions()
    names = [t["function"]["name"] for t in tools]
    assert names[:2] == ["home_assistant__list_entities", "home_assistant__get_history"]
    assert names == [function_name(name) for name in REGISTRY]  # every registered capability, in its order
    for tool in tools:
        capability = REGISTRY[capability_name(tool["function"]["name"])]
        assert tool["type"] == "function"
        assert tool["function"]["parameters"] == capability.published_arguments_schema
        assert tool["function"]["description"] == capability.description
        assert "." not in tool["function"]["name"]


def test_an_unknown_function_name_passes_through_for_stage_1_to_refuse():
    assert capability_name("home_assistant__call_service") == "home_assistant__call_service"


def test_a_text_answer_is_the_reply_and_the_model_saw_the_system_prompt_tools_and_model_name(service, model):
    model.script(text("Hello! Ask me about your home."))
    result = service.send(None, "hello")
    assert result.to_dict() == {"conversation_id": result.conversation_id, "reply": "Hello! Ask me about your home.",
                                "pending_confirmation": None}
    (request,) = model.requests
    assert request.path == "/v1/chat/completions"
    assert request.body["model"] == "fake-model"
    # Nothing allowlisted answers issue 28's reads (a calendar, a list, a weather): they are not offered.
    assert request.body["tools"] == [t for t in tool_definitions()
                                     if REGISTRY[capability_name(t["function"]["name"])].answers_for is None]
    system = request.messages[0]
    assert system["role"] == "system"
    assert LIST in system["content"] and HISTORY in system["content"]
    assert "asks the household" in system["content"] and "allowlist" in system["content"]
    # One line per get_history field, worded as the result schema describes it.
    for field, meaning in HISTORY_FIELD_MEANINGS.items():
        assert f"\n- {field}: {meaning}" in system["content"]
    assert request.messages[1:] == [{"role": "user", "content": "hello"}]
    assert "Authorization" not in request.headers


def test_a_second_message_continues_the_same_conversation(service, model):
    model.script(text("First."), text("Second."))
    first = service.send(None, "one")
    second = service.send(first.conversation_id, "two")
    assert second.conversation_id == first.conversation_id
    assert [m["content"] for m in model.requests[1].messages[1:]] == ["one", "First.", "two"]


def test_the_api_key_is_sent_as_a_bearer_token_and_never_logged(data_dir, executor, model, caplog):
    caplog.set_level(logging.DEBUG)
    key = "sk-household-secret-123"
    settings = ModelSettings.from_mapping({"CONSOLE_HA_LLM_URL": model.url, "CONSOLE_HA_LLM_MODEL": "m",
                                           "CONSOLE_HA_LLM_API_KEY": key})
    assert key not in repr(settings)
    service = ConversationService(executor, OpenAICompatibleModel(settings))
    model.script(status(500), status(500))
    with pytest.raises(ModelUnavailable) as caught:
        service.send(None, "hi")
    assert model.requests[0].headers["Authorization"] == f"Bearer {key}"
    assert key not in caplog.text and key not in str(caught.value.to_dict())


@pytest.mark.parametrize("arguments", ['{"entity_id": "sensor.living_room_temperature", "period": "day"}',
                                       HISTORY_ARGS])
def test_arguments_may_come_as_json_text_or_as_an_object(arguments):
    raw = {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "a", "type": "function", "function": {"name": HISTORY, "arguments": arguments}}]}}]}
    reply = parse_reply(json.dumps(raw).encode())
    assert reply.tool_calls[0].arguments == HISTORY_ARGS
    assert reply.tool_calls[0].capability == GET_HISTORY


def test_a_tool_call_without_an_id_is_given_one():
    raw = {"choices": [{"message": {"content": "", "tool_calls": [{"function": {"name": LIST}}]}}]}
    reply = parse_reply(json.dumps(raw).encode())
    assert reply.tool_calls[0].id == "call_0"
    assert reply.message["tool_calls"][0]["id"] == "call_0"


# --- stages 1-3: refusals go back to the model -------------------------------------------------

REFUSALS = [
    pytest.param({}, "home_assistant__call_service", {"entity_id": "lock.front_door"}, "UNKNOWN_CAPABILITY", 1,
                 id="stage1-unknown"),
    pytest.param({}, HISTORY, {"entity_id": "sensor.living_room_temperature", "period": "year"},
                 "INVALID_ARGUMENTS", 2, id="stage2-invalid-period"),
    pytest.param({}, HISTORY, {"entity_id": "Living Room", "period": "day"}, "INVALID_ARGUMENTS", 2,
                 id="stage2-invalid-entity"),
    pytest.param({"enabled": False}, LIST, {}, "CAPABILITY_DISABLED", 3, id="stage3-disabled"),
    pytest.param({"base_url": ""}, LIST, {}, "CAPABILITY_NOT_CONFIGURED", 3, id="stage3-not-configured"),
    pytest.param({}, HISTORY, {"entity_id": "lock.front_door", "period": "day"}, "ENTITY_NOT_ALLOWLISTED", 3,
                 id="stage3-not-allowlisted"),
]


@pytest.mark.parametrize(("changes", "function", "arguments", "code", "stage"), REFUSALS)
def test_a_refusal_goes_back_to_the_model_as_a_tool_result_and_the_model_answers(
        data_dir, configured, service, model, changes, function, arguments, code, stage):
    if changes:
        seed_settings(data_dir, changes)
    model.script(tool_call(function, arguments, call_id="call_x"), answer_from_tool_result)
    result = service.send(None, "is the front door locked?")
    assert result.pending_confirmation is None
    assert result.reply == f"I could not read that: {code}."
    tool_message = model.requests[1].messages[-1]
    assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "call_x"
    error = json.loads(tool_message["content"])["error"]
    assert error["code"] == code and error["message"]
    assert configured.requests == []  # refused before anything reached Home Assistant
    assert ("rejected", REGISTRY[capability_name(function)].name if stage > 1 else "unknown", code) in audit(data_dir)


def test_not_allowlisted_refusal_reads_the_same_whether_or_not_the_entity_exists(configured, service, model):
    model.script(tool_call(HISTORY, {"entity_id": "lock.front_door", "period": "day"}), text("a"),
                 tool_call(HISTORY, {"entity_id": "lock.no_such_lock", "period": "day"}), text("b"))
    first = service.send(None, "q1")
    service.send(first.conversation_id, "q2")
    assert tool_results(model.requests[1])[-1] == tool_results(model.requests[3])[-1]


def test_a_tool_call_with_invalid_json_arguments_becomes_invalid_arguments_for_the_model(
        data_dir, configured, service, model):
    model.script(tool_call(HISTORY, '{"entity_id": "sensor.living_room_temperature", "period": '),
                 text("Sorry, let me try again later."))
    result = service.send(None, "how warm was it today?")
    assert result.reply == "Sorry, let me try again later."
    error = tool_results(model.requests[1])[-1]["error"]
    assert error["code"] == "INVALID_ARGUMENTS" and "JSON" in error["message"]
    replayed = model.requests[1].messages[-2]["tool_calls"][0]["function"]
    assert replayed == {"name": HISTORY, "arguments": "{}"}  # servers that re-parse history still accept it
    assert ("rejected", GET_HISTORY, "INVALID_ARGUMENTS") in audit(data_dir)


# --- stage 4: pause and resume, for both capabilities ------------------------------------------

@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_a_proposal_halts_the_round_with_a_pending_confirmation(configured, service, model, function, arguments):
    model.script(tool_call(function, arguments))
    result = service.send(None, "what's the temperature in the living room?")
    pending = result.to_dict()["pending_confirmation"]
    assert result.reply is None
    assert set(pending) == {"token", "capability", "arguments", "card", "expires_at"}
    assert pending["capability"] == capability_name(function)
    assert pending["arguments"] == arguments
    assert set(pending["card"]) == {"title", "body", "approve_label", "deny_label"}
    assert pending["card"]["approve_label"] == "Allow this once"
    assert datetime.fromisoformat(pending["expires_at"]) > datetime.now(UTC)
    assert len(model.requests) == 1 and configured.requests == []


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_approval_runs_the_read_and_gives_the_result_to_the_model(
        data_dir, configured, service, model, function, arguments):
    model.script(tool_call(function, arguments), answer_from_tool_result)
    paused = service.send(None, "what's the temperature in the living room?")
    result = service.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
    assert result.pending_confirmation is None
    assert "Living room temperature" in result.reply
    (tool_result,) = tool_results(model.requests[1])
    assert "error" not in tool_result
    assert tool_result.get("entities") or tool_result.get("entity_id") == "sensor.living_room_temperature"
    assert configured.requests  # the read did reach Home Assistant
    name = capability_name(function)
    assert [e for e in audit(data_dir) if e[1] == name] == [
        ("proposed", name, None), ("confirmation_requested", name, None), ("approved", name, None),
        ("executed", name, None)]


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_denial_gives_the_model_confirmation_denied_and_nothing_is_read(
        data_dir, configured, service, model, function, arguments):
    model.script(tool_call(function, arguments), answer_from_tool_result)
    paused = service.send(None, "q")
    result = service.confirm(paused.conversation_id, paused.pending_confirmation.token, False)
    assert result.reply == "I could not read that: CONFIRMATION_DENIED."
    assert tool_results(model.requests[1])[-1]["error"]["code"] == "CONFIRMATION_DENIED"
    assert configured.requests == []
    assert ("denied", capability_name(function), "CONFIRMATION_DENIED") in audit(data_dir)


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_a_replayed_token_is_confirmation_invalid_and_nothing_runs_again(
        configured, service, model, function, arguments):
    model.script(tool_call(function, arguments), text("Done."))
    paused = service.send(None, "q")
    token = paused.pending_confirmation.token
    service.confirm(paused.conversation_id, token, True)
    reads, asks = len(configured.requests), len(model.requests)
    for approve in (True, False):
        err = refusal(partial(service.confirm, paused.conversation_id, token, approve))
        assert (err.code, err.stage) == ("CONFIRMATION_INVALID", 4)
    assert (len(configured.requests), len(model.requests)) == (reads, asks)


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_an_expired_token_is_confirmation_invalid_nothing_runs_and_the_conversation_is_unchanged(
        data_dir, configured, service, model, clock, function, arguments):
    model.script(tool_call(function, arguments))
    paused = service.send(None, "q")
    before = service.transcript(paused.conversation_id)
    clock.now += 301
    err = refusal(lambda: service.confirm(paused.conversation_id, paused.pending_confirmation.token, True))
    assert err.code == "CONFIRMATION_INVALID" and err.detail["reason"] == "expired"
    assert configured.requests == [] and len(model.requests) == 1
    # Unchanged but for the Console's own line saying it expired (issue 21); the card stays, shown expired.
    after = service.transcript(paused.conversation_id)
    assert before is not None and after is not None and after[1] == before[1] is not None
    assert after[0] == [*before[0], {"role": "note", "content": CHAT_EXPIRED.format(title=before[1].card.title)}]
    assert ("expired", capability_name(function), "CONFIRMATION_INVALID") in audit(data_dir)


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_a_foreign_token_is_confirmation_invalid_and_does_not_burn_the_owner_s_card(
        configured, service, model, function, arguments):
    model.script(tool_call(function, arguments), tool_call(function, arguments), text("Yours."))
    mine = service.send(None, "mine")
    theirs = service.send(None, "theirs")
    err = refusal(lambda: service.confirm(theirs.conversation_id, mine.pending_confirmation.token, True))
    assert err.code == "CONFIRMATION_INVALID"
    assert configured.requests == []
    assert service.confirm(mine.conversation_id, mine.pending_confirmation.token, True).reply == "Yours."


@pytest.mark.parametrize("token", ["", "not-a-token", "ü" * 10])
def test_an_unknown_token_is_confirmation_invalid(configured, service, model, token):
    model.script(tool_call(LIST, {}))
    paused = service.send(None, "q")
    assert refusal(lambda: service.confirm(paused.conversation_id, token, True)).code == "CONFIRMATION_INVALID"


def test_a_confirmation_for_an_unknown_conversation_is_confirmation_invalid(service):
    assert refusal(lambda: service.confirm("no-such-conversation", "t", True)).code == "CONFIRMATION_INVALID"


@pytest.mark.parametrize(("function", "arguments"), BOTH)
def test_the_model_never_sees_the_token_the_access_token_or_entities_outside_the_allowlist(
        configured, service, model, function, arguments):
    model.script(tool_call(function, arguments), answer_from_tool_result)
    paused = service.send(None, "what's the temperature in the living room?")
    service.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
    seen = model.seen()
    assert "sensor.living_room_temperature" in seen  # the approved result did arrive
    assert paused.pending_confirmation.token not in seen
    assert configured.token not in seen
    for entity_id in NOT_ALLOWED:
        assert entity_id not in seen
    assert "Alex" not in seen and "latitude" not in seen


# --- several proposals, limits and rounds ------------------------------------------------------

def test_two_proposals_in_one_message_are_asked_one_after_the_other(data_dir, configured, service, model):
    model.script(tool_calls((LIST, {}, "a"), (HISTORY, HISTORY_ARGS, "b")), text("Both read."))
    first = service.send(None, "what's the temperature now and today?")
    assert first.pending_confirmation.capability == LIST_ENTITIES
    second = service.confirm(first.conversation_id, first.pending_confirmation.token, True)
    # The second card comes straight from the same model message, without asking the model again.
    assert second.pending_confirmation.capability == GET_HISTORY and len(model.requests) == 1
    assert second.pending_confirmation.token != first.pending_confirmation.token
    done = service.confirm(first.conversation_id, second.pending_confirmation.token, True)
    assert done.reply == "Both read."
    tools = [m for m in model.requests[1].messages if m["role"] == "tool"]
    assert [m["tool_call_id"] for m in tools] == ["a", "b"]
    assert all("error" not in json.loads(m["content"]) for m in tools)


def test_denying_the_first_of_two_proposals_still_asks_about_the_second(configured, service, model):
    model.script(tool_calls((LIST, {}, "a"), (HISTORY, HISTORY_ARGS, "b")), text("Only history."))
    first = service.send(None, "q")
    second = service.confirm(first.conversation_id, first.pending_confirmation.token, False)
    assert second.pending_confirmation.capability == GET_HISTORY
    done = service.confirm(first.conversation_id, second.pending_confirmation.token, True)
    results = tool_results(model.requests[1])
    assert results[0]["error"]["code"] == "CONFIRMATION_DENIED" and "error" not in results[1]
    assert done.reply == "Only history."


def test_the_same_capability_twice_in_one_turn_is_invocation_limit_exceeded(data_dir, configured, service, model):
    model.script(tool_calls((LIST, {}, "a"), (LIST, {}, "b")), answer_from_tool_result)
    first = service.send(None, "q")
    done = service.confirm(first.conversation_id, first.pending_confirmation.token, True)
    assert done.pending_confirmation is None
    results = tool_results(model.requests[1])
    assert "entities" in results[0] and results[1]["error"]["code"] == "INVOCATION_LIMIT_EXCEEDED"
    assert ("rejected", LIST_ENTITIES, "INVOCATION_LIMIT_EXCEEDED") in audit(data_dir)


def test_the_limit_holds_across_rounds_of_one_turn_and_resets_with_the_next_message(configured, service, model):
    model.script(tool_call(LIST, {}, call_id="a"), tool_call(LIST, {}, call_id="b"), text("Once only."),
                 tool_call(LIST, {}, call_id="c"))
    first = service.send(None, "q")
    done = service.confirm(first.conversation_id, first.pending_confirmation.token, True)
    assert done.reply == "Once only."
    assert tool_results(model.requests[2])[-1]["error"]["code"] == "INVOCATION_LIMIT_EXCEEDED"
    again = service.send(first.conversation_id, "and now?")
    assert again.pending_confirmation is not None


def test_a_turn_stops_after_a_bounded_number_of_model_rounds(data_dir, executor, configured, model):
    service = make_service(data_dir, executor, model, max_rounds=3)
    model.fallback = tool_call("home_assistant__nothing", {})
    result = service.send(None, "q")
    assert result.reply == STOPPED_REPLY
    assert len(model.requests) == 3


def test_more_tool_calls_than_the_bound_in_one_message_are_cut(executor, configured, model, data_dir):
    calls: list[tuple[str, Any, str]] = [("home_assistant__nothing", {}, f"c{i}")
                                         for i in range(MAX_TOOL_CALLS_PER_MESSAGE + 5)]
    model.script(tool_calls(*calls), text("ok"))
    make_service(data_dir, executor, model).send(None, "q")
    replayed = model.requests[1].messages[-MAX_TOOL_CALLS_PER_MESSAGE - 1]
    assert len(replayed["tool_calls"]) == MAX_TOOL_CALLS_PER_MESSAGE
    assert len(tool_results(model.requests[1])) == MAX_TOOL_CALLS_PER_MESSAGE
    assert sum(1 for e in audit(data_dir) if e[0] == "proposed") == MAX_TOOL_CALLS_PER_MESSAGE


def test_a_new_message_while_a_card_is_open_answers_it_as_not_run(configured, service, model):
    model.script(tool_calls((LIST, {}, "a"), (HISTORY, HISTORY_ARGS, "b")), text("New topic."))
    paused = service.send(None, "q")
    result = service.send(paused.conversation_id, "never mind, tell me a joke")
    assert result.reply == "New topic."
    results = tool_results(model.requests[1])
    assert [r["error"]["code"] for r in results] == ["CONFIRMATION_INVALID", "CONFIRMATION_INVALID"]
    err = refusal(lambda: service.confirm(paused.conversation_id, paused.pending_confirmation.token, True))
    assert err.code == "CONFIRMATION_INVALID"
    assert configured.requests == []


def test_an_expired_card_can_be_asked_again(configured, service, model, clock):
    model.script(tool_call(LIST, {}), tool_call(LIST, {}), answer_from_tool_result)
    paused = service.send(None, "what's the temperature in the living room?")
    clock.now += 400
    refusal(lambda: service.confirm(paused.conversation_id, paused.pending_confirmation.token, True))
    again = service.send(paused.conversation_id, "what's the temperature in the living room?")
    done = service.confirm(again.conversation_id, again.pending_confirmation.token, True)
    assert "21.4" in done.reply


# --- the model failing -------------------------------------------------------------------------

@pytest.mark.parametrize("answer", [
    pytest.param(status(500), id="http-500"),
    pytest.param(status(404), id="http-404"),
    pytest.param(Raw(200, b"<html>not json</html>", "text/html"), id="not-json"),
    pytest.param({"choices": []}, id="no-choices"),
    pytest.param({"choices": [{"message": {"content": 42}}]}, id="content-not-text"),
    pytest.param({"choices": [{"message": {"tool_calls": [{"function": {"arguments": "{}"}}]}}]},
                 id="tool-call-without-name"),
])
def test_a_failing_or_malformed_model_is_model_unavailable_and_the_message_can_be_sent_again(
        service, model, answer):
    model.script(answer)
    with pytest.raises(ModelUnavailable) as caught:
        service.send(None, "hello")
    assert caught.value.code == "MODEL_UNAVAILABLE"
    model.script(text("Hi."))
    assert service.send(None, "hello").reply == "Hi."


def test_a_model_that_is_down_is_model_unavailable(data_dir, executor):
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((unused_loopback_url(),), "m")))
    with pytest.raises(ModelUnavailable):
        service.send(None, "hello")


def test_a_model_that_hangs_is_model_unavailable_within_its_timeout(data_dir, executor, model):
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=0.5)))
    model.script(Hang())
    with pytest.raises(ModelUnavailable):
        service.send(None, "hello")
    assert model.hanging == 1  # the model still held the request: the 0.5 s deadline ended the turn


def test_the_next_endpoint_is_tried_when_one_is_down_or_failing(data_dir, executor, model):
    settings = ModelSettings.from_mapping({"CONSOLE_HA_LLM_URL": f"{unused_loopback_url()}, {model.url}",
                                           "CONSOLE_HA_LLM_MODEL": "m"})
    service = ConversationService(executor, OpenAICompatibleModel(settings))
    model.script(text("From the second."))
    assert service.send(None, "hi").reply == "From the second."


def test_a_client_error_is_not_retried_on_the_next_endpoint(data_dir, executor, model):
    with FakeModel() as second:
        settings = ModelSettings((model.url, second.url), "m")
        service = ConversationService(executor, OpenAICompatibleModel(settings))
        model.script(status(400))
        with pytest.raises(ModelUnavailable):
            service.send(None, "hi")
        assert second.requests == []


def test_a_model_failure_after_approval_keeps_the_read_for_the_next_message(configured, service, model):
    model.script(tool_call(LIST, {}), status(500), answer_from_tool_result)
    paused = service.send(None, "what's the temperature in the living room?")
    with pytest.raises(ModelUnavailable):
        service.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
    result = service.send(paused.conversation_id, "so?")
    assert "21.4" in json.dumps(model.requests[-1].messages)
    assert result.pending_confirmation is None


def test_a_model_failure_on_a_message_leaves_no_trace_in_the_conversation(service, model):
    model.script(text("One."), status(500), text("Two."))
    first = service.send(None, "one")
    with pytest.raises(ModelUnavailable):
        service.send(first.conversation_id, "two")
    service.send(first.conversation_id, "two")
    assert [m["content"] for m in model.requests[-1].messages[1:]] == ["one", "One.", "two"]


def test_no_model_configured_is_model_not_configured(data_dir, executor):
    service = ConversationService(executor, OpenAICompatibleModel.from_mapping({}))
    err = refusal_of(ModelNotConfigured, lambda: service.send(None, "hello"))
    assert err.code == "MODEL_NOT_CONFIGURED"


@pytest.mark.parametrize("values", [
    {"CONSOLE_HA_LLM_URL": "http://127.0.0.1:9/v1"},  # no model name
    {"CONSOLE_HA_LLM_URL": "ftp://127.0.0.1/v1", "CONSOLE_HA_LLM_MODEL": "m"},
    {"CONSOLE_HA_LLM_URL": "http://user:pw@127.0.0.1/v1", "CONSOLE_HA_LLM_MODEL": "m"},
    {"CONSOLE_HA_LLM_URL": "http://127.0.0.1/v1", "CONSOLE_HA_LLM_MODEL": "m", "CONSOLE_HA_LLM_TIMEOUT": "soon"},
])
def test_invalid_model_settings_are_model_not_configured_and_say_why(data_dir, executor, values):
    service = ConversationService(executor, OpenAICompatibleModel.from_mapping(values))
    err = refusal_of(ModelNotConfigured, lambda: service.send(None, "hello"))
    assert "CONSOLE_HA_LLM" in err.message and "pw" not in err.message


def test_a_model_url_on_home_assistant_s_origin_is_refused(data_dir, executor, configured):
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((f"{configured.base_url}/v1",), "m")))
    err = refusal_of(ModelNotConfigured, lambda: service.send(None, "hello"))
    assert "Home Assistant" in err.message
    assert configured.requests == []


def refusal_of(kind, call):
    with pytest.raises(kind) as caught:
        call()
    return caught.value


# --- keeping conversations in memory -----------------------------------------------------------

def test_conversations_beyond_the_cap_evict_the_least_recently_used(data_dir, executor, model):
    store = ConversationStore(max_conversations=2)
    service = make_service(data_dir, executor, model, store=store)
    model.fallback = text("ok")
    a = service.send(None, "a").conversation_id
    b = service.send(None, "b").conversation_id
    service.send(a, "a again")  # a is now the most recent
    c = service.send(None, "c").conversation_id
    assert len(store) == 2
    assert store.get(b) is None and store.get(a) is not None and store.get(c) is not None
    assert service.send(b, "b again").conversation_id not in (a, b, c)  # an evicted id starts afresh


def test_programs_conversations_never_push_out_the_household_s():
    """A program starting conversation after conversation (each failed message starts one) evicts only programs'."""
    from console_ha.answers.household_queue import Asker
    from console_ha.conversation.conversations import HOUSEHOLD, owner_of

    store = ConversationStore(max_conversations=2)
    household = store.create(HOUSEHOLD)
    program = owner_of(Asker("script", "0123456789abcdef"))
    for _ in range(10):
        store.create(program)
    assert store.get(household.id) is household
    # The household's own new conversations still push out its least recently used one.
    newer = [store.create(HOUSEHOLD).id for _ in range(2)]
    assert store.get(household.id) is None and all(store.get(i) is not None for i in newer)


def test_programs_conversations_beyond_their_own_cap_evict_the_least_recently_used_program_s():
    from console_ha.answers.household_queue import Asker
    from console_ha.conversation.conversations import owner_of

    store = ConversationStore(max_program_conversations=2)
    flood = [store.create(owner_of(Asker("script", f"{n:016x}"))).id for n in range(5)]
    assert [store.get(i) is not None for i in flood] == [False, False, False, True, True]


def test_idle_conversations_are_evicted_after_their_age(data_dir, executor, model, clock):
    store = ConversationStore(max_idle_seconds=60, clock=clock)
    service = make_service(data_dir, executor, model, store=store)
    model.fallback = text("ok")
    old = service.send(None, "a").conversation_id
    clock.now += 61
    assert service.transcript(old) is None
    assert service.send(old, "again").conversation_id != old


def test_an_evicted_conversation_s_card_is_confirmation_invalid(data_dir, executor, configured, model):
    store = ConversationStore(max_conversations=1)
    service = make_service(data_dir, executor, model, store=store)
    model.script(tool_call(LIST, {}), text("other"))
    paused = service.send(None, "q")
    assert paused.pending_confirmation is not None
    token = paused.pending_confirmation.token
    service.send(None, "another conversation")
    err = refusal(lambda: service.confirm(paused.conversation_id, token, True))
    assert err.code == "CONFIRMATION_INVALID" and configured.requests == []


def test_old_turns_are_dropped_whole_when_the_history_grows_too_long(data_dir, configured, executor, model):
    service = make_service(data_dir, executor, model, max_history_chars=3000)
    model.script(tool_call(LIST, {}, call_id="t1"), text("It is 21.4 °C."))
    first = service.send(None, "what's the temperature?")
    assert first.pending_confirmation is not None
    service.confirm(first.conversation_id, first.pending_confirmation.token, True)
    model.fallback = text("ok")
    for n in range(6):
        service.send(first.conversation_id, f"question {n} " + "x" * 400)
    messages = model.requests[-1].messages[1:]
    assert messages[0]["role"] == "user"
    assert len(json.dumps(messages)) < 3000 + 1000
    assert "t1" not in json.dumps(messages)  # the call and its result went together


def test_a_model_failure_after_old_turns_were_trimmed_restores_the_whole_conversation(data_dir, executor, model):
    service = make_service(data_dir, executor, model, max_history_chars=600)
    model.script(text("A."), text("B."))
    first = service.send(None, "one " + "x" * 200)
    service.send(first.conversation_id, "two " + "y" * 200)
    model.script(status(500), text("C."))
    with pytest.raises(ModelUnavailable):
        service.send(first.conversation_id, "three " + "z" * 200)  # trims "one" before asking the model
    transcript = service.transcript(first.conversation_id)
    assert transcript is not None
    messages, _ = transcript
    assert [m["content"][:3] for m in messages] == ["one", "A.", "two", "B."]


def test_the_transcript_shows_the_household_s_words_the_console_s_lines_and_the_answers_only(configured, service,
                                                                                              model):
    thinking = tool_call(LIST, {})
    thinking["choices"][0]["message"]["content"] = "Let me look."
    model.script(thinking, answer_from_tool_result)
    paused = service.send(None, "what's the temperature in the living room?")
    messages, pending = service.transcript(paused.conversation_id)
    assert pending == paused.pending_confirmation
    service.confirm(paused.conversation_id, pending.token, True)
    messages, pending = service.transcript(paused.conversation_id)
    assert pending is None
    assert [m["role"] for m in messages] == ["user", "note", "assistant"]
    assert messages[1]["content"] == "Read your Home Assistant devices? You allowed it."
    assert "21.4" in messages[2]["content"]
    assert "Let me look." not in str(messages)


@pytest.mark.parametrize("message", ["", "   ", "x" * 4001])
def test_an_empty_or_overlong_message_is_invalid_request(service, model, message):
    err = refusal_of(Exception, lambda: service.send(None, message))
    assert getattr(err, "code", None) == "INVALID_REQUEST"
    assert model.requests == []


def test_secret_settings_never_show_themselves():
    assert "abc" not in repr(ModelSettings(("http://127.0.0.1/v1",), "m", Secret("abc")))


def test_a_model_that_trickles_its_answer_is_cut_off_at_the_whole_call_deadline(data_dir, executor, model):
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=1)))
    # The whole answer (valid, some 20 s of bytes) would come if waited for: a failure is the deadline's.
    model.script(Trickle(json.dumps(text("This answer arrives one byte at a time.")).encode(), interval=0.1))
    with pytest.raises(ModelUnavailable):
        service.send(None, "hello")


def test_a_model_that_trickles_a_chunk_size_line_is_cut_off_at_the_whole_call_deadline(data_dir, executor, model):
    # http.client reads a chunk-size line whole, each byte within the socket timeout: only shutting the
    # socket at the deadline ends the read (without it this thread waited about an hour).
    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=1)))
    model.script(TrickleChunkSize(interval=0.05))
    outcome: list[BaseException] = []
    worker = threading.Thread(target=lambda: outcome.append(pytest.raises(ModelUnavailable, service.send,
                                                                          None, "hello").value), daemon=True)
    worker.start()
    worker.join(PATIENCE)  # the chunk-size line never ends: only the deadline ends the read
    assert not worker.is_alive() and outcome

@pytest.mark.parametrize(
    "body",
    [
        b'{"choices": [{"message": {"role": "assistant", "content": "bad \\udc00"}}]}',
        b'{"choices": [{"message": {"role": "assistant", "content": ' + b"[" * 50_000 + b"]" * 50_000 + b"}}]}",
        b'{"choices": [{"message": {"role": "assistant", "content": null, "tool_calls": [{"id": "a", '
        b'"type": "function", "function": {"name": "home_assistant__list_entities", '
        b'"arguments": "' + b"[" * 50_000 + b'"}}]}}]}',
    ],
    ids=["unpaired-surrogate", "deep-nesting", "deep-arguments"],
)
def test_an_answer_that_is_not_usable_text_is_model_unavailable_and_leaves_the_conversation_usable(
        service, model, body):
    model.script(text("One."), Raw(200, body))
    first = service.send(None, "one")
    with pytest.raises(ModelUnavailable):
        service.send(first.conversation_id, "two")
    model.script(text("Two."))
    assert service.send(first.conversation_id, "two").reply == "Two."
    assert service.transcript(first.conversation_id) is not None


def test_a_card_in_the_last_round_still_lets_the_model_use_the_approved_read(data_dir, executor, configured, model):
    service = make_service(data_dir, executor, model, max_rounds=1)
    model.script(tool_call(LIST, {}), answer_from_tool_result)
    paused = service.send(None, "what's the temperature in the living room?")
    assert paused.pending_confirmation is not None
    result = service.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
    assert result.reply is not None and result.reply != STOPPED_REPLY and "21.4" in result.reply


def test_reading_the_transcript_does_not_wait_for_a_model_that_is_still_thinking(data_dir, executor, model):
    import threading

    service = ConversationService(executor, OpenAICompatibleModel(ModelSettings((model.url,), "m", timeout=3)))
    model.script(text("Hi."), Hang())
    first = service.send(None, "one")
    worker = threading.Thread(target=lambda: pytest.raises(ModelUnavailable, service.send, first.conversation_id,
                                                           "two"))
    worker.start()
    limit = time.monotonic() + PATIENCE
    while not model.hanging and time.monotonic() < limit:
        time.sleep(0.01)
    assert service.transcript(first.conversation_id) is not None
    assert model.hanging == 1 and worker.is_alive()  # read while the model was still thinking
    worker.join(PATIENCE)


def test_what_a_conversation_keeps_of_one_answer_is_bounded(service, model):
    model.script(text("x" * 200_000), tool_call(LIST, "[" + "1," * 5000 + "1]"), text("ok"))
    first = service.send(None, "one")
    assert len(first.reply) <= 16 * 1024 + 2
    service.send(first.conversation_id, "two")
    replayed = model.requests[-1].messages
    assert all(len(json.dumps(m)) < 20_000 for m in replayed)
    assert tool_results(model.requests[-1])[-1]["error"]["code"] == "INVALID_ARGUMENTS"


def _object_arguments(arguments: object) -> dict:
    """A completion calling list_entities with its arguments as a JSON object, not as text (some Ollama versions)."""
    return {"choices": [{"message": {"role": "assistant", "content": None, "tool_calls": [
        {"id": "call_o", "type": "function", "function": {"name": LIST, "arguments": arguments}}]}}]}


def test_arguments_sent_as_an_object_are_bounded_like_arguments_sent_as_text(service, model):
    # Some servers send arguments as an object; the 4 KiB bound must not depend on the dialect.
    model.script(_object_arguments({"filler": [1] * 50_000}), text("ok"))
    service.send(None, "one")
    replayed = model.requests[-1].messages
    assert all(len(json.dumps(m)) < 20_000 for m in replayed)
    assert tool_results(model.requests[-1])[-1]["error"]["code"] == "INVALID_ARGUMENTS"


def test_a_tool_call_id_is_bounded_like_the_rest_of_the_answer(service, model):
    huge_id = "call_" + "x" * 200_000
    model.script(tool_calls((LIST, {}, huge_id)), text("ok"))
    assert service.send(None, "one").reply == "ok"
    replayed = model.requests[-1].messages
    assert all(len(json.dumps(m)) < 20_000 for m in replayed)
    (call,) = replayed[-2]["tool_calls"]
    assert replayed[-1]["tool_call_id"] == call["id"]  # the result still answers its call

def test_arguments_nested_too_deeply_to_measure_are_refused_not_a_crash(service, model):
    deep: object = {}
    for _ in range(900):  # parses, but too deep to write out again from inside a turn
        deep = {"a": deep}
    model.script(_object_arguments(deep), text("ok"))
    assert service.send(None, "one").reply == "ok"
    assert tool_results(model.requests[-1])[-1]["error"]["code"] == "INVALID_ARGUMENTS"


# --- tool-call dialects of common servers, over HTTP through a whole turn ------------------------

def _dialect(function: dict, *, content: str | None = None, call_id: str | None = "call_d") -> dict:
    """A chat completion whose one tool call is shaped as a given server shapes it."""
    call: dict = {"type": "function", "function": function}
    if call_id is not None:
        call["id"] = call_id
    return {"id": "chatcmpl-d", "object": "chat.completion", "model": "m",
            "choices": [{"index": 0, "finish_reason": "tool_calls",
                         "message": {"role": "assistant", "content": content, "tool_calls": [call]}}]}


DIALECTS = [
    # OpenAI, vLLM, llama.cpp: arguments as JSON text.
    pytest.param(_dialect({"name": HISTORY, "arguments": json.dumps(HISTORY_ARGS)}), "call_d", id="arguments-as-text"),
    # Ollama's own API and some proxies: arguments as an object.
    pytest.param(_dialect({"name": HISTORY, "arguments": HISTORY_ARGS}), "call_d", id="arguments-as-object"),
    # Servers that leave out the id: the Console makes one up and answers under it.
    pytest.param(_dialect({"name": HISTORY, "arguments": json.dumps(HISTORY_ARGS)}, call_id=None), "call_0",
                 id="missing-id"),
    # Models that think aloud: content next to the tool calls.
    pytest.param(_dialect({"name": HISTORY, "arguments": json.dumps(HISTORY_ARGS)},
                          content="Let me look at the living room sensor."), "call_d", id="content-alongside"),
]


@pytest.mark.parametrize(("answer", "expected_id"), DIALECTS)
def test_each_tool_call_dialect_leads_to_the_card_the_read_and_the_answer(
        configured, service, model, answer, expected_id):
    model.script(answer, answer_from_tool_result)
    paused = service.send(None, "how was the living room today?")
    assert paused.reply is None and paused.pending_confirmation is not None
    assert paused.pending_confirmation.capability == GET_HISTORY
    assert paused.pending_confirmation.arguments == HISTORY_ARGS
    done = service.confirm(paused.conversation_id, paused.pending_confirmation.token, approve=True)
    assert "changed" in done.reply
    # What is replayed is in the form every server accepts: an id, and arguments as JSON text.
    replayed, result = model.requests[1].messages[-2:]
    assert replayed["role"] == "assistant"
    (call,) = replayed["tool_calls"]
    assert call["id"] == expected_id and json.loads(call["function"]["arguments"]) == HISTORY_ARGS
    assert result == {"role": "tool", "tool_call_id": expected_id, "content": result["content"]}
    assert "summary" in json.loads(result["content"]) or "changes" in json.loads(result["content"])
    # Text said alongside a tool call is thinking aloud: never shown as the reply.
    assert [m["content"] for m in service.transcript(paused.conversation_id)[0]] == [
        "how was the living room today?", "Read the history of Living room temperature? You allowed it.", done.reply]


# --- settings read per turn --------------------------------------------------------------------

def test_the_adapter_reads_its_settings_for_every_request(data_dir, executor, model):
    with FakeModel() as other:
        current = {"url": unused_loopback_url()}
        adapter = OpenAICompatibleModel.from_source(lambda: ModelSettings((current["url"],), "m", timeout=5))
        service = ConversationService(executor, adapter)
        with pytest.raises(ModelUnavailable):
            service.send(None, "hello")
        current["url"] = model.url
        model.script(text("from the first"))
        assert service.send(None, "hello").reply == "from the first"
        current["url"] = other.url
        other.script(text("from the second"))
        assert service.send(None, "hello").reply == "from the second"


def test_a_source_with_nothing_set_up_says_where_to_set_it(data_dir, executor):
    service = ConversationService(executor, OpenAICompatibleModel.from_source(lambda: None))
    with pytest.raises(ModelNotConfigured) as caught:
        service.send(None, "hello")
    assert "/settings/model" in caught.value.message


def test_a_call_with_null_content_is_replayed_with_empty_text(configured, service, model):
    """llama-cpp-python's server answers 500 to an assistant message whose content is null (tests/real_model)."""
    model.script(tool_call(LIST, {}), answer_from_tool_result)
    paused = service.send(None, "what is on?")
    service.confirm(paused.conversation_id, paused.pending_confirmation.token, approve=True)
    replayed = model.requests[1].messages[-2]
    assert replayed["role"] == "assistant" and replayed["tool_calls"] and replayed["content"] == ""
