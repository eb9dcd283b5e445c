"""Reading the Console's own files: an absent file is None, one that cannot be read says so in household words."""

from __future__ import annotations

from pathlib import Path

from console_ha.errors import SettingsFileDamaged


def read_if_present(path: Path) -> bytes | None:
    """The file's bytes, or None when it does not exist; any other failure to read is the caller's to judge."""
    try:
        return path.read_bytes()
    except FileNotFoundError:
        return None


def read_stored(path: Path, what: str) -> bytes | None:
    """The file's bytes, or None when absent; SettingsFileDamaged ("The {what} cannot be read (…).") when unreadable."""
    try:
        return read_if_present(path)
    except OSError as err:
        # The reason only (strerror): the message reaches the household's page, the path and errno need not.
        raise SettingsFileDamaged(f"The {what} cannot be read ({err.strerror}).") from None
