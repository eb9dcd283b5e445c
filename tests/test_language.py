"""The household's language without Flask: the choice, the catalogs (loaded once), and Words in each language."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from zoneinfo import ZoneInfo

import pytest

from console_ha.language import (
    AUTOMATIC,
    ENGLISH,
    LANGUAGES,
    PSEUDO,
    TRANSLATED,
    Words,
    by_code,
    choose,
    from_browser,
    localised,
    moment_words,
    translations,
)

FRENCH, GERMAN, SPANISH, DUTCH, CHINESE = TRANSLATED


@pytest.mark.parametrize(("tags", "code"), [
    (["fr-FR", "fr", "en-US"], "fr"),
    (["fr-CA"], "fr"),  # a region the Console has no catalog of: the language alone
    (["de-AT", "en"], "de"),
    (["es-419"], "es"),
    (["nl-BE"], "nl"),
    (["zh-CN", "zh"], "zh-Hans"),
    (["zh"], "zh-Hans"),
    (["zh-Hans-CN"], "zh-Hans"),
    (["zh-SG"], "zh-Hans"),
    (["zh-TW", "zh-HK", "ja"], "en"),  # Traditional script is not Simplified: the next preference, else English
    (["zh-Hant", "fr"], "fr"),
    (["ja-JP", "ko"], "en"),
    ([], "en"),
    (["*"], "en"),
])
def test_the_browsers_first_language_the_console_speaks_else_english(tags: list[str], code: str) -> None:
    assert from_browser(tags).code == code


def test_a_saved_choice_wins_over_the_browser_and_automatic_follows_it() -> None:
    assert choose("de", ["fr-FR"]) is GERMAN
    assert choose(AUTOMATIC, ["fr-FR"]) is FRENCH
    assert choose(AUTOMATIC, []) is ENGLISH


def test_a_saved_choice_the_console_does_not_know_follows_the_browser() -> None:
    assert choose("tlh", ["nl"]) is DUTCH


def test_the_pseudo_language_is_chosen_only_where_it_is_offered() -> None:
    assert choose(PSEUDO.code, ["es"]) is SPANISH
    assert choose(PSEUDO.code, ["es"], with_pseudo=True) is PSEUDO
    assert by_code(PSEUDO.code) is None


def test_every_language_is_named_in_itself() -> None:
    assert [language.name for language in LANGUAGES] == [
        "English", "Français", "Deutsch", "Español", "Nederlands", "中文(简体)"]


def test_words_read_as_their_english_sentence_wherever_the_language_is_not_known() -> None:
    words = Words("Read {name} now?", name="Kitchen")
    assert words == "Read Kitchen now?" and isinstance(words, str)
    assert json.dumps({"title": words}) == '{"title": "Read Kitchen now?"}'
    assert words.msgid == "Read {name} now?" and words.params == {"name": "Kitchen"}


def test_words_are_rendered_from_the_catalog_of_each_language() -> None:
    words = Words("That password is not right. Try again.")
    assert words.in_language(FRENCH) == "Ce mot de passe n’est pas le bon. Réessayez."
    assert words.in_language(CHINESE) == "密码不正确，请重试。"
    assert words.in_language(ENGLISH) == words


@pytest.mark.parametrize(("count", "french", "chinese"), [
    (1, "Trop de mots de passe erronés. Attendez 1 seconde, puis réessayez.", "错误密码次数过多。请等待 1 秒后再试。"),
    (30, "Trop de mots de passe erronés. Attendez 30 secondes, puis réessayez.",
     "错误密码次数过多。请等待 30 秒后再试。"),
])
def test_a_counted_sentence_takes_each_languages_own_plural_form(count: int, french: str, chinese: str) -> None:
    words = Words.counted("Too many wrong passwords. Wait {count} second, then try again.",
                          "Too many wrong passwords. Wait {count} seconds, then try again.", count)
    assert words.in_language(FRENCH) == french
    assert words.in_language(CHINESE) == chinese
    assert words == f"Too many wrong passwords. Wait {count} second{'s' if count != 1 else ''}, then try again."


def test_numbers_in_words_are_written_in_the_languages_own_form() -> None:
    words = Words.counted("The password may have at most {count} character.",
                          "The password may have at most {count} characters.", 1024)
    assert words == "The password may have at most 1,024 characters."
    assert words.in_language(GERMAN) == "Das Passwort darf höchstens 1.024 Zeichen haben."
    assert words.in_language(FRENCH) == "Le mot de passe peut comporter au plus 1\u202f024 caractères."


def test_a_message_no_catalog_has_reads_in_english_in_every_language() -> None:
    assert Words("A sentence nobody translated.").in_language(DUTCH) == "A sentence nobody translated."


def test_a_json_answer_has_every_words_in_it_rendered_and_everything_else_kept() -> None:
    answer = {"error": {"code": "UNAUTHENTICATED", "message": Words("Type the password."), "status": 401},
              "lines": [Words("Type the password."), "as it was", 3, None]}
    assert localised(answer, SPANISH) == {
        "error": {"code": "UNAUTHENTICATED", "message": "Escribe la contraseña.", "status": 401},
        "lines": ["Escribe la contraseña.", "as it was", 3, None]}


def test_a_catalog_is_loaded_once_per_process() -> None:
    assert translations(FRENCH.catalog) is translations(FRENCH.catalog)


def test_a_words_survives_a_copy_with_its_catalog_id() -> None:
    import copy
    import pickle
    words = Words.counted("The password needs at least {count} character.",
                          "The password needs at least {count} characters.", 8)
    for again in (copy.deepcopy(words), pickle.loads(pickle.dumps(words))):
        assert again == words and again.in_language(DUTCH) == "Het wachtwoord moet minstens 8 tekens hebben."


@pytest.mark.parametrize(("language", "with_date", "expected"), [
    (ENGLISH, True, "Dec 2, 2026, 10:30\u202fAM CET"),
    (FRENCH, True, "2 déc. 2026, 10:30 CET"),
    (GERMAN, True, "02.12.2026, 10:30 CET"),
    (SPANISH, True, "2 dic 2026, 10:30 CET"),
    (DUTCH, True, "2 dec 2026, 10:30 CET"),
    (CHINESE, True, "2026年12月2日 10:30 CET"),
    (FRENCH, False, "10:30 CET"),
    (ENGLISH, False, "10:30\u202fAM CET"),
])
def test_a_moment_is_written_in_the_languages_own_forms(language, with_date: bool, expected: str) -> None:
    moment = datetime(2026, 12, 2, 9, 30, tzinfo=UTC)
    assert moment_words(moment, ZoneInfo("Europe/Paris"), language, with_date=with_date) == expected
