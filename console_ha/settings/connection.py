"""The "is this Home Assistant?" test behind the settings page's Test connection button."""

from __future__ import annotations

import logging
from dataclasses import dataclass

from console_ha.errors import HABadResponse, HANotFound
from console_ha.ha.reads import Reads
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.language import Words
from console_ha.secret import Secret

log = logging.getLogger(__name__)

# What the test reads from Home Assistant.
CONNECTION_TEST_READS = Reads(paths=("/api/config",))

NOT_HOME_ASSISTANT = Words(
    "Something answers at this address, but it is not Home Assistant's API. Check the URL: it is usually "
    "like http://homeassistant.local:8123, without a path."
)


def not_home_assistant() -> HABadResponse:
    """502 HA_BAD_RESPONSE, reason `not_home_assistant`: an answer no Home Assistant would give."""
    return HABadResponse(NOT_HOME_ASSISTANT, reason="not_home_assistant")


@dataclass(frozen=True)
class HomeAssistantFound:
    """A Home Assistant that answered the test: its version and its name for the home."""

    base_url: str
    version: str
    location_name: str

    def to_json(self) -> dict[str, object]:
        """The settings API's answer to a test that passed."""
        return {"ok": True, "version": self.version, "location_name": self.location_name, "base_url": self.base_url}


def check_home_assistant(client: HomeAssistantClient, base_url: str, token: Secret, *,
                         timeout: float) -> HomeAssistantFound:
    """Ask `/api/config` with `token`; the precise HA_* failure, or `not_home_assistant`, when it is not HA."""
    try:
        answer = client.config(timeout=timeout)
    except HANotFound as err:
        raise not_home_assistant() from err
    except HABadResponse as err:
        if err.detail.get("reason") in ("invalid_json", "wrong_shape"):
            raise not_home_assistant() from err
        raise
    version, location = answer.get("version"), answer.get("location_name")
    if not (isinstance(version, str) and version and isinstance(location, str)):
        raise not_home_assistant()
    if token.reveal() in version or token.reveal() in location:
        # Home Assistant never says its token back; an impostor would, to have the page show it.
        log.warning("connection test to %s: the answer holds the token sent; not Home Assistant", base_url)
        raise not_home_assistant()
    log.info("connection test to %s: Home Assistant %s", base_url, version)
    return HomeAssistantFound(base_url, version, location)
