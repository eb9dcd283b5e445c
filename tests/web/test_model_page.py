"""The model settings API and page: saving, the write-only key, env precedence, the test, the no-model notice."""

from __future__ import annotations

import json
import re
import stat
from typing import Any

import pytest
from flask.testing import FlaskClient

from console_ha.store.datadir import DataDir
from tests.fake_model import FakeModel, Hang, Raw, text, tool_call, unused_loopback_url
from tests.seed import seed_settings

from .conftest import csrf_from, error_of, log_in, page_csrf

pytestmark = pytest.mark.app_config(CONSOLE_HA_MODEL_TEST_TIMEOUT=3.0)

MODEL_API = "/api/v1/conversation/model"
PAGE = "/settings/model"
KEY = "sk-household-model-key-42"
ENV = ("CONSOLE_HA_LLM_URL", "CONSOLE_HA_LLM_MODEL", "CONSOLE_HA_LLM_API_KEY", "CONSOLE_HA_LLM_TIMEOUT")


@pytest.fixture(autouse=True)
def _no_model_in_the_environment(monkeypatch: pytest.MonkeyPatch, hidden_secrets: list[str]) -> None:
    for name in ENV:
        monkeypatch.delenv(name, raising=False)
    hidden_secrets.append(KEY)


def save(client: FlaskClient, **body: Any) -> dict[str, Any]:
    response = client.post(MODEL_API, json=body)
    assert response.status_code == 200, response.get_json()
    return response.get_json()


# --- reading and saving ------------------------------------------------------------------------

def test_nothing_saved_reads_as_not_set_up(household):
    body = household.get(MODEL_API).get_json()
    assert body["base_url"] == "" and body["model"] == "" and body["has_api_key"] is False
    assert body["ready"] is False and "/settings/model" in body["problem"] and body["environment"] == []
    assert body["in_force"] == {"base_url": None, "model": None, "has_api_key": False}


def test_save_stores_url_model_and_key_apart_and_never_sends_the_key_back(household, data_dir: DataDir, model):
    body = save(household, base_url=model.url + "/", model="fake-model", api_key=KEY)
    assert body["base_url"] == model.url and body["model"] == "fake-model" and body["has_api_key"] is True
    assert body["ready"] is True and body["in_force"]["base_url"] == model.url
    assert json.loads(data_dir.model_config.read_text()) == {"base_url": model.url, "model": "fake-model"}
    assert stat.S_IMODE(data_dir.model_api_key.stat().st_mode) == 0o600
    assert household.get(MODEL_API).get_json()["has_api_key"] is True
    page = household.get(PAGE).get_data(as_text=True)
    assert 'type="password" id="api-key" name="api_key" value=""' in page
    # (The autouse fixture proves KEY is in no response and no log line.)


@pytest.mark.parametrize(("body", "field"), [
    ({"base_url": "http://h:8080", "model": "m"}, "base_url"),
    ({"base_url": "http://h:8080/v1", "model": ""}, "model"),
    ({"base_url": "http://h:8080/v1", "model": "m", "api_key": "with space"}, "api_key"),
    ({"base_url": "http://h:8080/v1", "model": "m", "api_key": 5}, "api_key"),
    ({"base_url": 5, "model": "m"}, "base_url"),
    ({"base_url": "http://h:8080/v1", "model": "m", "temperature": 1}, "temperature"),
    ({"base_url": "http://h:8080/v1", "model": "m", "remove_api_key": "yes"}, "remove_api_key"),
])
def test_a_bad_save_is_refused_with_its_field_and_writes_nothing(household, data_dir, body, field):
    error = error_of(household.post(MODEL_API, json=body), 400, "INVALID_CONFIG")
    assert error["field"] == field
    assert not data_dir.model_config.exists()


def test_home_assistant_s_address_is_refused_as_the_model_server(household, data_dir):
    seed_settings(data_dir, {"base_url": "http://homeassistant.local:8123"})
    error = error_of(household.post(MODEL_API, json={"base_url": "http://homeassistant.local:8123/v1", "model": "m"}),
                   400, "INVALID_CONFIG")
    assert error["field"] == "base_url" and "Home Assistant" in error["message"]
    error = error_of(household.post(MODEL_API + "/test", json={"base_url": "http://homeassistant.local:8123/v1"}),
                   400, "INVALID_CONFIG")


def test_a_key_for_another_server_is_removed_and_the_answer_says_so(household, data_dir):
    save(household, base_url="http://10.0.0.1:8080/v1", model="m", api_key=KEY)
    body = save(household, base_url="http://10.0.0.2:8080/v1", model="m")
    assert body["api_key_removed"] is True and body["has_api_key"] is False
    assert not data_dir.model_api_key.exists()


