"""Activity and the Console's refusals in the household's language: French and Chinese pages, their numbers in
each language's forms, English without an Accept-Language, and the model-facing words still English."""

from __future__ import annotations

import re
from collections.abc import Callable
from html import unescape

import requests
from flask import Flask
from flask.testing import FlaskClient

from console_ha.conversation.activity import EVENT_TABLE, REFUSED_FALLBACK, summarise
from console_ha.language import ENGLISH, Words, by_code
from console_ha.store.audit import AuditEvent, AuditLog
from console_ha.store.console_settings import ConsoleSettingsStore
from console_ha.store.datadir import DataDir
from console_ha.words import CHAT_WORDS
from tests.activity_log import HOOKS, PLUGIN, add_instance, fill, record
from tests.web.live import served

FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9"}
CHINESE = {"Accept-Language": "zh-CN,zh;q=0.9"}
STATE = "home_assistant.get_state"
NNBSP = "\u202f"  # Babel's French thousands separator


def _text(html: str) -> str:
    """The page's visible words in one line (tags out, entities read, spaces folded)."""
    body = re.sub(r"<(script|template)\b.*?</\1>", " ", html, flags=re.S)
    # Only ASCII white space folds: French keeps its no-break spaces (before ":", in "1 234 ms").
    return re.sub(r"[ \t\r\n]+", " ", unescape(re.sub(r"<[^>]+>", " ", body))).strip()


def _activity(household: FlaskClient, headers: dict[str, str]) -> tuple[str, str]:
    html = household.get("/activity", headers=headers).get_data(as_text=True)
    return html, _text(html)


def test_activity_in_french_every_line_counter_and_kind_of_read_with_french_numbers(
        household: FlaskClient, data_dir: DataDir) -> None:
    fill(data_dir)
    total = len(list(AuditLog(data_dir).events()))
    html, text = _activity(household, FRENCH)
    assert '<html lang="fr">' in html and "<title>Activité · Console</title>" in html
    assert "<h2 id=\"latest-title\">Derniers événements</h2>" in html
    french = by_code("fr")
    assert french is not None
    for event, words in EVENT_TABLE.items():
        line = Words(words.line.msgid, plugin=PLUGIN, hook=HOOKS[event]) if event in HOOKS else words.line
        assert line.in_language(french) in text and words.counter.in_language(french) in text
    for expected in ("Vous ne l’avez pas autorisé, donc rien n’a été lu.", "Refusé par la Console",
                     "Historique d’un appareil", "État actuel d’un appareil",
                     "Retiré\u00a0: vous avez demandé autre chose.", "Page Conversation", "Combien de fois",
                     f"1{NNBSP}234\u00a0ms", "Durée", "Demandé par"):
        assert expected in text, expected
    assert f"{total} événements dans le journal en tout." in text
    assert 'aria-label="Les 50 événements les plus récents, du plus récent au plus ancien"' in html
    # Nothing of the English page's own words is left.
    for english in ("Latest events", "How often", "You allowed it.", "Asked by", "events in the log in all"):
        assert english not in text, english


def test_activity_in_chinese_with_its_numbers_and_one_sentence_for_one_event(
        household: FlaskClient, data_dir: DataDir) -> None:
    record(AuditLog(data_dir), AuditEvent.EXECUTED, STATE)
    html, text = _activity(household, CHINESE)
    assert '<html lang="zh-Hans">' in html and "<title>活动 · 控制台</title>" in html
    assert "已完成读取。" in text and "单个设备的当前状态" in text and "1,234 毫秒" in text
    assert "日志中共有一条事件。" in text
    assert 'aria-label="最新的一条事件"' in html
    assert "请求方" in text and "对话页面" in text


def test_activity_counts_past_a_thousand_in_each_languages_form(household: FlaskClient, data_dir: DataDir) -> None:
    log = AuditLog(data_dir)
    for _ in range(1001):
        record(log, AuditEvent.PROPOSED, STATE)
    _, french = _activity(household, FRENCH)
    assert f"1{NNBSP}001 événements dans le journal en tout." in french
    _, chinese = _activity(household, CHINESE)
    assert "日志中共有 1,001 条事件。" in chinese
    _, english = _activity(household, {})
    assert "1,001 events in the log in all." in english


def _house_cabin_and_a_removed_shed(data_dir: DataDir) -> None:
    """Home (unnamed), the cabin (named "Chalet") and a shed since removed, with 1,001 of the cabin's events."""
    add_instance(data_dir, "cabin", "Chalet")
    log = AuditLog(data_dir)
    for _ in range(1001):
        record(log, AuditEvent.PROPOSED, STATE, instance="cabin")
    record(log, AuditEvent.EXECUTED, STATE)
    record(log, AuditEvent.EXECUTED, STATE, instance="shed")


