"""The Home Assistant access token, stored apart from the configuration: directory 0700, file 0600."""

from __future__ import annotations

import logging
import os
from pathlib import Path

from .atomic import atomic_write, ensure_dir, path_lock
from .datadir import DataDir
from .errors import InvalidConfig

log = logging.getLogger(__name__)

MAX_TOKEN_LENGTH = 4096


class Secret:
    """A string that never shows itself in a repr, str, log line or traceback."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself: only for the Authorization header."""
        return self._value

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def check_token(value: object) -> Secret:
    """Validate a token the household pasted: non-empty printable ASCII without spaces, bounded."""
    if not isinstance(value, str):
        raise InvalidConfig("The access token must be text.", field="access_token")
    token = value.strip()
    if not token:
        raise InvalidConfig("The access token is empty.", field="access_token")
    if len(token) > MAX_TOKEN_LENGTH or not all(0x21 <= ord(c) <= 0x7E for c in token):
        raise InvalidConfig(
            "The access token has characters a Home Assistant token never has.", field="access_token"
        )
    return Secret(token)


class TokenStore:
    """Reads, writes and removes `secrets/home-assistant/access-token`."""

    def __init__(self, data_dir: DataDir) -> None:
        self._dd = data_dir

    @property
    def path(self) -> Path:
        return self._dd.ha_token

    def read(self) -> Secret | None:
        """The stored token, or None when there is none (or it is empty)."""
        try:
            text = self.path.read_text(encoding="ascii")
        except FileNotFoundError:
            return None
        except (OSError, UnicodeDecodeError) as err:
            log.warning("the stored Home Assistant token cannot be read (%s); treating it as absent",
                        type(err).__name__)
            return None
        try:
            return check_token(text) if text.strip() else None
        except InvalidConfig:
            # The same rules as for a pasted token: a damaged file is "no token", not a doomed read.
            log.warning("the stored Home Assistant token file is damaged; treating it as absent")
            return None

    def exists(self) -> bool:
        """Whether a usable token is stored."""
        return self.read() is not None

    def write(self, token: Secret) -> None:
        """Store `token` atomically with private permissions."""
        ensure_dir(self._dd.root / "secrets", 0o700)
        ensure_dir(self._dd.ha_secrets, 0o700)
        with path_lock(self.path):
            atomic_write(self.path, token.reveal().encode("ascii") + b"\n", mode=0o600)

    def remove(self) -> None:
        """Forget the stored token; no error when there is none."""
        with path_lock(self.path):
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