def test_saving_needs_the_csrf_token_with_a_session(logged_in, data_dir):
    error_of(logged_in.post(MODEL_API, json={"base_url": "http://h:8080/v1", "model": "m"}), 400, "CSRF_INVALID")
    assert not data_dir.model_config.exists()


def test_the_api_is_closed_to_strangers_and_to_an_api_token(client, bearer, password, data_dir):
    """Where the household's conversations go is the household's to say: a program's token gets 403 (issue 16)."""
    error_of(client.get(MODEL_API), 401, "UNAUTHENTICATED")
    error_of(client.post(MODEL_API + "/test", json={}), 401, "UNAUTHENTICATED")
    assert client.get(PAGE).status_code == 302
    error_of(bearer.post(MODEL_API, json={"base_url": "http://attacker.example/v1", "model": "m"}), 403, "FORBIDDEN")
    error_of(bearer.post(MODEL_API + "/test", json={"base_url": "http://attacker.example/v1"}), 403, "FORBIDDEN")
    error_of(bearer.get(MODEL_API), 403, "FORBIDDEN")
    assert bearer.get(PAGE).status_code == 403
    assert not data_dir.model_config.exists()
    log_in(client, password)
    client.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(client)
    assert save(client, base_url="http://10.0.0.1:8080/v1", model="m")["model"] == "m"


def test_a_damaged_file_is_reported_and_a_reset_save_starts_again(household, data_dir):
    data_dir.model_config.parent.mkdir(parents=True)
    data_dir.model_config.write_text("{oops")
    body = household.get(MODEL_API).get_json()
    assert body["config_error"]["code"] == "CONFIG_INVALID" and "not valid JSON" in body["config_error"]["message"]
    assert "damaged" in household.get(PAGE).get_data(as_text=True)
    error_of(household.post(MODEL_API, json={"base_url": "bad", "model": "m", "reset": True}), 400, "INVALID_CONFIG")
    assert data_dir.model_config.read_text() == "{oops"  # a refused reset moves nothing aside
    body = save(household, base_url="http://10.0.0.1:8080/v1", model="m", reset=True)
    assert body["config_error"] is None and body["model"] == "m"
    assert len(list(data_dir.model_config.parent.glob("model.json.broken-*"))) == 1


@pytest.mark.parametrize(("body", "field"), [
    ({"base_url": "http://homeassistant.local:8123/v1", "model": "m"}, "base_url"),
    ({"base_url": "", "model": "", "api_key": KEY}, "api_key"),
    ({"base_url": "http://10.0.0.1:8080/v1", "model": "m", "api_key": "two words"}, "api_key"),
])
def test_a_reset_refused_for_any_reason_moves_nothing_aside(household, data_dir, body, field):
    seed_settings(data_dir, {"base_url": "http://homeassistant.local:8123"})
    data_dir.model_config.parent.mkdir(parents=True, exist_ok=True)
    data_dir.model_config.write_text("{oops")
    error = error_of(household.post(MODEL_API, json={**body, "reset": True}), 400, "INVALID_CONFIG")
    assert error["field"] == field
    assert data_dir.model_config.read_text() == "{oops"
    assert not list(data_dir.model_config.parent.glob("model.json.broken-*"))


# --- the environment wins ----------------------------------------------------------------------

def test_environment_variables_win_and_the_api_and_page_say_which(household, monkeypatch, model):
    save(household, base_url="http://10.0.0.1:8080/v1", model="saved-model", api_key=KEY)
    monkeypatch.setenv("CONSOLE_HA_LLM_MODEL", "env-model")
    body = household.get(MODEL_API).get_json()
    assert body["environment"] == ["CONSOLE_HA_LLM_MODEL"]
    assert body["model"] == "saved-model" and body["in_force"]["model"] == "env-model"
    assert body["in_force"]["has_api_key"] is True
    monkeypatch.setenv("CONSOLE_HA_LLM_URL", model.url)
    body = household.get(MODEL_API).get_json()
    assert body["environment"] == ["CONSOLE_HA_LLM_URL", "CONSOLE_HA_LLM_MODEL"]
    # The saved key was typed for 10.0.0.1: it does not follow the environment to another server.
    assert body["in_force"] == {"base_url": model.url, "model": "env-model", "has_api_key": False}
    page = household.get(PAGE).get_data(as_text=True)
    found = re.search(r'id="environment-notice">(.*?)</div>', page, re.S)
    assert found, "no environment notice"
    notice = found.group(1)
    assert "<code>CONSOLE_HA_LLM_URL</code>, <code>CONSOLE_HA_LLM_MODEL</code>" in notice
    assert "win over what is saved here" in notice and model.url in notice
    assert "CONSOLE_HA_LLM_API_KEY" not in notice


