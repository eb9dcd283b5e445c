"""The Home Assistant access token and the origin it belongs to, stored apart from the configuration.

The file `secrets/home-assistant/access-token` (0600, in a 0700 directory) is one record written
atomically: the token on the first line, the origin (`scheme://host:port`) it was saved for on the
second. A token is only ever handed out for its own origin (`TokenStore.lookup`), so whatever the
configuration file says, and whenever a process died, the token never goes to another Home Assistant.
"""

from __future__ import annotations

import logging
import os
from dataclasses import dataclass
from pathlib import Path

from console_ha.errors import InvalidSettingsChange
from console_ha.ha.addresses import origin_of
from console_ha.language import Words
from console_ha.secret import Secret
from console_ha.store.atomic import atomic_write, path_lock
from console_ha.store.datadir import HOME_INSTANCE, DataDir, ensure_secrets_dir
from console_ha.store.files import read_if_present

log = logging.getLogger(__name__)

MAX_TOKEN_LENGTH = 4096

# The `reason` detail of every refusal for that cause, so a page can tell it from "no token yet".
TOKEN_FOR_ANOTHER_ORIGIN_REASON = "token_for_another_origin"
# The household's words when the stored token belongs to another Home Assistant; one place for every path.
TOKEN_FOR_ANOTHER_ORIGIN = Words(
    "The stored access token was saved for the Home Assistant at {saved_for}, and the Console only ever "
    "sends it there. To use {asked_for}, enter the access token of that Home Assistant."
)
# The same, when the address asked about is not a URL the Console can read.
TOKEN_FOR_ANOTHER_ORIGIN_THIS_ADDRESS = Words(
    "The stored access token was saved for the Home Assistant at {saved_for}, and the Console only ever "
    "sends it there. To use this address, enter the access token of its Home Assistant."
)
TOKEN_WITHOUT_ORIGIN = Words(
    "The stored access token was saved without a Home Assistant URL, so the Console cannot tell which "
    "Home Assistant it belongs to. Enter the access token again with the URL."
)


def check_token(value: object) -> Secret:
    """Validate a token the household pasted: non-empty printable ASCII without spaces, bounded."""
    if not isinstance(value, str):
        raise InvalidSettingsChange(Words("The access token must be text."), field="access_token")
    token = value.strip()
    if not token:
        raise InvalidSettingsChange(Words("The access token is empty."), field="access_token")
    if len(token) > MAX_TOKEN_LENGTH or not all(0x21 <= ord(c) <= 0x7E for c in token):
        raise InvalidSettingsChange(
            Words("The access token has characters a Home Assistant token never has."), field="access_token"
        )
    return Secret(token)


def _origin_or_none(url: str) -> str | None:
    try:
        return origin_of(url) if url else None
    except ValueError:
        return None


@dataclass(frozen=True)
class StoredToken:
    """The token file's record: the token and the origin it was saved for (None in a legacy file)."""

    token: Secret
    origin: str | None

    def bound_origin(self, configured_url: str) -> str | None:
        """The origin this token belongs to.

        A legacy file (the token alone, written by a release before origins were stored, or by hand)
        belongs to the origin of the URL configured beside it: that is what it was written for, and this
        release never writes a file without its origin, so no save of ours can leave one behind.
        """
        return self.origin if self.origin is not None else _origin_or_none(configured_url)


@dataclass(frozen=True)
class TokenLookup:
    """The answer to "which token may go to this origin?": the token, or why there is none."""

    token: Secret | None
    stored: bool  # whether any token is stored at all
    saved_for: str | None  # the origin the stored token belongs to
    asked_for: str | None  # the origin asked about

    @property
    def elsewhere(self) -> bool:
        """A token is stored, but for another Home Assistant: it must be entered again for this one."""
        return self.stored and self.token is None

    def message(self) -> Words:
        """Why the stored token cannot be used here, in the household's words."""
        if self.saved_for is None:
            return TOKEN_WITHOUT_ORIGIN
        if self.asked_for is None:
            return Words(TOKEN_FOR_ANOTHER_ORIGIN_THIS_ADDRESS.msgid, saved_for=self.saved_for)
        return Words(TOKEN_FOR_ANOTHER_ORIGIN.msgid, saved_for=self.saved_for, asked_for=self.asked_for)


