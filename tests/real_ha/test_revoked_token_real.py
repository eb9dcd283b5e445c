"""A Home Assistant token revoked in the real Home Assistant 2025.4.4 (issue 21; RFC-0018's open question).

The test revokes a real long-lived token through Home Assistant's own WebSocket `auth/delete_refresh_token`
(the Console never could: it is not a read). Then Test connection, the picker, a conversation read and an
MCP read each say, in the household's words, that Home Assistant refused the token and how to make a new
one; the answer holds nothing else (no status line of Home Assistant's, no address, never the token).
"""

from __future__ import annotations

import asyncio
import json
import secrets
from collections.abc import Iterator
from typing import Any

import pytest
import requests

from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from console_ha.words import CHAT_WORDS, MODEL_WORDS, SETTINGS_WORDS
from tests.fake_model import FakeModel, text, tool_call
from tests.mcp.conftest import FAST_HASH, PASSWORD, ServedConsole, log_in, mcp_session, serve, stop
from tests.mcp.test_mcp_http import household_answers, pending_cards, run
from tests.real_ha.harness import RealHomeAssistant, mint_and_revoke

pytestmark = pytest.mark.real_ha

API = "/api/v1/conversation/home-assistant"
MESSAGE = "/api/v1/conversation/message"
ENTITY = "sensor.living_room_temperature"
# How to make a new one, in every answer the household (or its assistant) reads.
HOW = "Long-lived access tokens"


@pytest.fixture(scope="module")
def revoked(real_ha: RealHomeAssistant) -> str:
    """A token the real Home Assistant issued and then revoked; Home Assistant now answers it 401."""
    token, revoke = mint_and_revoke(real_ha, f"console-ha revoked {secrets.token_hex(4)}")
    assert real_ha.get("/api/", token=token).status_code == 200
    revoke()
    assert real_ha.get("/api/", token=token).status_code == 401
    return token


@pytest.fixture
def console(data_dir: DataDir, real_ha: RealHomeAssistant, revoked: str, model: FakeModel,
            hidden_secrets: list[str]) -> Iterator[ServedConsole]:
    """The Console served on loopback, set up with the revoked token, its model the fake."""
    hidden_secrets.append(revoked)
    app = create_app(data_dir, {"CONSOLE_HA_LLM_URL": model.url, "CONSOLE_HA_LLM_MODEL": "fake-model",
                                "CONSOLE_HA_LLM_TIMEOUT": 5})
    server, thread, url = serve(app)
    served = ServedConsole(app, data_dir, url)
    served.configure(real_ha.base_url, revoked, allowlist=[ENTITY])
    ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)
    try:
        yield served
    finally:
        app.extensions["console_ha_mcp"].close()
        stop(server, thread)


@pytest.fixture
def household(console: ServedConsole) -> Iterator[requests.Session]:
    browser = log_in(console)
    yield browser
    browser.close()


def only_the_household_s_words(response: requests.Response, revoked: str, real_ha: RealHomeAssistant) -> None:
    """A 502 whose body is the code, the settings page's sentence and Home Assistant's status, nothing else."""
    assert response.status_code == 502
    assert response.json() == {"error": {"code": "HA_UNAUTHORIZED", "message": SETTINGS_WORDS["HA_UNAUTHORIZED"],
                                         "status": 401}}
    assert HOW in response.text
    assert revoked not in response.text and real_ha.base_url not in response.text


def test_test_connection_says_home_assistant_refused_the_token_and_how_to_make_one(
        console: ServedConsole, household: requests.Session, revoked: str, real_ha: RealHomeAssistant) -> None:
    only_the_household_s_words(household.post(console.url + API + "/test", json={}, timeout=30), revoked, real_ha)


def test_the_picker_says_home_assistant_refused_the_token_and_how_to_make_one(
        console: ServedConsole, household: requests.Session, revoked: str, real_ha: RealHomeAssistant) -> None:
    only_the_household_s_words(household.get(console.url + API + "/entities", timeout=30), revoked, real_ha)


def test_a_conversation_read_says_it_in_the_chat_and_the_model_is_told_the_same(
        console: ServedConsole, household: requests.Session, model: FakeModel, revoked: str,
        real_ha: RealHomeAssistant) -> None:
    model.script(tool_call("home_assistant__get_history", {"entity_id": ENTITY, "period": "day"}),
                 text("Home Assistant refused the Console."))
    paused = household.post(console.url + MESSAGE, json={"message": "how warm was it today?"}, timeout=30).json()
    card = paused["pending_confirmation"]
    answered = household.post(console.url + MESSAGE, timeout=30, json={
        "conversation_id": paused["conversation_id"], "confirmation": {"token": card["token"], "approve": True}})
    assert answered.status_code == 200 and answered.json()["reply"] == "Home Assistant refused the Console."
    lines = household.get(console.url + "/api/v1/conversation/lines", timeout=10,
                          params={"conversation_id": paused["conversation_id"]}).json()["messages"]
    said = f"{card['card']['title']} You allowed it. {CHAT_WORDS['HA_UNAUTHORIZED']}"
    assert {"role": "note", "content": said} in lines
    assert HOW in CHAT_WORDS["HA_UNAUTHORIZED"]
    (tool_message,) = [m for m in model.requests[-1].messages if m["role"] == "tool"]
    assert json.loads(tool_message["content"]) == {
        "error": {"code": "HA_UNAUTHORIZED", "message": MODEL_WORDS["HA_UNAUTHORIZED"]}}
    sent = json.dumps([r.body for r in model.requests])
    assert revoked not in sent and real_ha.base_url not in sent


def test_an_mcp_read_says_home_assistant_refused_the_token_and_how_to_make_one(
        console: ServedConsole, household: requests.Session, revoked: str, real_ha: RealHomeAssistant) -> None:
    api_token = ConsoleSecrets(console.data_dir).create_api_token("assistant")

    async def scenario() -> Any:
        async with mcp_session(console.mcp_url, api_token) as session:
            call = asyncio.create_task(session.call_tool("home_assistant_get_history",
                                                         {"entity_id": ENTITY, "period": "day"}))
            card = (await pending_cards(console, household))[0]
            await household_answers(console, household, card["token"], True)
            return await asyncio.wait_for(call, 30)

    result = run(scenario)
    assert result.isError is True
    assert result.structuredContent == {"error": {"code": "HA_UNAUTHORIZED", "message": MODEL_WORDS["HA_UNAUTHORIZED"]}}
    assert HOW in MODEL_WORDS["HA_UNAUTHORIZED"]
    said = json.dumps(result.model_dump(mode="json"))
    assert revoked not in said and real_ha.base_url not in said
