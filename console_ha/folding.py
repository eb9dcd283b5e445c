"""How the household's words are compared with Home Assistant's names: case, accents and spacing ignored."""

from __future__ import annotations

import unicodedata


def fold(text: str) -> str:
    """`text` as matching sees it: casefolded, decomposed (NFKD) without combining marks, spaces collapsed.

    Casefolding comes first: it can itself make a combining mark ("İ" folds to "i" and a dot above), which
    the decomposition then drops, so "İstanbul", "istanbul" and "ISTANBUL" fold alike; so do "Küche",
    "kuche" and "KÜCHE", and "ﬁ" (a ligature) and "fi". Written here rather than taken from a library
    because it is these four standard-library steps, and every match in the Console must use the same ones.
    """
    decomposed = unicodedata.normalize("NFKD", text.casefold())
    kept = "".join(char for char in decomposed if not unicodedata.combining(char))
    return " ".join(kept.split())
