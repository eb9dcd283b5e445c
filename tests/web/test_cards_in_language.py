"""Issue 26: a card, the Console's chat lines and the confirmations read in the language of the request that
gets them, whichever language the request that made the card spoke (real HTTP, and the Flask test client)."""

from __future__ import annotations

import re

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient

from console_ha.answers.household_queue import HouseholdQueue, WaitingRead
from tests.fake_model import FakeModel, text, tool_call
from tests.seed import seed_settings
from tests.web.conftest import csrf_from
from tests.web.live import Browser, served

pytestmark = pytest.mark.with_model  # the Console's model is the scripted fake (conftest.py `app`)

FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9"}
CHINESE = {"Accept-Language": "zh-CN,zh;q=0.9"}
GERMAN = {"Accept-Language": "de"}
ENTITY = "sensor.living_room_temperature"
NAME = "Living room temperature"


@pytest.fixture
def configured(data_dir, stub_ha):
    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url, "allowlisted_entities": [ENTITY],
                             "entity_names": {ENTITY: NAME}}, token=stub_ha.token)
    return stub_ha


def _household(browser: Browser, password: str) -> dict[str, str]:
    """Log the browser in; the CSRF header its page's script sends with each JSON request."""
    assert browser.log_in(password).status_code == 302
    return {"X-CSRFToken": browser.csrf("/conversation")}


def test_a_card_made_in_french_reads_in_chinese_and_english_and_its_lines_follow_each_request(
        app: Flask, model: FakeModel, configured, password: str) -> None:
    model.script(tool_call("home_assistant__get_state", {"entity_id": ENTITY}), text("Il fait 21 °C."))
    with served(app) as console:
        browser = console.browser()
        csrf = _household(browser, password)
        made = browser.post("/api/v1/conversation/message", json={"message": "Quelle température ?"},
                            headers={**csrf, **FRENCH}).json()
        card = made["pending_confirmation"]["card"]
        assert card["title"] == f"Lire {NAME} maintenant\u202f?"
        assert card["approve_label"] == "Autoriser cette fois-ci" and card["deny_label"] == "Ne pas autoriser"
        assert card["body"].startswith(f"L’assistant souhaite lire la valeur actuelle de {NAME} ({ENTITY}) avec "
                                       "son unité")
        conversation = made["conversation_id"]

        def lines(headers: dict[str, str]) -> dict:
            answer = browser.get("/api/v1/conversation/lines", params={"conversation_id": conversation},
                                 headers=headers)
            assert answer.status_code == 200 and "Accept-Language" in answer.headers["Vary"]
            return answer.json()

        chinese = lines(CHINESE)["pending_confirmation"]["card"]
        assert chinese["title"] == f"现在读取{NAME}？" and chinese["approve_label"] == "仅允许这一次"
        assert chinese["body"].endswith("的 Home Assistant。")
        assert lines({})["pending_confirmation"]["card"]["title"] == f"Read {NAME} now?"

        denied = browser.post("/api/v1/conversation/message", headers={**csrf, **GERMAN}, json={
            "conversation_id": conversation, "confirmation": {"token": made["pending_confirmation"]["token"],
                                                              "approve": False}})
        assert denied.status_code == 200
        said = {language: [m["content"] for m in lines(headers)["messages"] if m["role"] == "note"]
                for language, headers in (("fr", FRENCH), ("zh", CHINESE), ("en", {}))}
        assert said["fr"] == [f"Lire {NAME} maintenant\u202f? Vous ne l’avez pas autorisé, donc rien n’a été lu."]
        assert said["zh"] == [f"现在读取{NAME}？你没有允许，因此没有读取任何内容。"]
        assert said["en"] == [f"Read {NAME} now? You did not allow it, so nothing was read."]
    assert configured.requests == []


def test_the_conversation_page_without_javascript_shows_the_card_and_its_hint_in_chinese(
        app: Flask, household: FlaskClient, model: FakeModel, configured) -> None:
    model.script(tool_call("home_assistant__get_state", {"entity_id": ENTITY}))
    made = household.post("/api/v1/conversation/message", json={"message": "温度？"}).get_json()
    html = household.get(f"/conversation?c={made['conversation_id']}", headers=CHINESE).get_data(as_text=True)
    assert f'<h2 id="confirm-title" data-slot="title">现在读取{NAME}？</h2>' in html
    assert "未经你允许，不会读取任何内容。此请求在 <time" in html and "之前有效。</p>" in html
    assert '>仅允许这一次</button>' in html and '>不允许</button>' in html
    assert "<title>对话 · 控制台</title>" in html and 'data-words-empty="请先输入一个问题。"' in html


