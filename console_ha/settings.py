"""Saving the household's Home Assistant settings: the configuration file and the token, together."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from .atomic import path_lock
from .config_store import ConfigStore, StoredConfig
from .secret_store import Secret, TokenStore

log = logging.getLogger(__name__)


def save_settings(config_store: ConfigStore, token_store: TokenStore, changes: Mapping[str, Any], *,
                  token: Secret | None = None, remove_token: bool = False,
                  expected_revision: str | None = None) -> StoredConfig:
    """Write validated `changes`, then the token: both, or (as far as the disk allows) neither.

    The token must already be checked (`check_token`), so that nothing is written when it is bad. A save
    that fails at the token (a full disk) puts the settings file back as it was, and saves run one at a
    time, so no save pairs one request's URL with another's token.
    """
    with path_lock(config_store.data_dir.capabilities / "settings-save"):
        before = config_store.read() if changes and (token is not None or remove_token) else None
        stored = (
            config_store.update(changes, expected_revision=expected_revision) if changes else config_store.read()
        )
        try:
            if token is not None:
                token_store.write(token)
            elif remove_token:
                token_store.remove()
        except OSError:
            if before is not None:
                log.error("the token could not be saved; putting the settings file back as it was")
                config_store.update(before.config.to_json())
            raise
    return stored
