"""Saving settings writes the token (bound to its origin) and the file together, or neither; recovery at start."""

from __future__ import annotations

import pytest

from console_ha import cli
from console_ha.errors import InvalidConfig
from console_ha.settings.saving import recover, save_settings
from console_ha.store.config import ConfigStore
from console_ha.store.ha_token import StoredToken, TokenStore, check_token
from tests.seed import seed_settings


@pytest.fixture(params=["home", "cabin"])
def stores(request, data_dir):
    """The settings and token stores of `home`, or of another instance (made first, by a save with its name)."""
    if request.param != "home":
        seed_settings(data_dir, {"name": "Cabin"}, instance=request.param)
    return ConfigStore(data_dir, request.param), TokenStore(data_dir, request.param)


def test_a_token_that_cannot_be_written_leaves_the_settings_as_they_were(stores, monkeypatch):
    configs, tokens = stores
    save_settings(configs, tokens, {"base_url": "http://old.local:8123"}, token=check_token("old-token"))

    def full_disk(self, token, origin):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(TokenStore, "write", full_disk)
    with pytest.raises(OSError):
        save_settings(configs, tokens, {"base_url": "http://new.local:8123"}, token=check_token("new-token"))
    assert configs.load().base_url == "http://old.local:8123"
    assert tokens.read_record() == StoredToken(check_token("old-token"), "http://old.local:8123")


def test_settings_and_token_are_saved_together(stores):
    configs, tokens = stores
    stored = save_settings(configs, tokens, {"enabled": True, "base_url": "http://ha.local:8123"},
                           token=check_token("a-token"))
    assert stored.config.enabled and configs.load().base_url == "http://ha.local:8123"
    save_settings(configs, tokens, {}, remove_token=True)
    assert tokens.read_record() is None and configs.load().enabled


def test_recover_sweeps_temporary_files_and_binds_a_legacy_token(data_dir):
    """At start: a killed write's `.tmp` copies go; a token file without its origin gets the configured one."""
    configs, tokens = ConfigStore(data_dir), TokenStore(data_dir)
    save_settings(configs, tokens, {"base_url": "http://ha.local:8123"}, token=check_token("a-token-123"))
    tokens.path.write_text("a-token-123\n")
    leftover = tokens.path.with_name(".access-token.a1b2c3d4.tmp")
    leftover.write_text("a-token-123\nhttp://ha.local:8123\n")
    recover(data_dir, ConfigStore(data_dir), TokenStore(data_dir))
    assert not leftover.exists()
    assert tokens.path.read_text() == "a-token-123\nhttp://ha.local:8123\n"


def test_recover_leaves_a_legacy_token_without_a_url_unbound(data_dir):
    """Nothing to bind it to: it stays as it is, and no URL can use it until it is entered again."""
    tokens = TokenStore(data_dir)
    tokens.write(check_token("a-token-123"), "http://ha.local:8123")
    tokens.path.write_text("a-token-123\n")
    recover(data_dir, ConfigStore(data_dir), TokenStore(data_dir))
    assert tokens.read_record() == StoredToken(check_token("a-token-123"), None)
    assert tokens.lookup("http://ha.local:8123", configured_url="").elsewhere


def test_every_cli_command_sweeps_leftovers(data_dir, capsys):
    """`console-ha api-token list` (any command with a data dir) starts with the same sweep as the app."""
    leftover = data_dir.console_secrets / ".api-tokens.json.zz_00000.tmp"
    leftover.parent.mkdir(parents=True)
    leftover.write_text("{}")
    assert cli.main(["api-token", "list", "--data-dir", str(data_dir.root)]) == 0
    assert not leftover.exists()


def test_a_file_that_cannot_be_written_puts_the_token_back(stores, monkeypatch):
    """The token is written first; if the settings file then fails, the previous token record returns."""
    configs, tokens = stores
    save_settings(configs, tokens, {"base_url": "http://old.local:8123"}, token=check_token("old-token"))

    def full_disk(self, config):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ConfigStore, "write", full_disk)
    with pytest.raises(OSError):
        save_settings(configs, tokens, {"base_url": "http://new.local:8123"}, token=check_token("new-token"))
    assert tokens.read_record() == StoredToken(check_token("old-token"), "http://old.local:8123")
    assert configs.load().base_url == "http://old.local:8123"


def test_a_save_refused_for_the_tokens_origin_writes_nothing(stores):
    configs, tokens = stores
    save_settings(configs, tokens, {"base_url": "http://ha.local:8123"}, token=check_token("a-token-123"))
    before = (configs.path.read_bytes(), tokens.path.read_bytes())
    with pytest.raises(InvalidConfig) as refused:
        save_settings(configs, tokens, {"base_url": "http://other.local:8123", "enabled": True})
    assert refused.value.detail["field"] == "access_token"
    assert (configs.path.read_bytes(), tokens.path.read_bytes()) == before


def test_a_create_whose_settings_file_cannot_be_written_leaves_no_instance_and_no_token(data_dir, monkeypatch):
    """A new instance's token is written first; when its file then fails, the token goes and no instance is made."""
    configs, tokens = ConfigStore(data_dir, "cabin"), TokenStore(data_dir, "cabin")

    def full_disk(self, config):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(ConfigStore, "write", full_disk)
    with pytest.raises(OSError):
        save_settings(configs, tokens, {"name": "Cabin", "base_url": "http://cabin.local:8123"},
                      token=check_token("cabin-token"))
    assert tokens.read_record() is None and not configs.path.exists()


def test_a_start_on_a_data_dir_it_cannot_write_still_starts(data_dir, monkeypatch, caplog):
    """A leftover that cannot be removed, a legacy token that cannot be rewritten: logged, not fatal."""
    import os

    from console_ha.store import ha_token as secret_store

    tokens = TokenStore(data_dir)
    seed_settings(data_dir, {"base_url": "http://ha.local:8123"})
    tokens.write(check_token("a-token-123"), "http://ha.local:8123")
    tokens.path.write_text("a-token-123\n")
    leftover = tokens.path.with_name(".access-token.a1b2c3d4.tmp")
    leftover.write_text("x")

    def read_only(*args, **kwargs):
        raise PermissionError(30, "Read-only file system")

    monkeypatch.setattr("console_ha.store.atomic.os.unlink", read_only)
    monkeypatch.setattr(secret_store, "atomic_write", read_only)
    recover(data_dir, ConfigStore(data_dir), TokenStore(data_dir))
    monkeypatch.setattr("console_ha.store.atomic.os.unlink", os.unlink)
    assert leftover.exists() and tokens.read_for("http://ha.local:8123", configured_url="http://ha.local:8123")
    assert "could not remove" in caplog.text and "could not write the stored token's origin" in caplog.text


def test_a_review_is_only_written_beside_the_configuration_it_was_saved_with(data_dir):
    """Each save writes its review in its own locked section: the review always names the URL saved with it."""
    from console_ha.store.review import ReviewStore

    store, tokens, reviews = ConfigStore(data_dir), TokenStore(data_dir), ReviewStore(data_dir)
    save_settings(store, tokens, {"base_url": "http://ha-one.local:8123"}, token=check_token("tok-one-0123"),
                  reviewed=["light.kitchen"], reviews=reviews)
    save_settings(store, tokens, {"base_url": "http://ha-two.local:8123"}, token=check_token("tok-two-0123"),
                  reviewed=["switch.fan"], reviews=reviews)
    assert reviews.read_for("http://ha-one.local:8123/") is None
    review = reviews.read_for("http://ha-two.local:8123/")
    assert review is not None and review.entity_ids == {"switch.fan"}