def _queue(app: Flask) -> HouseholdQueue:
    queue: HouseholdQueue = app.extensions["console_ha_mcp"].queue
    return queue


def _waiting(app: Flask, token_id: str = "") -> WaitingRead:
    """A program's read waiting for the household, as an MCP call leaves one; asked for twice."""
    first = _queue(app).ask("tests", "home_assistant.get_history", {"entity_id": ENTITY, "period": "day"},
                            token_id=token_id)
    first.asked = 2
    return first


def test_the_confirmations_follow_the_language_of_each_request_over_real_http(
        app: Flask, configured, password: str, api_token: str, console_secrets) -> None:
    read = _waiting(app, token_id=console_secrets.api_tokens()[0].token_id)
    with served(app) as console:
        browser = console.browser()
        csrf = _household(browser, password)

        def pending(headers: dict[str, str]) -> dict:
            return browser.get("/api/v1/confirmations", headers=headers).json()["pending"][0]

        french, chinese = pending(FRENCH), pending(CHINESE)
        assert french["card"]["title"] == f"Lire l’historique de {NAME}\u202f?"
        assert "sur la dernière journée\u00a0:" in french["card"]["body"]
        assert french["destination"].startswith("Demandé par «\u00a0tests\u00a0», un programme")
        assert french["asked_words"] == "Demandé 2\u00a0fois."
        assert chinese["card"]["title"] == f"读取{NAME}的历史记录？" and chinese["asked_words"] == "已请求 2 次。"
        assert pending({})["card"]["title"] == f"Read the history of {NAME}?"

        # What the asking program sees of its own card follows its own Accept-Language: none is English.
        def program(headers: dict[str, str]) -> dict:
            answer = requests.get(f"{console.url}/api/v1/confirmations", timeout=10,
                                  headers={"Authorization": f"Bearer {api_token}", **headers})
            return answer.json()["pending"][0]["card"]

        assert program({})["title"] == "Waiting for the household"
        assert program(FRENCH)["title"] == "En attente du foyer"

        answered = browser.post(f"/api/v1/confirmations/{read.token}", json={"approve": True},
                                headers={**csrf, **CHINESE}).json()
        assert answered == {"status": "approved", "message": "已允许：该程序可获得这一次读取结果。"}
        late = browser.post(f"/api/v1/confirmations/{read.token}", json={"approve": True},
                            headers={**csrf, **FRENCH}).json()
        assert late["error"]["message"] == ("Cette demande n’est plus en attente\u00a0: elle a reçu une réponse, a été "
                                            "retirée ou n’a jamais été faite.")


def test_an_answer_without_javascript_is_told_back_in_the_page_s_language(
        app: Flask, household: FlaskClient, configured) -> None:
    read = _waiting(app)
    page = household.get("/confirmations", headers=FRENCH).get_data(as_text=True)
    assert "<h1>Confirmations</h1>" in page and "Rien n’est lu sans votre autorisation" in page
    assert "Cette demande reste ouverte jusqu’à <time" in page
    assert re.search(r'data-words-arrived-other="\{count\} demandes vous attendent\."', page)
    answer = household.post("/confirmations", headers=FRENCH, data={
        "token": read.token, "decision": "deny", "csrf_token": csrf_from(page)})
    assert answer.status_code == 303
    shown = household.get("/confirmations", headers=FRENCH).get_data(as_text=True)
    assert "Non autorisé\u00a0: rien n’a été lu." in shown
    assert "Rien ne vous attend. Quand un programme demande à lire Home Assistant" in shown


def test_each_page_s_long_poll_words_the_notification_in_its_own_language(
        app: Flask, household: FlaskClient, configured) -> None:
    """Issue 20's system notification, from the same card: a French tab and a Chinese tab each read their own."""
    _waiting(app)

    def notification(headers: dict[str, str]) -> tuple[str, str]:
        card = household.get("/api/v1/confirmations/watch", headers=headers).get_json()["cards"][0]
        return card["notification_title"], card["notification_body"]

    assert notification(FRENCH) == ("«\u00a0tests\u00a0» demande à lire Home Assistant",
                                    f"Lire l’historique de {NAME}\u202f? Autorisez-le ou non sur la page "
                                    "Confirmations de la Console.")
    assert notification(CHINESE)[1] == f"读取{NAME}的历史记录？请在控制台的“确认请求”页面上选择是否允许。"
    assert notification({})[0] == "“tests” asks to read Home Assistant"
