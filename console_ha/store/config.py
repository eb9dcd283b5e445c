"""The Home Assistant capability configuration file: defaults, validation, fresh reads, atomic writes."""

from __future__ import annotations

import hashlib
import json
import logging
import os
import secrets
import time
import unicodedata
from collections.abc import Callable, Iterable, Mapping
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from types import MappingProxyType
from typing import Any, Generic, TypeVar

from console_ha.errors import InvalidSettingsChange, SettingsChangedElsewhere, SettingsFileDamaged
from console_ha.ha.addresses import is_entity_id, normalise_base_url
from console_ha.language import Words
from console_ha.store.atomic import atomic_write, ensure_dir, path_lock
from console_ha.store.datadir import HOME_INSTANCE, DataDir
from console_ha.store.files import read_stored
from console_ha.unknown_keys import first_unknown

log = logging.getLogger(__name__)

MAX_ALLOWLIST = 2000
ABSENT_REVISION = "absent"

MAX_NAME_LENGTH = 200
# A Home Assistant's own name (an instance's): what a card and the settings page call it.
MAX_INSTANCE_NAME_LENGTH = 40

@dataclass(frozen=True)
class HomeAssistantConfig:
    """What `capabilities/home-assistant.json` holds. Never the token."""

    # The defaults are the settings' own (`SETTINGS`, below); `entity_names` and `ca_bundle` are the
    # documented extra keys.
    enabled: bool = field(default_factory=lambda: ENABLED.default)
    base_url: str = field(default_factory=lambda: BASE_URL.default)
    allowlisted_entities: tuple[str, ...] = field(default_factory=lambda: ALLOWLISTED_ENTITIES.default)
    entity_names: Mapping[str, str] = field(default_factory=lambda: dict(ENTITY_NAMES.default))
    ca_bundle: str = field(default_factory=lambda: CA_BUNDLE.default)
    # The household's name for this Home Assistant ("Cabin"); empty until one is given (`home`'s own file).
    name: str = field(default_factory=lambda: NAME.default)

    def to_json(self) -> dict[str, Any]:
        """The file's JSON object; extra keys only when set, so the default file is the contract's."""
        data = asdict(self)
        data["allowlisted_entities"] = list(self.allowlisted_entities)
        data["entity_names"] = {k: v for k, v in self.entity_names.items() if k in self.allowlisted_entities}
        for extra in ("entity_names", "ca_bundle", "name"):
            if not data[extra]:
                del data[extra]
        return data

    def display_name(self, entity_id: str) -> str:
        """The entity's friendly name when the picker saw one, else its object id in words."""
        name = self.entity_names.get(entity_id)
        if name:
            return name
        return entity_id.partition(".")[2].replace("_", " ").strip().capitalize() or entity_id


@dataclass(frozen=True)
class StoredConfig:
    """A configuration as read, with the revision a writer must name to replace it."""

    config: HomeAssistantConfig
    revision: str


T = TypeVar("T")


@dataclass(frozen=True)
class Setting(Generic[T]):
    """One Home Assistant setting, declared once (as datasette declares its settings).

    The declaration drives everything about the field: the file's validation (`with_changes`, in this
    table's order), the settings API's JSON, the no-JavaScript form's parse and the page script (the
    page serves `to_json`); `HomeAssistantConfig` takes its defaults from here.
    """

    name: str
    type: str  # the JSON type a client sends: "boolean", "string", "array" or "object"
    default: T
    wrong: str  # the household's words for a value of the wrong kind
    check: Callable[[object], T]  # the value as given -> the value kept; InvalidSettingsChange names the field
    sent_by_page: bool = True  # False: set by editing the file only (`ca_bundle` decides whom the token trusts)

    def to_json(self) -> dict[str, object]:
        """What the page script is told about the field (never the check itself)."""
        default: object = self.default
        if isinstance(default, tuple):
            default = list(default)
        elif isinstance(default, Mapping):
            default = dict(default)
        return {"name": self.name, "type": self.type, "default": default}

    def refuse(self, words: str | None = None) -> InvalidSettingsChange:
        """400 INVALID_CONFIG on this field, in `words` (else the field's own words for a wrong value)."""
        return InvalidSettingsChange(words or self.wrong, field=self.name)


def normalise_allowlist(value: object) -> tuple[str, ...]:
    """Check every entity id's shape and drop duplicates, keeping first-seen order."""
    if not isinstance(value, (list, tuple)):
        raise ALLOWLISTED_ENTITIES.refuse()
    if len(value) > MAX_ALLOWLIST:
        raise ALLOWLISTED_ENTITIES.refuse(
            Words("The allowlist may hold at most {count} entities.", count=MAX_ALLOWLIST))
    seen: dict[str, None] = {}
    for item in value:
        if not is_entity_id(item):
            raise ALLOWLISTED_ENTITIES.refuse(Words(
                "Each allowlisted entity must look like domain.object_id "
                "(lower-case letters, digits and underscores)."
            ))
        seen.setdefault(item, None)
    return tuple(seen)