@pytest.mark.parametrize(("env", "words"), [
    ({"CONSOLE_HA_LLM_URL": "ftp://10.0.0.1/v1", "CONSOLE_HA_LLM_MODEL": "m"}, "must be an http:// or https://"),
    ({"CONSOLE_HA_LLM_API_KEY": KEY}, "No language model is set up yet"),
    ({"CONSOLE_HA_LLM_URL": "http://10.0.0.1:8080/v1"}, "No model is chosen yet"),
])
def test_the_environment_notice_says_why_no_conversation_can_start(household, monkeypatch, env, words):
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    page = household.get(PAGE).get_data(as_text=True)
    found = re.search(r'id="environment-notice">(.*?)</div>', page, re.S)
    assert found, "no environment notice"
    notice = found.group(1)
    assert words in notice
    assert "a conversation uses" not in notice  # none can start: the page must not say one uses anything


def test_a_turn_uses_what_was_saved_without_a_restart(household, model):
    model.script(text("Hello from the saved model."), text("Hello again."))
    response = household.post("/api/v1/conversation/message", json={"message": "hi"})
    assert error_of(response, 503, "MODEL_NOT_CONFIGURED")["message"].find("/settings/model") >= 0
    save(household, base_url=model.url, model="fake-model", api_key=KEY)
    response = household.post("/api/v1/conversation/message", json={"message": "hi"})
    assert response.status_code == 200 and response.get_json()["reply"] == "Hello from the saved model."
    (request,) = model.requests
    assert request.body["model"] == "fake-model" and request.headers["Authorization"] == f"Bearer {KEY}"
    save(household, base_url=model.url, model="renamed")
    household.post("/api/v1/conversation/message", json={"message": "hi"})
    assert model.requests[-1].body["model"] == "renamed"


# --- the test over the API ---------------------------------------------------------------------

def test_the_test_reports_ready_and_the_server_s_models(household, model):
    model.models = ["fake-model", "small"]
    model.script(tool_call("report_ready", {"ready": True}))
    response = household.post(MODEL_API + "/test", json={"base_url": model.url, "model": "fake-model"})
    assert response.status_code == 200
    assert response.get_json() == {"ok": True, "problem": None, "message": response.get_json()["message"],
                                   "models": ["fake-model", "small"], "chosen": "", "is_error": False}


@pytest.mark.parametrize(("setup", "problem"), [
    ("down", "unreachable"),
    ("html", "not_openai_compatible"),
    ("unknown-model", "model_not_found"),
    ("no-tools", "no_tool_calls"),
])
def test_each_failure_of_the_test_is_named_in_plain_words(household, model, setup, problem):
    url = model.url
    if setup == "down":
        url = unused_loopback_url()
    elif setup == "html":
        model.models = Raw(200, b"<html>router</html>", "text/html")
    elif setup == "unknown-model":
        model.script(Raw(404, b'{"error": {"message": "model \\"nope\\" not found"}}'))
    else:
        model.script(text("Sure, I am ready."))
    body = household.post(MODEL_API + "/test", json={"base_url": url, "model": "nope"}).get_json()
    assert body["ok"] is False and body["problem"] == problem and body["message"]


def test_the_test_uses_the_saved_key_for_its_own_server_only(household, model):
    save(household, base_url=model.url, model="fake-model", api_key=KEY)
    model.script(tool_call("report_ready", {"ready": True}))
    assert household.post(MODEL_API + "/test", json={"base_url": model.url, "model": "fake-model"}).get_json()["ok"]
    assert all(r.headers.get("Authorization") == f"Bearer {KEY}" for r in model.requests)
    with FakeModel() as other:
        other.script(tool_call("report_ready", {"ready": True}))
        household.post(MODEL_API + "/test", json={"base_url": other.url, "model": "fake-model"})
        assert other.requests and all("Authorization" not in r.headers for r in other.requests)


# --- the page without JavaScript ---------------------------------------------------------------

def _page_form(client: FlaskClient) -> str:
    return csrf_from(client.get(PAGE).get_data(as_text=True))