def test_activity_of_several_home_assistants_in_french(household: FlaskClient, data_dir: DataDir) -> None:
    """Issue 29: the choice of Home Assistant, each event's, a removed one's mark and the counts of one, in French."""
    _house_cabin_and_a_removed_shed(data_dir)
    html, text = _activity(household, FRENCH)
    assert "Afficher les événements de Tous Maison Chalet shed (retiré)" in text
    assert re.search(r"<dt>Home Assistant</dt><dd>shed \(retiré\)</dd>", html)
    assert re.search(r"<dt>Home Assistant</dt><dd>Maison</dd>", html)
    _, cabin = _activity_of(household, "cabin", FRENCH)
    assert f"1{NNBSP}001 événements de Chalet dans le journal." in cabin
    _, shed = _activity_of(household, "shed", FRENCH)
    assert "Un seul événement de shed (retiré) dans le journal." in shed
    add_instance(data_dir, "attic", "Grenier")
    _, attic = _activity_of(household, "attic", FRENCH)
    assert "Aucun événement de Grenier pour l’instant. Quand l’assistant demande à le lire, ils apparaissent ici." \
        in attic
    for english in ("Show the events of", " All ", "(removed)", "events of", "No events"):
        assert english not in text + cabin + shed + attic, english


def test_activity_of_several_home_assistants_in_chinese(household: FlaskClient, data_dir: DataDir) -> None:
    _house_cabin_and_a_removed_shed(data_dir)
    _, text = _activity(household, CHINESE)
    assert "按 Home Assistant 筛选事件 全部 家 Chalet shed（已移除）" in text
    _, cabin = _activity_of(household, "cabin", CHINESE)
    assert "日志中有 1,001 条关于 Chalet 的事件。" in cabin
    _, home = _activity_of(household, "home", CHINESE)
    assert "日志中有一条关于 家 的事件。" in home


def _activity_of(household: FlaskClient, instance: str, headers: dict[str, str]) -> tuple[str, str]:
    html = household.get("/activity", query_string={"instance": instance}, headers=headers).get_data(as_text=True)
    return html, _text(html)


def test_activity_is_english_without_an_accept_language_and_in_the_saved_choice_over_it(
        household: FlaskClient, data_dir: DataDir) -> None:
    fill(data_dir)
    html, text = _activity(household, {})
    assert '<html lang="en">' in html and "Latest events" in text and "You allowed it." in text
    ConsoleSettingsStore(data_dir).set_language("zh-Hans")
    _, text = _activity(household, FRENCH)
    assert "最新事件" in text and "你允许了。" in text


def test_activitys_words_read_as_english_where_no_language_is_known() -> None:
    """A Words is its English sentence: the log, the CLI and any code that does not know the language."""
    activity = summarise([{"event": "approved", "capability": STATE, "invocation": "a"},
                          {"event": "rejected", "capability": STATE, "invocation": "a",
                           "code": "CONFIRMATION_INVALID"}])
    newest = activity.latest[0]
    assert newest.words == "You allowed it, but the Console then refused it, so nothing was read."
    assert newest.why == CHAT_WORDS["CONFIRMATION_INVALID"]  # the chat's own sentence: one fact, one place
    assert newest.why == ("Your Home Assistant settings or your devices' names changed after you were asked, so "
                          "nothing was read.")
    assert isinstance(newest.words, Words) and isinstance(newest.capability_words, Words)
    assert newest.capability_words.in_language(ENGLISH) == "Current state of one device"
    assert isinstance(REFUSED_FALLBACK, Words)


def test_an_untrusted_host_is_told_in_the_browsers_language_never_the_saved_one(
        make_app: Callable[..., Flask], data_dir: DataDir) -> None:
    """The refusal names the command in any language; a page on another name never learns the household's choice."""
    ConsoleSettingsStore(data_dir).set_language("zh-Hans")
    with served(make_app()) as console:
        french = requests.get(console.url + "/login", headers={"Host": "evil.example", **FRENCH}, timeout=10)
        assert french.status_code == 400
        assert french.text.startswith("La Console ne répond pas à ce nom d’hôte.")
        assert "`console-ha serve --trusted-host NAME` (ou CONSOLE_HA_TRUSTED_HOSTS)" in french.text
        answer = requests.get(console.url + "/api/v1/conversation/home-assistant",
                              headers={"Host": "evil.example", "Accept": "application/json", **CHINESE}, timeout=10)
        assert answer.json()["error"]["message"].startswith("控制台不响应这个主机名。")
        plain = requests.get(console.url + "/login", headers={"Host": "evil.example"}, timeout=10)
        assert plain.text.startswith("The Console does not answer to this host name.")


def test_a_change_from_another_site_is_refused_in_french_on_its_page_and_in_json(
        make_app: Callable[..., Flask], password: str) -> None:
    with served(make_app()) as console:
        browser = console.browser()
        assert browser.log_in(password).status_code == 302
        token = browser.csrf("/settings/home-assistant")
        page = browser.post("/settings/language", origin="http://evil.example", data={"csrf_token": token},
                            headers=FRENCH)
        assert page.status_code == 403
        assert "Cette requête venait d’un autre site, donc la Console l’a refusée." in unescape(page.text)
        api = browser.post("/api/v1/conversation/home-assistant", origin="http://evil.example", json={},
                           headers={"X-CSRFToken": token, **CHINESE})
        assert api.json()["error"]["message"] == "此请求来自其他网站，因此控制台拒绝了它。"
        english = browser.post("/api/v1/conversation/home-assistant", origin="http://evil.example", json={},
                               headers={"X-CSRFToken": token})
        assert english.json()["error"]["message"] == "This request came from another site, so the Console refused it."