def _check_enabled(value: object) -> bool:
    if not isinstance(value, bool):
        raise ENABLED.refuse()
    return value


def _check_entity_names(value: object) -> Mapping[str, str]:
    if not isinstance(value, dict):
        raise ENTITY_NAMES.refuse()
    if len(value) > MAX_ALLOWLIST:
        raise ENTITY_NAMES.refuse(Words("At most {count} entity names.", count=MAX_ALLOWLIST))
    names: dict[str, str] = {}
    for key, name in value.items():
        if not is_entity_id(key) or not isinstance(name, str):
            raise ENTITY_NAMES.refuse(Words("Entity names must map entity ids to text."))
        cleaned = shown_name(name, MAX_NAME_LENGTH)
        if cleaned:
            names[key] = cleaned
    return names


def shown_name(name: str, limit: int) -> str:
    """A name someone typed, as a card may show it: at most `limit` characters, nothing invisible."""
    # Control and format characters (bidi overrides among them) could make a card say one thing
    # and mean another; whitespace runs fold to one space. Half a UTF-16 pair (a file's JSON may spell one,
    # `\ud800`) is no UTF-8 at all: no page, prompt or response holding it could be sent. It shows as U+FFFD,
    # as `entity_budget.cut` shows it.
    # A line break or a tab is whitespace first: "Cabin\nHouse" reads "Cabin House", not "CabinHouse".
    visible = "".join("\ufffd" if unicodedata.category(c) == "Cs" else c for c in name
                      if c.isspace() or unicodedata.category(c) not in ("Cc", "Cf"))
    return " ".join(visible.split())[:limit]


def _check_name(value: object) -> str:
    if not isinstance(value, str):
        raise NAME.refuse()
    name = shown_name(value, len(value))
    if len(name) > MAX_INSTANCE_NAME_LENGTH:
        raise NAME.refuse(Words("A Home Assistant's name may be at most {count} characters.",
                                count=MAX_INSTANCE_NAME_LENGTH))
    if value.strip() and not name:
        raise NAME.refuse()
    return name


def _check_ca_bundle(value: object) -> str:
    if not isinstance(value, str):
        raise CA_BUNDLE.refuse()
    text = value.strip()
    if text and not Path(text).is_absolute():
        raise CA_BUNDLE.refuse(Words("The CA bundle must be an absolute file path."))
    return text


def _check_base_url(value: object) -> str:
    if not isinstance(value, str):
        raise BASE_URL.refuse()
    return normalise_base_url(value)  # says itself what is wrong with a URL's text


ENABLED: Setting[bool] = Setting("enabled", "boolean", False, Words("`enabled` must be true or false."), _check_enabled)
BASE_URL: Setting[str] = Setting("base_url", "string", "", Words("The Home Assistant URL must be text."),
                               _check_base_url)
ALLOWLISTED_ENTITIES: Setting[tuple[str, ...]] = Setting(
    "allowlisted_entities", "array", (), Words("The allowlist must be a list of entity ids."), normalise_allowlist)
# Friendly names the picker saw for allowlisted entities, so a confirmation card can name an entity
# without asking Home Assistant before approval.
ENTITY_NAMES: Setting[Mapping[str, str]] = Setting(
    "entity_names", "object", MappingProxyType({}), Words("Entity names must be an object of entity id to name."),
    _check_entity_names)
# A PEM file of the household's own CA, for https Home Assistant.
CA_BUNDLE: Setting[str] = Setting("ca_bundle", "string", "", Words("The CA bundle must be a file path."),
                                   _check_ca_bundle, sent_by_page=False)
# The household's name for the Home Assistant (contract, "Several Home Assistants").
NAME: Setting[str] = Setting("name", "string", "", Words("A Home Assistant's name must be text you can read."),
                             _check_name)

# Every setting, in the order a save checks them (so the first bad one, in this order, is the one named).
SETTINGS: tuple[Setting[Any], ...] = (ENABLED, BASE_URL, ALLOWLISTED_ENTITIES, ENTITY_NAMES, CA_BUNDLE, NAME)
# What a client may send to save (the settings API, the form, the page script).
PAGE_SETTINGS = tuple(setting for setting in SETTINGS if setting.sent_by_page)
PAGE_FIELDS = tuple(setting.name for setting in PAGE_SETTINGS)


