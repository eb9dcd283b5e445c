"""The access token: stored apart, private, atomic, removable, never shown."""

from __future__ import annotations

import os
import stat

import pytest

from console_ha.errors import InvalidConfig
from console_ha.ha.addresses import origin_of
from console_ha.secret import Secret
from console_ha.store.ha_token import StoredToken, TokenStore, check_token
from tests.seed import seed_settings

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
    from console_ha.store.config import ConfigStore

    TokenStore(data_dir).write(check_token(TOKEN), HA)
    seed_settings(data_dir, {"enabled": True, "base_url": "http://ha.local:8123"})
    assert TOKEN not in ConfigStore(data_dir).path.read_text()


@pytest.mark.parametrize("content", [b"two words\n", b"tok\x00en", b"\xef\xbb\xbftoken", "t\u00e9st".encode()])
def test_a_damaged_token_file_counts_as_no_token(data_dir, content, caplog):
    store = TokenStore(data_dir)
    store.write(check_token(TOKEN), HA)
    store.path.write_bytes(content)
    assert store.read_record() is None and not store.exists()
    assert "damaged" in caplog.text or "cannot be read" in caplog.text


# --- the token belongs to its origin --------------------------------------------------------------


@pytest.mark.parametrize(
    ("url", "origin"),
    [
        ("http://ha.local:8123", "http://ha.local:8123"),
        ("http://HA.Local:8123/api", "http://ha.local:8123"),
        ("http://ha.local", "http://ha.local:80"),
        ("http://ha.local:80/", "http://ha.local:80"),
        ("https://ha.local", "https://ha.local:443"),
        ("HTTPS://ha.local:443/path", "https://ha.local:443"),
        ("https://ha.local:80", "https://ha.local:80"),
        ("http://[::1]:8123", "http://[::1]:8123"),
        ("http://[FE80::1]", "http://[fe80::1]:80"),
        ("http://192.168.1.5:8123", "http://192.168.1.5:8123"),
    ],
)
def test_the_origin_writes_the_port_out(url, origin):
    assert origin_of(url) == origin


@pytest.mark.parametrize("url", ["", "ftp://ha.local", "ha.local:8123", "http://", "http://ha.local:99999"])
def test_what_is_not_an_http_url_has_no_origin(url):
    with pytest.raises(ValueError):
        origin_of(url)


def test_a_token_is_read_only_for_its_own_origin(data_dir):
    store = TokenStore(data_dir)
    store.write(check_token(TOKEN), "http://ha.local:8123/api")
    assert store.path.read_text() == f"{TOKEN}\nhttp://ha.local:8123\n"
    for url in ("http://ha.local:8123", "http://HA.local:8123/", "http://ha.local:8123/some/prefix"):
        assert store.read_for(url, configured_url="") == Secret(TOKEN)
    for url in ("http://ha.local", "https://ha.local:8123", "http://ha.local:8124", "http://other:8123",
                "http://192.168.1.5:8123", "", "not a url"):
        lookup = store.lookup(url, configured_url="http://ha.local:8123")
        assert lookup.token is None and lookup.stored and lookup.saved_for == "http://ha.local:8123"
        assert TOKEN not in lookup.message() and TOKEN not in repr(lookup)


def test_the_configured_url_does_not_move_a_bound_token(data_dir):
    """Only a legacy file looks at the configured URL; a record with its origin ignores it."""
    store = TokenStore(data_dir)
    store.write(check_token(TOKEN), "http://ha.local:8123")
    assert store.read_for("http://other:8123", configured_url="http://other:8123") is None


def test_a_legacy_file_belongs_to_the_configured_origin(data_dir):
    store = TokenStore(data_dir)
    store.write(check_token(TOKEN), HA)
    store.path.write_text(TOKEN + "\n")
    assert store.read_record() == StoredToken(Secret(TOKEN), None)
    assert store.read_for("http://ha.local:8123/x", configured_url=HA) == Secret(TOKEN)
    assert store.read_for("http://other:8123", configured_url=HA) is None
    nowhere = store.lookup(HA, configured_url="")
    assert nowhere.elsewhere and nowhere.saved_for is None and "without a Home Assistant URL" in nowhere.message()


@pytest.mark.parametrize(
    "content",
    [f"{TOKEN}\nnot an origin\n", f"{TOKEN}\nhttp://ha.local:8123/path\n", f"{TOKEN}\nhttp://ha.local\n",
     f"{TOKEN}\nhttp://ha.local:8123\nextra\n", f"{TOKEN} http://ha.local:8123\n"],
)
def test_a_damaged_origin_line_counts_as_no_token(data_dir, content, caplog):
    """Only an origin exactly as written by origin_of is trusted; anything else is no token at all."""
    store = TokenStore(data_dir)
    store.write(check_token(TOKEN), HA)
    store.path.write_text(content)
    assert store.read_record() is None and store.read_for(HA, configured_url=HA) is None
    assert "damaged" in caplog.text


def test_a_trailing_blank_line_is_not_damage(data_dir):
    store = TokenStore(data_dir)
    store.write(check_token(TOKEN), HA)
    store.path.write_text(f"{TOKEN}\n{HA}\n\n")
    assert store.read_for(HA, configured_url="") == Secret(TOKEN)
