"""What every confirmation card shares: its shape, its buttons, where the request goes, who asked.

Each capability writes its own card's words (`Capability.card`, in its module), as `Words`: the catalogs hold
their translations, each marked with the capability it belongs to (scripts/i18n.py), and the web layer shows
them in the language of the request that shows the card (docs/capabilities.md, "A card's words").
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from urllib.parse import urlsplit

from console_ha.language import Words
from console_ha.store.config import HomeAssistantConfig

APPROVE_LABEL = Words("Allow this once")
DENY_LABEL = Words("Don't allow")


@dataclass(frozen=True)
class Card:
    """What the Console shows before a capability runs (each field a `Words`, English as a str)."""

    title: str
    body: str
    approve_label: str = APPROVE_LABEL
    deny_label: str = DENY_LABEL

    def to_dict(self) -> dict[str, str]:
        """The card's fields, each `Words` kept as it is (the JSON provider or a template renders it)."""
        return asdict(self)


# What ends a sentence: dropped from the end of words a card puts inside its own sentence, so the model's
# "kitchen lights?" is quoted as “kitchen lights” and no line reads “kitchen lights?”. or “…?”,. An ellipsis
# stays: it says the words were cut short (`entity_budget.cut`), which a card must not hide, and it doubles
# nothing.
SENTENCE_ENDS = ".?!:;,。？！"


def unended(words: str) -> str:
    """`words` without the punctuation that would end a sentence at its end (whole, if nothing else is left)."""
    return words.rstrip(SENTENCE_ENDS).rstrip() or words


def quoted(words: str) -> Words:
    """Someone else's words (the model's filter, its query, a kind's name) quoted inside a card's sentence."""
    # A Words (a kind's name) is ours, without a sentence's end; the model's words lose theirs.
    inner = words if isinstance(words, Words) else unended(words)
    # Translators: someone else's words quoted inside a sentence; use your language's quotation marks.
    return Words("“{words}”", words=inner)


def names_listed(names: list[str]) -> str:
    """Devices' names one after the other, as a card lists them ("Kitchen, Hall, Lounge")."""
    if len(names) <= 1:
        return "".join(names)
    # Translators: a device's name, then the names of the others in a card's list (Chinese separates with 、).
    return Words("{name}, {more_names}", name=names[0], more_names=names_listed(names[1:]))


# Each message once, as Words (so the catalogs find it), for the functions below to fill in and `at_instance` to
# recognise: two whole sentences one after the other, how a card's body is made (`sentences`); the sentence every
# card ends with (`leaves_device`); and that sentence naming the instance, when there are several.
# Translators: two whole sentences one after the other (Chinese writes them with no space between).
_SENTENCES = Words("{sentence} {next_sentence}", sentence="", next_sentence="").msgid
_LEAVES_DEVICE = Words("This request leaves this device for Home Assistant at {host}.", host="").msgid
# Translators: Its last sentence when the household has several Home Assistants; {instance} is the household's
# name for one of them ("Cabin"), in your language's quotation marks.
_LEAVES_FOR_INSTANCE = Words("This request leaves this device for your Home Assistant “{instance}” at {host}.",
                             instance="", host="").msgid


def sentences(first: str, *more: str) -> str:
    """Whole sentences one after the other, as one card body or chat line (each language spaces them its way)."""
    if not more:
        return first
    return Words(_SENTENCES, sentence=first, next_sentence=sentences(*more))


def host_of(base_url: str) -> str:
    """The host (and port) a household recognises, without scheme or path."""
    parts = urlsplit(base_url)
    return parts.netloc or base_url


def at_instance(card: Card, name: str) -> Card:
    """`card` naming the Home Assistant it reads by its name, for a Console that reads more than one: the title
    starts with the name, and the body's last sentence (`leaves_device`) says which Home Assistant it goes to.

    One place for every capability: each card ends with `leaves_device`, whose words this swaps for the naming
    ones (tests/test_cards_instances.py holds every capability's card to that).
    """
    # Translators: the household's name for one of its Home Assistants ("Cabin"), then a card's title.
    return replace(card, title=Words("{instance}: {title}", instance=name, title=card.title),
                   body=_naming(card.body, name))


def _naming(body: str, name: str) -> str:
    """`body` with its `leaves_device` sentence, at its end, naming the instance `name`."""
    if not isinstance(body, Words):
        return body
    if body.msgid == _LEAVES_DEVICE:
        return Words(_LEAVES_FOR_INSTANCE, instance=name, host=body.params["host"])
    rest = body.params.get("next_sentence")
    if body.msgid == _SENTENCES and isinstance(rest, str):
        return Words(_SENTENCES, sentence=body.params["sentence"], next_sentence=_naming(rest, name))
    return body


def leaves_device(config: HomeAssistantConfig) -> Words:
    """The sentence every card ends with: the read leaves this device, for that Home Assistant."""
    return Words(_LEAVES_DEVICE, host=host_of(config.base_url))


# What the program that asked sees of its own waiting card (GET /api/v1/confirmations with its API
# token): the household's card names Home Assistant's address and the allowed devices, which the
# program has not been allowed to learn. Words too: a program's answer follows its own Accept-Language
# (none: English), as every JSON answer does (docs/capabilities.md).
CARD_FOR_THE_ASKING_PROGRAM = Card(
    title=Words("Waiting for the household"),
    body=Words("The household answers this request on the Console, where its card says what would be read."),
)


def destination_for(client: str) -> Words:
    """Who asked, and where what is read goes, for a card asked for by a client other than the Console's page."""
    return Words("Asked by “{client}”, a program using the Console's API token of that name. If you allow it, "
                 "what is read goes to that program and to the assistant behind it.", client=client)
