"""The household's saved model settings: the file and the key apart, and what a saved value may be.

The model server URL and model name are saved in `D/console/model.json`; the API key apart, in
`D/secrets/console/model-api-key.json` (0600), together with the origin it was typed for, so a key is
never sent to a server it was not given for, even if a crash left the two files out of step.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import NamedTuple
from urllib.parse import urlsplit

from console_ha.errors import ConsoleHaError, InvalidSettingsChange, SettingsFileDamaged
from console_ha.ha.addresses import origin_of
from console_ha.language import Words
from console_ha.secret import Secret
from console_ha.store.atomic import atomic_write, ensure_dir, path_lock
from console_ha.store.datadir import DataDir
from console_ha.store.files import read_stored

log = logging.getLogger(__name__)

MAX_MODEL_CHARS = 256
MAX_API_KEY_CHARS = 4096
URL_EXAMPLE = "http://192.168.1.20:8080/v1"
HOME_ASSISTANT_URL = Words("The model server URL is your Home Assistant's address. Enter the address of the model "
                           "server (llama.cpp, Ollama, vLLM) instead.")


class EndpointWords(NamedTuple):
    """`check_endpoint`'s three refusals, each a whole sentence naming where the URL came from."""

    unparsable: str
    not_http: str
    not_plain: str


# The model page's words, in the household's language.
PAGE_URL_WORDS = EndpointWords(
    Words("The model server URL holds a URL that cannot be parsed."),
    Words("The model server URL must be an http:// or https:// URL with a host."),
    Words("The model server URL must not hold a user name, password, query or fragment."),
)


# --- validation --------------------------------------------------------------------------------

def check_endpoint(url: str, *, words: EndpointWords, error: Callable[[str], ConsoleHaError]) -> str:
    """An http(s) base URL with a host and no credentials, query or fragment, without trailing slash.

    `words` are the refusals, naming where the URL came from, and `error` makes the exception: the settings
    page refuses a typed URL with its own error type, the environment's with ModelNotConfigured.
    """
    text = url.strip().rstrip("/")
    try:
        parts = urlsplit(text)
        parts.port  # noqa: B018 - raises ValueError on a bad port
    except ValueError:
        raise error(words.unparsable) from None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        raise error(words.not_http)
    if "@" in parts.netloc or parts.query or parts.fragment:
        # Credentials belong in the API key, where they are never logged.
        raise error(words.not_plain)
    return text


def check_base_url(value: object) -> str:
    """A typed model server URL: http(s), a host, no credentials, ending in /v1 (the OpenAI base)."""
    if not isinstance(value, str):
        raise InvalidSettingsChange(Words("The model server URL must be text."), field="base_url")
    if not value.strip():
        raise InvalidSettingsChange(Words("The model server URL is empty."), field="base_url")
    url = check_endpoint(value, words=PAGE_URL_WORDS,
                         error=lambda message: InvalidSettingsChange(message, field="base_url"))
    if not url.endswith("/v1"):
        # Every OpenAI-compatible server the household is likely to run (llama.cpp, Ollama, vLLM,
        # LM Studio) serves its API under /v1; a URL without it is the commonest mistake.
        raise InvalidSettingsChange(Words("The model server URL ends in /v1, like {example}.", example=URL_EXAMPLE),
                                    field="base_url")
    return url


