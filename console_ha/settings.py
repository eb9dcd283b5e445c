"""Saving the household's Home Assistant settings: the configuration file and the token, together."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from .config_store import ConfigStore, StoredConfig
from .secret_store import Secret, TokenStore


def save_settings(config_store: ConfigStore, token_store: TokenStore, changes: Mapping[str, Any], *,
                  token: Secret | None = None, remove_token: bool = False,
                  expected_revision: str | None = None) -> StoredConfig:
    """Write validated `changes`, then the token; a refused file write leaves the token as it was.

    The token must already be checked (`check_token`) so that nothing is written when it is bad.
    """
    stored = (
        config_store.update(changes, expected_revision=expected_revision) if changes else config_store.read()
    )
    if token is not None:
        token_store.write(token)
    elif remove_token:
        token_store.remove()
    return stored
