"""The Console's own secrets under `secrets/console/`: password hash, API tokens, sessions, session key."""

from __future__ import annotations

import calendar
import hashlib
import hmac
import json
import logging
import re
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path

from werkzeug.security import check_password_hash, generate_password_hash

from console_ha.errors import ConsoleHaError, InvalidSettingsChange
from console_ha.errors import PasswordAlreadySet as PasswordAlreadySet
from console_ha.language import Words
from console_ha.store.atomic import atomic_write, ensure_dir, path_lock
from console_ha.store.datadir import DataDir
from console_ha.store.files import read_if_present
from console_ha.timestamps import utc_z, utc_z_now

log = logging.getLogger(__name__)

# werkzeug's scrypt (n=2**15, r=8, p=1): about 70 ms a check on this kind of machine, which is what makes
# guessing slow; tests pass a cheaper method explicitly.
DEFAULT_PASSWORD_METHOD = "scrypt"
MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024
MAX_TOKEN_NAME_LENGTH = 100
API_TOKEN_PREFIX = "cha_"
SESSION_KEY_BYTES = 32
# A token's last use is kept to the minute, the resolution the API tokens page shows: the file is written at
# the first use in each minute of the clock, and not again in that minute. A program polling every second
# rewrites the token file at most once a minute, and the page is never a minute behind. (Before, a write came
# at most 60 s after the last one, so a use at 10:01:10 after one at 10:00:30 left "10:00" on the page.)
API_TOKEN_USE_GRANULARITY = 60
# A session's last activity is written at most this often (seconds), for the same reason.
SESSION_SEEN_GRANULARITY = 3600
# Browsers logged in at once; past it the longest-idle session ends. A household has a handful.
MAX_SESSIONS = 64
SESSION_ID_BYTES = 32
# -- issue 20: an API token's patience (docs/mcp.md, "Come back for the answer") --
# How long an MCP tool call of this token waits for the household before it returns early, in seconds.
# The default fits the official TypeScript SDK, which gives up after 60 s; Home Assistant's own MCP client
# gives up after 10 s, so a token for it wants a few seconds. The most stays below the card's 5 minutes.
DEFAULT_PATIENCE_SECONDS = 50
MIN_PATIENCE_SECONDS = 1
MAX_PATIENCE_SECONDS = 290


@dataclass(frozen=True)
class ApiToken:
    """What is kept of an API token: its name, when it was made and last used, and a SHA-256 hash of it."""

    name: str
    created: str
    digest: str
    last_used: str | None = None
    patience: int = DEFAULT_PATIENCE_SECONDS

    @property
    def token_id(self) -> str:
        """A handle for the page's revoke button: a prefix of the hash, which says nothing of the token."""
        return self.digest[:16]


def check_password(value: object) -> str:
    """Validate a new password's length; InvalidSettingsChange (field `password`) says what is wrong."""
    if not isinstance(value, str):
        raise InvalidSettingsChange(Words("The password must be text."), field="password")
    if len(value) < MIN_PASSWORD_LENGTH:
        raise InvalidSettingsChange(Words.counted(
            "The password needs at least {count} character.", "The password needs at least {count} characters.",
            MIN_PASSWORD_LENGTH), field="password")
    if len(value) > MAX_PASSWORD_LENGTH:
        raise InvalidSettingsChange(Words.counted(
            "The password may have at most {count} character.", "The password may have at most {count} characters.",
            MAX_PASSWORD_LENGTH), field="password")
    return value


def check_token_name(value: object) -> str:
    """Validate an API token's name: printable, non-empty, bounded."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidSettingsChange(Words("The token needs a name."), field="name")
    name = " ".join(value.split())
    if len(name) > MAX_TOKEN_NAME_LENGTH or not name.isprintable():
        raise InvalidSettingsChange(
            Words("The token name must be printable and at most {count} characters.", count=MAX_TOKEN_NAME_LENGTH),
            field="name",
        )
    return name


def check_patience(value: object) -> int:
    """Validate an API token's patience: whole seconds within the bounds (field `patience`)."""
    # A form's field: ASCII digits only, and few ("²" is a digit to isdigit() but not to int(), and int()
    # refuses over 4,300 digits), so that anything else is this refusal, not a ValueError.
    if isinstance(value, str) and re.fullmatch(r"[0-9]{1,6}", value.strip()):
        value = int(value.strip())
    if isinstance(value, bool) or not isinstance(value, int) \
            or not MIN_PATIENCE_SECONDS <= value <= MAX_PATIENCE_SECONDS:
        raise InvalidSettingsChange(
            Words("The patience must be a whole number of seconds from {low} to {high}.",
                  low=MIN_PATIENCE_SECONDS, high=MAX_PATIENCE_SECONDS),
            field="patience",
        )
    return value


