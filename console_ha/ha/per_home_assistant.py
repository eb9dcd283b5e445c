"""A table of what one Console keeps per Home Assistant, keyed by the one it serves, of bounded size."""

from __future__ import annotations

import threading
from collections import OrderedDict
from collections.abc import Callable, Hashable
from typing import Generic, TypeVar

K = TypeVar("K", bound=Hashable)
V = TypeVar("V")

# Home Assistants one Console keeps things for at once: a household's instances (a house, a cabin, a workshop:
# issue 29) and the addresses and tokens it tries in the picker while setting up. Past this the one used
# longest ago goes, so a household that tries token after token does not grow the Console without bound.
MAX_HOME_ASSISTANTS = 8


class PerHomeAssistant(Generic[K, V]):
    """Values keyed by the Home Assistant they serve (its `cache_key`); past `most` the least recently used goes.

    Thread-safe: every request thread of a Console reads and fills the same table.
    """

    def __init__(self, most: int = MAX_HOME_ASSISTANTS) -> None:
        if most < 1:
            raise ValueError("a table keeps at least one Home Assistant")
        self._most = most
        self._lock = threading.Lock()
        self._entries: OrderedDict[K, V] = OrderedDict()

    def get(self, key: K) -> V | None:
        """The value kept for `key`, or None; a value found counts as used now."""
        with self._lock:
            value = self._entries.get(key)
            if value is not None:
                self._entries.move_to_end(key)
            return value

    def put(self, key: K, value: V) -> None:
        """Keep `value` for `key`, in place of any before it."""
        with self._lock:
            self._put(key, value)

    def get_or_make(self, key: K, make: Callable[[], V]) -> V:
        """The value kept for `key`, else `make()`'s, kept; made under the lock, so once per key."""
        with self._lock:
            value = self._entries.get(key)
            if value is None:
                value = make()
                self._put(key, value)
            else:
                self._entries.move_to_end(key)
            return value

    def clear(self) -> None:
        """Forget every kept value."""
        with self._lock:
            self._entries.clear()

    def __len__(self) -> int:
        with self._lock:
            return len(self._entries)

    def _put(self, key: K, value: V) -> None:
        self._entries[key] = value
        self._entries.move_to_end(key)
        while len(self._entries) > self._most:
            self._entries.popitem(last=False)
