"""The settings a plugin declares for the household, their checks, and the values handed to its hooks.

A plugin declares them as a module attribute (`console_ha.hooks.SETTINGS_ATTRIBUTE`):

    CONSOLE_HA_SETTINGS = [
        {"name": "start", "type": "time", "label": {"en": "Quiet from", "fr": "Silence à partir de"}},
    ]

`type` is "time" (a time of day, HH:MM, 24 hours), "url" (http or https) or "text" (one line); `label` is the
household's words for the field, one text or one per language code ("en" required: the words for every
language the plugin has none in). The plugins page shows and saves them; a hook reads them with
`console_ha.hooks.settings()` (the registry sets them around each of its calls).
"""

from __future__ import annotations

import logging
import re
import threading
import unicodedata
from collections.abc import Mapping
from dataclasses import dataclass
from types import MappingProxyType
from typing import Literal
from urllib.parse import urlsplit

from console_ha.errors import InvalidSettingsChange
from console_ha.hooks import SETTINGS_ATTRIBUTE
from console_ha.language import Words
from console_ha.store.plugin_values import PluginValuesFile

log = logging.getLogger(__name__)

SettingType = Literal["time", "url", "text"]
SETTING_TYPES: tuple[SettingType, ...] = ("time", "url", "text")
MAX_SETTINGS = 16  # a plugin's fields on the page; more is a declaration gone wrong
MAX_VALUE_LENGTH = 500  # characters of one value (an ntfy topic's URL is well under)
_NAME = re.compile(r"^[a-z][a-z0-9_]{0,39}$")
_TIME = re.compile(r"^([01][0-9]|2[0-3]):[0-5][0-9]$")

TIME_WORDS = Words("Give a time of day as hours and minutes, such as 07:30 or 22:00.")
URL_WORDS = Words("Give an address that starts with http:// or https://, such as https://ntfy.example/console.")
_BIDI_CONTROLS = frozenset("\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069")
_NONE: Mapping[str, str] = MappingProxyType({})

LENGTH_WORDS = Words("Give at most {count} characters.", count=MAX_VALUE_LENGTH)
LINE_WORDS = Words("Give one line of text, without line breaks or control characters.")


class InvalidDeclaration(ValueError):
    """A plugin's `CONSOLE_HA_SETTINGS` is not a list of settings as documented; the Console does not start."""


@dataclass(frozen=True)
class SettingField:
    """One setting a plugin declared: its name (the key its hooks read), its type and its label."""

    name: str
    type: SettingType
    labels: Mapping[str, str]  # by language code; "en" always there

    def label(self, language_code: str) -> str:
        """The household's words for this field in `language_code`, else the plugin's English ones."""
        return self.labels.get(language_code, self.labels["en"])


def declared_settings(plugin: object, name: str) -> tuple[SettingField, ...]:
    """What `plugin` (registered as `name`) declares; none without the attribute, InvalidDeclaration if wrong."""
    declared = getattr(plugin, SETTINGS_ATTRIBUTE, None)
    if declared is None:
        return ()
    if not isinstance(declared, list | tuple) or len(declared) > MAX_SETTINGS:
        raise InvalidDeclaration(f"the plugin {name}'s {SETTINGS_ATTRIBUTE} is not a list of at most "
                                 f"{MAX_SETTINGS} settings")
    fields = tuple(_field(item, name) for item in declared)
    if len({field.name for field in fields}) != len(fields):
        raise InvalidDeclaration(f"the plugin {name} declares a setting twice")
    return fields


def _field(item: object, plugin: str) -> SettingField:
    if not isinstance(item, Mapping):
        raise InvalidDeclaration(f"a setting of the plugin {plugin} is not a dict")
    name, kind, label = item.get("name"), item.get("type"), item.get("label")
    if not isinstance(name, str) or not _NAME.match(name):
        raise InvalidDeclaration(f"a setting of the plugin {plugin} has no name of lowercase letters, digits and _")
    if kind not in SETTING_TYPES:
        raise InvalidDeclaration(f"the setting {name} of the plugin {plugin} has a type other than "
                                 f"{', '.join(SETTING_TYPES)}")
    labels = {"en": label} if isinstance(label, str) else label
    if (not isinstance(labels, Mapping) or not isinstance(labels.get("en"), str)
            or not all(isinstance(code, str) and isinstance(text, str) for code, text in labels.items())):
        raise InvalidDeclaration(f"the setting {name} of the plugin {plugin} has no label (text, or text per "
                                 "language with \"en\")")
    return SettingField(name, kind, MappingProxyType(dict(labels)))


