"""The model test, against the fake model over HTTP (conversation/model_check.py)."""

from __future__ import annotations

import json
import logging

import pytest

from console_ha.conversation.model import ModelSettings
from console_ha.conversation.model_check import PROBE_TOOL, PROBLEMS, READY, check_model, settings_to_test
from console_ha.errors import InvalidConfig
from console_ha.secret import Secret
from tests.fake_model import FakeModel, Hang, Raw, status, text, tool_call, unused_loopback_url

KEY = "sk-model-key-0123456789"
URL = "http://192.168.1.20:8080/v1"


# --- the model test, against the fake model over HTTP ------------------------------------------

def checked(model: FakeModel, name: str = "fake-model", key: str | None = None, timeout: float = 5.0):
    return check_model(ModelSettings((model.url,), name, Secret(key) if key else None, timeout))


def test_a_model_that_calls_the_tool_is_ready_and_its_server_s_models_are_offered(model):
    model.models = ["fake-model", "other-model"]
    model.script(tool_call("report_ready", {"ready": True}))
    result = checked(model)
    assert result.ok and result.problem is None and result.message == READY
    assert result.models == ("fake-model", "other-model")
    listing, chat = model.requests
    assert listing.path == "/v1/models" and chat.path == "/v1/chat/completions"
    assert chat.body["tools"] == [PROBE_TOOL] and chat.body["tool_choice"] == "required"
    assert chat.body["model"] == "fake-model" and chat.body["max_tokens"] > 0


def test_the_key_goes_to_both_requests_as_a_bearer_token_and_never_into_the_log(model, caplog):
    caplog.set_level(logging.DEBUG)
    model.script(tool_call("report_ready", {"ready": True}))
    assert checked(model, key=KEY).ok
    assert [r.headers["Authorization"] for r in model.requests] == [f"Bearer {KEY}"] * 2
    assert KEY not in caplog.text


def test_unreachable_says_nothing_answered():
    url = unused_loopback_url()
    result = check_model(ModelSettings((url,), "m", None, 2.0))
    assert not result.ok and result.problem == "unreachable"
    assert result.message.startswith(f"Nothing answered at {url}")


def test_a_server_that_does_not_answer_in_time_is_unreachable(model):
    model.models = Hang(10)
    result = checked(model, timeout=0.5)
    assert result.problem == "unreachable" and "within 0.5 s" in result.message


@pytest.mark.parametrize("listing", [Raw(404, b"<html>Not found</html>", "text/html"),
                                     Raw(200, b"<html>a router's page</html>", "text/html"),
                                     Raw(200, b'{"models": ["m"]}'),
                                     Raw(200, b'{"data": [{"name": "m"}]}')],
                         ids=["404", "html", "wrong-shape", "no-ids"])
def test_a_server_without_an_openai_model_list_is_not_openai_compatible(model, listing):
    model.models = listing
    result = checked(model)
    assert result.problem == "not_openai_compatible" and "/v1" in result.message and result.models == ()


def test_a_chat_answer_that_is_not_a_completion_is_not_openai_compatible(model):
    model.script(Raw(200, b'{"hello": "world"}'))
    assert checked(model).problem == "not_openai_compatible"


@pytest.mark.parametrize("answer", [
    status(404, {"error": {"message": 'model "llama9" not found, try pulling it first'}}),  # Ollama
    status(400, {"object": "error", "message": "The model `llama9` does not exist.", "code": 404}),  # vLLM
], ids=["ollama-404", "vllm-400"])
def test_an_unknown_model_is_model_not_found_and_the_server_s_models_are_offered(model, answer):
    model.models = ["llama3.2:latest", "qwen2.5:7b"]
    model.script(answer)
    result = checked(model, name="llama9")
    assert result.problem == "model_not_found" and "“llama9”" in result.message
    assert result.models == ("llama3.2:latest", "qwen2.5:7b")


@pytest.mark.parametrize("answer", [
    text("I am ready."),
    status(500, {"error": {"code": 500, "message": "tools param requires --jinja flag", "type": "server_error"}}),
], ids=["text-instead", "llama.cpp-without-jinja"])
def test_a_model_that_does_not_call_the_tool_says_llama_cpp_needs_jinja(model, answer):
    model.script(answer)
    result = checked(model)
    assert result.problem == "no_tool_calls" and "--jinja" in result.message


@pytest.mark.parametrize("code", [401, 403])
def test_a_refused_key_says_so(model, code):
    model.models = Raw(code, b'{"error": "invalid api key"}')
    result = checked(model, key="sk-wrong")
    assert result.problem == "key_refused" and str(code) in result.message


def test_an_empty_model_name_lists_the_models_to_choose_from_without_a_chat_request(model):
    model.models = ["a", "b", "c"]
    result = checked(model, name="")
    assert result.problem == "no_model" and result.models == ("a", "b", "c") and "3" in result.message
    assert [r.path for r in model.requests] == ["/v1/models"]


def test_every_problem_has_words_and_no_message_leaks_the_key(model):
    assert set(PROBLEMS) >= {"unreachable", "not_openai_compatible", "model_not_found", "no_tool_calls"}
    model.models = Raw(500, json.dumps({"error": f"bad key {KEY}"}).encode())
    result = checked(model, key=KEY)
    assert KEY not in json.dumps(result.to_json())


def test_a_test_of_typed_values_uses_the_saved_key_only_for_its_origin(model_store):
    model_store.save(URL, "m", api_key=Secret(KEY))
    assert settings_to_test(model_store, URL, "m", "").api_key == Secret(KEY)
    assert settings_to_test(model_store, "http://elsewhere:8080/v1", "m", "").api_key is None
    assert settings_to_test(model_store, "http://elsewhere:8080/v1", "m", "sk-typed").api_key == Secret("sk-typed")
    with pytest.raises(InvalidConfig):
        settings_to_test(model_store, "http://ha.local:8123/v1", "m", "", home_assistant_origins=frozenset({"http://ha.local:8123"}))


def test_the_offered_models_are_bounded_in_number_and_length_and_printable(model):
    model.models = ["ok", "x" * 300, "bad\nname", "", *[f"m{i}" for i in range(400)]]
    result = checked(model, name="")
    assert result.models[0] == "ok" and len(result.models) == 200
    assert all(0 < len(name) <= 256 and name.isprintable() for name in result.models)


def test_the_only_model_a_server_offers_is_chosen_for_you_and_tested(model):
    model.models = ["qwen2.5:3b"]
    model.script(tool_call("report_ready", {}))
    result = checked(model, name="")
    assert result.ok and result.chosen == "qwen2.5:3b" and not result.is_error
    assert result.message.startswith("The model server offers one model, qwen2.5:3b, so the Console chose it")
    assert model.requests[-1].body["model"] == "qwen2.5:3b"
    assert result.to_json()["chosen"] == "qwen2.5:3b"


def test_several_models_to_choose_from_are_a_question_not_an_error(model):
    model.models = ["a", "b"]
    result = checked(model, name="")
    assert not result.ok and not result.is_error and result.to_json()["is_error"] is False
    assert "offers 2 models" in result.message
