"""The household's model settings: the saved file and key, what is in force per turn, and the model test.

The model server URL and model name are saved in `D/console/model.json`; the API key apart, in
`D/secrets/console/model-api-key.json` (0600), together with the origin it was typed for, so a key is
never sent to a server it was not given for, even if a crash left the two files out of step. The
`CONSOLE_HA_LLM_*` variables win, each on its own, over what is saved.
"""

from __future__ import annotations

import json
import logging
import os
import secrets
import time
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from typing import Any

from console_ha.conversation.model import (
    DEFAULT_TIMEOUT_SECONDS,
    ENV_API_KEY,
    ENV_MODEL,
    ENV_TIMEOUT,
    ENV_URL,
    NOT_SET_UP,
    ModelNotConfigured,
    ModelSettings,
    ModelUnavailable,
    OpenAICompatibleModel,
    check_endpoint,
)
from console_ha.errors import ConfigInvalid, InvalidConfig
from console_ha.ha.addresses import origin_of
from console_ha.secret import Secret
from console_ha.store.atomic import atomic_write, ensure_dir, path_lock
from console_ha.store.datadir import DataDir
from console_ha.store.files import read_stored

log = logging.getLogger(__name__)

ENVIRONMENT = (ENV_URL, ENV_MODEL, ENV_API_KEY)
# Every CONSOLE_HA_LLM_* variable a turn reads, the timeout included.
MODEL_VARIABLES = (ENV_URL, ENV_MODEL, ENV_API_KEY, ENV_TIMEOUT)
MAX_MODEL_CHARS = 256
MAX_API_KEY_CHARS = 4096
URL_LABEL = "The model server URL"
URL_EXAMPLE = "http://192.168.1.20:8080/v1"
HOME_ASSISTANT_URL = (f"{URL_LABEL} is your Home Assistant's address. Enter the address of the model server "
                      "(llama.cpp, Ollama, vLLM) instead.")
# The model test waits at most this long in all for each of its two requests: a server loading a large
# model for the first request can be slow, but a settings page must answer.
TEST_TIMEOUT_SECONDS = 60.0


