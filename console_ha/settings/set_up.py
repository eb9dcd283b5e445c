"""Whether the household has finished setting up: the front door then leads to the conversation."""

from __future__ import annotations

from console_ha.settings.settings_service import SettingsView
from console_ha.settings.tokens import typed_origin


def is_set_up(view: SettingsView) -> bool:
    """Home Assistant is switched on, with an address, a token saved for that address, and a device allowed.

    Exactly what a read needs before the executor's policy stage lets it through (nothing less would
    answer a first question); the model is not part of it, since the conversation page says on load what
    the model still needs and leads to its page.
    """
    config = view.config
    return (view.config_error is None and config.enabled and bool(config.base_url)
            and view.token.stored and view.token.origin == typed_origin(config.base_url)
            and bool(config.allowlisted_entities))
