"""The household's language: the languages the Console speaks, their catalogs (loaded once), and `Words`.

No Flask here: the capability layer returns `Words` (a catalog id and named values), and whoever shows them
(the web layer, for the request's language) renders them with `Words.in_language`. Templates use the same
catalogs through Flask-Babel (web/request_language.py).
"""

from __future__ import annotations

import functools
import io
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import date, datetime, tzinfo
from pathlib import Path

from babel import Locale, negotiate_locale
from babel.dates import format_date, format_datetime, format_time
from babel.messages.mofile import write_mo
from babel.messages.pofile import read_po
from babel.numbers import format_decimal
from babel.support import NullTranslations, Translations

log = logging.getLogger(__name__)

TRANSLATIONS = Path(__file__).resolve().parent / "translations"
DOMAIN = "messages"
# The saved choice that follows the browser (`Accept-Language`), and is the default.
AUTOMATIC = "automatic"


@dataclass(frozen=True)
class Language:
    """One language the household may read the Console in."""

    code: str  # BCP 47, as <html lang> and the settings file name it: "fr", "zh-Hans"
    name: str  # its own name, written in itself, as a language menu shows it
    catalog: str  # its catalog's folder under translations/ ("zh_Hans"); English is the msgids themselves
    locale: str  # the Babel locale of its dates and numbers


ENGLISH = Language("en", "English", "en", "en")
LANGUAGES: tuple[Language, ...] = (
    ENGLISH,
    Language("fr", "Français", "fr", "fr"),
    Language("de", "Deutsch", "de", "de"),
    Language("es", "Español", "es", "es"),
    Language("nl", "Nederlands", "nl", "nl"),
    Language("zh-Hans", "中文(简体)", "zh_Hans", "zh_Hans"),
)
# The tests' pseudo-language (scripts/pseudo_locale.py makes its catalog from messages.pot): every word
# accented and 40 % longer, so a word not from the catalogs, or cut off by the layout, shows. Never offered
# to a household: an app lists it only when its config says so (web/request_language.py).
PSEUDO = Language("en-XA", "Ƥşéûđö", "en_XA", "en")
TRANSLATED: tuple[Language, ...] = LANGUAGES[1:]

# Browser tags that name Chinese in traditional script: Simplified is not their writing, so such a tag is
# passed over for the browser's next preference (else English), as Home Assistant's frontend keeps them apart.
_TRADITIONAL = ("zh-hant", "zh-tw", "zh-hk", "zh-mo")


def by_code(code: str, *, with_pseudo: bool = False) -> Language | None:
    """The language of that code ("fr", "zh-Hans"), or None when the Console does not speak it."""
    known: tuple[Language, ...] = (*LANGUAGES, PSEUDO) if with_pseudo else LANGUAGES
    for language in known:
        if language.code == code:
            return language
    return None


def from_browser(tags: Iterable[str]) -> Language:
    """The first of the browser's languages (best first, as `Accept-Language` orders them) the Console speaks."""
    offered: dict[str, Language] = {language.code.lower(): language for language in LANGUAGES}
    offered.update({"zh": LANGUAGES[-1], "zh-cn": LANGUAGES[-1], "zh-sg": LANGUAGES[-1]})
    for tag in tags:
        tag = tag.strip().replace("_", "-").lower()
        if tag.startswith(_TRADITIONAL):
            continue
        # Babel's negotiation: an exact tag first, then the language alone ("fr-CA" is French).
        match: str | None = negotiate_locale([tag], list(offered), sep="-")
        if match is not None:
            return offered[match.lower()]
    return ENGLISH


def choose(saved: str, browser_tags: Iterable[str], *, with_pseudo: bool = False) -> Language:
    """The saved choice when it names a language, else the browser's, else English."""
    if saved != AUTOMATIC:
        language = by_code(saved, with_pseudo=with_pseudo)
        if language is not None:
            return language
    return from_browser(browser_tags)


@functools.cache
def translations(catalog: str) -> NullTranslations:
    """The compiled catalog of a language, loaded once per process (English: the msgids as they are)."""
    if catalog == ENGLISH.catalog:
        return NullTranslations()
    folder = TRANSLATIONS / catalog / "LC_MESSAGES"
    if (folder / f"{DOMAIN}.mo").is_file():
        with open(folder / f"{DOMAIN}.mo", "rb") as compiled:
            return Translations(compiled, domain=DOMAIN)
    # A checkout whose catalogs changed after its install compiled them: compile in memory, and say how to fix it.
    log.warning("the %s catalog is not compiled; run `python scripts/i18n.py compile` (or pip install -e .)", catalog)
    with open(folder / f"{DOMAIN}.po", "rb") as source:
        buffer = io.BytesIO()
        write_mo(buffer, read_po(source, locale=catalog))
    buffer.seek(0)
    return Translations(buffer, domain=DOMAIN)


def N_(msgid: str) -> str:  # gettext's own name for it, which pybabel extracts
    """Mark `msgid` for the catalogs where it is defined; it becomes a `Words` where it is used, with its values."""
    return msgid


