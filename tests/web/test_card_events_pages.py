"""on_card and the conversation's hooks through the Console's pages (issue 30), with a plugin installed under the
entry point group `console_ha`: the household page's cards and a program's conversation message, as each is."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from flask import Flask

from console_ha.console import Console
from tests.fake_model import answer_from_tool_result, tool_call
from tests.tiny_plugin import install_plugin
from tests.web.test_conversation_api import _card_for, _program_asks, answer, ask, household_of

pytestmark = pytest.mark.with_model  # the Console's model is the scripted fake (conftest.py `app`)

HISTORY = "home_assistant__get_history"
ARGUMENTS = {"entity_id": "sensor.living_room_temperature", "period": "day"}
RECORDER = """
import json

from console_ha.hooks import hookimpl


@hookimpl
def on_card(event, principal):
    with open({path!r}, "a", encoding="utf-8") as told:
        told.write(json.dumps([event, principal]) + "\\n")
"""


@pytest.fixture
def told(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """Where the installed plugin writes each on_card; installed before the app (and its Console) is made."""
    path = tmp_path / "told.jsonl"
    install_plugin(tmp_path / "site", monkeypatch, name="page_card_recorder", version="1.0",
                   source=RECORDER.format(path=str(path)))
    return path


@pytest.fixture
def app(told: Path, app_with_model: Flask) -> Flask:
    """The Console app with the fake model, made once the plugin is installed (Console.open loads it)."""
    return app_with_model


def events(app: Flask, told: Path) -> list[tuple[str, str]]:
    console: Console = app.extensions["console_ha"]
    console.stage_hooks.settled()
    lines = told.read_text(encoding="utf-8").splitlines() if told.exists() else []
    return [tuple(json.loads(line)) for line in lines]


def test_the_household_page_s_cards_are_told_waiting_allowed_denied_and_withdrawn(told, app, password, configured,
                                                                                  model):
    household = household_of(app, password)
    model.script(tool_call(HISTORY, ARGUMENTS), answer_from_tool_result, tool_call(HISTORY, ARGUMENTS),
                 answer_from_tool_result, tool_call(HISTORY, ARGUMENTS), answer_from_tool_result)
    for approve in (True, False):
        paused = ask(household).get_json()
        answer(household, paused["conversation_id"], paused["pending_confirmation"]["token"], approve)
    paused = ask(household).get_json()
    ask(household, "something else", paused["conversation_id"])  # a new message withdraws the card
    assert events(app, told) == [("waiting", "household"), ("allowed", "household"), ("waiting", "household"),
                                 ("denied", "household"), ("waiting", "household"), ("withdrawn", "household")]


def test_a_program_s_conversation_message_s_card_is_told_as_the_program_s(told, app, api_token, password, configured,
                                                                         model):
    bearer = app.test_client()
    bearer.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {api_token}"
    household = household_of(app, password)
    model.script(tool_call(HISTORY, ARGUMENTS), answer_from_tool_result)
    asked = _program_asks(bearer)
    card = _card_for(household)
    household.post(f"/api/v1/confirmations/{card['token']}", json={"approve": True})
    assert asked.result(timeout=15).status_code == 200
    assert events(app, told) == [("waiting", "program:tests"), ("allowed", "program:tests")]


def test_activity_shows_a_plugin_skipped_on_a_card(tmp_path, monkeypatch, make_app, password, configured, model):
    install_plugin(tmp_path / "site", monkeypatch, name="broken_card", version="0.1", source="""
from console_ha.hooks import hookimpl


@hookimpl
def on_card(event):
    raise RuntimeError("broken plugin")
""")
    app = make_app(CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model", CONSOLE_HA_LLM_TIMEOUT=5)
    household = household_of(app, password)
    model.script(tool_call(HISTORY, ARGUMENTS), answer_from_tool_result)
    paused = ask(household).get_json()
    answer(household, paused["conversation_id"], paused["pending_confirmation"]["token"], False)
    app.extensions["console_ha"].stage_hooks.settled()
    page = household.get("/activity")
    assert page.status_code == 200
    assert ("The plugin broken_card failed or took longer than a second at on_card, so the Console went on without it."
            in page.get_data(as_text=True))


def test_activity_shows_a_message_a_plugin_answered_as_no_read(tmp_path, monkeypatch, make_app, password, configured,
                                                                model):
    # A conversation hook's line is about no read: its card said "Read: Something the Console does not know".
    install_plugin(tmp_path / "site", monkeypatch, name="night", version="0.1", source="""
from console_ha.hooks import hookimpl


@hookimpl
def on_input(message):
    return "Reads are off tonight."
""")
    app = make_app(CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model", CONSOLE_HA_LLM_TIMEOUT=5)
    household = household_of(app, password)
    assert ask(household).get_json()["reply"] == "Reads are off tonight."
    page = household.get("/activity").get_data(as_text=True)
    event = page[page.index('<li class="event-card"'):]
    event = event[:event.index("</li>")]
    assert "The plugin night answered the message itself at on_input, so the assistant was not asked." in event
    assert "Something the Console does not know" not in event and "<dt>Read</dt>" not in event
    assert "<dt>Asked by</dt><dd>Conversation page</dd>" in event