def refuse_unknown(changes: Mapping[str, Any], allowed: Iterable[str]) -> None:
    """400 INVALID_CONFIG naming the first key of `changes` that is not one of `allowed`."""
    unknown = first_unknown(changes, allowed)
    if unknown is not None:
        raise InvalidSettingsChange(Words("Unknown setting: {name}.", name=unknown), field=unknown)


def with_changes(current: HomeAssistantConfig, changes: Mapping[str, Any]) -> HomeAssistantConfig:
    """`current` with the known `changes` checked (`Setting.check`) and applied; keys are the caller's check.

    Only each field's own rules: whether a new allowlist fits list_entities' bound is the settings
    save's check (`settings.saving`), not the file's, since a file saved before that check existed
    must still open.
    """
    # In SETTINGS' order, so the first bad field (in that order) is the one named.
    return replace(current, **{s.name: s.check(changes[s.name]) for s in SETTINGS if s.name in changes})


def parse_config(raw: bytes) -> HomeAssistantConfig:
    """Parse the file's bytes; SettingsFileDamaged says what is wrong, with the field where there is one."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:  # bad UTF-8, bad JSON, too deep, an int too long to read
        raise SettingsFileDamaged(Words("The configuration file is not valid JSON ({kind}).",
                                        kind=err.__class__.__name__)) from err
    if not isinstance(data, dict):
        raise SettingsFileDamaged(Words("The configuration file must hold a JSON object."))
    try:
        return with_changes(HomeAssistantConfig(), data)  # keys the Console does not know are left alone
    except InvalidSettingsChange as err:
        raise SettingsFileDamaged(
            Words("The configuration file has an invalid value: {why}", why=err.message), field=err.detail.get("field")
        ) from err


def check_revision(current: StoredConfig, expected_revision: str | None) -> None:
    """Refuse (409 CONFIG_STALE) when the file changed since the caller read `expected_revision`."""
    if expected_revision is not None and expected_revision != current.revision:
        raise SettingsChangedElsewhere(Words(
            "The settings were changed elsewhere since this page loaded. Reload to see them; nothing was saved."
        ))


def _revision(raw: bytes | None) -> str:
    return ABSENT_REVISION if raw is None else hashlib.sha256(raw).hexdigest()[:16]


class ConfigStore:
    """Reads `home-assistant.json` fresh on every call and writes it atomically under a lock."""

    def __init__(self, data_dir: DataDir, instance: str = HOME_INSTANCE) -> None:
        self._dd = data_dir
        self._files = data_dir.instance(instance)

    @property
    def instance(self) -> str:
        """The id of the Home Assistant instance whose settings file this is."""
        return self._files.instance

    @property
    def path(self) -> Path:
        return self._files.config

    @property
    def data_dir(self) -> DataDir:
        return self._dd

    def _read_raw(self) -> bytes | None:
        return read_stored(self.path, "configuration file")

    def read(self) -> StoredConfig:
        """The current configuration and its revision; the default when the file is absent."""
        raw = self._read_raw()
        config = HomeAssistantConfig() if raw is None else parse_config(raw)
        return StoredConfig(config, _revision(raw))

    def load(self) -> HomeAssistantConfig:
        """The current configuration (SettingsFileDamaged when the file on disk is broken)."""
        return self.read().config

    def write(self, config: HomeAssistantConfig) -> StoredConfig:
        """Replace the file with `config`, already checked by the caller (the settings save, under its lock)."""
        with path_lock(self.path):  # every atomic write runs under its file's lock (`sweep_temp_files`)
            return self._write(config)

    def reset(self, config: HomeAssistantConfig | None = None) -> StoredConfig:
        """Move a broken file aside (kept, never deleted) and start again from `config` (else the default)."""
        with path_lock(self.path):
            # Whatever is there (unreadable, even a directory) is renamed, never read: reset must work
            # on exactly the files that cannot be read. The name is unique, so nothing kept is replaced.
            if os.path.lexists(self.path):
                stamp = time.strftime("%Y%m%dT%H%M%S")
                aside = self.path.with_name(f"{self.path.name}.broken-{stamp}-{secrets.token_hex(3)}")
                os.rename(self.path, aside)
                log.warning("moved the configuration file aside to %s", aside)
            return self._write(config or HomeAssistantConfig())

    def _write(self, config: HomeAssistantConfig) -> StoredConfig:
        ensure_dir(self._dd.capabilities, 0o700)
        ensure_dir(self.path.parent, 0o700)  # another instance's: a directory of their own, inside it
        raw = (json.dumps(config.to_json(), indent=2) + "\n").encode("utf-8")
        atomic_write(self.path, raw, mode=0o600)
        return StoredConfig(config, _revision(raw))
