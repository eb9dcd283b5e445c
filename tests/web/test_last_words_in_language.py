"""The last household words that were English: the stores' refusals, the model set-up, the certificate's dates.

Each is a whole sentence in the catalogs (issue 26): the page or the household's JSON says it in the request's
language, and with no Accept-Language the English the other tests read.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from console_ha.conversation.model_setup import resolve
from console_ha.errors import InvalidConfig
from console_ha.language import Language, Words, by_code
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenLookup
from console_ha.store.model_config import ModelStore
from tests.certs import make_ca, store_at

from .conftest import API

MODEL_API = "/api/v1/conversation/model"
TOKENS_PAGE = "/settings/api-tokens"
FRENCH = {"Accept-Language": "fr-FR,fr;q=0.9"}
CHINESE = {"Accept-Language": "zh-CN,zh;q=0.9"}


def _language(code: str) -> Language:
    language = by_code(code)
    assert language is not None
    return language


def _in(words: object, code: str) -> str:
    """`words`, which must be a `Words`, in the language of `code`."""
    assert isinstance(words, Words), words
    return words.in_language(_language(code))


def _message(client: FlaskClient, path: str, body: Mapping[str, object], headers: dict[str, str] | None = None) -> str:
    answer = client.post(path, json=body, headers=headers or {})
    assert answer.status_code in (400, 409), answer.get_data(as_text=True)
    message = answer.get_json()["error"]["message"]
    assert isinstance(message, str)
    return message


def test_a_save_over_a_change_made_elsewhere_is_refused_in_the_language(household: FlaskClient) -> None:
    """store/config.py's 409: French and Chinese as the catalogs say it, English without Accept-Language."""
    first = household.get(API).get_json()["revision"]
    household.post(API, json={"enabled": True, "revision": first})
    body = {"enabled": False, "revision": first}
    assert _message(household, API, body, FRENCH) == (
        "Les paramètres ont été modifiés ailleurs depuis le chargement de cette page. Rechargez-la pour les voir\u202f;"
        " rien n’a été enregistré.")
    assert _message(household, API, body, CHINESE) == (
        "自此页面加载以来，设置已在别处被更改。请重新加载以查看；未保存任何内容。")
    assert _message(household, API, body).startswith("The settings were changed elsewhere since this page loaded.")


def test_a_field_s_refusal_is_a_whole_sentence_in_the_language(household: FlaskClient) -> None:
    """Each field's own words (store/config.py), its number written by the language (2 000 in French)."""
    wrong = {"enabled": "yes"}
    assert _message(household, API, wrong, FRENCH) == "«\xa0enabled\xa0» doit valoir true ou false."
    assert _message(household, API, wrong, CHINESE) == "“enabled”必须是 true 或 false。"
    too_many = {"allowlisted_entities": [f"sensor.s{index}" for index in range(2001)]}
    assert "en compte 2\u202f000 au plus" in _message(household, API, too_many, FRENCH)
    assert "最多包含 2,000 个实体" in _message(household, API, too_many, CHINESE)
    assert "at most 2,000 entities" in _message(household, API, too_many)


def test_the_model_page_s_field_errors_are_sentences_in_the_language(household: FlaskClient) -> None:
    """store/model_config.py: no label glued to a fragment, each refusal one sentence per language."""
    body = {"base_url": "http://192.168.1.20:8080", "model": "m"}
    assert _message(household, MODEL_API, body, FRENCH) == (
        "L’URL du serveur de modèle se termine par /v1, comme http://192.168.1.20:8080/v1.")
    assert _message(household, MODEL_API, body, CHINESE) == "模型服务器 URL 以 /v1 结尾，例如 http://192.168.1.20:8080/v1。"
    not_http = {"base_url": "ftp://h/v1", "model": "m"}
    assert _message(household, MODEL_API, not_http, CHINESE) == (
        "模型服务器 URL 必须是带主机名的 http:// 或 https:// URL。")
    assert _message(household, MODEL_API, not_http) == (
        "The model server URL must be an http:// or https:// URL with a host.")


