"""The saved model settings: validation, the store and its key apart (store/model_config.py)."""

from __future__ import annotations

import json
import os
import stat

import pytest

from console_ha.conversation.model_setup import resolve
from console_ha.errors import ConfigInvalid, InvalidConfig
from console_ha.secret import Secret
from console_ha.store.model_config import SavedModel, check_api_key, check_base_url, check_model_name

KEY = "sk-model-key-0123456789"
URL = "http://192.168.1.20:8080/v1"


# --- validation --------------------------------------------------------------------------------

@pytest.mark.parametrize("url", ["http://192.168.1.20:8080/v1", "https://llm.home.arpa/v1/", "http://[::1]:11434/v1",
                                 "http://ollama.local:11434/openai/v1"])
def test_a_base_url_ending_in_v1_is_accepted_without_its_trailing_slash(url):
    assert check_base_url(url) == url.rstrip("/")


@pytest.mark.parametrize(("url", "words"), [
    ("", "empty"),
    ("192.168.1.20:8080/v1", "http:// or https://"),
    ("ftp://host/v1", "http:// or https://"),
    ("http://host:99999/v1", "cannot be parsed"),
    ("http://user:pw@host/v1", "user name, password"),
    ("http://host/v1?x=1", "query"),
    ("http://host:8080", "ends in /v1"),
    ("http://host:8080/v1/chat/completions", "ends in /v1"),
])
def test_a_bad_base_url_is_refused_with_the_field_and_the_reason(url, words):
    with pytest.raises(InvalidConfig) as caught:
        check_base_url(url)
    assert caught.value.detail["field"] == "base_url" and words in caught.value.message


@pytest.mark.parametrize("name", ["", "   ", "a\nb", "x" * 257, 5])
def test_a_bad_model_name_is_refused(name):
    with pytest.raises(InvalidConfig) as caught:
        check_model_name(name)
    assert caught.value.detail["field"] == "model"


@pytest.mark.parametrize("key", ["", "has space", "ключ", "x" * 4097, None])
def test_a_bad_api_key_is_refused_without_echoing_it(key):
    with pytest.raises(InvalidConfig) as caught:
        check_api_key(key)
    assert caught.value.detail["field"] == "api_key"
    assert not key or key not in caught.value.message


def test_a_url_that_is_not_text_is_refused_as_such():
    with pytest.raises(InvalidConfig) as caught:
        check_base_url(["http://h/v1"])
    assert "must be text" in caught.value.message


# --- the store ---------------------------------------------------------------------------------

def test_nothing_saved_reads_as_empty(model_store):
    assert model_store.read() == SavedModel() and model_store.api_key(URL) is None


def test_saving_writes_url_and_model_to_model_json_and_the_key_apart_0600(model_store, data_dir):
    saved, dropped = model_store.save(URL, "qwen2.5:7b", api_key=Secret(KEY))
    assert saved == SavedModel(URL, "qwen2.5:7b") and not dropped
    on_disk = json.loads(data_dir.model_config.read_text())
    assert on_disk == {"base_url": URL, "model": "qwen2.5:7b"}
    assert KEY not in data_dir.model_config.read_text()
    assert data_dir.model_api_key.parent == data_dir.console_secrets
    assert stat.S_IMODE(os.stat(data_dir.model_api_key).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(data_dir.console_secrets).st_mode) == 0o700
    assert model_store.read() == saved and model_store.api_key(URL) == Secret(KEY)


def test_the_key_is_only_given_out_for_the_origin_it_was_saved_for(model_store):
    model_store.save(URL, "m", api_key=Secret(KEY))
    assert model_store.api_key("http://192.168.1.20:8080/v1") == Secret(KEY)
    assert model_store.api_key("http://192.168.1.20:8081/v1") is None
    assert model_store.api_key("https://192.168.1.20:8080/v1") is None
    assert model_store.api_key("http://evil.example/v1") is None


