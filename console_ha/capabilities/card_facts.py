"""What a card may know of the allowed devices before the household allows a read, without asking Home Assistant.

A card is built before approval, so it may not read Home Assistant: it names what the Console already
holds. That is the saved settings (ids and the names the picker saw), the areas the last registry round
read, and each device's kind of reading (device class, state class) as the last read of its state found
it: both held by the Console's `CardMemory`, for each Home Assistant apart. Anything not held is `None`, and
the card says so.
"""

from __future__ import annotations

import threading
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from typing import Any

from console_ha.ha.areas import AreaIndex
from console_ha.ha.per_home_assistant import MAX_HOME_ASSISTANTS, PerHomeAssistant

Key = tuple[str, str, str]  # a client's `cache_key`: URL, token hash, CA bundle

# State classes and device classes whose statistics are "how much" (Home Assistant's meters: `change`).
METER_STATE_CLASSES = frozenset({"total", "total_increasing"})
METER_DEVICE_CLASSES = frozenset({"energy", "gas", "water"})
# How many devices' traits are kept per Home Assistant, at most: beyond this, those seen longest ago go (a house
# has a few hundred).
MAX_SEEN = 5000


@dataclass(frozen=True)
class Traits:
    """The kind of reading a device gives, as its state last said: device class and state class, or None."""

    device_class: str | None = None
    state_class: str | None = None

    @property
    def is_meter(self) -> bool:
        """Whether its statistics count up: a state class of total, or no state class and an energy, gas or water
        device class."""
        # Home Assistant's recorder keeps a sum for a total and a mean for a measurement, whatever the device
        # class: an energy sensor that says "measurement" has an average, lowest and highest, not a count.
        if self.state_class is not None:
            return self.state_class in METER_STATE_CLASSES
        return self.device_class in METER_DEVICE_CLASSES


def traits_of(state: Mapping[str, Any]) -> Traits:
    """The device class and state class of one Home Assistant state (short text only, else None)."""
    attributes = state.get("attributes")
    attributes = attributes if isinstance(attributes, Mapping) else {}

    def text(key: str) -> str | None:
        value = attributes.get(key)
        return value if isinstance(value, str) and 0 < len(value) <= 64 else None
    return Traits(text("device_class"), text("state_class"))


@dataclass(frozen=True)
class CardFacts:
    """What the Console holds for a card: the areas (None: not known) and each device's traits."""

    areas: AreaIndex | None = None
    traits: Mapping[str, Traits] = field(default_factory=dict)

    def traits_for(self, entity_id: str) -> Traits | None:
        """The traits last seen for `entity_id`, or None when its state was not read yet."""
        return self.traits.get(entity_id)


NOTHING_KNOWN = CardFacts()


@dataclass
class _Held:
    """What is held of one Home Assistant: its areas as last read, and its devices' traits in order of last sight."""

    areas: AreaIndex | None = None
    traits: dict[str, Traits] = field(default_factory=dict)


class CardMemory:
    """What one Console holds for its cards, per Home Assistant it reads (a house and a cabin alike): the areas
    last read and each allowed device's traits as its state last said. `Console.open` builds one and hands it to
    its executors and its settings service, so a second Console in the same process never sees the first one's.

    Kept by `cache_key` (address, token, CA) in a bounded table (`PerHomeAssistant`): a read of the cabin leaves
    what is held of the house as it was, and another token or CA for the same address starts afresh.
    """

    def __init__(self, max_seen: int = MAX_SEEN, most: int = MAX_HOME_ASSISTANTS) -> None:
        self._max_seen = max_seen
        # One lock over the table and what each entry holds: a read's `remember` and a card's `facts` never
        # see an entry half updated.
        self._lock = threading.Lock()
        self._held: PerHomeAssistant[Key, _Held] = PerHomeAssistant(most)

    def keep_areas(self, key: Key, index: AreaIndex) -> None:
        """Hold `index` as the last areas read for `key` (a read's or the picker's round), for cards only."""
        with self._lock:
            self._held.get_or_make(key, _Held).areas = index

    def remember(self, key: Key, states: Iterable[Mapping[str, Any]], allowed: Iterable[str]) -> None:
        """Keep the traits of the allowed entities among `states` (those a read has just fetched)."""
        wanted = set(allowed)
        # The client hands over states already checked (objects with an entity_id); one pass over them.
        seen = {state["entity_id"]: traits_of(state) for state in states if state["entity_id"] in wanted}
        with self._lock:
            held = self._held.get_or_make(key, _Held)
            # Seen again is seen last: the dict's order is the order of last sight, so what goes first is what
            # no read has seen for longest (a device still allowed is seen by every read of the states).
            for entity_id in seen:
                held.traits.pop(entity_id, None)
            held.traits.update(seen)
            if len(held.traits) > self._max_seen:
                # In one pass: deleting from the front one at a time rescans the dict's emptied slots each time.
                held.traits = dict(list(held.traits.items())[-self._max_seen:])

    def facts(self, key: Key) -> CardFacts:
        """What is held for the Home Assistant of `key` (copies), without a request to it; nothing for another."""
        with self._lock:
            held = self._held.get(key)
            if held is None:
                return NOTHING_KNOWN
            return CardFacts(held.areas, dict(held.traits))


@dataclass(frozen=True)
class ReadNotes:
    """What the executor hands a read besides its arguments: the areas its own card was built from (what the
    household allowed, None when the card knew none), and the Console's memory, told what the read learns."""

    memory: CardMemory
    card_areas: AreaIndex | None = None
