"""`Secret`: a string that never shows itself; and the one constant-time way to look a token up."""

from __future__ import annotations

import hashlib
import hmac
from collections.abc import Mapping
from typing import TypeVar

T = TypeVar("T")


class Secret:
    """A string that never shows itself in a repr, str, log line or traceback."""

    __slots__ = ("_value",)

    def __init__(self, value: str) -> None:
        self._value = value

    def reveal(self) -> str:
        """The secret itself: only for the Authorization header."""
        return self._value

    def digest(self) -> str:
        """A SHA-256 of the secret: keys a cache (a new secret is a new key) without keeping the secret in it."""
        return hashlib.sha256(self._value.encode("utf-8")).hexdigest()

    def __repr__(self) -> str:
        return "Secret('********')"

    __str__ = __repr__

    def __eq__(self, other: object) -> bool:
        return isinstance(other, Secret) and other._value == self._value

    def __hash__(self) -> int:
        return hash(self._value)


def same_token(expected: str, given: object) -> bool:
    """Whether `given` is the token `expected`, compared in constant time (anything not ASCII text is not)."""
    return isinstance(given, str) and given.isascii() and hmac.compare_digest(expected, given)


def find_by_token(items: Mapping[str, T], token: object) -> T | None:
    """The item filed under `token`, every key compared in constant time (few are open at once)."""
    for candidate, item in items.items():
        if same_token(candidate, token):
            return item
    return None