def test_saving_another_server_without_a_new_key_removes_the_old_key(model_store, data_dir):
    model_store.save(URL, "m", api_key=Secret(KEY))
    same_origin, dropped = model_store.save("http://192.168.1.20:8080/other/v1", "m")
    assert not dropped and model_store.api_key(same_origin.base_url) == Secret(KEY)
    _, dropped = model_store.save("http://10.0.0.5:8080/v1", "m")
    assert dropped and not data_dir.model_api_key.exists()


def test_an_empty_key_keeps_the_saved_one_and_remove_removes_it(model_store, data_dir):
    model_store.save(URL, "m", api_key=Secret(KEY))
    model_store.save(URL, "other")
    assert model_store.api_key(URL) == Secret(KEY)
    model_store.save(URL, "other", remove_api_key=True)
    assert model_store.api_key(URL) is None and not data_dir.model_api_key.exists()


def test_clearing_the_settings_clears_the_key_too(model_store, data_dir):
    model_store.save(URL, "m", api_key=Secret(KEY))
    assert model_store.save("", "") == (SavedModel(), False)
    assert not data_dir.model_api_key.exists()


@pytest.mark.parametrize(("url", "name", "field"), [(URL, "", "model"), ("http://h/x", "m", "base_url")])
def test_a_refused_save_writes_nothing(model_store, data_dir, url, name, field):
    model_store.save(URL, "kept", api_key=Secret(KEY))
    before = data_dir.model_config.read_bytes(), data_dir.model_api_key.read_bytes()
    with pytest.raises(InvalidConfig) as caught:
        model_store.save(url, name, api_key=Secret("sk-new-key"))
    assert caught.value.detail["field"] == field
    assert (data_dir.model_config.read_bytes(), data_dir.model_api_key.read_bytes()) == before


def test_a_key_without_a_url_is_refused(model_store):
    with pytest.raises(InvalidConfig) as caught:
        model_store.save("", "", api_key=Secret(KEY))
    assert caught.value.detail["field"] == "api_key"


def test_home_assistant_s_own_address_is_refused_as_the_model_server(model_store):
    with pytest.raises(InvalidConfig) as caught:
        model_store.save("http://homeassistant.local:8123/v1", "m", home_assistant_origins=frozenset({"http://homeassistant.local:8123"}))
    assert caught.value.detail["field"] == "base_url" and "Home Assistant" in caught.value.message


def test_a_write_that_fails_midway_leaves_the_old_file_whole(model_store, data_dir, monkeypatch):
    model_store.save(URL, "old")
    before = data_dir.model_config.read_bytes()

    def crash(*args, **kwargs):
        raise OSError("disk full")

    monkeypatch.setattr(os, "replace", crash)
    with pytest.raises(OSError):
        model_store.save("http://10.0.0.9:8080/v1", "new")
    assert data_dir.model_config.read_bytes() == before
    assert [p.name for p in data_dir.model_config.parent.iterdir() if p.name.endswith(".tmp")] == []


@pytest.mark.parametrize(("raw", "words"), [
    (b"{not json", "not valid JSON"),
    (b"[]", "JSON object"),
    (b'{"base_url": "http://h:8080", "model": "m"}', "ends in /v1"),
    (b'{"base_url": "http://h:8080/v1", "model": 7}', "model name"),
])
def test_a_damaged_file_is_reported_with_what_is_wrong_and_reset_keeps_it_aside(model_store, data_dir, raw, words):
    data_dir.model_config.parent.mkdir(parents=True, exist_ok=True)
    data_dir.model_config.write_bytes(raw)
    with pytest.raises(ConfigInvalid) as caught:
        model_store.read()
    assert words in caught.value.message
    setup = resolve({}, model_store)
    assert setup.settings is None and setup.saved_error is not None and setup.problem is not None
    assert "/settings/model" in setup.problem
    model_store.reset()
    assert model_store.read() == SavedModel()
    (aside,) = [p for p in data_dir.model_config.parent.iterdir() if ".broken-" in p.name]
    assert aside.read_bytes() == raw


def test_a_damaged_key_file_is_no_key(model_store, data_dir, caplog):
    model_store.save(URL, "m", api_key=Secret(KEY))
    data_dir.model_api_key.write_text("{broken")
    assert model_store.api_key(URL) is None
    assert "damaged" in caplog.text
