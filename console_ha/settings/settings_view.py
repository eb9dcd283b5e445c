"""The Home Assistant settings as a page or the settings API shows them: one instance's, never its token."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from console_ha.errors import SettingsFileDamaged
from console_ha.settings.tokens import TokenStatus
from console_ha.store.config import PAGE_SETTINGS, HomeAssistantConfig
from console_ha.store.datadir import HOME_INSTANCE
from console_ha.store.instances import name_of

# What the instances list (`GET .../instances`) says of each instance, of what `SettingsView.to_json` says.
LISTED_FIELDS = ("name", "base_url", "enabled", "has_access_token", "allowlisted_entities", "config_error")


class SettingsUnreadable(SettingsFileDamaged):
    """409 CONFIG_INVALID: the saved settings cannot be read; what is wrong, and the way out (reset)."""

    def __init__(self, cause: SettingsFileDamaged, config_file: str) -> None:
        detail = {k: v for k, v in cause.detail.items() if v is not None}
        super().__init__(
            f"The saved Home Assistant settings cannot be read. {cause.message} To fix this, start again from "
            f"empty settings (reset): the damaged file is kept beside the new one as "
            f"{config_file}.broken-<time>, and the access token is kept.",
            action="reset",
            **detail,
        )
        # What is wrong, alone: a page that explains the way out itself shows only this.
        self.cause = cause


@dataclass(frozen=True)
class SettingsView:
    """The settings as a page shows them: never the token, only whether there is one and its origin."""

    config: HomeAssistantConfig
    revision: str | None
    token: TokenStatus
    config_error: SettingsUnreadable | None = None
    instance: str = HOME_INSTANCE  # whose settings these are

    @property
    def can_list(self) -> bool:
        """Whether the saved settings have a URL and a token for it, so the picker can list their entities."""
        url = self.config.base_url
        return bool(url) and self.token.stored and not self.token.asked_again_for(url)

    def to_json(self) -> dict[str, Any]:
        """The settings API's answer (GET, and POST after a save)."""
        # Every setting a page may send, as the file holds it (`HomeAssistantConfig.to_json`: the names of
        # allowlisted entities only), else its declared default.
        saved = self.config.to_json()
        fields = {s.name: saved[s.name] if s.name in saved else s.to_json()["default"] for s in PAGE_SETTINGS}
        return {
            **fields,
            "instance": self.instance,
            # What its cards and the page call it (`name_of`): the household's name, else "Home" or its id.
            "name": name_of(self.instance, self.config),
            "has_access_token": self.token.stored,
            # The origin the stored token belongs to (never the token): the page asks for a new token when
            # the URL typed has another.
            "access_token_origin": self.token.origin,
            "revision": self.revision,
            "config_error": self.config_error.to_dict()["error"] if self.config_error else None,
        }

    def listed(self) -> dict[str, Any]:
        """This instance as the instances list shows it: its id, name, URL, switch, token's presence, allowlist."""
        shown = self.to_json()
        return {"id": self.instance, **{name: shown[name] for name in LISTED_FIELDS}}
