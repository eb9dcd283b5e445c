"""The tests' pseudo-language, made from messages.pot: every word accented, bracketed and 40 % longer.

    python scripts/pseudo_locale.py     # writes console_ha/translations/en_XA/LC_MESSAGES/messages.po

A page in it shows at once a word that did not come from a catalog (it reads plain), a sentence glued from
pieces (brackets inside a sentence), and text the layout cuts off (the closing bracket is missing). The
placeholders (`%(name)s`, `{name}`) are kept as they are. `scripts/i18n.py check` fails when it is stale.
"""

from __future__ import annotations

import io
import math
import re
import sys
from datetime import UTC, datetime
from pathlib import Path

from babel.messages.catalog import Catalog
from babel.messages.pofile import write_po

sys.path.insert(0, str(Path(__file__).resolve().parent))
import i18n  # beside this script, not a package

CODE = i18n.PSEUDO
OPEN, CLOSE = "⟦", "⟧"
GROWTH = 0.4
_MADE = datetime(2026, 1, 1, tzinfo=UTC)
_ACCENTED = str.maketrans(
    "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ",
    "åƀçđéƒĝĥîĵķľɱñöþǫŕšţûṽŵẋýžÅƁÇĐÉƑĜĤÎĴĶĽṀÑÖÞǪŔŠŢÛṼŴẊÝŽ",
)
# What must reach the formatter untouched: Python's %-style and brace-style named placeholders.
_PLACEHOLDER = re.compile(r"%\([a-z_]+\)s|\{[a-z_]+\}")
# Words of padding, not one long word: a language grows by words, so the layout may break lines between them
# (a single 90-letter word would overflow a phone's width where no translation would).
_PADDING = " ·ẋẋẋ·ẋẋẋ" * 24


def pseudo(text: str) -> str:
    """`text` accented (placeholders kept), 40 % longer, between brackets."""
    pieces, last = [], 0
    for match in _PLACEHOLDER.finditer(text):
        pieces.append(text[last:match.start()].translate(_ACCENTED))
        pieces.append(match.group())
        last = match.end()
    pieces.append(text[last:].translate(_ACCENTED))
    grown = "".join(pieces)
    extra = math.ceil(len(text) * GROWTH)
    padding = (_PADDING * (1 + extra // len(_PADDING)))[:extra]
    return f"{OPEN}{grown}{padding}{CLOSE}"


def catalog_from(template: Catalog) -> Catalog:
    """The pseudo-language's catalog: one entry per message of the template."""
    # Fixed dates: the same .pot makes the same file (and the same .mo), so a test can tell it is current.
    catalog = Catalog(locale="en", project="console-ha", version="", msgid_bugs_address="", fuzzy=False,
                      creation_date=_MADE, revision_date=_MADE)
    catalog.header_comment = "# console-ha's pseudo-language for the tests, made by scripts/pseudo_locale.py."
    for message in template:
        if not message.id:
            continue
        if isinstance(message.id, str):
            catalog.add(message.id, pseudo(message.id), flags=message.flags)
        else:
            singular, plural = message.id
            catalog.add(message.id, (pseudo(singular), pseudo(plural)), flags=message.flags)
    return catalog


def text() -> bytes:
    """The pseudo-language's .po as written, from the repository's messages.pot."""
    buffer = io.BytesIO()
    write_po(buffer, catalog_from(i18n.read_catalog(i18n.TEMPLATE)), include_lineno=False, sort_output=True,
             width=120)
    return buffer.getvalue()


def main() -> int:
    """Write the pseudo-language's catalog beside the others."""
    path = i18n.po_path(CODE)
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(text())
    print(path.relative_to(i18n.ROOT))
    return 0


if __name__ == "__main__":
    sys.exit(main())
