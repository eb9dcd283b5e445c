"""Saving the household's Home Assistant settings: the configuration file and the token, together.

Crash consistency rests on one rule, not on the order of two writes: the token is stored with the
origin it belongs to in one atomic record, and is only ever handed out for that origin
(`TokenStore.lookup`). Whatever moment a process dies, the worst a reader can find is a URL whose token
was saved for another origin, which it treats as "no token". The token is written first all the same,
so a legacy record (a token without its origin, bound to the configured URL) is never paired with a
URL saved after it.

The same holds for every instance (contract, "Several Home Assistants"): each has its own token record, bound
to its own origin, and no two instances share an origin (`instance_rules`). Creating one writes its token, then
its settings file, which is what makes it exist; removing one deletes its token first and its settings last. A
crash between leaves secrets of an id that is no instance: never read, swept at the next start
(`recover_leftovers`) or by the next create of that id, which starts from nothing.
"""

from __future__ import annotations

import contextlib
import logging
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from console_ha.capabilities.entity_budget import check_fits
from console_ha.errors import InvalidSettingsChange, SettingsFileDamaged
from console_ha.ha.addresses import origin_of
from console_ha.language import Words
from console_ha.secret import Secret
from console_ha.settings.instance_rules import INSTANCE_FIELD, check_instance_change, no_such_instance
from console_ha.settings.tokens import refuse_moving_the_token
from console_ha.store.atomic import path_lock, sweep_temp_files
from console_ha.store.config import (
    ABSENT_REVISION,
    PAGE_FIELDS,
    ConfigStore,
    HomeAssistantConfig,
    StoredConfig,
    check_revision,
    refuse_unknown,
    with_changes,
)
from console_ha.store.datadir import HOME_INSTANCE, DataDir
from console_ha.store.ha_token import StoredToken, TokenStore
from console_ha.store.instances import Instances
from console_ha.store.review import ReviewStore

log = logging.getLogger(__name__)


@contextlib.contextmanager
def save_lock(data_dir: DataDir) -> Iterator[None]:
    """The one lock of every settings save (and of the start's token repair): one at a time, across processes."""
    with path_lock(data_dir.capabilities / "settings-save"):
        yield


@dataclass(frozen=True)
class Saved(StoredConfig):
    """A save's outcome: the configuration as written, its revision, and the token record as it now stands."""

    token: StoredToken | None = None


def checked_changes(current: HomeAssistantConfig, changes: Mapping[str, Any]) -> HomeAssistantConfig:
    """`current` with `changes` applied (`with_changes`), refused when a new allowlist would not fit.

    The fit is list_entities' bound (`entity_budget.check_fits`), checked only when the allowlist changes:
    one saved before the check existed must still let the household change other settings (and a failed
    save must be able to put it back), while the page shows it is over the limit.
    """
    new = with_changes(current, changes)
    if new.allowlisted_entities != current.allowlisted_entities:
        check_fits(new.allowlisted_entities)
    return new


def save_settings(config_store: ConfigStore, token_store: TokenStore, changes: Mapping[str, Any], *,
                  token: Secret | None = None, remove_token: bool = False,
                  expected_revision: str | None = None, reset: bool = False,
                  reviewed: list[str] | None = None, reviews: ReviewStore | None = None) -> Saved:
    """One save in one pass: validate, then write the token (bound to the saved URL's origin), the file, the review.

    Under the saves' lock, taken once: one read of the file and of the token record, one revision check,
    one validation, then the writes in the order crash safety rests on (token file, settings file), and
    the review (`reviewed`, into `reviews`) beside the configuration it was saved with. The token must
    already be checked (`check_token`), so that nothing is written when it is bad. A new URL of another
    origin than the stored token's needs a new token (400 on `access_token`): the stored one is never
    moved to another Home Assistant. A file that cannot be written puts the token record back as it was.
    `reset` starts again from empty settings: the file is not read (it may be what cannot be read), and
    is moved aside, kept, when the new one is written.
    """
    if reviewed is not None and reviews is None:
        raise ValueError("a review needs the store it is written to")
    # Before anything is read, as every front end's first refusal: no front end may set `ca_bundle`.
    refuse_unknown(changes, PAGE_FIELDS)
    with save_lock(config_store.data_dir):
        instances = Instances(config_store.data_dir)
        creating = not instances.exists(config_store.instance)
        if reset:
            current = StoredConfig(HomeAssistantConfig(), ABSENT_REVISION)
        else:
            current = config_store.read()
            check_revision(current, expected_revision)
        new = checked_changes(current.config, changes)
        check_instance_change(instances, config_store.instance, current.config, new, creating=creating, reset=reset)
        # A new instance starts from nothing: a token an unfinished create or remove left is not its own.
        record = None if creating else token_store.read_record()
        refuse_moving_the_token(record, new.base_url, configured_url=current.config.base_url,
                                token=token, remove_token=remove_token)
        if creating:
            instances.forget_leftovers(config_store.instance)
        token_now = _write_token(token_store, record, new.base_url, current.config.base_url,
                                 token=token, remove_token=remove_token)
        try:
            stored = config_store.reset(new) if reset else config_store.write(new) if changes else current
        except BaseException:
            if token is not None or remove_token:
                log.error("the settings file could not be saved; putting the token back as it was")
                token_store.put_back(record)
            raise
        if reviewed is not None and reviews is not None:
            _remember(reviews, stored.config, reviewed)
    return Saved(stored.config, stored.revision, token_now)


