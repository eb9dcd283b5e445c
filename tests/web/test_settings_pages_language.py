"""The settings, model and API-token pages in the household's language (issue 26), over the Flask client.

French and Chinese, chosen by the browser's Accept-Language: the pages' own words, the words the scripts
show (#script-words), the kinds of entity in the picker, the settings API's and the model test's sentences,
and the flashed lines after a form. With no Accept-Language every answer is the English it always was.
"""

from __future__ import annotations

import re

import pytest
from flask.testing import FlaskClient

from console_ha.language import LANGUAGES, Words, by_code
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.words import KIND_NAMES, SETTINGS_WORDS, kind_name
from tests.fake_model import FakeModel, text, unused_loopback_url
from tests.stub_ha import StubHomeAssistant

from .conftest import API, configure, csrf_from

pytestmark = pytest.mark.app_config(CONSOLE_HA_MODEL_TEST_TIMEOUT=3.0)

PAGE = "/settings/home-assistant"
MODEL_PAGE = "/settings/model"
MODEL_API = "/api/v1/conversation/model"
TOKENS_PAGE = "/settings/api-tokens"
FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9"}
CHINESE = {"Accept-Language": "zh-CN,zh;q=0.9"}


def _in(code: str, words: Words) -> str:
    language = by_code(code)
    assert language is not None
    return words.in_language(language)


def _script_words(html: str) -> str:
    found = re.search(r'<template id="script-words">(.*?)</template>', html, re.S)
    assert found is not None, "the page carries the words its scripts show"
    return found.group(1)


@pytest.mark.parametrize(("headers", "lang", "title", "button", "light"), [
    (FRENCH, "fr", "Paramètres de Home Assistant", "Tester la connexion", "Lumières"),
    (CHINESE, "zh-Hans", "Home Assistant 设置", "测试连接", "灯"),
])
def test_the_settings_page_reads_in_the_browser_s_language(household: FlaskClient, headers: dict[str, str],
                                                           lang: str, title: str, button: str, light: str) -> None:
    """The page, its buttons, the scripts' words and the picker's kinds; no English sentence left."""
    html = household.get(PAGE, headers=headers).get_data(as_text=True)
    assert f'<html lang="{lang}"' in html and f"<title>{title}" in html
    assert f'id="test-connection">{button}</button>' in html
    for english in ("Test connection", "Entities the assistant may read", "Let the assistant read Home Assistant",
                    "Kind of entity", "Home Assistant on https with its own certificate"):
        assert f">{english}<" not in html
    words = _script_words(html)
    assert f'<span data-kind="light">{light}</span>' in words
    assert _in(lang, SETTINGS_WORDS["HA_UNREACHABLE"]) not in words  # the API says those, not the page
    assert "Loading entities from Home Assistant" not in words and "{count}" in words


def test_every_kind_of_entity_has_its_own_name_in_every_language() -> None:
    """The picker's kinds are translated, not the English again (a few are the same word: Sun/Soleil differ)."""
    for language in LANGUAGES[1:]:
        named = {domain: name.in_language(language) for domain, name in KIND_NAMES.items()}
        assert all(named.values())
        assert named["light"] != "Lights" and named["sensor"] != KIND_NAMES["sensor"]
    # A domain the table does not know is still readable, and the same in every language.
    assert kind_name("some_new_domain") == "Some new domain"
    # For the model and programs a kind stays its English text.
    assert str(kind_name("light")) == "Lights" and f"{kind_name('light')}" == "Lights"


@pytest.mark.parametrize(("headers", "sensors", "showing"), [
    (FRENCH, "Capteurs (température, énergie, humidité…) (", "Affichage de 1 à 200 sur"),
    (CHINESE, "传感器（温度、能耗、湿度……）（", "显示第 1–200 个"),
])
def test_the_picker_without_javascript_names_kinds_and_counts_in_the_language(
        household: FlaskClient, stub_ha: StubHomeAssistant, headers: dict[str, str], sensors: str,
        showing: str) -> None:
    for i in range(300):
        stub_ha.states.append({"entity_id": f"sensor.extra_{i:03d}", "state": str(i), "attributes": {},
                               "last_changed": "2026-01-01T00:00:00+00:00",
                               "last_updated": "2026-01-01T00:00:00+00:00"})
    configure(household, stub_ha.base_url, stub_ha.token, allowlisted_entities=["light.living_room"])
    html = household.get(PAGE + "?q=", headers=headers).get_data(as_text=True)
    assert sensors in html and showing in html
    assert "Sensors (temperature" not in html and "Showing 1" not in html
    kinds = re.search(r'<select id="nojs-kind" name="kind">(.*?)</select>', html, re.S)
    assert kinds is not None
    labels = re.findall(r'<option value="[a-z_]+"[^>]*>([^<]+)</option>', kinds.group(1))
    assert len(labels) > 2 and labels == sorted(labels, key=str.casefold)  # in the language's own order


