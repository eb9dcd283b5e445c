"""The model settings: the store and its key, validation, what is in force per turn, and the model test."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Iterator

import pytest

from console_ha.conversation.model import NOT_SET_UP, ModelNotConfigured, ModelSettings
from console_ha.conversation.model_settings import (
    PROBE_TOOL,
    PROBLEMS,
    READY,
    ModelStore,
    SavedModel,
    check_api_key,
    check_base_url,
    check_model,
    check_model_name,
    resolve,
    settings_in_force,
    settings_to_test,
)
from console_ha.errors import ConfigInvalid, InvalidConfig
from console_ha.secret import Secret
from console_ha.store.datadir import DataDir
from tests.fake_model import FakeModel, Hang, Raw, status, text, tool_call, unused_loopback_url

KEY = "sk-model-key-0123456789"
URL = "http://192.168.1.20:8080/v1"


@pytest.fixture
def store(data_dir: DataDir) -> ModelStore:
    return ModelStore(data_dir)


@pytest.fixture
def model() -> Iterator[FakeModel]:
    with FakeModel() as fake:
        yield fake


# --- validation --------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["http://192.168.1.20:8080/v1", "https://llm.home.arpa/v1/", "http://[::1]:11434/v1",
                                 "http://ollama.local:11434/openai/v1"])
def test_a_base_url_ending_in_v1_is_accepted_without_its_trailing_slash(url):
    assert check_base_url(url) == url.rstrip("/")


@pytest.mark.parametrize(("url", "words"), [
    ("", "empty"),
    ("192.168.1.20:8080/v1", "http:// or https://"),
    ("ftp://host/v1", "http:// or https://"),
    ("http://host:99999/v1", "cannot be parsed"),
    ("http://user:pw@host/v1", "user name, password"),
    ("http://host/v1?x=1", "query"),
    ("http://host:8080", "ends in /v1"),
    ("http://host:8080/v1/chat/completions", "ends in /v1"),
])
def test_a_bad_base_url_is_refused_with_the_field_and_the_reason(url, words):
    with pytest.raises(InvalidConfig) as caught:
        check_base_url(url)
    assert caught.value.detail["field"] == "base_url" and words in caught.value.message


@pytest.mark.parametrize("name", ["", "   ", "a\nb", "x" * 257, 5])
def test_a_bad_model_name_is_refused(name):
    with pytest.raises(InvalidConfig) as caught:
        check_model_name(name)
    assert caught.value.detail["field"] == "model"


@pytest.mark.parametrize("key", ["", "has space", "ключ", "x" * 4097, None])
def test_a_bad_api_key_is_refused_without_echoing_it(key):
    with pytest.raises(InvalidConfig) as caught:
        check_api_key(key)
    assert caught.value.detail["field"] == "api_key"
    assert not key or key not in caught.value.message


# --- the store ---------------------------------------------------------------------------------

def test_nothing_saved_reads_as_empty(store):
    assert store.read() == SavedModel() and store.api_key(URL) is None


def test_saving_writes_url_and_model_to_model_json_and_the_key_apart_0600(store, data_dir):
    saved, dropped = store.save(URL, "qwen2.5:7b", api_key=Secret(KEY))
    assert saved == SavedModel(URL, "qwen2.5:7b") and not dropped
    on_disk = json.loads(data_dir.model_config.read_text())
    assert on_disk == {"base_url": URL, "model": "qwen2.5:7b"}
    assert KEY not in data_dir.model_config.read_text()
    assert data_dir.model_api_key.parent == data_dir.console_secrets
    assert stat.S_IMODE(os.stat(data_dir.model_api_key).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(data_dir.console_secrets).st_mode) == 0o700
    assert store.read() == saved and store.api_key(URL) == Secret(KEY)


def test_the_key_is_only_given_out_for_the_origin_it_was_saved_for(store):
    store.save(URL, "m", api_key=Secret(KEY))
    assert store.api_key("http://192.168.1.20:8080/v1") == Secret(KEY)
    assert store.api_key("http://192.168.1.20:8081/v1") is None
    assert store.api_key("https://192.168.1.20:8080/v1") is None
    assert store.api_key("http://evil.example/v1") is None


def test_saving_another_server_without_a_new_key_removes_the_old_key(store, data_dir):
    store.save(URL, "m", api_key=Secret(KEY))
    same_origin, dropped = store.save("http://192.168.1.20:8080/other/v1", "m")
    assert not dropped and store.api_key(same_origin.base_url) == Secret(KEY)
    _, dropped = store.save("http://10.0.0.5:8080/v1", "m")
    assert dropped and not data_dir.model_api_key.exists()


def test_an_empty_key_keeps_the_saved_one_and_remove_removes_it(store, data_dir):
    store.save(URL, "m", api_key=Secret(KEY))
    store.save(URL, "other")
    assert store.api_key(URL) == Secret(KEY)
    store.save(URL, "other", remove_api_key=True)
    assert store.api_key(URL) is None and not data_dir.model_api_key.exists()


def test_clearing_the_settings_clears_the_key_too(store, data_dir):
    store.save(URL, "m", api_key=Secret(KEY))
    assert store.save("", "") == (SavedModel(), False)
    assert not data_dir.model_api_key.exists()


@pytest.mark.parametrize(("url", "name", "field"), [(URL, "", "model"), ("http://h/x", "m", "base_url")])
def test_a_refused_save_writes_nothing(store, data_dir, url, name, field):
    store.save(URL, "kept", api_key=Secret(KEY))
    before = data_dir.model_config.read_bytes(), data_dir.model_api_key.read_bytes()
    with pytest.raises(InvalidConfig) as caught:
        store.save(url, name, api_key=Secret("sk-new-key"))
    assert caught.value.detail["field"] == field
    assert (data_dir.model_config.read_bytes(), data_dir.model_api_key.read_bytes()) == before


def test_a_key_without_a_url_is_refused(store):
    with pytest.raises(InvalidConfig) as caught:
        store.save("", "", api_key=Secret(KEY))
    assert caught.value.detail["field"] == "api_key"


def test_home_assistant_s_own_address_is_refused_as_the_model_server(store):
    with pytest.raises(InvalidConfig) as caught:
        store.save("http://homeassistant.local:8123/v1", "m", home_assistant_url="http://HomeAssistant.local:8123")
    assert caught.value.detail["field"] == "base_url" and "Home Assistant" in caught.value.message


def test_a_write_that_fails_midway_leaves_the_old_file_whole(store, data_dir, monkeypatch):
    store.save(URL, "old")
    before = data_dir.model_config.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        store.save("http://10.0.0.9:8080/v1", "new")
    assert data_dir.model_config.read_bytes() == before
    assert [p.name for p in data_dir.model_config.parent.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize(("raw", "words"), [
    (b"{not json", "not valid JSON"),
    (b"[]", "JSON object"),
    (b'{"base_url": "http://h:8080", "model": "m"}', "ends in /v1"),
    (b'{"base_url": "http://h:8080/v1", "model": 7}', "model name"),
])
def test_a_damaged_file_is_reported_with_what_is_wrong_and_reset_keeps_it_aside(store, data_dir, raw, words):
    data_dir.model_config.parent.mkdir(parents=True, exist_ok=True)
    data_dir.model_config.write_bytes(raw)
    with pytest.raises(ConfigInvalid) as caught:
        store.read()
    assert words in caught.value.message
    setup = resolve({}, store)
    assert setup.settings is None and setup.saved_error is not None and "/settings/model" in setup.problem
    store.reset()
    assert store.read() == SavedModel()
    (aside,) = [p for p in data_dir.model_config.parent.iterdir() if ".broken-" in p.name]
    assert aside.read_bytes() == raw


def test_a_damaged_key_file_is_no_key(store, data_dir, caplog):
    store.save(URL, "m", api_key=Secret(KEY))
    data_dir.model_api_key.write_text("{broken")
    assert store.api_key(URL) is None
    assert "damaged" in caplog.text


# --- what is in force --------------------------------------------------------------------------

def test_nothing_anywhere_is_not_set_up(store):
    setup = resolve({}, store)
    assert setup.settings is None and setup.problem == NOT_SET_UP and not setup.ready
    with pytest.raises(ModelNotConfigured) as caught:
        settings_in_force({}, store)
    assert caught.value.message == NOT_SET_UP


def test_saved_settings_are_used_when_the_environment_sets_nothing(store):
    store.save(URL, "m", api_key=Secret(KEY))
    settings = settings_in_force({}, store)
    assert settings.endpoints == (URL,) and settings.model == "m" and settings.api_key == Secret(KEY)
    assert resolve({}, store).from_environment == ()


@pytest.mark.parametrize(("env", "expected"), [
    ({"CONSOLE_HA_LLM_URL": "http://env-host:8080/v1"}, ("http://env-host:8080/v1", "m", None)),
    ({"CONSOLE_HA_LLM_MODEL": "env-model"}, (URL, "env-model", KEY)),
    ({"CONSOLE_HA_LLM_API_KEY": "sk-env"}, (URL, "m", "sk-env")),
    ({"CONSOLE_HA_LLM_URL": "http://env-host:8080/v1", "CONSOLE_HA_LLM_MODEL": "e", "CONSOLE_HA_LLM_API_KEY": "k"},
     ("http://env-host:8080/v1", "e", "k")),
    ({"CONSOLE_HA_LLM_URL": "", "CONSOLE_HA_LLM_MODEL": "  "}, (URL, "m", KEY)),
])
def test_each_environment_variable_wins_on_its_own_and_the_saved_key_stays_with_its_server(store, env, expected):
    store.save(URL, "m", api_key=Secret(KEY))
    setup = resolve(env, store)
    url, name, key = expected
    assert setup.settings.endpoints == (url,) and setup.settings.model == name
    assert setup.settings.api_key == (Secret(key) if key else None)
    assert setup.from_environment == tuple(k for k in ("CONSOLE_HA_LLM_URL", "CONSOLE_HA_LLM_MODEL",
                                                       "CONSOLE_HA_LLM_API_KEY") if env.get(k, "").strip())


def test_a_url_without_a_model_says_to_choose_one(store):
    setup = resolve({"CONSOLE_HA_LLM_URL": URL}, store)
    assert setup.settings is None and "Choose one" in setup.problem


def test_an_invalid_environment_url_says_which_variable(store):
    setup = resolve({"CONSOLE_HA_LLM_URL": "ftp://x", "CONSOLE_HA_LLM_MODEL": "m"}, store)
    assert setup.settings is None and "CONSOLE_HA_LLM_URL" in setup.problem


def test_a_save_applies_to_the_next_read_without_a_restart(store):
    assert resolve({}, store).settings is None
    store.save(URL, "first")
    assert settings_in_force({}, store).model == "first"
    store.save(URL, "second")
    assert settings_in_force({}, store).model == "second"


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


def test_a_test_of_typed_values_uses_the_saved_key_only_for_its_origin(store):
    store.save(URL, "m", api_key=Secret(KEY))
    assert settings_to_test(store, URL, "m", "").api_key == Secret(KEY)
    assert settings_to_test(store, "http://elsewhere:8080/v1", "m", "").api_key is None
    assert settings_to_test(store, "http://elsewhere:8080/v1", "m", "sk-typed").api_key == Secret("sk-typed")
    with pytest.raises(InvalidConfig):
        settings_to_test(store, "http://ha.local:8123/v1", "m", "", home_assistant_url="http://ha.local:8123")


def test_the_offered_models_are_bounded_in_number_and_length_and_printable(model):
    model.models = ["ok", "x" * 300, "bad\nname", "", *[f"m{i}" for i in range(400)]]
    result = checked(model, name="")
    assert result.models[0] == "ok" and len(result.models) == 200
    assert all(0 < len(name) <= 256 and name.isprintable() for name in result.models)


def test_a_url_that_is_not_text_is_refused_as_such():
    with pytest.raises(InvalidConfig) as caught:
        check_base_url(["http://h/v1"])
    assert "must be text" in caught.value.message
