"""The model settings service: everything the model settings page does, in plain Python (no Flask).

Read what is in force, save (every field checked before anything is written), start again after a
damaged file, and test typed values against the server they name, one test at a time. A front end parses
its request into a `ModelSaveRequest` or a `ModelTryRequest`, calls one method here, and maps the answer or
the error (every refusal is a `ConsoleHaError` carrying its contract code).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from console_ha.conversation.model import ModelSettings
from console_ha.conversation.model_check import ModelCheck, check_model, settings_to_test
from console_ha.conversation.model_setup import ModelSetup, resolve, settings_in_force
from console_ha.errors import InvalidSettingsChange, RateLimited, SettingsFileDamaged
from console_ha.ha.addresses import origin_of
from console_ha.secret import Secret
from console_ha.store.config import refuse_unknown
from console_ha.store.instances import Instances
from console_ha.store.model_config import ModelStore, SavedModel, typed_api_key
from console_ha.unknown_keys import first_unknown

# What a client may send to save, and to test before saving.
SAVE_FIELDS = ("base_url", "model", "api_key", "remove_api_key", "reset")
TEST_FIELDS = ("base_url", "model", "api_key")

ModelEnvironment = Callable[[], Mapping[str, Any]]


def home_assistant_origins(instances: Instances) -> frozenset[str]:
    """The origin of every instance's Home Assistant: none may be the model's, which the Console POSTs to."""
    origins = set()
    for instance in instances.ids():
        try:
            base_url = instances.get(instance).config.load().base_url
        except SettingsFileDamaged:
            continue  # a damaged file is its settings page's business; here it names no address to refuse
        if base_url:
            origins.add(origin_of(base_url))
    return frozenset(origins)


class ModelTestBusy(RateLimited):
    """A model test is already under way; a second would only hold another worker thread."""


@dataclass(frozen=True)
class ModelSaveRequest:
    """One save, from any front end: the typed URL and model, the key's fate, and whether to start again."""

    base_url: str = ""
    model: str = ""
    api_key: Secret | None = None  # a new key, already checked (`typed_api_key`); None keeps the saved one
    remove_api_key: bool = False
    reset: bool = False  # move a damaged file aside first, once every value has passed

    @classmethod
    def typed(cls, base_url: str, model: str, api_key: object, *, remove_api_key: bool = False,
              reset: bool = False) -> ModelSaveRequest:
        """The values as typed; the key is checked here, before anything is written."""
        return cls(base_url, model, typed_api_key(api_key), remove_api_key, reset)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ModelSaveRequest:
        """The model API's POST body, checked field by field; nothing is written on error."""
        refuse_unknown(body, SAVE_FIELDS)
        for flag in ("remove_api_key", "reset"):
            if not isinstance(body.get(flag, False), bool):
                raise InvalidSettingsChange(f"`{flag}` must be true or false.", field=flag)
        for name in ("base_url", "model"):
            if not isinstance(body.get(name, ""), str):
                raise InvalidSettingsChange(f"`{name}` must be text.", field=name)
        return cls.typed(body.get("base_url") or "", body.get("model") or "", body.get("api_key"),
                         remove_api_key=bool(body.get("remove_api_key")), reset=bool(body.get("reset")))


@dataclass(frozen=True)
class ModelTryRequest:
    """Typed values to test before saving them; checked by the test itself (`settings_to_test`)."""

    base_url: object = None
    model: object = None
    api_key: object = None  # empty: the saved key, only for the origin it was saved for

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> ModelTryRequest:
        """The body of a test: only `base_url`, `model` and `api_key`."""
        if (unknown := first_unknown(body, TEST_FIELDS)) is not None:
            raise InvalidSettingsChange(f"Unknown field: {unknown}.", field=unknown)
        return cls(body.get("base_url"), body.get("model"), body.get("api_key"))


class ModelSettingsService:
    """The model settings page's core, over the saved settings, the environment and the Home Assistants' addresses."""

    def __init__(self, store: ModelStore, *, instances: Instances, environment: ModelEnvironment) -> None:
        self._store = store
        self._instances = instances
        self._environment = environment
        # One model test at a time: each may wait a minute on a slow server, and the Console has few threads.
        self._test_lock = threading.Lock()

    @property
    def config_path(self) -> Path:
        """Where the settings are saved, for the page to name."""
        return self._store.path

    def setup(self) -> ModelSetup:
        """The settings in force now, and where each part came from."""
        return resolve(self._environment(), self._store)

    def settings_in_force(self) -> ModelSettings:
        """What a conversation turn uses; ModelNotConfigured saying why when nothing usable is set."""
        return settings_in_force(self._environment(), self._store)

    def save(self, request: ModelSaveRequest) -> tuple[SavedModel, bool]:
        """Validate and save; the settings and whether a key saved for another server was dropped."""
        # The store moves a damaged file aside only once every check has passed: a refused reset moves nothing.
        return self._store.save(request.base_url, request.model, api_key=request.api_key,
                                remove_api_key=request.remove_api_key,
                                home_assistant_origins=home_assistant_origins(self._instances),
                                reset=request.reset)

    def reset(self) -> SavedModel:
        """Move a damaged file aside (kept, never deleted) and start again from empty settings."""
        return self._store.reset()

    def test(self, request: ModelTryRequest, *, timeout: float) -> ModelCheck:
        """Test the typed values against the server they name; ModelTestBusy while another test runs."""
        if not self._test_lock.acquire(blocking=False):
            raise ModelTestBusy("A model test is already running. Wait for its result, then try again.")
        try:
            settings = settings_to_test(self._store, request.base_url, request.model, request.api_key,
                                        home_assistant_origins=home_assistant_origins(self._instances),
                                        timeout=timeout)
            return check_model(settings)
        finally:
            self._test_lock.release()