def look_up(record: StoredToken | None, url: str, *, configured_url: str) -> TokenLookup:
    """The rule of `TokenStore.lookup`, over a record already read (a save reads the record once)."""
    asked_for = _origin_or_none(url)
    if record is None:
        return TokenLookup(None, False, None, asked_for)
    saved_for = record.bound_origin(configured_url)
    usable = asked_for is not None and saved_for == asked_for
    return TokenLookup(record.token if usable else None, True, saved_for, asked_for)


class TokenStore:
    """Reads, writes and removes one instance's token file (`home`'s: `secrets/home-assistant/access-token`),
    always with its origin."""

    def __init__(self, data_dir: DataDir, instance: str = HOME_INSTANCE) -> None:
        self._files = data_dir.instance(instance)

    @property
    def path(self) -> Path:
        return self._files.token

    def read_record(self) -> StoredToken | None:
        """The stored record, or None when there is none (or it is damaged)."""
        try:
            raw = read_if_present(self.path)
            text = "" if raw is None else raw.decode("ascii")
        except (OSError, UnicodeDecodeError) as err:
            log.warning("the stored Home Assistant token cannot be read (%s); treating it as absent",
                        type(err).__name__)
            return None
        lines = text.splitlines()
        while lines and not lines[-1].strip():
            lines.pop()  # a file edited by hand may end in blank lines
        if not lines:
            return None
        try:
            if len(lines) not in (1, 2):
                raise InvalidSettingsChange("not one or two lines", field="access_token")
            token = check_token(lines[0])
            origin = lines[1].strip() if len(lines) == 2 else None
            if origin is not None and _origin_or_none(origin) != origin:
                raise InvalidSettingsChange("the origin line is not an origin", field="access_token")
        except InvalidSettingsChange:
            # The same rules as for a pasted token: a damaged file is "no token", not a doomed read.
            log.warning("the stored Home Assistant token file is damaged; treating it as absent")
            return None
        return StoredToken(token, origin)

    def lookup(self, url: str, *, configured_url: str) -> TokenLookup:
        """The stored token if it belongs to `url`'s origin; the one rule every sending path goes through.

        `configured_url` is the base URL the caller read from the configuration file *before* calling
        this (it only matters for a legacy file): a save writes the token before the configuration, so a
        configuration read first can never pair a legacy token with a URL saved after it.
        """
        return look_up(self.read_record(), url, configured_url=configured_url)

    def read_for(self, url: str, *, configured_url: str) -> Secret | None:
        """The stored token for `url`'s origin; None when none is stored or it belongs to another origin."""
        return self.lookup(url, configured_url=configured_url).token

    def exists(self) -> bool:
        """Whether a token is stored, for whichever origin (`lookup` says whether it may go somewhere)."""
        return self.read_record() is not None

    def write(self, token: Secret, origin: str) -> StoredToken:
        """Store `token` bound to `origin` (a URL or an origin), atomically, with private permissions."""
        record = StoredToken(token, origin_of(origin))
        self._write_record(record)
        return record

    def put_back(self, record: StoredToken | None) -> None:
        """Restore a record exactly as `read_record` returned it (None: no token), after a failed save."""
        if record is None:
            self.remove()
        else:
            self._write_record(record)

    def _write_record(self, record: StoredToken) -> None:
        lines = [record.token.reveal()] + ([record.origin] if record.origin is not None else [])
        ensure_secrets_dir(self._files)
        with path_lock(self.path):
            atomic_write(self.path, "".join(line + "\n" for line in lines).encode("ascii"), mode=0o600)

    def remove(self) -> None:
        """Forget the stored token; no error when there is none."""
        with path_lock(self.path):
            try:
                os.unlink(self.path)
            except FileNotFoundError:
                pass
