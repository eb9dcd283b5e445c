"""Saving the household's Home Assistant settings: the configuration file and the token, together.

Crash consistency rests on one rule, not on the order of two writes: the token is stored with the
origin it belongs to in one atomic record, and is only ever handed out for that origin
(`TokenStore.lookup`). Whatever moment a process dies, the worst a reader can find is a URL whose token
was saved for another origin, which it treats as "no token". The token is written first all the same,
so a legacy record (a token without its origin, bound to the configured URL) is never paired with a
URL saved after it.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

from console_ha.capabilities.entity_budget import check_fits
from console_ha.errors import ConfigInvalid
from console_ha.ha.addresses import origin_of
from console_ha.secret import Secret
from console_ha.settings.tokens import refuse_moving_the_token
from console_ha.store.atomic import path_lock, sweep_temp_files
from console_ha.store.config import ConfigStore, HomeAssistantConfig, StoredConfig, apply_changes, check_revision
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore
from console_ha.store.review import ReviewStore

log = logging.getLogger(__name__)


def checked_changes(current: HomeAssistantConfig, changes: Mapping[str, Any]) -> HomeAssistantConfig:
    """`current` with `changes` applied (`apply_changes`), refused when a new allowlist would not fit.

    The fit is list_entities' bound (`entity_budget.check_fits`), checked only when the allowlist changes:
    one saved before the check existed must still let the household change other settings (and a failed
    save must be able to put it back), while the page shows it is over the limit.
    """
    new = apply_changes(current, changes)
    if new.allowlisted_entities != current.allowlisted_entities:
        check_fits(new.allowlisted_entities)
    return new


def save_settings(config_store: ConfigStore, token_store: TokenStore, changes: Mapping[str, Any], *,
                  token: Secret | None = None, remove_token: bool = False,
                  expected_revision: str | None = None) -> StoredConfig:
    """Validate `changes`, then write the token (bound to the saved URL's origin), then the file.

    The token must already be checked (`check_token`), so that nothing is written when it is bad. A new
    URL of another origin than the stored token's needs a new token (400 on `access_token`): the stored
    one is never moved to another Home Assistant. Saves run one at a time; a file that cannot be written
    puts the token record back as it was.
    """
    with path_lock(config_store.data_dir.capabilities / "settings-save"):
        current = config_store.read()
        check_revision(current, expected_revision)
        new = checked_changes(current.config, changes)
        refuse_moving_the_token(token_store, new.base_url, configured_url=current.config.base_url,
                                token=token, remove_token=remove_token)
        record = token_store.read_record()
        if token is not None:
            token_store.write(token, new.base_url)
        elif remove_token:
            token_store.remove()
        elif record is not None and record.origin is None and current.config.base_url:
            # A legacy record belongs to the configured URL; writing that origin down keeps the binding
            # whatever the file says later (the URL cleared, then another typed).
            token_store.write(record.token, current.config.base_url)
        try:
            stored = config_store.update(changes, expected_revision=expected_revision) if changes else current
        except BaseException:
            if token is not None or remove_token:
                log.error("the settings file could not be saved; putting the token back as it was")
                token_store.put_back(record)
            raise
    return stored


def remember_review(config_store: ConfigStore, stored: StoredConfig, reviewed: list[str]) -> bool:
    """After a save: remember what the picker showed, unless another save came in between (then its wins).

    Under the saves' lock, so a review is only ever written beside the configuration it was saved with.
    A failure to write is logged, not raised: the settings are saved, and only a notice depends on it.
    """
    try:
        with path_lock(config_store.data_dir.capabilities / "settings-save"):
            if config_store.read().revision != stored.revision or not stored.config.base_url:
                return False
            ReviewStore(config_store.data_dir).write(stored.config.base_url, reviewed)
            return True
    except (OSError, ConfigInvalid) as err:
        log.warning("the settings were saved, but what the picker showed could not be remembered (%s)",
                    type(err).__name__)
        return False


def recover(data_dir: DataDir) -> None:
    """At start: sweep temporary files killed writes left behind, and bind a legacy token to its origin."""
    sweep_temp_files(data_dir.root)
    token_store = TokenStore(data_dir)
    record = token_store.read_record()
    if record is None or record.origin is not None:
        return
    try:
        configured = ConfigStore(data_dir).load().base_url
    except ConfigInvalid:
        return  # the page explains the damaged file; the legacy token stays unusable until it is fixed
    try:
        with path_lock(data_dir.capabilities / "settings-save"):
            if configured and token_store.read_record() == record:
                token_store.write(record.token, origin_of(configured))
                log.info("the stored Home Assistant token is now bound to %s", origin_of(configured))
    except OSError as err:
        # Not fatal: the record is read as bound to the configured URL anyway, and the next save writes it.
        log.warning("could not write the stored token's origin (%s)", err.strerror)
