"""The household's language on the web: the choice, pages and JSON in it, dates in its forms, catalogs loaded once."""

from __future__ import annotations

import json
import os
import stat
from collections.abc import Callable

import pytest
import requests
from flask import Flask
from flask.testing import FlaskClient

from console_ha.language import translations
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.datadir import DataDir
from tests.web.conftest import csrf_from, log_in
from tests.web.live import served

FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9,en;q=0.5"}
CHINESE = {"Accept-Language": "zh-CN,zh;q=0.9"}
GERMAN = {"Accept-Language": "de-DE"}


def _html_lang(html: str) -> str:
    return html.split('<html lang="', 1)[1].split('"', 1)[0]


@pytest.mark.parametrize(("headers", "lang", "title", "label"), [
    ({}, "en", "Log in · Console", "Password"),
    (FRENCH, "fr", "Se connecter · Console", "Mot de passe"),
    (GERMAN, "de", "Anmelden · Konsole", "Passwort"),
    ({"Accept-Language": "es-MX"}, "es", "Iniciar sesión · Consola", "Contraseña"),
    ({"Accept-Language": "nl-BE,nl"}, "nl", "Inloggen · Console", "Wachtwoord"),
    (CHINESE, "zh-Hans", "登录 · 控制台", "密码"),
    ({"Accept-Language": "zh-TW,ja"}, "en", "Log in · Console", "Password"),
    ({"Accept-Language": "fr;q=0, ja"}, "en", "Log in · Console", "Password"),  # q=0: "not French"
    ({"Accept-Language": "fr;q=0.2, nl;q=0.8"}, "nl", "Inloggen · Console", "Wachtwoord"),
])
def test_the_login_page_is_in_the_browsers_language_and_html_lang_names_it(
        client: FlaskClient, password: str, headers: dict[str, str], lang: str, title: str, label: str) -> None:
    html = client.get("/login", headers=headers).get_data(as_text=True)
    assert _html_lang(html) == lang
    assert f"<title>{title}</title>" in html
    assert f'<label for="password">{label}</label>' in html


def test_the_setup_page_speaks_chinese_with_its_number_and_its_error(client: FlaskClient) -> None:
    html = client.get("/setup", headers=CHINESE).get_data(as_text=True)
    assert "请设置家人打开控制台时使用的密码，至少需要 8 个字符。" in html
    token = csrf_from(html)
    answer = client.post("/setup", headers=CHINESE, data={"password": "abcdefgh1", "confirm": "abcdefgh2",
                                                          "csrf_token": token})
    assert answer.status_code == 400
    assert "两次输入的密码不一致，请重新输入。" in answer.get_data(as_text=True)
    short = client.post("/setup", headers=FRENCH, data={"password": "abc", "confirm": "abc", "csrf_token": token})
    assert "Le mot de passe doit comporter au moins 8 caractères." in short.get_data(as_text=True)


def test_a_wrong_password_and_the_throttle_are_said_in_the_households_language(
        client: FlaskClient, password: str) -> None:
    token = csrf_from(client.get("/login").get_data(as_text=True))
    answers = [client.post("/login", headers=FRENCH, data={"password": "wrong", "csrf_token": token})
               for _ in range(7)]
    assert "Ce mot de passe n’est pas le bon. Réessayez." in answers[0].get_data(as_text=True)
    throttled = next(answer for answer in answers if answer.status_code == 429)
    html = throttled.get_data(as_text=True)
    assert "<h1 id=\"error-title\">Trop de tentatives</h1>" in html
    assert "Trop de mots de passe erronés. Attendez" in html and "puis réessayez." in html
    assert "Erreur 429" in html


def test_every_page_says_it_varies_with_the_browsers_language(client: FlaskClient, password: str) -> None:
    assert "Accept-Language" in client.get("/login").headers["Vary"]


def test_a_json_answer_is_in_the_language_of_the_request_that_gets_it_over_real_http(
        make_app: Callable[..., Flask]) -> None:
    """One error, three requests, three languages; a program that names none gets English."""
    with served(make_app()) as console:
        def message(headers: dict[str, str]) -> str:
            answer = requests.get(f"{console.url}/api/v1/conversation/home-assistant", headers=headers, timeout=10)
            assert answer.status_code == 401
            return str(answer.json()["error"]["message"])

        assert message(FRENCH) == "Connectez-vous d’abord à la Console, ou envoyez un jeton d’API."
        assert message(GERMAN) == "Melde dich zuerst bei der Konsole an oder sende ein API-Token."
        assert message({}) == "Log in to the Console first, or send an API token."
        assert message(CHINESE) == "请先登录控制台，或发送 API 令牌。"