def environment_values(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The CONSOLE_HA_LLM_* values in force: the process environment, overridden by `overrides`."""
    values: dict[str, Any] = {key: os.environ[key] for key in MODEL_VARIABLES if os.environ.get(key)}
    if overrides:
        values.update({key: overrides[key] for key in MODEL_VARIABLES if overrides.get(key) is not None})
    return values


# --- validation --------------------------------------------------------------------------------

def check_base_url(value: object) -> str:
    """A typed model server URL: http(s), a host, no credentials, ending in /v1 (the OpenAI base)."""
    if not isinstance(value, str):
        raise InvalidConfig(f"{URL_LABEL} must be text.", field="base_url")
    if not value.strip():
        raise InvalidConfig(f"{URL_LABEL} is empty.", field="base_url")
    url = check_endpoint(value, label=URL_LABEL, error=lambda message: InvalidConfig(message, field="base_url"))
    if not url.endswith("/v1"):
        # Every OpenAI-compatible server the household is likely to run (llama.cpp, Ollama, vLLM,
        # LM Studio) serves its API under /v1; a URL without it is the commonest mistake.
        raise InvalidConfig(f"{URL_LABEL} ends in /v1, like {URL_EXAMPLE}.", field="base_url")
    return url


def check_model_name(value: object) -> str:
    """A model name: printable text without line breaks, bounded."""
    if not isinstance(value, str) or not value.strip():
        raise InvalidConfig("Choose a model: the model name is empty.", field="model")
    name = value.strip()
    if len(name) > MAX_MODEL_CHARS or not name.isprintable():
        raise InvalidConfig(f"The model name must be printable and at most {MAX_MODEL_CHARS} characters.",
                            field="model")
    return name


def check_api_key(value: object) -> Secret:
    """A typed API key: printable ASCII without spaces, bounded (as a bearer token must be)."""
    if not isinstance(value, str):
        raise InvalidConfig("The API key must be text.", field="api_key")
    key = value.strip()
    if not key:
        raise InvalidConfig("The API key is empty.", field="api_key")
    if len(key) > MAX_API_KEY_CHARS or not all(0x21 <= ord(c) <= 0x7E for c in key):
        raise InvalidConfig("The API key has characters an API key never has.", field="api_key")
    return Secret(key)


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
    """The file's bytes as settings; ConfigInvalid says what is wrong, with the field where there is one."""
    try:
        data = json.loads(raw.decode("utf-8"))
    except (ValueError, RecursionError) as err:
        raise ConfigInvalid(f"The model settings file is not valid JSON ({type(err).__name__}).") from None
    if not isinstance(data, dict):
        raise ConfigInvalid("The model settings file must hold a JSON object.")
    url, model = data.get("base_url", ""), data.get("model", "")
    try:
        return SavedModel(check_base_url(url) if url else "", check_model_name(model) if model else "")
    except InvalidConfig as err:
        raise ConfigInvalid(f"The model settings file has an invalid value: {err.message}",
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
        """The saved settings (empty when none); ConfigInvalid when the file is damaged."""
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
        except (OSError, ValueError, KeyError, TypeError, InvalidConfig):
            log.warning("the saved model API key file is damaged; treating it as absent")
            return None
        return secret if base_url and origin == origin_of(base_url) else None

    def has_api_key(self, base_url: str) -> bool:
        """Whether a key is saved for `base_url`'s origin."""
        return self.api_key(base_url) is not None

    def save(self, base_url: object, model: object, *, api_key: Secret | None = None,
             remove_api_key: bool = False, home_assistant_url: str = "",
             reset: bool = False) -> tuple[SavedModel, bool]:
        """Validate and save; returns the settings and whether a key for another server was dropped.

        Empty URL and model clear the settings (and the key). A key kept from before stays only while the
        URL keeps its origin: a key typed for one server is never sent to another. `reset` first moves a
        damaged file aside, only once every value has passed: a refused save moves nothing.
        """
        saved = check_values(base_url, model)
        url, name = saved.base_url, saved.model
        if not url and api_key is not None:
            raise InvalidConfig("An API key needs the model server URL it is for.", field="api_key")
        if url and home_assistant_url and origin_of(url) == origin_of(home_assistant_url):
            # The adapter POSTs; Home Assistant must only ever be read.
            raise InvalidConfig(HOME_ASSISTANT_URL, field="base_url")
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


# --- what is in force --------------------------------------------------------------------------

@dataclass(frozen=True)
class ModelSetup:
    """The settings a turn uses now, and where each part came from, for the page to explain."""

    saved: SavedModel
    has_saved_key: bool
    # The CONSOLE_HA_LLM_* variables that are set, in ENVIRONMENT's order; each wins over the saved value.
    from_environment: tuple[str, ...]
    settings: ModelSettings | None
    problem: str | None = None
    saved_error: ConfigInvalid | None = field(default=None, compare=False)

    @property
    def ready(self) -> bool:
        """Whether a turn would reach a model (not whether the model answers)."""
        return self.settings is not None


def resolve(environment: Mapping[str, Any], store: ModelStore) -> ModelSetup:
    """The settings in force: each CONSOLE_HA_LLM_* variable that is set, else the saved value.

    The saved API key goes only with the saved URL's origin; an environment URL elsewhere gets the
    environment's key or none.
    """
    env = {k: str(v).strip() for k, v in environment.items() if k in (*ENVIRONMENT, ENV_TIMEOUT)
           and v is not None and str(v).strip()}
    from_env = tuple(name for name in ENVIRONMENT if name in env)
    saved_error: ConfigInvalid | None = None
    try:
        saved = store.read()
    except ConfigInvalid as err:
        saved, saved_error = SavedModel(), err
    saved_key = store.api_key(saved.base_url) if saved.base_url else None
    url = env.get(ENV_URL) or saved.base_url
    values: dict[str, Any] = {ENV_URL: url, ENV_MODEL: env.get(ENV_MODEL) or saved.model}
    if ENV_TIMEOUT in env:
        values[ENV_TIMEOUT] = env[ENV_TIMEOUT]
    key: Secret | None = Secret(env[ENV_API_KEY]) if ENV_API_KEY in env else None
    base = ModelSetup(saved, saved_key is not None, from_env, None, saved_error=saved_error)
    if not url:
        problem = NOT_SET_UP
        if saved_error is not None:
            problem = (f"The saved model settings cannot be read: {saved_error.message} "
                       "Open the model settings page (/settings/model) to start again.")
        return replace(base, problem=problem)
    if not values[ENV_MODEL]:
        return replace(base, problem="No model is chosen yet. Choose one on the model settings page "
                                     "(/settings/model), or set CONSOLE_HA_LLM_MODEL.")
    try:
        settings = ModelSettings.from_mapping(values)
    except ModelNotConfigured as err:
        return replace(base, problem=err.message)
    assert settings is not None  # a URL is set
    if key is None and saved_key is not None and settings.origins() == {origin_of(saved.base_url)}:
        key = saved_key
    return replace(base, settings=replace(settings, api_key=key))


def settings_in_force(environment: Mapping[str, Any], store: ModelStore) -> ModelSettings | None:
    """What a conversation turn uses; ModelNotConfigured saying why when nothing usable is set."""
    setup = resolve(environment, store)
    if setup.settings is None:
        raise ModelNotConfigured(setup.problem or NOT_SET_UP)
    return setup.settings


# --- the model test ----------------------------------------------------------------------------

# The problems the test reports, in the household's words. One place: the API sends them, the page shows them.
PROBLEMS: Mapping[str, str] = {
    "unreachable": "Nothing answered at {url} ({why}). Check the address, and that the model server is "
                   "running and reachable from this Console.",
    "not_openai_compatible": "Something answers at {url}, but not as an OpenAI-compatible server ({why}). "
                             f"Check the address: it usually ends in /v1, like {URL_EXAMPLE}.",
    "key_refused": "The model server refused the API key (HTTP {status}). Type the key again, or leave it "
                   "empty if the server needs none.",
    "model_not_found": "The model server has no model called “{model}”. Choose one of the models it lists.",
    "no_tool_calls": "The model answered, but without calling the test tool, so it could not read your home. "
                     "Use a model that supports tool calls; llama.cpp's server must be started with --jinja.",
    "refused": "The model server refused the test request (HTTP {status}).",
    "no_model": "The model server answers and lists {count} model(s). Choose one under Model, then test again.",
}
READY = "The model answered with a tool call: it is ready. Press Save to use it."

PROBE_TOOL = {
    "type": "function",
    "function": {
        "name": "report_ready",
        "description": "Report that you are ready. Always call this function.",
        "parameters": {"type": "object", "properties": {"ready": {"type": "boolean"}}, "required": ["ready"]},
    },
}
PROBE_MESSAGES = (
    {"role": "system", "content": "You are being tested. Call the function report_ready with ready set to true."},
    {"role": "user", "content": "Are you ready?"},
)
PROBE_MAX_TOKENS = 64
# A server's list can be long (a proxy in front of a cloud); the page offers choices, not a catalogue.
MAX_LISTED_MODELS = 200


@dataclass(frozen=True)
class ModelCheck:
    """What the model test found: ready, or one problem in plain words, and the models the server lists."""

    ok: bool
    problem: str | None
    message: str
    models: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        """The API's answer."""
        return {"ok": self.ok, "problem": self.problem, "message": self.message, "models": list(self.models)}


def _failed(problem: str, models: tuple[str, ...] = (), **words: Any) -> ModelCheck:
    return ModelCheck(False, problem, PROBLEMS[problem].format(**words), models)


def _lists(models: tuple[str, ...], name: str) -> bool:
    # Ollama lists "llama3.2:latest" and answers to "llama3.2" alike.
    return name in models or f"{name}:latest" in models


def check_model(settings: ModelSettings, **adapter_options: Any) -> ModelCheck:
    """List the server's models, then ask for one tiny tool call; say in plain words what went wrong."""
    url = settings.endpoints[0]
    adapter = OpenAICompatibleModel(settings, tools=[PROBE_TOOL], **adapter_options)
    try:
        listed = (name for name in adapter.list_models() if 0 < len(name) <= MAX_MODEL_CHARS and name.isprintable())
        models = tuple(dict.fromkeys(listed))[:MAX_LISTED_MODELS]
    except ModelUnavailable as err:
        return _classify(err, url, settings.model, (), listing=True)
    if not settings.model:
        return _failed("no_model", models, count=len(models))
    try:
        reply = adapter.complete(PROBE_MESSAGES, tool_choice="required", max_tokens=PROBE_MAX_TOKENS)
    except ModelUnavailable as err:
        return _classify(err, url, settings.model, models, listing=False)
    if not reply.tool_calls:
        return _failed("no_tool_calls", models)
    log.info("model test: %s answered with a tool call", url)
    return ModelCheck(True, None, READY, models)


def _classify(err: ModelUnavailable, url: str, model: str, models: tuple[str, ...], *, listing: bool) -> ModelCheck:
    """One failed request of the test as the problem a household can act on."""
    log.info("model test of %s: %s", url, err.message)
    answer = err.answer.decode("utf-8", "replace").lower()
    if err.kind == "unreachable":
        return _failed("unreachable", models, url=url, why=err.message.rpartition(": ")[2].rstrip("."))
    if err.status in (401, 403):
        return _failed("key_refused", models, status=err.status)
    if listing:
        why = f"HTTP {err.status} for {url}/models" if err.status else "its list of models is not in the OpenAI form"
        return _failed("not_openai_compatible", (), url=url, why=why)
    if err.kind != "refused":
        return _failed("not_openai_compatible", models, url=url, why="its answer to a chat request was not a "
                                                                     "chat completion")
    if "jinja" in answer or ("tool" in answer and "model" not in answer):
        return _failed("no_tool_calls", models)
    if err.status == 404 or ("model" in answer and models and not _lists(models, model)):
        return _failed("model_not_found", models, model=model)
    return _failed("refused", models, status=err.status)


def typed_api_key(value: object) -> Secret | None:
    """A key from a form or body: None when left empty (the page's key field always loads empty)."""
    if value is None or (isinstance(value, str) and not value.strip()):
        return None
    return check_api_key(value)


def settings_to_test(store: ModelStore, base_url: object, model: object, api_key: object, *,
                     home_assistant_url: str = "", timeout: float = TEST_TIMEOUT_SECONDS) -> ModelSettings:
    """Settings for a test of typed values; InvalidConfig when the URL or name cannot be used.

    A key left empty means the saved one, and only if it was saved for this URL's origin: like a turn,
    a test never carries a key to a server it was not typed for.
    """
    url = check_base_url(base_url)
    name = check_model_name(model) if model else ""
    if home_assistant_url and origin_of(url) == origin_of(home_assistant_url):
        raise InvalidConfig(HOME_ASSISTANT_URL, field="base_url")
    key = typed_api_key(api_key) or store.api_key(url)
    return ModelSettings((url,), name, key, min(timeout, DEFAULT_TIMEOUT_SECONDS))
