"""The settings API answers in the household's words (console_ha.words), so the page keeps no copy of them."""

from __future__ import annotations

from flask.testing import FlaskClient

from console_ha.errors import CapabilityNotConfigured, HAUnreachable
from console_ha.words import MODEL_WORDS, SETTINGS_WORDS, household_error
from tests.stub_ha import StubHomeAssistant

from .conftest import API, configure, unused_port

HA_CODES = {"HA_UNREACHABLE", "HA_TIMEOUT", "HA_UNAUTHORIZED", "HA_NOT_FOUND", "HA_BAD_RESPONSE", "HA_TLS_ERROR"}


def test_every_home_assistant_code_has_words_for_the_page_and_for_the_model() -> None:
    """The contract's six HA_* codes each have a sentence for the household and one for the model."""
    assert HA_CODES <= set(SETTINGS_WORDS)
    # HA_NO_STATISTICS (issue 19) comes from get_statistics only, never from the settings page's reads;
    # REFUSED_BY_PLUGIN (issue 30) from a plugin's before_toolcall, naming the plugin and its reason.
    assert HA_CODES | {"HA_BUSY", "HA_NO_STATISTICS", "REFUSED_BY_PLUGIN"} == set(MODEL_WORDS)


def test_a_home_assistant_failure_keeps_its_code_and_detail_with_the_households_sentence() -> None:
    """Only the message changes; the code and every detail field stay."""
    err = household_error(HAUnreachable("Could not connect to http://10.0.0.2:8123.", reason="refused"))
    assert err.to_dict() == {"error": {"code": "HA_UNREACHABLE", "message": SETTINGS_WORDS["HA_UNREACHABLE"],
                                       "reason": "refused"}}


def test_a_token_for_another_home_assistant_keeps_its_own_sentence() -> None:
    """Not configured with a reason names both addresses; the general words would hide which token to fetch."""
    err = CapabilityNotConfigured("Saved for http://a:80, not http://b:80.", reason="token_for_another_origin")
    assert household_error(err) is err


def test_test_connection_sends_the_households_words(household: FlaskClient, stub_ha: StubHomeAssistant) -> None:
    """A wrong token and a dead address answer with the sentences the settings page shows."""
    wrong = household.post(f"{API}/test", json={"base_url": stub_ha.base_url, "access_token": "wrong-token"})
    assert wrong.status_code == 502
    assert wrong.get_json()["error"]["message"] == SETTINGS_WORDS["HA_UNAUTHORIZED"]
    dead = household.post(f"{API}/test", json={"base_url": f"http://127.0.0.1:{unused_port()}", "access_token": "t"})
    assert dead.get_json()["error"] == {"code": "HA_UNREACHABLE", "message": SETTINGS_WORDS["HA_UNREACHABLE"]} | {
        k: v for k, v in dead.get_json()["error"].items() if k not in ("code", "message")}


def test_the_picker_not_set_up_says_how_to_set_it_up(household: FlaskClient) -> None:
    """409 CAPABILITY_NOT_CONFIGURED with the page's instruction, not the server's internal wording."""
    response = household.get(f"{API}/entities")
    assert response.status_code == 409
    assert response.get_json()["error"]["message"] == SETTINGS_WORDS["CAPABILITY_NOT_CONFIGURED"]


def test_a_failure_outside_home_assistant_keeps_its_message(household: FlaskClient, stub_ha: StubHomeAssistant) -> None:
    """Input errors are not Home Assistant failures: their own sentence, naming the field."""
    configure(household, stub_ha.base_url, stub_ha.token)
    response = household.post(API, json={"base_url": "ftp://nas.local"})
    error = response.get_json()["error"]
    assert error["code"] == "INVALID_CONFIG" and error["message"] not in SETTINGS_WORDS.values()


def test_test_connection_not_set_up_keeps_the_words_for_its_field(household: FlaskClient,
                                                                  stub_ha: StubHomeAssistant) -> None:
    """The status line gets the household's sentence; the field named keeps its own words (what to type).

    Before the words moved to the server (de4fd72) the page showed the sentence in the status line and the
    server's own message beside the field; both still reach it. A test uses what is typed, so the field's
    words say what to type, never "save ... first" (issue 21: the page promises one Save).
    """
    no_token = household.post(f"{API}/test", json={"base_url": stub_ha.base_url})
    assert no_token.status_code == 409
    error = no_token.get_json()["error"]
    assert error["message"] == SETTINGS_WORDS["CAPABILITY_NOT_CONFIGURED"]
    assert error["field"] == "access_token"
    assert error["field_message"] == "Paste an access token from Home Assistant above, then press Test connection."
    no_url = household.post(f"{API}/test", json={}).get_json()["error"]
    assert no_url["field"] == "base_url"
    assert no_url["field_message"] == "Enter the Home Assistant URL above, then press Test connection."
    assert "save" not in error["field_message"].lower() + no_url["field_message"].lower()


def test_every_code_the_words_are_for_is_owned_by_an_error_class() -> None:
    """The tables are keyed by code; a code no class owns (a typo, a renamed code) would never be looked up."""
    from console_ha.errors import error_classes
    from console_ha.words import CHAT_WORDS

    assert set(SETTINGS_WORDS) | set(MODEL_WORDS) | set(CHAT_WORDS) <= set(error_classes())
