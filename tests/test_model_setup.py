"""What is in force for a turn: each CONSOLE_HA_LLM_* variable over the saved settings (conversation/model_setup.py)."""

from __future__ import annotations

import pytest

from console_ha.conversation.model import NOT_SET_UP, ModelNotConfigured
from console_ha.conversation.model_setup import resolve, settings_in_force
from console_ha.secret import Secret

KEY = "sk-model-key-0123456789"
URL = "http://192.168.1.20:8080/v1"


# --- what is in force --------------------------------------------------------------------------

def test_nothing_anywhere_is_not_set_up(model_store):
    setup = resolve({}, model_store)
    assert setup.settings is None and setup.problem == NOT_SET_UP and not setup.ready
    with pytest.raises(ModelNotConfigured) as caught:
        settings_in_force({}, model_store)
    assert caught.value.message == NOT_SET_UP


def test_saved_settings_are_used_when_the_environment_sets_nothing(model_store):
    model_store.save(URL, "m", api_key=Secret(KEY))
    settings = settings_in_force({}, model_store)
    assert settings.endpoints == (URL,) and settings.model == "m" and settings.api_key == Secret(KEY)
    assert resolve({}, model_store).from_environment == ()


@pytest.mark.parametrize(("env", "expected"), [
    ({"CONSOLE_HA_LLM_URL": "http://env-host:8080/v1"}, ("http://env-host:8080/v1", "m", None)),
    ({"CONSOLE_HA_LLM_MODEL": "env-model"}, (URL, "env-model", KEY)),
    ({"CONSOLE_HA_LLM_API_KEY": "sk-env"}, (URL, "m", "sk-env")),
    ({"CONSOLE_HA_LLM_URL": "http://env-host:8080/v1", "CONSOLE_HA_LLM_MODEL": "e", "CONSOLE_HA_LLM_API_KEY": "k"},
     ("http://env-host:8080/v1", "e", "k")),
    ({"CONSOLE_HA_LLM_URL": "", "CONSOLE_HA_LLM_MODEL": "  "}, (URL, "m", KEY)),
])
def test_each_environment_variable_wins_on_its_own_and_the_saved_key_stays_with_its_server(model_store, env, expected):
    model_store.save(URL, "m", api_key=Secret(KEY))
    setup = resolve(env, model_store)
    url, name, key = expected
    assert setup.settings is not None
    assert setup.settings.endpoints == (url,) and setup.settings.model == name
    assert setup.settings.api_key == (Secret(key) if key else None)
    assert setup.from_environment == tuple(k for k in ("CONSOLE_HA_LLM_URL", "CONSOLE_HA_LLM_MODEL",
                                                       "CONSOLE_HA_LLM_API_KEY") if env.get(k, "").strip())


def test_a_url_without_a_model_says_to_choose_one(model_store):
    setup = resolve({"CONSOLE_HA_LLM_URL": URL}, model_store)
    assert setup.settings is None and setup.problem is not None and "Choose one" in setup.problem


def test_an_invalid_environment_url_says_which_variable(model_store):
    setup = resolve({"CONSOLE_HA_LLM_URL": "ftp://x", "CONSOLE_HA_LLM_MODEL": "m"}, model_store)
    assert setup.settings is None and setup.problem is not None and "CONSOLE_HA_LLM_URL" in setup.problem


def test_a_save_applies_to_the_next_read_without_a_restart(model_store):
    assert resolve({}, model_store).settings is None
    model_store.save(URL, "first")
    assert settings_in_force({}, model_store).model == "first"
    model_store.save(URL, "second")
    assert settings_in_force({}, model_store).model == "second"
