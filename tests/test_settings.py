"""Saving settings writes the file and the token together, or puts the file back."""

from __future__ import annotations

import pytest

from console_ha.config_store import ConfigStore
from console_ha.secret_store import StoredToken, TokenStore, check_token
from console_ha.settings import save_settings


def test_a_token_that_cannot_be_written_leaves_the_settings_as_they_were(data_dir, monkeypatch):
    configs, tokens = ConfigStore(data_dir), TokenStore(data_dir)
    save_settings(configs, tokens, {"base_url": "http://old.local:8123"}, token=check_token("old-token"))

    def full_disk(self, token, origin):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(TokenStore, "write", full_disk)
    with pytest.raises(OSError):
        save_settings(configs, tokens, {"base_url": "http://new.local:8123"}, token=check_token("new-token"))
    assert configs.load().base_url == "http://old.local:8123"
    assert tokens.read_record() == StoredToken(check_token("old-token"), "http://old.local:8123")


def test_settings_and_token_are_saved_together(data_dir):
    configs, tokens = ConfigStore(data_dir), TokenStore(data_dir)
    stored = save_settings(configs, tokens, {"enabled": True, "base_url": "http://ha.local:8123"},
                           token=check_token("a-token"))
    assert stored.config.enabled and configs.load().base_url == "http://ha.local:8123"
    save_settings(configs, tokens, {}, remove_token=True)
    assert tokens.read_record() is None and configs.load().enabled
