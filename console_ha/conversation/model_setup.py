"""Which model a conversation turn uses: the CONSOLE_HA_LLM_* variables over the saved settings.

The variables win, each on its own, over what is saved on the model page (`store/model_config.py`);
a saved key goes only with the saved URL's origin.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import Any

from console_ha.conversation.model import (
    ENV_API_KEY,
    ENV_MODEL,
    ENV_TIMEOUT,
    ENV_URL,
    NOT_SET_UP,
    ModelNotConfigured,
    ModelSettings,
)
from console_ha.errors import SettingsFileDamaged
from console_ha.ha.addresses import origin_of
from console_ha.language import Words
from console_ha.secret import Secret
from console_ha.store.model_config import ModelStore, SavedModel

ENVIRONMENT = (ENV_URL, ENV_MODEL, ENV_API_KEY)
# Every CONSOLE_HA_LLM_* variable a turn reads, the timeout included.
MODEL_VARIABLES = (ENV_URL, ENV_MODEL, ENV_API_KEY, ENV_TIMEOUT)


def environment_values(overrides: Mapping[str, Any] | None = None) -> dict[str, Any]:
    """The CONSOLE_HA_LLM_* values in force: the process environment, overridden by `overrides`."""
    values: dict[str, Any] = {key: os.environ[key] for key in MODEL_VARIABLES if os.environ.get(key)}
    if overrides:
        values.update({key: overrides[key] for key in MODEL_VARIABLES if overrides.get(key) is not None})
    return values


@dataclass(frozen=True)
class ModelSetup:
    """The settings a turn uses now, and where each part came from, for the page to explain."""

    saved: SavedModel
    has_saved_key: bool
    # The CONSOLE_HA_LLM_* variables that are set, in ENVIRONMENT's order; each wins over the saved value.
    from_environment: tuple[str, ...]
    settings: ModelSettings | None
    problem: str | None = None
    saved_error: SettingsFileDamaged | None = field(default=None, compare=False)

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
    saved_error: SettingsFileDamaged | None = None
    try:
        saved = store.read()
    except SettingsFileDamaged as err:
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
            problem = Words("The saved model settings cannot be read: {why} "
                            "Open the model settings page (/settings/model) to start again.", why=saved_error.message)
        return replace(base, problem=problem)
    if not values[ENV_MODEL]:
        return replace(base, problem=Words("No model is chosen yet. Choose one on the model settings page "
                                           "(/settings/model), or set {name}.", name=ENV_MODEL))
    try:
        settings = ModelSettings.from_mapping(values)
    except ModelNotConfigured as err:
        return replace(base, problem=err.message)
    assert settings is not None  # a URL is set
    if key is None and saved_key is not None and settings.origins() == {origin_of(saved.base_url)}:
        key = saved_key
    return replace(base, settings=replace(settings, api_key=key))


def settings_in_force(environment: Mapping[str, Any], store: ModelStore) -> ModelSettings:
    """What a conversation turn uses; ModelNotConfigured saying why when nothing usable is set."""
    setup = resolve(environment, store)
    if setup.settings is None:
        raise ModelNotConfigured(setup.problem or NOT_SET_UP)
    return setup.settings
