"""Plain-language confirmation card copy: what will be read, and where the request goes."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any
from urllib.parse import urlsplit

from console_ha.capabilities.registry import GET_HISTORY, LIST_ENTITIES
from console_ha.store.config import HomeAssistantConfig

PERIOD_WORDS = {"hour": "the past hour", "day": "the past day", "week": "the past week"}
APPROVE_LABEL = "Allow this once"
DENY_LABEL = "Don't allow"


@dataclass(frozen=True)
class Card:
    """What the Console shows before a capability runs."""

    title: str
    body: str
    approve_label: str = APPROVE_LABEL
    deny_label: str = DENY_LABEL

    def to_dict(self) -> dict[str, str]:
        return asdict(self)


def host_of(base_url: str) -> str:
    """The host (and port) a household recognises, without scheme or path."""
    parts = urlsplit(base_url)
    return parts.netloc or base_url


def _leaves_device(config: HomeAssistantConfig) -> str:
    return f"This request leaves this device for Home Assistant at {host_of(config.base_url)}."


def _list_entities_card(config: HomeAssistantConfig, arguments: Mapping[str, Any]) -> Card:
    count = len(config.allowlisted_entities)
    names = [config.display_name(e) for e in config.allowlisted_entities[:3]]
    devices = "device" if count == 1 else "devices"
    example = ""
    if names:
        more = ", and others" if count > len(names) else ""
        example = f" ({', '.join(names)}{more})"
    return Card(
        title="Read your Home Assistant devices?",
        body=(
            f"The assistant wants to read the current state of the {count} {devices} you allowed"
            f"{example}. {_leaves_device(config)}"
        ),
    )


def _get_history_card(config: HomeAssistantConfig, arguments: Mapping[str, Any]) -> Card:
    entity_id = arguments["entity_id"]
    name = config.display_name(entity_id)
    period = PERIOD_WORDS[arguments["period"]]
    return Card(
        title=f"Read the history of {name}?",
        body=(
            f"The assistant wants to read how {name} ({entity_id}) changed over {period}: "
            "when it changed, how long it was in each state, and its lowest and highest values. "
            f"{_leaves_device(config)}"
        ),
    )


_CARDS = {LIST_ENTITIES: _list_entities_card, GET_HISTORY: _get_history_card}


# What the program that asked sees of its own waiting card (GET /api/v1/confirmations with its API
# token): the household's card names Home Assistant's address and the allowed devices, which the
# program has not been allowed to learn.
CARD_FOR_THE_ASKING_PROGRAM = Card(
    title="Waiting for the household",
    body="The household answers this request on the Console, where its card says what would be read.",
)


def card_for(capability: str, config: HomeAssistantConfig, arguments: Mapping[str, Any]) -> Card:
    """The card for one validated invocation of a registered capability."""
    return _CARDS[capability](config, arguments)


def destination_for(client: str) -> str:
    """Who asked, and where what is read goes, for a card asked for by a client other than the Console's page."""
    return (
        f"Asked by “{client}”, a program using the Console's API token of that name. If you allow it, "
        f"what is read goes to that program and to the assistant behind it."
    )
