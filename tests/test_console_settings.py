"""The Console's own settings file: the household's Language choice, kept atomically, read once until it changes."""

from __future__ import annotations

import json
import os
import stat

import pytest

from console_ha.errors import InvalidSettingsChange
from console_ha.store.console_settings import CHOICES, ConsoleSettingsStore
from console_ha.store.datadir import DataDir


def test_no_file_is_automatic(data_dir: DataDir) -> None:
    assert ConsoleSettingsStore(data_dir).language() == "automatic"


@pytest.mark.parametrize("choice", CHOICES)
def test_a_choice_is_saved_0600_and_read_back(data_dir: DataDir, choice: str) -> None:
    store = ConsoleSettingsStore(data_dir)
    assert store.set_language(choice) == choice
    assert store.language() == choice and ConsoleSettingsStore(data_dir).language() == choice
    assert stat.S_IMODE(os.stat(data_dir.console_settings).st_mode) == 0o600
    assert data_dir.console_settings.parent == data_dir.root / "console"


@pytest.mark.parametrize("value", ["tlh", "FR", "", None, 3, ["fr"]])
def test_a_language_the_console_does_not_speak_is_refused(data_dir: DataDir, value: object) -> None:
    with pytest.raises(InvalidSettingsChange) as refused:
        ConsoleSettingsStore(data_dir).set_language(value)
    assert refused.value.detail["field"] == "language"
    assert not data_dir.console_settings.exists()


def test_the_other_settings_in_the_file_are_kept(data_dir: DataDir) -> None:
    data_dir.console_settings.parent.mkdir(parents=True)
    data_dir.console_settings.write_text(json.dumps({"later": 1}))
    ConsoleSettingsStore(data_dir).set_language("nl")
    assert json.loads(data_dir.console_settings.read_text()) == {"later": 1, "language": "nl"}


def test_a_change_by_another_writer_is_seen_at_the_next_read(data_dir: DataDir) -> None:
    reader, writer = ConsoleSettingsStore(data_dir), ConsoleSettingsStore(data_dir)
    writer.set_language("fr")
    assert reader.language() == "fr"
    writer.set_language("zh-Hans")
    assert reader.language() == "zh-Hans"


def test_the_file_is_read_once_until_it_changes(data_dir: DataDir, monkeypatch: pytest.MonkeyPatch) -> None:
    store = ConsoleSettingsStore(data_dir)
    store.set_language("es")
    reads: list[int] = []
    original = store._read

    def counted() -> str:
        reads.append(1)
        return original()

    monkeypatch.setattr(store, "_read", counted)
    for _ in range(10):
        assert store.language() == "es"
    assert len(reads) == 1


@pytest.mark.parametrize("body", [b"{not json", b"[]", b'{"language": "tlh"}', b'{"language": 7}'])
def test_a_damaged_or_unknown_file_keeps_the_pages_readable_in_the_browsers_language(
        data_dir: DataDir, body: bytes, caplog: pytest.LogCaptureFixture) -> None:
    data_dir.console_settings.parent.mkdir(parents=True)
    data_dir.console_settings.write_bytes(body)
    assert ConsoleSettingsStore(data_dir).language() == "automatic"