def _shown(value: object, language: Language) -> object:
    # A value as `language` writes it: a nested sentence, a number, a moment (in its own zone), a day.
    if isinstance(value, Words):
        return value.in_language(language)
    if isinstance(value, datetime):
        locale = Locale.parse(language.locale)
        return format_datetime(value, format=_date_time_pattern(locale), tzinfo=value.tzinfo, locale=locale)
    if isinstance(value, date):
        return format_date(value, format="long", locale=language.locale)
    if isinstance(value, int | float) and not isinstance(value, bool):
        return format_decimal(value, locale=language.locale)
    return value


class Words(str):
    """A sentence the household reads: a catalog id with named values, that reads as its English text.

    One whole sentence per message (`Words("Read {name} now?", name=...)`), never assembled from pieces, so
    each language can order it its own way. As a str it is the English sentence, so code that does not know
    the household's language still shows a true sentence; the edge that knows it calls `in_language`.
    """

    msgid: str
    params: dict[str, object]
    plural: str | None
    number: int | None  # the count a plural sentence depends on (str has a `count` of its own)

    def __new__(cls, msgid: str, /, **params: object) -> Words:
        """The sentence `msgid` (also its English text) with its named values."""
        english = msgid.format(**{name: _shown(value, ENGLISH) for name, value in params.items()}) if params else msgid
        words = super().__new__(cls, english)
        words.msgid, words.params, words.plural, words.number = msgid, params, None, None
        return words

    @classmethod
    def counted(cls, singular: str, plural: str, count: int, /, **params: object) -> Words:
        """A sentence that depends on a number `count` (its `{count}`), in each language's own plural forms."""
        words = cls(singular if count == 1 else plural, count=count, **params)
        words.msgid, words.plural, words.number = singular, plural, count
        return words

    def to_record(self) -> dict[str, object]:
        """This sentence as JSON keeps it (a conversation on disk): its message and values, nested sentences too."""
        values = {name: {"words": value.to_record()} if isinstance(value, Words) else value
                  for name, value in self.params.items()}
        return {"msgid": self.msgid, "plural": self.plural, "number": self.number, "values": values}

    @classmethod
    def from_record(cls, record: object) -> Words | None:
        """The sentence `to_record` wrote; None for anything else (a damaged file keeps its English text)."""
        if not isinstance(record, dict) or not isinstance(record.get("msgid"), str):
            return None
        plural, number, values = record.get("plural"), record.get("number"), record.get("values")
        if not isinstance(values, dict) or (plural is None) != (number is None):
            return None
        if plural is not None and (not isinstance(plural, str) or type(number) is not int):
            return None
        params: dict[str, object] = {}
        for name, value in values.items():
            nested = cls.from_record(value.get("words")) if isinstance(value, dict) else None
            if nested is None and not (isinstance(value, str | int | float) and not isinstance(value, bool)):
                return None
            params[str(name)] = nested if nested is not None else value
        try:
            if plural is not None and isinstance(number, int):
                return cls.counted(record["msgid"], plural, number, **{k: v for k, v in params.items() if k != "count"})
            return cls(record["msgid"], **params)
        except (KeyError, IndexError, ValueError):  # values that do not fill the message: not one of ours
            return None

    def in_language(self, language: Language) -> str:
        """This sentence in `language`, its values shown in that language's forms (numbers, nested Words)."""
        catalog = translations(language.catalog)
        if self.plural is not None and self.number is not None:
            template = catalog.ngettext(self.msgid, self.plural, self.number)
        else:
            template = catalog.gettext(self.msgid)
        if not self.params:
            return template
        return template.format(**{name: _shown(value, language) for name, value in self.params.items()})


def localised(value: object, language: Language) -> object:
    """`value` (a JSON answer: dicts, lists, str) with every `Words` in it rendered in `language`."""
    if isinstance(value, Words):
        return value.in_language(language)
    if isinstance(value, dict):
        return {key: localised(item, language) for key, item in value.items()}
    if isinstance(value, list | tuple):
        return [localised(item, language) for item in value]
    return value


def moment_words(moment: datetime, zone: tzinfo | None, language: Language, *, with_date: bool = True) -> str:
    """A moment as a person reads it in `language` and `zone` (None: the machine's own), its zone named.

    "4 déc. 2026, 22:47 UTC+1": the language's medium date and short time, and the zone, since this is what
    a page shows when the browser's own clock (static/clock.js) cannot be used.
    """
    local = moment.astimezone(zone) if zone is not None else moment.astimezone()
    locale = Locale.parse(language.locale)
    zone_name = local.strftime("%Z")
    if with_date:
        when = format_datetime(local, format=_date_time_pattern(locale), tzinfo=local.tzinfo, locale=locale)
    else:
        when = format_time(local, format="short", tzinfo=local.tzinfo, locale=locale)
    return f"{when} {zone_name}"


@functools.cache
def _date_time_pattern(locale: Locale) -> str:
    # The language's own "medium date, short time" pattern, as Intl's {dateStyle: medium, timeStyle: short}.
    date = locale.date_formats["medium"].pattern
    time = locale.time_formats["short"].pattern
    glue = str(locale.datetime_formats["medium"])
    return glue.replace("{1}", date).replace("{0}", time)
