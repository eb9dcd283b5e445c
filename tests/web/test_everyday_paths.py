"""Issue 25's everyday paths as the server answers them: the front door, the recent conversations, the Enter hint."""

from __future__ import annotations

import re
import time
from typing import Any
from urllib.parse import urlsplit

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient

from console_ha.secret import Secret
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore
from tests.fake_model import FakeModel, text, tool_call
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant
from tests.web.conftest import csrf_from
from tests.web.live import served

pytestmark = pytest.mark.with_model  # the Console's model is the scripted fake (conftest.py `app`)

MESSAGE = "/api/v1/conversation/message"
RECENT = "/api/v1/conversation/recent"
SETTINGS = "/settings/home-assistant"
URL = "http://homeassistant.local:8123"
ALLOWED = ["sensor.living_room_temperature"]
SET_UP: dict[str, Any] = {"enabled": True, "base_url": URL, "allowlisted_entities": ALLOWED}


def save(data_dir: DataDir, config: dict[str, Any], token_for: str | None = URL) -> None:
    seed_settings(data_dir, config)
    if token_for is not None:
        TokenStore(data_dir).write(Secret("eyJhbGciOiJIUzI1NiJ9.front-door.signature"), token_for)


@pytest.fixture
def configured(data_dir: DataDir, stub_ha: StubHomeAssistant) -> StubHomeAssistant:
    save(data_dir, {**SET_UP, "base_url": stub_ha.base_url}, token_for=None)
    from console_ha.store.ha_token import check_token

    TokenStore(data_dir).write(check_token(stub_ha.token), stub_ha.base_url)
    return stub_ha


# --- the front door ------------------------------------------------------------------------------

def test_once_set_up_the_front_door_leads_to_the_conversation(logged_in: FlaskClient, data_dir: DataDir) -> None:
    save(data_dir, SET_UP)
    response = logged_in.get("/")
    assert response.status_code == 302 and response.location == "/conversation"


@pytest.mark.parametrize(("config", "token_for"), [
    ({**SET_UP, "enabled": False}, URL),  # switched off
    ({**SET_UP, "allowlisted_entities": []}, URL),  # nothing chosen to read
    (SET_UP, None),  # no token
    (SET_UP, "http://elsewhere.local:8123"),  # a token for another Home Assistant, which is never sent here
], ids=["off", "no-devices", "no-token", "token-for-elsewhere"])
def test_until_set_up_the_front_door_leads_to_settings(
        logged_in: FlaskClient, data_dir: DataDir, config: dict[str, Any], token_for: str | None) -> None:
    save(data_dir, config, token_for)
    response = logged_in.get("/")
    assert response.status_code == 302 and response.location == SETTINGS


def test_a_damaged_settings_file_leads_to_settings_which_says_what_to_do(
        logged_in: FlaskClient, data_dir: DataDir) -> None:
    save(data_dir, SET_UP)
    data_dir.ha_config.write_text("{not json")
    assert logged_in.get("/").location == SETTINGS


def test_a_login_without_next_lands_on_the_conversation_once_set_up(
        client: FlaskClient, password: str, data_dir: DataDir) -> None:
    save(data_dir, SET_UP)
    token = csrf_from(client.get("/login").get_data(as_text=True))
    landed = client.post("/login", data={"password": password, "csrf_token": token}, follow_redirects=True)
    assert landed.status_code == 200 and landed.request.path == "/conversation"


def test_a_login_with_next_still_goes_there(client: FlaskClient, password: str, data_dir: DataDir) -> None:
    save(data_dir, SET_UP)
    token = csrf_from(client.get("/login").get_data(as_text=True))
    landed = client.post("/login?next=/activity", data={"password": password, "csrf_token": token},
                         follow_redirects=True)
    assert landed.request.path == "/activity"


# --- the recent conversations ---------------------------------------------------------------------

def test_the_list_follows_the_last_message_and_an_answered_card_no_longer_waits(
        household: FlaskClient, configured: StubHomeAssistant, model: FakeModel) -> None:
    model.script(text("Hello."), tool_call("home_assistant__list_entities", {}), text("Two devices."))
    first = household.post(MESSAGE, json={"message": "hello there"}).get_json()
    time.sleep(0.01)
    second = household.post(MESSAGE, json={"message": "what devices are there?"}).get_json()
    listed = household.get(RECENT).get_json()["conversations"]
    assert [(c["label"], c["waiting"]) for c in listed] == [("what devices are there?", True), ("hello there", False)]
    # Reopening the older one to read it moves nothing.
    household.get(f'/conversation?c={first["conversation_id"]}')
    assert [c["conversation_id"] for c in household.get(RECENT).get_json()["conversations"]] == [
        second["conversation_id"], first["conversation_id"]]
    household.post(MESSAGE, json={"conversation_id": second["conversation_id"], "confirmation": {
        "token": second["pending_confirmation"]["token"], "approve": True}})
    answered = household.get(RECENT).get_json()["conversations"][0]
    assert answered["conversation_id"] == second["conversation_id"] and answered["waiting"] is False
    model.script(text("Hi again."))
    time.sleep(0.01)
    household.post(MESSAGE, json={"conversation_id": first["conversation_id"], "message": "me again"})
    moved = household.get(RECENT).get_json()["conversations"]
    assert moved[0]["conversation_id"] == first["conversation_id"]
    assert moved[0]["updated"] >= moved[1]["updated"]  # with its new time, not its old one