def test_the_choice_is_saved_in_the_consoles_own_settings_and_wins_over_the_browser(
        household: FlaskClient, data_dir: DataDir) -> None:
    page = household.get("/settings/home-assistant", headers=FRENCH).get_data(as_text=True)
    assert _html_lang(page) == "fr"
    assert '<option value="automatic" selected>Automatique</option>' in page
    answer = household.post("/settings/language", data={"language": "de", "csrf_token": csrf_from(page)})
    assert answer.status_code == 303 and answer.headers["Location"].endswith("/settings/home-assistant")
    assert json.loads(data_dir.console_settings.read_text()) == {"language": "de"}
    assert stat.S_IMODE(os.stat(data_dir.console_settings).st_mode) == 0o600
    again = household.get("/settings/home-assistant", headers=FRENCH).get_data(as_text=True)
    assert _html_lang(again) == "de"
    assert '<option value="de" lang="de" selected>Deutsch</option>' in again
    assert "<label for=\"language-choice\">Sprache</label>" in again
    household.post("/settings/language", data={"language": "automatic", "csrf_token": csrf_from(again)})
    assert _html_lang(household.get("/settings/home-assistant", headers=CHINESE).get_data(as_text=True)) == "zh-Hans"


def test_the_select_offers_automatic_and_each_language_named_in_itself(household: FlaskClient) -> None:
    page = household.get("/settings/home-assistant").get_data(as_text=True)
    block = page.split('<select id="language-choice"', 1)[1].split("</select>", 1)[0]
    assert [line.strip() for line in block.splitlines() if "<option" in line] == [
        '<option value="automatic" selected>Automatic</option>',
        '<option value="en" lang="en">English</option>',
        '<option value="fr" lang="fr">Français</option>',
        '<option value="de" lang="de">Deutsch</option>',
        '<option value="es" lang="es">Español</option>',
        '<option value="nl" lang="nl">Nederlands</option>',
        '<option value="zh-Hans" lang="zh-Hans">中文(简体)</option>',
    ]


def test_a_language_the_console_does_not_speak_is_refused_and_nothing_is_saved(
        household: FlaskClient, data_dir: DataDir) -> None:
    token = csrf_from(household.get("/settings/home-assistant").get_data(as_text=True))
    answer = household.post("/settings/language", headers=FRENCH, data={"language": "tlh", "csrf_token": token})
    assert answer.status_code == 400
    assert "Choisissez une langue dans la liste." in answer.get_data(as_text=True)
    assert not data_dir.console_settings.exists()


def test_the_choice_needs_the_households_session_and_its_csrf_token(
        logged_in: FlaskClient, bearer: FlaskClient, data_dir: DataDir) -> None:
    assert logged_in.post("/settings/language", data={"language": "fr"}).status_code == 400
    assert bearer.post("/settings/language", data={"language": "fr"}).status_code == 403
    assert not data_dir.console_settings.exists()


def test_moments_on_a_page_are_written_in_the_languages_own_forms(
        make_app: Callable[..., Flask], data_dir: DataDir, password: str) -> None:
    app = make_app(CONSOLE_HA_TIME_ZONE="Europe/Paris")
    AuditLog(data_dir).record(AuditEvent.PROPOSED, capability="home_assistant.list_entities", classification="read",
                              stage=1, invocation="x")
    line = json.loads(data_dir.audit_log.read_text())
    data_dir.audit_log.write_text(json.dumps({**line, "time": "2026-12-02T09:30:00Z"}) + "\n")
    client = app.test_client()
    log_in(client, password)
    for headers, words in ((FRENCH, "2 déc. 2026, 10:30 CET"), (CHINESE, "2026年12月2日 10:30 CET"),
                           (GERMAN, "02.12.2026, 10:30 CET")):
        html = client.get("/activity", headers=headers).get_data(as_text=True)
        assert f'<time datetime="2026-12-02T09:30:00Z" data-clock="date">{words}</time>' in html


def test_a_catalog_is_read_from_disk_once_however_many_requests_use_it(client: FlaskClient, password: str) -> None:
    translations.cache_clear()
    for _ in range(5):
        client.get("/login", headers=FRENCH)
        client.get("/login", headers=CHINESE)
    info = translations.cache_info()
    assert info.misses == 2 and info.hits >= 8


def test_the_pseudo_language_is_offered_only_by_an_app_that_tests_with_it(
        make_app: Callable[..., Flask], data_dir: DataDir, password: str) -> None:
    for config, offered in (({}, False), ({"CONSOLE_HA_PSEUDO_LANGUAGE": True}, True)):
        client = make_app(**config).test_client()
        log_in(client, password)
        page = client.get("/settings/home-assistant").get_data(as_text=True)
        assert ('value="en-XA"' in page) is offered


@pytest.mark.parametrize("path", ["/settings/home-assistant", "/settings/model", "/conversation", "/activity",
                                  "/confirmations", "/settings/api-tokens", "/settings/plugins", "/no-such-page"])
def test_html_lang_names_the_language_on_every_page(household: FlaskClient, path: str) -> None:
    html = household.get(path, headers={"Accept-Language": "nl-NL,nl;q=0.9"}).get_data(as_text=True)
    assert _html_lang(html) == "nl"
    assert "<a class=\"skip-link\" href=\"#main\">Direct naar de inhoud</a>" in html