def test_a_failed_connection_test_is_said_in_the_language_of_the_request(household: FlaskClient) -> None:
    """The settings API's household sentence (words.SETTINGS_WORDS) follows Accept-Language; English without."""
    body = {"base_url": unused_loopback_url().removesuffix("/v1"), "access_token": "a" * 40}
    french = household.post(f"{API}/test", json=body, headers=FRENCH).get_json()["error"]
    english = household.post(f"{API}/test", json=body).get_json()["error"]
    assert french["code"] == english["code"] == "HA_UNREACHABLE"
    assert french["message"] == _in("fr", SETTINGS_WORDS["HA_UNREACHABLE"]) != english["message"]
    assert english["message"] == SETTINGS_WORDS["HA_UNREACHABLE"]


def test_the_model_test_s_verdict_follows_the_language(household: FlaskClient, model: FakeModel) -> None:
    """The API's verdict in French; the page without JavaScript in Chinese, its own words too."""
    model.script(text("Sure, I am ready."))
    answer = household.post(MODEL_API + "/test", json={"base_url": model.url, "model": "fake-model"},
                            headers=FRENCH).get_json()
    assert answer["problem"] == "no_tool_calls" and answer["message"].startswith("Le modèle a répondu")
    page = household.get(MODEL_PAGE, headers=CHINESE).get_data(as_text=True)
    model.script(text("Still no tools."))
    html = household.post(MODEL_PAGE, headers=CHINESE, data={
        "csrf_token": csrf_from(page), "base_url": model.url, "model": "fake-model", "action": "test"},
    ).get_data(as_text=True)
    assert '<html lang="zh-Hans"' in html and "模型作出了回应，但没有调用测试工具" in html
    assert ">测试模型</button>" in html and "<title>模型设置" in html
    assert "Test model" not in html and "The model answered" not in html


def test_the_api_tokens_pages_and_their_flashed_lines_follow_the_language(
        household: FlaskClient, console_secrets: ConsoleSecrets, data_dir: DataDir) -> None:
    console_secrets.create_api_token("old laptop")
    token_id = console_secrets.api_tokens()[0].token_id
    listing = household.get(TOKENS_PAGE, headers=CHINESE).get_data(as_text=True)
    assert "<title>API 令牌" in listing and "持有令牌的程序" in listing and ">撤销</button>" in listing
    question = household.get(f"{TOKENS_PAGE}/{token_id}/revoke", headers=FRENCH).get_data(as_text=True)
    assert "Révoquer le jeton «\xa0old laptop\xa0»\u202f?" in question and ">Oui, révoquer</button>" in question
    assert household.post(f"{TOKENS_PAGE}/{token_id}/revoke", headers=FRENCH).status_code == 303
    after = household.get(TOKENS_PAGE, headers=FRENCH).get_data(as_text=True)
    assert "Le jeton «\xa0old laptop\xa0» est révoqué." in after and "Revoked the token" not in after


def test_with_no_accept_language_the_pages_stay_english(household: FlaskClient) -> None:
    """The default: the words the existing tests read, byte for byte."""
    html = household.get(PAGE).get_data(as_text=True)
    assert '<html lang="en"' in html and 'id="test-connection">Test connection</button>' in html
    assert '<span data-kind="light">Lights</span>' in _script_words(html)
    assert ">Test model</button>" in household.get(MODEL_PAGE).get_data(as_text=True)


def test_a_mistyped_url_is_refused_in_the_language_of_the_page(household: FlaskClient) -> None:
    """The URL's own refusal (ha/addresses.py) beside the field and in the notice, with the page's own words."""
    page = household.get(PAGE, headers=FRENCH).get_data(as_text=True)
    html = household.post(PAGE, headers=FRENCH, data={"csrf_token": csrf_from(page), "revision": "",
                                                      "base_url": "ftp://homeassistant.local"}).get_data(as_text=True)
    assert "L’URL de Home Assistant doit commencer par http:// ou https://." in html
    assert "Rien n’a été enregistré." in html and "must start with" not in html
    english = household.post(PAGE, data={"csrf_token": csrf_from(page), "revision": "",
                                         "base_url": "ftp://homeassistant.local"}).get_data(as_text=True)
    assert "The Home Assistant URL must start with http:// or https://." in english