def _stored_patience(entry: dict[str, object]) -> int:
    # A token file written before patience existed (or edited by hand) gets the default, not a refusal.
    try:
        return check_patience(entry.get("patience", DEFAULT_PATIENCE_SECONDS))
    except InvalidSettingsChange:
        return DEFAULT_PATIENCE_SECONDS


def _parse_utc(text: str | None) -> float:
    if not text:
        return 0.0
    try:
        return calendar.timegm(time.strptime(text, "%Y-%m-%dT%H:%M:%SZ"))
    except ValueError:
        return 0.0


def _minute(moment: float) -> int:
    """Which minute of the clock `moment` falls in (0 for a token never used)."""
    return int(moment // API_TOKEN_USE_GRANULARITY) if moment else 0


def _digest(token: str) -> str:
    # API tokens carry 256 random bits, so a fast hash is enough; a slow one would only slow every request.
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class ConsoleSecrets:
    """Reads and writes `secrets/console/`; every read is fresh, so the CLI's changes apply at once."""

    def __init__(self, data_dir: DataDir, *, clock: Callable[[], float] = time.time) -> None:
        self._dd = data_dir
        self._clock = clock

    @property
    def directory(self) -> Path:
        return self._dd.console_secrets

    @property
    def password_path(self) -> Path:
        return self.directory / "password-hash"

    @property
    def api_tokens_path(self) -> Path:
        return self.directory / "api-tokens.json"

    @property
    def session_key_path(self) -> Path:
        return self.directory / "session-key"

    @property
    def sessions_path(self) -> Path:
        return self.directory / "sessions.json"

    def _ensure_dir(self) -> None:
        self._dd.ensure()
        ensure_dir(self._dd.root / "secrets", 0o700)
        ensure_dir(self.directory, 0o700)

    # -- password ---------------------------------------------------------------------------------

    def password_hash(self) -> str | None:
        """The stored password hash, or None before the first run's password is set."""
        raw = read_if_present(self.password_path)
        return None if raw is None else raw.decode("utf-8").strip() or None

    def has_password(self) -> bool:
        """Whether the household has set a Console password."""
        return self.password_hash() is not None

    def set_password(
        self, password: str, *, only_if_unset: bool = False, method: str = DEFAULT_PASSWORD_METHOD
    ) -> None:
        """Store a slow salted hash of `password`; `only_if_unset` refuses to replace an existing one."""
        check_password(password)
        hashed = generate_password_hash(password, method=method)
        self._ensure_dir()
        with path_lock(self.password_path):
            # Checked under the lock so two first-run forms cannot both set a password.
            if only_if_unset and self.has_password():
                raise PasswordAlreadySet("A Console password is set already; log in with it.")
            atomic_write(self.password_path, hashed.encode("utf-8") + b"\n", mode=0o600)
        # Sessions also carry a fingerprint of the hash (web.auth), so a crash between these two writes
        # still ends them; this makes the change visible in the file and frees their slots.
        self.end_all_sessions()
        log.info("the Console password was set; every session was ended")

    def verified_fingerprint(self, password: str) -> str | None:
        """The fingerprint of the stored hash `password` matches, or None.

        The hash is read once and the fingerprint is of that hash: the check is slow on purpose, and a
        password changed meanwhile must not lend its fingerprint to a login made with the old one.
        """
        hashed = self.password_hash()
        if hashed is None or not isinstance(password, str) or len(password) > MAX_PASSWORD_LENGTH:
            return None
        return _fingerprint(hashed) if check_password_hash(hashed, password) else None

    def password_fingerprint(self) -> str | None:
        """A short digest of the stored hash: sessions carry it, so a new password ends every old session."""
        hashed = self.password_hash()
        return None if hashed is None else _fingerprint(hashed)

    # -- API tokens -------------------------------------------------------------------------------

    def api_tokens(self) -> list[ApiToken]:
        """Every stored API token's name, creation time and hash."""
        raw = read_if_present(self.api_tokens_path)
        if raw is None:
            return []
        try:
            entries = json.loads(raw)["tokens"]
            return [ApiToken(e["name"], e["created"], e["sha256"], e.get("last_used"), _stored_patience(e))
                    for e in entries]
        except (ValueError, KeyError, TypeError) as err:
            # A damaged file must not let anyone in; it shuts every API token out until fixed.
            log.error("the API token file %s cannot be read (%s); no API token is accepted",
                      self.api_tokens_path, type(err).__name__)
            return []

    def _write_api_tokens(self, tokens: list[ApiToken]) -> None:
        body = {"tokens": [{"name": t.name, "created": t.created, "sha256": t.digest, "last_used": t.last_used,
                            "patience": t.patience} for t in tokens]}
        atomic_write(self.api_tokens_path, (json.dumps(body, indent=2) + "\n").encode("utf-8"), mode=0o600)

    def create_api_token(self, name: str, *, patience: int = DEFAULT_PATIENCE_SECONDS) -> str:
        """Make a new API token named `name`, store only its hash, and return it (shown once)."""
        name = check_token_name(name)
        patience = check_patience(patience)
        token = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
        created = utc_z_now()
        self._ensure_dir()
        with path_lock(self.api_tokens_path):
            tokens = self.api_tokens()
            tokens.append(ApiToken(name, created, _digest(token), patience=patience))
            self._write_api_tokens(tokens)
        log.info("API token %r created", name)
        return token

    def revoke_api_tokens(self, name: str) -> int:
        """Remove every API token named `name`; returns how many were removed."""
        name = check_token_name(name)
        if not self.api_tokens_path.exists():
            return 0
        with path_lock(self.api_tokens_path):
            tokens = self.api_tokens()
            kept = [t for t in tokens if t.name != name]
            if len(kept) != len(tokens):
                self._write_api_tokens(kept)
        removed = len(tokens) - len(kept)
        log.info("revoked %d API token(s) named %r", removed, name)
        return removed

    def revoke_api_token(self, token_id: str) -> ApiToken | None:
        """Remove the one API token whose `token_id` this is; returns it, or None when there is none."""
        if not self.api_tokens_path.exists():
            return None
        with path_lock(self.api_tokens_path):
            tokens = self.api_tokens()
            gone = [t for t in tokens if hmac.compare_digest(t.token_id, token_id)]
            if not gone:
                return None
            self._write_api_tokens([t for t in tokens if t not in gone])
        log.info("revoked the API token %r", gone[0].name)
        return gone[0]

    def set_api_token_patience(self, token_id: str, patience: object) -> ApiToken | None:
        """Change one API token's patience; returns the token as now stored, or None when there is none."""
        seconds = check_patience(patience)
        if not self.api_tokens_path.exists():
            return None
        with path_lock(self.api_tokens_path):
            tokens = self.api_tokens()
            found = [t for t in tokens if hmac.compare_digest(t.token_id, token_id)]
            if not found:
                return None
            changed = replace(found[0], patience=seconds)
            self._write_api_tokens([changed if t is found[0] else t for t in tokens])
        return changed

    def has_api_token(self, token_id: str) -> bool:
        """Whether the API token whose `token_id` this is is still stored (not revoked)."""
        return any(hmac.compare_digest(t.token_id, token_id) for t in self.api_tokens())

    def verify_api_token(self, token: str) -> ApiToken | None:
        """The stored token that `token` is, or None; every stored hash is compared in constant time."""
        if not isinstance(token, str) or not token or len(token) > 512:
            return None
        digest = _digest(token)
        found: ApiToken | None = None
        for stored in self.api_tokens():
            # No early exit: the time taken does not depend on which entry matched.
            if hmac.compare_digest(stored.digest, digest):
                found = stored
        now = self._clock()
        if found is not None and _minute(now) != _minute(_parse_utc(found.last_used)):
            self._note_use(found, now)
        return found

    def _note_use(self, used: ApiToken, now: float) -> None:
        # Re-read under the lock: a token revoked meanwhile must not come back.
        with path_lock(self.api_tokens_path):
            tokens = self.api_tokens()
            when = utc_z(datetime.fromtimestamp(now, UTC))
            updated = [replace(t, last_used=when) if t.digest == used.digest else t for t in tokens]
            if updated != tokens:
                self._write_api_tokens(updated)

    # -- sessions ---------------------------------------------------------------------------------
    #
    # The cookie is signed, so it cannot be forged; but a signed cookie alone stays valid wherever it is
    # copied to. Each session therefore has an id whose hash is kept here: logging out removes it, a new
    # password removes them all, and a copied cookie of an ended session opens nothing.

    def _read_sessions(self) -> dict[str, int]:
        raw = read_if_present(self.sessions_path)
        if raw is None:
            return {}
        try:
            entries = json.loads(raw)["sessions"]
            return {str(k): int(v["seen"]) for k, v in entries.items()}
        except (ValueError, KeyError, TypeError, AttributeError) as err:
            # Damaged: no session is valid (everyone logs in again), which is safe and fixes itself.
            log.error("the sessions file %s cannot be read (%s); every browser must log in again",
                      self.sessions_path, type(err).__name__)
            return {}

    def _write_sessions(self, sessions: dict[str, int]) -> None:
        body = {"sessions": {k: {"seen": v} for k, v in sessions.items()}}
        atomic_write(self.sessions_path, (json.dumps(body, indent=1) + "\n").encode("utf-8"), mode=0o600)

    def start_session(self, idle_limit: float) -> str:
        """Make a new session id and keep its hash; the oldest sessions end past MAX_SESSIONS."""
        session_id = secrets.token_urlsafe(SESSION_ID_BYTES)
        now = int(time.time())
        self._ensure_dir()
        with path_lock(self.sessions_path):
            sessions = {k: v for k, v in self._read_sessions().items() if now - v < idle_limit}
            sessions[_digest(session_id)] = now
            if len(sessions) > MAX_SESSIONS:
                kept = sorted(sessions.items(), key=lambda item: item[1])[-MAX_SESSIONS:]
                sessions = dict(kept)
            self._write_sessions(sessions)
        return session_id

    def session_active(self, session_id: object, idle_limit: float) -> bool:
        """Whether `session_id` names a session that has not ended nor been idle past `idle_limit` seconds."""
        if not isinstance(session_id, str) or not 0 < len(session_id) <= 128:
            return False
        seen = self._read_sessions().get(_digest(session_id))
        now = time.time()
        if seen is None or now - seen >= idle_limit:
            return False
        if now - seen >= SESSION_SEEN_GRANULARITY:
            self._touch_session(session_id)
        return True

    def _touch_session(self, session_id: str) -> None:
        digest = _digest(session_id)
        with path_lock(self.sessions_path):
            sessions = self._read_sessions()
            # Ended meanwhile (a logout in another tab): it stays ended.
            if digest in sessions:
                sessions[digest] = int(time.time())
                self._write_sessions(sessions)

    def end_session(self, session_id: object) -> None:
        """End one session: its cookie, wherever it was copied, opens nothing any more."""
        if not isinstance(session_id, str) or not self.sessions_path.exists():
            return
        with path_lock(self.sessions_path):
            sessions = self._read_sessions()
            if sessions.pop(_digest(session_id), None) is not None:
                self._write_sessions(sessions)

    def end_all_sessions(self) -> None:
        """End every session (a new password does this)."""
        if not self.sessions_path.exists():
            return
        with path_lock(self.sessions_path):
            self._write_sessions({})

    # -- session signing key ----------------------------------------------------------------------

    def session_key(self) -> bytes:
        """The key that signs session cookies: made once, then the same across restarts and processes."""
        key = self._read_session_key()
        if key is not None:
            return key
        self._ensure_dir()
        with path_lock(self.session_key_path):
            # Another process may have made it while this one waited for the lock.
            key = self._read_session_key()
            if key is None:
                key = secrets.token_bytes(SESSION_KEY_BYTES)
                atomic_write(self.session_key_path, key.hex().encode("ascii") + b"\n", mode=0o600)
                log.info("made a new session signing key")
        return key

    def _read_session_key(self) -> bytes | None:
        raw = read_if_present(self.session_key_path)
        if raw is None:
            return None
        text = raw.decode("ascii").strip()
        try:
            key = bytes.fromhex(text)
        except ValueError:
            key = b""
        if len(key) < SESSION_KEY_BYTES:
            raise ConsoleHaError(
                f"The session key file {self.session_key_path} is damaged; remove it to make a new one "
                "(everyone will have to log in again)."
            )
        return key


def _fingerprint(hashed: str) -> str:
    return hashlib.sha256(hashed.encode("utf-8")).hexdigest()[:32]