def test_the_page_has_the_contract_s_fields_and_buttons(logged_in):
    html = logged_in.get(PAGE).get_data(as_text=True)
    assert '<label for="base-url">Model server URL</label>' in html
    assert '<label for="model">Model</label>' in html
    assert '<label for="api-key">API key</label>' in html and 'type="password" id="api-key"' in html
    # Not "off", which Chromium ignores for passwords: the Console's saved login must not be filled in here.
    assert re.search(r'id="api-key"[^>]*autocomplete="new-password"', html)
    assert ">Test model</button>" in html and ">Save</button>" in html
    assert 'href="/settings/model"' in html  # the nav link


def test_the_form_saves_and_tests_without_javascript(logged_in, data_dir, model):
    token = _page_form(logged_in)
    response = logged_in.post(PAGE, data={"csrf_token": token, "base_url": model.url, "model": "fake-model",
                                          "api_key": KEY, "action": "save"})
    assert response.status_code == 303 and response.headers["Location"].endswith(PAGE)
    assert json.loads(data_dir.model_config.read_text())["model"] == "fake-model"
    assert "Saved." in logged_in.get(PAGE).get_data(as_text=True)
    model.models = ["fake-model", "tiny-model"]
    model.script(text("no tools here"))
    html = logged_in.post(PAGE, data={"csrf_token": token, "base_url": model.url, "model": "fake-model",
                                      "action": "test"}).get_data(as_text=True)
    assert "--jinja" in html and '<option value="tiny-model">' in html
    assert f'value="{model.url}"' in html  # what was typed stays in the form


def test_a_refused_form_keeps_the_values_and_says_why(logged_in, data_dir):
    token = _page_form(logged_in)
    response = logged_in.post(PAGE, data={"csrf_token": token, "base_url": "http://h:8080", "model": "m",
                                          "api_key": KEY, "action": "save"})
    html = response.get_data(as_text=True)
    assert response.status_code == 400 and "ends in /v1" in html and 'aria-invalid=true' in html
    assert 'value="http://h:8080"' in html and not data_dir.model_config.exists()


def test_the_form_needs_its_csrf_token(logged_in, data_dir):
    response = logged_in.post(PAGE, data={"base_url": "http://h:8080/v1", "model": "m"})
    assert response.status_code == 400 and not data_dir.model_config.exists()


def test_the_form_resets_a_damaged_file(logged_in, data_dir):
    data_dir.model_config.parent.mkdir(parents=True)
    data_dir.model_config.write_text("[]")
    token = _page_form(logged_in)
    assert logged_in.post(PAGE, data={"csrf_token": token, "action": "reset"}).status_code == 303
    assert not data_dir.model_config.exists()
    assert len(list(data_dir.model_config.parent.glob("model.json.broken-*"))) == 1


# --- the conversation page says when no model is set up ----------------------------------------

def test_the_conversation_page_says_when_no_model_is_set_up_and_links_to_the_page(household, model):
    html = household.get("/conversation").get_data(as_text=True)
    found = re.search(r'id="model-notice"(.*?)</div>', html, re.S)
    assert found, "no model notice"
    notice = found.group(1)
    assert "No language model is set up yet" in notice and 'href="/settings/model"' in notice
    save(household, base_url=model.url, model="fake-model")
    assert 'id="model-notice"' not in household.get("/conversation").get_data(as_text=True)


def test_the_conversation_page_has_no_notice_when_the_environment_sets_the_model(household, monkeypatch, model):
    monkeypatch.setenv("CONSOLE_HA_LLM_URL", model.url)
    monkeypatch.setenv("CONSOLE_HA_LLM_MODEL", "fake-model")
    assert 'id="model-notice"' not in household.get("/conversation").get_data(as_text=True)


def test_one_model_test_at_a_time(app, household, password, model):
    """A second test while one waits on a slow server is refused at once, not queued on a worker thread."""
    import threading
    import time

    from .conftest import log_in, page_csrf

    model.models = Hang(2.5)
    first: dict[str, Any] = {}

    def slow() -> None:
        first["response"] = household.post(MODEL_API + "/test", json={"base_url": model.url, "model": "m"})

    worker = threading.Thread(target=slow)
    worker.start()
    deadline = time.monotonic() + 5
    while not model.requests and time.monotonic() < deadline:
        time.sleep(0.02)
    other = app.test_client()
    log_in(other, password)
    other.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(other)
    error_of(other.post(MODEL_API + "/test", json={"base_url": model.url, "model": "m"}), 429, "RATE_LIMITED")
    worker.join(10)
    assert first["response"].get_json()["problem"] == "unreachable"
    model.models = ["m"]
    model.script(tool_call("report_ready", {"ready": True}))
    assert other.post(MODEL_API + "/test", json={"base_url": model.url, "model": "m"}).get_json()["ok"]
