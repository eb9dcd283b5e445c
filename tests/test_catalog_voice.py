"""The catalogs read as one voice: one form of address per language, and each language's typography.

Three parts of the Console were translated in parallel (issue 26); these checks keep what was made
consistent from drifting apart again: German says "du" as Home Assistant's German frontend does, French
"vous", Spanish "tú", Dutch "je", Chinese "你"; French spaces before its high punctuation, German „…“,
Chinese full-width punctuation.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path

import pytest
from babel.messages.pofile import read_po

TRANSLATIONS = Path(__file__).resolve().parent.parent / "console_ha" / "translations"
# A placeholder's text is not the language's: "{name}" or "%(num)s"; nor is an HTTP header's.
_PLACEHOLDER = re.compile(r"%\([a-z_]+\)s|\{[a-z_]+\}|Authorization: Bearer")

# What each language must never say to the household (its form of address, its typography).
NEVER: dict[str, tuple[tuple[str, str], ...]] = {
    "de": (
        (r"\b\w+en Sie\b|\bIhnen\b|\bSie (können|möchten|sehen|wählen|verwenden)\b", "the polite Sie, not du"),
        (r"(^|[\s(])“|”|\"", "English quotes, not „…“"),
        (r"«|»", "guillemets, not „…“"),
    ),
    "fr": (
        (r"\b(tu|ton|ta|tes|toi|te)\b", "tu, not vous"),
        (r" [:;?!»]|« ", "an ordinary space where a no-break space belongs"),
        (r"[^\s\xa0\u202f/\d:]:\s|\w[;?!](\s|$)", "high punctuation without its space"),
        (r"[“”\"]", "English quotes, not « … »"),
    ),
    "es": (
        (r"\b(usted|ustedes)\b", "usted, not tú"),
        (r"\b(Pulse|Elija|Introduzca|Compruebe|Seleccione|Pegue|Inténtelo|Dé|[Dd]esmarque|[Qq]uite)\b",
         "an imperative of usted, not tú"),
        (r"[“”\"]", "English quotes, not «…»"),
    ),
    "nl": (
        (r"\b(u|uw)\b", "u, not je"),
        (r"[“”\"]", "double quotes, not ‘…’"),
    ),
    "zh_Hans": (
        (r"您", "您, not 你"),
        (r"[\u4e00-\u9fff][,:;?!()]|[,;?!(][\u4e00-\u9fff]", "half-width punctuation beside Chinese"),
        (r"[\u4e00-\u9fff][A-Za-z0-9]|[A-Za-z0-9][\u4e00-\u9fff]", "no space between Chinese and a Latin word"),
        (r"\"|[‘’]", "quotes other than “…”"),
    ),
}


def _translations(language: str) -> Iterator[tuple[str, str]]:
    with open(TRANSLATIONS / language / "LC_MESSAGES" / "messages.po", "rb") as source:
        catalog = read_po(source, locale=language)
    for message in catalog:
        if not message.id:
            continue
        msgid = message.id[0] if isinstance(message.id, tuple) else message.id
        for text in message.string if isinstance(message.string, tuple) else (message.string,):
            yield str(msgid), _PLACEHOLDER.sub("", str(text))


@pytest.mark.parametrize("language", sorted(NEVER))
def test_every_message_keeps_its_language_s_voice_and_typography(language: str) -> None:
    """Each message of each catalog, against what its language never says."""
    found = [f"{why}: {msgid[:60]!r} -> {text!r}" for msgid, text in _translations(language)
             for pattern, why in NEVER[language] if re.search(pattern, text)]
    assert not found, "\n".join(found)


def test_the_check_can_fail() -> None:
    """The patterns catch what they are for (so a passing test says something)."""
    samples = {"de": "Wählen Sie unten die Entitäten", "fr": "Enregistrez : rien", "es": "Pulse Guardar",
               "nl": "Kies uw apparaat", "zh_Hans": "请选择,然后保存"}
    for language, sample in samples.items():
        assert any(re.search(pattern, sample) for pattern, _ in NEVER[language]), language


# One word for one thing in each catalog, where issue 29's new sentences had taken another: the catalog's own
# word, then the one it must not say (German, Spanish and Chinese said "Console" beside 39, 48 and 79 sentences
# saying Konsole, Consola and 控制台; French and Spanish "certificat de l’AC", "certificado de la CA").
ONE_WORD: dict[str, tuple[tuple[str, str], ...]] = {
    "de": (("Konsole", "Console"),),
    "es": (("Consola", "Console"), ("certificado de CA", "certificado de la CA")),
    "fr": (("certificat d’AC", "certificat de l’AC"),),
    "zh_Hans": (("控制台", "Console"),),
}


@pytest.mark.parametrize("language", sorted(ONE_WORD))
def test_each_catalog_calls_one_thing_by_one_word(language: str) -> None:
    """No sentence names the Console or a CA certificate with a word its catalog does not use elsewhere."""
    found = [f"{text!r}: {word!r}, not {other!r}" for _, text in _translations(language)
             for word, other in ONE_WORD[language] if other in text]
    assert not found, "\n".join(found)
