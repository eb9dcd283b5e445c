"""The Console's own secrets under `secrets/console/`: password hash, API token hashes, session key."""

from __future__ import annotations

import hashlib
import hmac
import json
import logging
import secrets
import time
from dataclasses import dataclass
from pathlib import Path

from werkzeug.security import check_password_hash, generate_password_hash

from .atomic import atomic_write, ensure_dir, path_lock
from .datadir import DataDir
from .errors import ConsoleHaError, InvalidConfig

log = logging.getLogger(__name__)

# werkzeug's scrypt (n=2**15, r=8, p=1): about 70 ms a check on this kind of machine, which is what makes
# guessing slow; tests pass a cheaper method explicitly.
DEFAULT_PASSWORD_METHOD = "scrypt"
MIN_PASSWORD_LENGTH = 8
MAX_PASSWORD_LENGTH = 1024
MAX_TOKEN_NAME_LENGTH = 100
API_TOKEN_PREFIX = "cha_"
SESSION_KEY_BYTES = 32


class PasswordAlreadySet(ConsoleHaError):
    """The first-run password was asked for, but a password exists already."""

    code = "PASSWORD_ALREADY_SET"


@dataclass(frozen=True)
class ApiToken:
    """What is kept of an API token: its name, when it was made, and a SHA-256 hash of it."""

    name: str
    created: str
    digest: str


def check_password(value: object) -> str:
    """Validate a new password's length; InvalidConfig (field `password`) says what is wrong."""
    if not isinstance(value, str):
        raise InvalidConfig("The password must be text.", field="password")
    if len(value) < MIN_PASSWORD_LENGTH:
        raise InvalidConfig(
            f"The password needs at least {MIN_PASSWORD_LENGTH} characters.", field="password"
        )
    if len(value) > MAX_PASSWORD_LENGTH:
        raise InvalidConfig(
            f"The password may have at most {MAX_PASSWORD_LENGTH} characters.", field="password"
        )
    return value


def check_token_name(value: object) -> str:
    """Validate an API token's name: printable, non-empty, bounded."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidConfig("The token needs a name.", field="name")
    name = " ".join(value.split())
    if len(name) > MAX_TOKEN_NAME_LENGTH or not name.isprintable():
        raise InvalidConfig(
            f"The token name must be printable and at most {MAX_TOKEN_NAME_LENGTH} characters.",
            field="name",
        )
    return name


def _digest(token: str) -> str:
    # API tokens carry 256 random bits, so a fast hash is enough; a slow one would only slow every request.
    return hashlib.sha256(token.encode("utf-8")).hexdigest()


class ConsoleSecrets:
    """Reads and writes `secrets/console/`; every read is fresh, so the CLI's changes apply at once."""

    def __init__(self, data_dir: DataDir) -> None:
        self._dd = data_dir

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

    def _ensure_dir(self) -> None:
        ensure_dir(self._dd.root / "secrets", 0o700)
        ensure_dir(self.directory, 0o700)

    # -- password ---------------------------------------------------------------------------------

    def password_hash(self) -> str | None:
        """The stored password hash, or None before the first run's password is set."""
        try:
            text = self.password_path.read_text(encoding="utf-8").strip()
        except FileNotFoundError:
            return None
        return text or None

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
        log.info("the Console password was set")

    def verify_password(self, password: str) -> bool:
        """Whether `password` matches the stored hash (False when none is set)."""
        hashed = self.password_hash()
        if hashed is None or not isinstance(password, str) or len(password) > MAX_PASSWORD_LENGTH:
            return False
        return check_password_hash(hashed, password)

    def password_fingerprint(self) -> str | None:
        """A short digest of the stored hash: sessions carry it, so a new password ends every old session."""
        hashed = self.password_hash()
        if hashed is None:
            return None
        return hashlib.sha256(hashed.encode("utf-8")).hexdigest()[:32]

    # -- API tokens -------------------------------------------------------------------------------

    def api_tokens(self) -> list[ApiToken]:
        """Every stored API token's name, creation time and hash."""
        try:
            raw = self.api_tokens_path.read_bytes()
        except FileNotFoundError:
            return []
        try:
            entries = json.loads(raw)["tokens"]
            return [ApiToken(e["name"], e["created"], e["sha256"]) for e in entries]
        except (ValueError, KeyError, TypeError) as err:
            # A damaged file must not let anyone in; it shuts every API token out until fixed.
            log.error("the API token file %s cannot be read (%s); no API token is accepted",
                      self.api_tokens_path, type(err).__name__)
            return []

    def _write_api_tokens(self, tokens: list[ApiToken]) -> None:
        body = {"tokens": [{"name": t.name, "created": t.created, "sha256": t.digest} for t in tokens]}
        atomic_write(self.api_tokens_path, (json.dumps(body, indent=2) + "\n").encode("utf-8"), mode=0o600)

    def create_api_token(self, name: str) -> str:
        """Make a new API token named `name`, store only its hash, and return it (shown once)."""
        name = check_token_name(name)
        token = API_TOKEN_PREFIX + secrets.token_urlsafe(32)
        created = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime())
        self._ensure_dir()
        with path_lock(self.api_tokens_path):
            tokens = self.api_tokens()
            tokens.append(ApiToken(name, created, _digest(token)))
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
        return found

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
        try:
            text = self.session_key_path.read_text(encoding="ascii").strip()
        except FileNotFoundError:
            return None
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