def _write_token(token_store: TokenStore, record: StoredToken | None, new_url: str, configured_url: str, *,
                 token: Secret | None, remove_token: bool) -> StoredToken | None:
    """The token file's part of a save, written before the settings file; the record as it then stands."""
    if token is not None:
        return token_store.write(token, new_url)
    if remove_token:
        token_store.remove()
        return None
    if record is not None and record.origin is None and configured_url:
        # A legacy record belongs to the configured URL; writing that origin down keeps the binding
        # whatever the file says later (the URL cleared, then another typed).
        return token_store.write(record.token, configured_url)
    return record


def _remember(reviews: ReviewStore, config: HomeAssistantConfig, reviewed: list[str]) -> bool:
    """Remember what the picker showed, beside `config`; a failure is logged, not raised (only a notice needs it)."""
    if not config.base_url:
        return False
    try:
        reviews.write(config.base_url, reviewed)
    except OSError as err:
        log.warning("the settings were saved, but what the picker showed could not be remembered (%s)",
                    type(err).__name__)
        return False
    return True


def remove_instance(instances: Instances, instance: str) -> None:
    """Remove an instance other than `home`, with its token and CA certificate (`Instances.remove`), under the
    saves' lock; 400 INVALID_CONFIG on `instance` for `home` or an id that is no instance (checked under it)."""
    if instance == HOME_INSTANCE:
        # The page's own labels, so the household finds the controls it names.
        raise InvalidSettingsChange(Words("The first Home Assistant cannot be removed. To stop reading it, untick "
                                          "“Let the assistant read Home Assistant”, or tick “Forget the stored "
                                          "token when I save” and save."),
                                    field=INSTANCE_FIELD)
    with save_lock(instances.data_dir):
        if not instances.exists(instance):
            raise no_such_instance(instance)
        instances.remove(instance)


def recover_leftovers(instances: Instances) -> None:
    """At start: remove the token and CA certificate of ids that are no instance (an unfinished create or remove)."""
    leftovers = instances.leftovers()
    if not leftovers:
        return
    try:
        with save_lock(instances.data_dir):
            for instance in leftovers:
                instances.forget_leftovers(instance)
    except OSError as err:
        # Not fatal: they are never read (no instance has them), and a create of that id removes them first.
        log.warning("could not remove what an unfinished change of an instance left (%s)", err.strerror)


def recover(data_dir: DataDir, config_store: ConfigStore, token_store: TokenStore) -> None:
    """At start: sweep temporary files killed writes left behind, and bind a legacy token to its origin."""
    sweep_temp_files(data_dir.root)
    record = token_store.read_record()
    if record is None or record.origin is not None:
        return
    try:
        configured = config_store.load().base_url
    except SettingsFileDamaged:
        return  # the page explains the damaged file; the legacy token stays unusable until it is fixed
    try:
        with save_lock(data_dir):
            if configured and token_store.read_record() == record:
                token_store.write(record.token, origin_of(configured))
                log.info("the stored Home Assistant token is now bound to %s", origin_of(configured))
    except OSError as err:
        # Not fatal: the record is read as bound to the configured URL anyway, and the next save writes it.
        log.warning("could not write the stored token's origin (%s)", err.strerror)
