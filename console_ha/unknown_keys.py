"""How a request names a key it does not accept: one rule for every JSON body and the executor."""

from __future__ import annotations

from collections.abc import Iterable

# Long enough for any real field name, short enough that a hostile megabyte key is not echoed back.
MAX_SHOWN_KEY = 64


def shown_key(key: object) -> str:
    """`key` as an error names it: text, cut to MAX_SHOWN_KEY characters with an ellipsis."""
    text = str(key)
    return text if len(text) <= MAX_SHOWN_KEY else text[:MAX_SHOWN_KEY] + "…"


def first_unknown(keys: Iterable[object], allowed: Iterable[str]) -> str | None:
    """The first key (in sorted order, so the answer is stable) that is not allowed, as shown; else None."""
    known = set(allowed)
    unknown = sorted(str(k) for k in keys if k not in known)
    return shown_key(unknown[0]) if unknown else None
