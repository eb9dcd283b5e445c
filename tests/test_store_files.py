"""The one read of the Console's own files: absent is None, unreadable is ConfigInvalid in household words."""

from __future__ import annotations

from pathlib import Path

import pytest

from console_ha.errors import ConfigInvalid
from console_ha.store.files import read_if_present, read_stored


def test_an_absent_file_is_none(tmp_path: Path) -> None:
    assert read_if_present(tmp_path / "missing") is None
    assert read_stored(tmp_path / "missing", "configuration file") is None


def test_a_present_file_is_its_bytes(tmp_path: Path) -> None:
    path = tmp_path / "file"
    path.write_bytes(b"\x00{\r\n}\xff")
    assert read_if_present(path) == b"\x00{\r\n}\xff"
    assert read_stored(path, "configuration file") == b"\x00{\r\n}\xff"


def test_read_if_present_leaves_any_other_failure_to_the_caller(tmp_path: Path) -> None:
    with pytest.raises(IsADirectoryError):
        read_if_present(tmp_path)  # a directory cannot be read, even by root


def test_an_unreadable_file_names_itself_and_the_reason_but_not_its_path(tmp_path: Path) -> None:
    with pytest.raises(ConfigInvalid) as caught:
        read_stored(tmp_path, "model settings file")
    assert caught.value.message == "The model settings file cannot be read (Is a directory)."
    assert caught.value.code == "CONFIG_INVALID"
    assert str(tmp_path) not in str(caught.value) and caught.value.__cause__ is None