def checked_value(field: SettingField, typed: str) -> str:
    """`typed` as it is kept for `field` (spaces around it dropped), or InvalidSettingsChange naming the field.

    Empty is always allowed: the setting is then not set, and the plugin does nothing that needs it.
    """
    value = typed.strip()
    if not value:
        return ""
    if len(value) > MAX_VALUE_LENGTH:
        raise InvalidSettingsChange(LENGTH_WORDS, field=field.name)
    if any(_breaks_the_line(ch) for ch in value):
        raise InvalidSettingsChange(LINE_WORDS, field=field.name)
    if field.type == "time" and not _TIME.match(value):
        raise InvalidSettingsChange(TIME_WORDS, field=field.name)
    if field.type == "url" and not _is_web_address(value):
        raise InvalidSettingsChange(URL_WORDS, field=field.name)
    return value


def _breaks_the_line(ch: str) -> bool:
    """A control character (C0, DEL, C1: U+0085 is a line break too), a line or paragraph separator, or a bidi
    control, which makes a value read one way on the page and mean another. Joiners stay: emoji need them."""
    return unicodedata.category(ch) in ("Cc", "Zl", "Zp") or ch in _BIDI_CONTROLS


def _is_web_address(value: str) -> bool:
    try:
        parts = urlsplit(value)
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and " " not in value


class PluginSettings:
    """Each plugin's declared settings and the household's values, read once and written through."""

    def __init__(self, store: PluginValuesFile | None = None) -> None:
        """Over `store`; without one (plugins registered in code by a test) nothing is saved nor can be."""
        self._store = store
        self._fields: dict[str, tuple[SettingField, ...]] = {}
        self._saving = threading.Lock()
        self._values = store.read() if store is not None else {}
        # What hooks are handed, per plugin: its saved values that fit its declaration (`_fitting`), made again
        # at each declare and save, so a hook call reads a ready mapping.
        self._handed: dict[str, Mapping[str, str]] = {}

    def declare(self, plugin: object, name: str) -> None:
        """Note what the plugin registered as `name` declares (InvalidDeclaration: it cannot be registered)."""
        fields = declared_settings(plugin, name)
        if fields:
            self._fields[name] = fields
            self._handed[name] = self._fitting(name)

    def fields(self, plugin: str) -> tuple[SettingField, ...]:
        """The settings `plugin` declared, in its order; none for a plugin that declares none."""
        return self._fields.get(plugin, ())

    def values(self, plugin: str) -> Mapping[str, str]:
        """The saved values of `plugin`'s declared settings (one not set is absent), as its hooks see them."""
        return self._handed.get(plugin, _NONE)

    def _fitting(self, plugin: str) -> Mapping[str, str]:
        """`plugin`'s saved values that pass the page's check of their declared type.

        A hook may trust a setting's type: a value edited by hand, or saved while the plugin declared another
        type, counts as not set (logged by field, never with the value: a URL may hold a topic's secret name).
        """
        saved, kept = self._values.get(plugin, {}), {}
        for field in self.fields(plugin):
            value = saved.get(field.name, "")
            try:
                value = checked_value(field, value)
            except InvalidSettingsChange:
                log.warning("the saved value of the setting %s of the plugin %s does not fit its type; not set",
                            field.name, plugin)
                continue
            if value:
                kept[field.name] = value
        return MappingProxyType(kept)

    def save(self, plugin: str, typed: Mapping[str, str]) -> Mapping[str, str]:
        """Check every declared field of `plugin` in `typed` and save them all, or nothing on the first refusal."""
        kept = {field.name: checked_value(field, typed.get(field.name, "")) for field in self.fields(plugin)}
        if self._store is None:
            raise RuntimeError("these plugins' settings have no file to be saved in")
        with self._saving:
            self._values = self._store.save(plugin, {name: value for name, value in kept.items() if value})
            self._handed = {name: self._fitting(name) for name in self._fields}
        return self.values(plugin)