def check_model_name(value: object) -> str:
    """A model name: printable text without line breaks, bounded."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidSettingsChange(Words("Choose a model: the model name is empty."), field="model")
    name = value.strip()
    if len(name) > MAX_MODEL_CHARS or not name.isprintable():
        raise InvalidSettingsChange(Words("The model name must be printable and at most {count} characters.",
                                          count=MAX_MODEL_CHARS), field="model")
    return name


def check_api_key(value: object) -> Secret:
    """A typed API key: printable ASCII without spaces, bounded (as a bearer token must be)."""
    if not isinstance(value, str):
        raise InvalidSettingsChange(Words("The API key must be text."), field="api_key")
    key = value.strip()
    if not key:
        raise InvalidSettingsChange(Words("The API key is empty."), field="api_key")
    if len(key) > MAX_API_KEY_CHARS or not all(0x21 <= ord(c) <= 0x7E for c in key):
        raise InvalidSettingsChange(Words("The API key has characters an API key never has."), field="api_key")
    return Secret(key)


def typed_api_key(value: object) -> Secret | None:
    """A key from a form or body: None when left empty (the page's key field always loads empty)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return check_api_key(value)


def check_values(base_url: object, model: object) -> SavedModel:
    """Validated settings to save: both empty (cleared), or a URL and a model name."""
    url = check_base_url(base_url) if base_url else ""
    return SavedModel(url, check_model_name(model) if model or url else "")


# --- the saved settings ------------------------------------------------------------------------

@dataclass(frozen=True)
class SavedModel:
    """What the household saved on the model page: a base URL and a model name, both may be empty."""

    base_url: str = ""
    model: str = ""

    def to_json(self) -> dict[str, str]:
        """The file's (and the API's) form."""
        return {"base_url": self.base_url, "model": self.model}


def parse_saved(raw: bytes) -> SavedModel:
    """The file's bytes as settings; SettingsFileDamaged says what is wrong, with the field where there is one."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:
        raise SettingsFileDamaged(Words("The model settings file is not valid JSON ({kind}).",
                                        kind=type(err).__name__)) from None
    if not isinstance(data, dict):
        raise SettingsFileDamaged(Words("The model settings file must hold a JSON object."))
    url, model = data.get("base_url", ""), data.get("model", "")
    try:
        return SavedModel(check_base_url(url) if url else "", check_model_name(model) if model else "")
    except InvalidSettingsChange as err:
        raise SettingsFileDamaged(Words("The model settings file has an invalid value: {why}", why=err.message),
                            field=err.detail.get("field")) from None


class ModelStore:
    """Reads the model settings fresh on every call; writes them atomically under a lock."""

    def __init__(self, data_dir: DataDir) -> None:
        self._dd = data_dir

    @property
    def path(self) -> Path:
        return self._dd.model_config

    @property
    def key_path(self) -> Path:
        return self._dd.model_api_key

    def read(self) -> SavedModel:
        """The saved settings (empty when none); SettingsFileDamaged when the file is damaged."""
        raw = read_stored(self.path, "model settings file")
        return SavedModel() if raw is None else parse_saved(raw)

    def api_key(self, base_url: str) -> Secret | None:
        """The saved key, only when it was saved for `base_url`'s origin; None otherwise or when damaged."""
        try:
            data = json.loads(self.key_path.read_bytes())
            key, origin = data["api_key"], data["origin"]
            secret = check_api_key(key)
        except FileNotFoundError:
            return None
        except (OSError, ValueError, KeyError, TypeError, InvalidSettingsChange):
            log.warning("the saved model API key file is damaged; treating it as absent")
            return None
        return secret if base_url and origin == origin_of(base_url) else None

    def save(self, base_url: object, model: object, *, api_key: Secret | None = None,
             remove_api_key: bool = False, home_assistant_origins: frozenset[str] = frozenset(),
             reset: bool = False) -> tuple[SavedModel, bool]:
        """Validate and save; returns the settings and whether a key for another server was dropped.

        Empty URL and model clear the settings (and the key). A key kept from before stays only while the
        URL keeps its origin: a key typed for one server is never sent to another. `reset` first moves a
        damaged file aside, only once every value has passed: a refused save moves nothing.
        """
        saved = check_values(base_url, model)
        url, name = saved.base_url, saved.model
        if not url and api_key is not None:
            raise InvalidSettingsChange(Words("An API key needs the model server URL it is for."), field="api_key")
        if url and origin_of(url) in home_assistant_origins:
            # The adapter POSTs; no Home Assistant (`home_assistant_origins`: every instance's) may get one.
            raise InvalidSettingsChange(HOME_ASSISTANT_URL, field="base_url")
        dropped = False
        with path_lock(self.path):
            ensure_dir(self.path.parent, 0o700)
            ensure_dir(self._dd.root / "secrets", 0o700)
            ensure_dir(self._dd.console_secrets, 0o700)
            if reset:
                self._move_aside()
            key_origin = self._key_origin()
            if api_key is not None:
                body = {"origin": origin_of(url), "api_key": api_key.reveal()}
                atomic_write(self.key_path, (json.dumps(body) + "\n").encode("ascii"), mode=0o600)
            elif remove_api_key or not url:
                self._remove_key()
            elif key_origin is not None and key_origin != origin_of(url):
                # Kept, it would do nothing (it is only sent to its own origin); removed, the page can say so.
                dropped = True
                self._remove_key()
            atomic_write(self.path, (json.dumps(saved.to_json(), indent=2) + "\n").encode("utf-8"), mode=0o600)
        log.info("model settings saved (model %r; API key %s)", name,
                 "replaced" if api_key is not None else "removed" if remove_api_key or dropped else "unchanged")
        return saved, dropped

    def reset(self) -> SavedModel:
        """Move a damaged file aside (kept, never deleted) and start again from empty settings."""
        with path_lock(self.path):
            self._move_aside()
        return SavedModel()

    def _move_aside(self) -> None:
        if os.path.lexists(self.path):
            stamp = time.strftime("%Y%m%dT%H%M%S")
            aside = self.path.with_name(f"{self.path.name}.broken-{stamp}-{secrets.token_hex(3)}")
            os.rename(self.path, aside)
            log.warning("moved the model settings file aside to %s", aside)

    def _key_origin(self) -> str | None:
        try:
            origin = json.loads(self.key_path.read_bytes()).get("origin")
        except FileNotFoundError:
            return None
        except (OSError, ValueError, AttributeError):
            return ""  # damaged: differs from every origin, so the next save removes it
        return origin if isinstance(origin, str) else ""

    def _remove_key(self) -> None:
        try:
            os.unlink(self.key_path)
        except FileNotFoundError:
            pass