def test_a_token_s_name_and_patience_are_refused_in_the_language(household: FlaskClient,
                                                                 console_secrets: ConsoleSecrets) -> None:
    """store/console_secrets.py's refusals, flashed on the API tokens page in the page's language."""
    console_secrets.create_api_token("node-red")
    (token,) = console_secrets.api_tokens()
    household.post(f"{TOKENS_PAGE}/{token.token_id}/patience", data={"patience": "9999"}, headers=FRENCH)
    page = household.get(TOKENS_PAGE, headers=FRENCH).get_data(as_text=True)
    assert re.search(r"La patience doit être un nombre entier de secondes entre \d+ et \d+\.", page)
    assert "whole number of seconds" not in page
    household.post(f"{TOKENS_PAGE}/{token.token_id}/patience", data={"patience": "0"}, headers=CHINESE)
    assert re.search(r"等待时长必须是 \d+ 到 \d+ 之间的整数秒。", household.get(TOKENS_PAGE).get_data(as_text=True))


def test_nothing_set_up_is_said_in_the_language(data_dir: DataDir) -> None:
    """conversation/model_setup.py's problem, as the model and conversation pages show it."""
    problem = resolve({}, ModelStore(data_dir)).problem
    assert problem is not None and problem.startswith("No language model is set up yet.")
    assert _in(problem, "fr").startswith("Aucun modèle de langage n’est encore configuré.")
    assert _in(problem, "zh-Hans").startswith("尚未设置语言模型。")


def test_the_conversation_page_says_no_model_is_set_up_in_the_language(household: FlaskClient) -> None:
    """The problem said on the conversation page's load (conversation/model.py's NOT_SET_UP)."""
    french = household.get("/conversation", headers=FRENCH).get_data(as_text=True)
    assert "Aucun modèle de langage n’est encore configuré." in french and "No language model" not in french
    chinese = household.get("/conversation", headers=CHINESE).get_data(as_text=True)
    assert "尚未设置语言模型。" in chinese
    assert "No language model is set up yet." in household.get("/conversation").get_data(as_text=True)


def test_a_token_for_another_home_assistant_names_this_address_as_a_whole_sentence() -> None:
    """store/ha_token.py: no English "this address" inside a French or Chinese sentence."""
    lookup = TokenLookup(None, True, "http://homeassistant.local:8123", None)
    assert "To use this address, enter" in lookup.message()
    assert "Pour utiliser cette adresse, saisissez" in lookup.message().in_language(_language("fr"))
    assert "要使用此地址" in lookup.message().in_language(_language("zh-Hans"))


def test_a_certificate_s_dates_are_written_by_the_language(tmp_path: Path) -> None:
    """The CA certificate's expiry day and start moment in the language's own date forms, not ISO."""
    issued = make_ca(tmp_path / "ca")
    with pytest.raises(InvalidConfig) as late:
        store_at(DataDir(tmp_path / "data"), issued.ca_pem, days_from_now=365)
    with pytest.raises(InvalidConfig) as soon:
        store_at(DataDir(tmp_path / "data"), issued.ca_pem, days_from_now=-2)
    expired, early = late.value.message, soon.value.message
    french = _in(expired, "fr")
    assert re.search(r"a expiré le \d{1,2} (janvier|février|mars|avril|mai|juin|juillet|août|septembre|octobre"
                     r"|novembre|décembre) \d{4}\xa0:", french), french
    chinese = _in(expired, "zh-Hans")
    assert re.search(r"已于 \d{4}年\d{1,2}月\d{1,2}日 过期", chinese), chinese
    assert not re.search(r"\d{4}-\d{2}-\d{2}", french + chinese + str(expired))
    assert re.search(r"在 UTC \d{4}年\d{1,2}月\d{1,2}日 \d{2}:\d{2} 之前无效", _in(early, "zh-Hans"))
