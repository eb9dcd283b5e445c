"""find_entities' vocabulary: the household's words for kinds of things in six languages (household_words.toml),
the words that say nothing, and how a query written without spaces (Chinese) is cut into words."""

from __future__ import annotations

import re
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from importlib import resources
from typing import Any

from console_ha.folding import fold

# The household's languages (contract, "The household's language"): every English word has words in the others.
LANGUAGES = ("en", "fr", "de", "es", "nl", "zh")
# How a query is cut into words first: at anything not a letter or digit (find_entities matches these).
WORD = re.compile(r"[^\W_]+")
# Han characters (CJK unified ideographs, extension A, compatibility): a script written without spaces, so a
# run of them is cut by the table's words and into pairs, not taken whole.
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]+")


@dataclass(frozen=True)
class Kind:
    """A kind of device a household word names: a domain, and the device class when the word is that narrow."""

    domain: str
    device_class: str | None = None


def _kind(spec: str) -> Kind:
    """`"light"`, `"binary_sensor/door"`: a domain, or a domain and a device class."""
    return Kind(*spec.split("/", 1))


@dataclass(frozen=True)
class Vocabulary:
    """The table, folded as matching folds: stop words, each word's kinds, and the Han words to cut runs by."""

    stop_words: frozenset[str]
    kinds: Mapping[str, tuple[Kind, ...]]
    han_words: frozenset[str]
    longest_han_word: int


def _folded_word(word: str) -> str:
    folded = fold(word)
    if not (HAN.fullmatch(folded) or WORD.fullmatch(folded)):
        # A query never holds such a word whole (it is cut at spaces and hyphens): the entry would never match.
        raise ValueError(f"household_words.toml: {word!r} is not one word")
    return folded


def vocabulary(table: Mapping[str, Any]) -> Vocabulary:
    """The vocabulary a parsed household_words.toml declares; a word in several entries names all their kinds."""
    stop_words = frozenset(_folded_word(word) for language in LANGUAGES for word in table["stop_words"][language])
    kinds: dict[str, tuple[Kind, ...]] = {}
    for english, entry in table["words"].items():
        named = tuple(_kind(spec) for spec in entry["kinds"])
        for word in [english, *(word for language in LANGUAGES[1:] for word in entry[language])]:
            folded = _folded_word(word)
            kinds[folded] = tuple(dict.fromkeys((*kinds.get(folded, ()), *named)))
    han_words = frozenset(word for word in (*kinds, *stop_words) if HAN.fullmatch(word))
    return Vocabulary(stop_words, kinds, han_words, max(map(len, han_words), default=1))


VOCABULARY = vocabulary(tomllib.loads(
    resources.files(__package__).joinpath("household_words.toml").read_text(encoding="utf-8")))
STOP_WORDS = VOCABULARY.stop_words
HOUSEHOLD_WORDS = VOCABULARY.kinds


def han_words(run: str, known: Vocabulary = VOCABULARY) -> list[str]:
    """A run of Han characters as words, in order: the table's words in it (stop words left out) and what lies
    between them as itself; then that text's pairs of characters.

    Written here rather than taken from a segmentation library (jieba and the like carry a dictionary of
    several megabytes and a second or so of start-up): a device's name is a few characters, matched as a
    substring, and a household's words for rooms are not in a general dictionary anyway. The table's own
    words and the pairs ("主卧室" → "主卧", "卧室") find what a segmenter would.
    """
    # From the end backwards, the longest word ending at each place: "主卧室温度计" is "主卧室" and "温度计",
    # where reading forwards would take "室温" (room temperature) and break the thermometer.
    found: list[str] = []  # the run's pieces from its end: unmatched text, then a table word, and so on
    end, unmatched = len(run), ""
    while end > 0:
        size = next((size for size in range(min(known.longest_han_word, end), 0, -1)
                     if run[end - size:end] in known.han_words), 0)
        if not size:
            unmatched = run[end - 1] + unmatched
            end -= 1
            continue
        found += [unmatched, run[end - size:end]]
        unmatched = ""
        end -= size
    found.append(unmatched)
    found.reverse()
    pairs = [text[i:i + 2] for text in found if len(text) > 2 and text not in known.han_words
             for i in range(len(text) - 1)]
    return list(dict.fromkeys(text for text in [*found, *pairs] if text and text not in known.stop_words))


def query_texts(query: str) -> Iterator[str]:
    """The query's words, folded, in order: cut at spaces and punctuation, and each Han run cut as above."""
    for token in WORD.findall(fold(query)):
        if not HAN.search(token):
            yield token
            continue
        position = 0
        for run in HAN.finditer(token):
            if run.start() > position:
                yield token[position:run.start()]
            yield from han_words(run.group())
            position = run.end()
        if position < len(token):
            yield token[position:]
