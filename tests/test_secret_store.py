"""The access token: stored apart, private, atomic, removable, never shown."""

from __future__ import annotations

import os
import stat

import pytest

from console_ha.errors import InvalidConfig
from console_ha.secret_store import Secret, TokenStore, check_token

HA = "http://ha.local:8123"
TOKEN = "eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.c2VjcmV0LXRva2VuLXZhbHVl.sig_nature-123"


def test_token_is_written_private_in_a_private_directory(data_dir):
    store = TokenStore(data_dir)
    store.write(check_token(TOKEN), HA)
    assert stat.S_IMODE(os.stat(store.path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(store.path.parent).st_mode) == 0o700
    assert store.read_for(HA, configured_url=HA) == Secret(TOKEN)


def test_token_can_be_removed(data_dir):
    store = TokenStore(data_dir)
    store.write(check_token(TOKEN), HA)
    store.remove()
    store.remove()
    assert store.read_record() is None and not store.exists()


def test_secret_never_shows_itself():
    secret = Secret(TOKEN)
    for text in (repr(secret), str(secret), f"{secret}", repr([secret]), repr({"t": secret})):
        assert TOKEN not in text
    assert secret.reveal() == TOKEN


@pytest.mark.parametrize("bad", ["", "   ", "two words", "tab\there", "é" * 10, "x" * 5000, None, 12])
def test_malformed_token_is_refused_without_echoing_it(bad):
    with pytest.raises(InvalidConfig) as caught:
        check_token(bad)
    assert caught.value.detail["field"] == "access_token"
    if isinstance(bad, str) and bad.strip():
        assert bad not in str(caught.value) and bad not in repr(caught.value)


def test_token_never_lands_in_the_config_file(data_dir):
    from console_ha.config_store import ConfigStore

    TokenStore(data_dir).write(check_token(TOKEN), HA)
    ConfigStore(data_dir).update({"enabled": True, "base_url": "http://ha.local:8123"})
    assert TOKEN not in ConfigStore(data_dir).path.read_text()


@pytest.mark.parametrize("content", [b"two words\n", b"tok\x00en", b"\xef\xbb\xbftoken", "t\u00e9st".encode()])
def test_a_damaged_token_file_counts_as_no_token(data_dir, content, caplog):
    store = TokenStore(data_dir)
    store.write(check_token(TOKEN), HA)
    store.path.write_bytes(content)
    assert store.read_record() is None and not store.exists()
    assert "damaged" in caplog.text or "cannot be read" in caplog.text