def test_the_list_is_the_household_s_alone(bearer: FlaskClient, client: FlaskClient) -> None:
    assert bearer.get(RECENT).status_code == 403
    assert client.get(RECENT).status_code == 401


def test_a_long_first_question_is_shortened_once_on_the_server(
        household: FlaskClient, configured: StubHomeAssistant, model: FakeModel) -> None:
    model.script(text("OK."))
    question = "Which of the lights " * 10
    household.post(MESSAGE, json={"message": question})
    label = household.get(RECENT).get_json()["conversations"][0]["label"]
    assert len(label) == 80 and label.endswith("…") and question.startswith(label[:-1])
    assert f">{label}</a>" in household.get("/conversation").get_data(as_text=True)


def test_the_page_states_the_bounds_in_one_line(household: FlaskClient) -> None:
    html = household.get("/conversation").get_data(as_text=True)
    line = re.search(r'<p class="hint" id="recent-bounds">(.*?)</p>', html, re.S)
    assert line is not None
    words = " ".join(line.group(1).split())
    assert words == ("The Console keeps your last 100 conversations for 6 hours after their last message, also "
                     "across a restart, and of a long conversation its latest 262,144 characters.")


# --- the Enter hint -------------------------------------------------------------------------------

def test_the_enter_hint_is_hidden_until_the_script_that_sends_on_enter_shows_it(household: FlaskClient) -> None:
    html = household.get("/conversation").get_data(as_text=True)
    assert re.search(r'<p class="hint" id="enter-hint" hidden>Press Enter to send', html)
    assert 'aria-describedby="message-hint"' in html  # a screen reader is not told it either


# --- over real HTTP: whose list, and where a login may land -----------------------------------------

def test_a_program_s_conversation_is_never_listed_nor_kept_nor_opened_by_the_household_over_http(
        app: Flask, api_token: str, password: str, configured: StubHomeAssistant, model: FakeModel,
        data_dir: DataDir) -> None:
    model.script(text("Hello, program."), text("Hello, household."))
    with served(app) as console:
        program = requests.post(f"{console.url}{MESSAGE}", json={"message": "the program's question"},
                                headers={"Authorization": f"Bearer {api_token}"}, timeout=10)
        assert program.status_code == 200, program.text
        assert requests.get(f"{console.url}{RECENT}", headers={"Authorization": f"Bearer {api_token}"},
                            timeout=10).status_code == 403
        household = console.browser()
        assert household.log_in(password).status_code == 302
        token = household.csrf("/conversation")
        mine = household.post(MESSAGE, json={"message": "the household's question"},
                              headers={"X-CSRFToken": token}).json()
        listed = household.get(RECENT).json()["conversations"]
        assert [c["conversation_id"] for c in listed] == [mine["conversation_id"]]
        page = household.get(f"/conversation?c={program.json()['conversation_id']}").text
        assert "the program's question" not in page and "Hello, program." not in page
    kept = "".join(p.read_text() for p in (data_dir.root / "conversations").glob("*.json"))
    assert "the household's question" in kept and "the program's question" not in kept


@pytest.mark.parametrize("next_url", ["//evil.example/", "https://evil.example/", "/\\evil.example",
                                      "/\t/evil.example", "http:/evil.example", "javascript:alert(1)",
                                      "%2F%2Fevil.example", "/%2F%2Fevil.example"])
def test_a_login_with_a_hostile_next_lands_on_the_console_over_http(
        app: Flask, password: str, data_dir: DataDir, next_url: str) -> None:
    save(data_dir, SET_UP)
    with served(app) as console:
        household = console.browser()
        form = {"password": password, "csrf_token": household.csrf("/login"), "next": next_url}
        landed = household.post("/login", data=form)
        assert landed.status_code == 302
        location = landed.headers["Location"]
        # A path on the Console, which a browser cannot read as another host.
        parts = urlsplit(location)
        assert not parts.scheme and not parts.netloc and location.startswith("/"), location
        assert not location.startswith(("//", "/\\")) and not any(ord(c) < 0x20 for c in location), location
        front = household.get("/")
        assert front.status_code in (302, 303) and front.headers["Location"] == "/conversation"
