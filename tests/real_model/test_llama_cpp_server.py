"""The model adapter against a real OpenAI-compatible server: llama-cpp-python's, with a tiny random model.

The fake model (tests/fake_model.py) says what we think servers send; this says what one real server does
with what the adapter sends, and that the adapter reads what it answers.
"""

from __future__ import annotations

import pytest

from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.conversation import ConversationService, ModelSettings, OpenAICompatibleModel
from console_ha.conversation.model import function_name
from console_ha.conversation.model_check import check_model
from console_ha.conversation.turn_loop import SYSTEM_PROMPT
from tests.executors import executor_over
from tests.real_model.conftest import LlamaServer

LIST = function_name(LIST_ENTITIES)
QUESTION = [{"role": "system", "content": SYSTEM_PROMPT}, {"role": "user", "content": "What is on?"}]


@pytest.fixture
def settings(llama_server: LlamaServer) -> ModelSettings:
    return ModelSettings((llama_server.url,), llama_server.model, timeout=60)


def test_the_adapter_reads_the_real_server_s_model_list(settings, llama_server):
    assert OpenAICompatibleModel(settings).list_models() == [llama_server.model]


def test_a_tool_call_from_the_real_server_becomes_a_capability_call_and_its_replay_is_accepted(settings):
    adapter = OpenAICompatibleModel(settings)
    # A named tool_choice makes the server constrain the output with a grammar built from the tool's
    # schema, so even random weights give a well-formed call.
    reply = adapter.complete(QUESTION, tool_choice={"type": "function", "function": {"name": LIST}}, max_tokens=32)
    (call,) = reply.tool_calls
    assert call.function == LIST and call.capability == LIST_ENTITIES
    assert call.arguments == {} and not call.arguments_invalid
    assert isinstance(call.id, str) and call.id
    # The turn loop's next request: the assistant's call as replayed, then the tool's result under its id.
    follow_up = [*QUESTION, reply.message,
                 {"role": "tool", "tool_call_id": call.id, "content": '{"entities": [], "count": 0}'}]
    answer = adapter.complete(follow_up, max_tokens=16)
    assert isinstance(answer.content, str) and answer.tool_calls == ()


def test_a_whole_turn_through_the_conversation_service_gets_a_text_reply(settings, data_dir):
    service = ConversationService(executor_over(data_dir), OpenAICompatibleModel(settings))
    result = service.send(None, "hello")
    assert isinstance(result.reply, str) and result.pending_confirmation is None


def test_the_model_test_lists_the_model_and_reports_that_it_made_no_tool_call(settings, llama_server):
    # llama-cpp-python's chatml handler forces a call only for a named tool_choice; asked to call one of
    # its own accord, this random model writes text, which the test must call "no tool calls".
    result = check_model(settings)
    assert result.models == (llama_server.model,)
    assert result.problem == "no_tool_calls" and "--jinja" in result.message
