"""What every confirmation card shares: its shape, its buttons, where the request goes, who asked.

Each capability writes its own card's words (`Capability.card`, in its module).
"""

from __future__ import annotations

from dataclasses import asdict, dataclass
from urllib.parse import urlsplit

from console_ha.store.config import HomeAssistantConfig

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


# What ends a sentence: dropped from the end of words a card puts inside its own sentence, so the model's
# "kitchen lights?" is quoted as “kitchen lights” and no line reads “kitchen lights?”. or “…?”,. An ellipsis
# stays: it says the words were cut short (`entity_budget.cut`), which a card must not hide, and it doubles
# nothing.
SENTENCE_ENDS = ".?!:;,。？！"


def unended(words: str) -> str:
    """`words` without the punctuation that would end a sentence at its end (whole, if nothing else is left)."""
    return words.rstrip(SENTENCE_ENDS).rstrip() or words


def quoted(words: str) -> str:
    """Someone else's words (the model's filter, its query) quoted inside a card's sentence, in “”."""
    return f"“{unended(words)}”"


def host_of(base_url: str) -> str:
    """The host (and port) a household recognises, without scheme or path."""
    parts = urlsplit(base_url)
    return parts.netloc or base_url


def leaves_device(config: HomeAssistantConfig) -> str:
    """The sentence every card ends with: the read leaves this device, for that Home Assistant."""
    return f"This request leaves this device for Home Assistant at {host_of(config.base_url)}."


# What the program that asked sees of its own waiting card (GET /api/v1/confirmations with its API
# token): the household's card names Home Assistant's address and the allowed devices, which the
# program has not been allowed to learn.
CARD_FOR_THE_ASKING_PROGRAM = Card(
    title="Waiting for the household",
    body="The household answers this request on the Console, where its card says what would be read.",
)


def destination_for(client: str) -> str:
    """Who asked, and where what is read goes, for a card asked for by a client other than the Console's page."""
    return (
        f"Asked by “{client}”, a program using the Console's API token of that name. If you allow it, "
        f"what is read goes to that program and to the assistant behind it."
    )
