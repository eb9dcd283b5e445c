"""Issue 21 on /conversation: the recent conversations, the lines endpoint, the model's next step."""

from __future__ import annotations

import pytest
from flask import Flask
from flask.testing import FlaskClient
from markupsafe import escape

from console_ha.words import CHAT_EXPIRED, CHAT_WORDS, MODEL_NEXT_STEP
from tests.fake_model import FakeModel, status, text, tool_call
from tests.seed import seed_settings
from tests.web.conftest import household_client

pytestmark = pytest.mark.with_model  # the Console's model is the scripted fake (conftest.py `app`)

MESSAGE = "/api/v1/conversation/message"
LINES = "/api/v1/conversation/lines"
ALLOWED = ["sensor.living_room_temperature"]


@pytest.fixture
def configured(data_dir, stub_ha):
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": ALLOWED},
                  token=stub_ha.token)
    return stub_ha


def test_the_page_lists_recent_conversations_and_reopens_one_with_its_waiting_card(
        household: FlaskClient, configured, model: FakeModel) -> None:
    model.script(text("Hello."), tool_call("home_assistant__list_entities", {}))
    first = household.post(MESSAGE, json={"message": "hello there"}).get_json()
    second = household.post(MESSAGE, json={"message": "what devices are there?"}).get_json()
    assert second["pending_confirmation"] is not None
    page = household.get("/conversation").get_data(as_text=True)
    listed = page[page.index("Recent conversations"):]
    assert listed.index("what devices are there?") < listed.index("hello there")  # newest first
    assert f'/conversation?c={first["conversation_id"]}' in listed
    assert "a question waits for your answer" in listed
    assert "keeps your last 100 conversations for 6 hours" in listed
    reopened = household.get(f'/conversation?c={second["conversation_id"]}').get_data(as_text=True)
    assert second["pending_confirmation"]["card"]["title"] in reopened
    assert second["pending_confirmation"]["token"] in reopened  # the card's own form can answer it


def test_lines_give_the_console_s_own_lines_to_the_page_and_only_to_the_household(
        app: Flask, household: FlaskClient, bearer: FlaskClient, configured, model: FakeModel) -> None:
    model.script(tool_call("home_assistant__get_history", {"entity_id": "lock.front_door", "period": "day"}),
                 text("I cannot read that."))
    done = household.post(MESSAGE, json={"message": "is the door locked?"}).get_json()
    lines = household.get(LINES, query_string={"conversation_id": done["conversation_id"]}).get_json()
    assert [(m["role"], m["content"]) for m in lines["messages"]] == [
        ("user", "is the door locked?"), ("note", CHAT_WORDS["ENTITY_NOT_ALLOWLISTED"]),
        ("assistant", "I cannot read that.")]
    assert lines["pending_confirmation"] is None
    assert household.get(LINES, query_string={"conversation_id": "nope"}).status_code == 404
    assert household.get(LINES).status_code == 404
    refused = bearer.get(LINES, query_string={"conversation_id": done["conversation_id"]})
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "FORBIDDEN"


def test_a_model_that_cannot_be_reached_gets_a_next_step_and_a_link_to_model(
        household: FlaskClient, configured, model: FakeModel) -> None:
    model.script(status(500))
    csrf = household.get("/conversation").get_data(as_text=True)
    from tests.web.conftest import csrf_from
    response = household.post("/conversation", data={"message": "hi", "csrf_token": csrf_from(csrf)})
    html = response.get_data(as_text=True)
    assert response.status_code == 502
    assert MODEL_NEXT_STEP.replace("’", "&#8217;") in html or MODEL_NEXT_STEP in html
    assert 'href="/settings/model">Open Model</a>' in html


def test_a_program_s_conversations_are_not_listed_on_the_household_s_page(
        app: Flask, bearer: FlaskClient, data_dir, configured, model: FakeModel) -> None:
    model.script(text("Hi program."))
    assert bearer.post(MESSAGE, json={"message": "a program's question"}).status_code == 200
    household = household_client(app, data_dir)
    page = household.get("/conversation").get_data(as_text=True)
    assert "program&#39;s question" not in page and "program's question" not in page
    assert "None yet." in page


def test_lines_after_the_card_s_expiry_give_the_console_s_line_and_no_open_card(
        app: Flask, household: FlaskClient, data_dir, configured, model: FakeModel) -> None:
    from tests.web.test_conversation_api import with_clock

    clock = with_clock(app, data_dir, model)
    model.script(tool_call("home_assistant__list_entities", {}))
    paused = household.post(MESSAGE, json={"message": "what devices are there?"}).get_json()
    title = paused["pending_confirmation"]["card"]["title"]
    before = household.get(LINES, query_string={"conversation_id": paused["conversation_id"]}).get_json()
    assert before["pending_confirmation"]["token"] == paused["pending_confirmation"]["token"]
    clock.now += 301
    after = household.get(LINES, query_string={"conversation_id": paused["conversation_id"]}).get_json()
    assert after["pending_confirmation"] is None
    assert after["messages"][-1] == {"role": "note", "content": CHAT_EXPIRED.format(title=title)}
    # Without JavaScript the page shows the same line, and the card expired with its "Ask again".
    page = household.get(f'/conversation?c={paused["conversation_id"]}').get_data(as_text=True)
    assert page.count(str(escape(CHAT_EXPIRED.format(title=title)))) == 1
    assert 'class="card confirm-card confirm-card--expired" id="confirm-card"' in page and "Ask again" in page
    assert "Expired unanswered" in household.get("/activity").get_data(as_text=True)
