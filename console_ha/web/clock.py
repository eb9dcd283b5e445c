"""The household's clock on every page: one template helper writes a moment as a `<time>` element.

The element carries the moment in UTC (`datetime`), and its text is the moment in the Console's configured
zone (`CONSOLE_HA_TIME_ZONE`, else the machine's own), in the page's language's own forms (Babel's), which
is what a page without JavaScript shows; `static/clock.js` rewrites every such element in the browser's own
zone, in the language `<html lang>` names (Intl). The API keeps UTC.
"""

from __future__ import annotations

import os
from datetime import tzinfo

from flask import Flask, current_app
from markupsafe import Markup

from console_ha.language import moment_words
from console_ha.timestamps import parse_utc_z, time_zone
from console_ha.web.request_language import current_language

ENVIRONMENT_VARIABLE = "CONSOLE_HA_TIME_ZONE"
_ZONE = "console_ha_time_zone"


def init_app(app: Flask) -> None:
    """Resolve the configured zone once (a ValueError for an unknown name) and offer `moment` to every template."""
    name = app.config.get(ENVIRONMENT_VARIABLE) or os.environ.get(ENVIRONMENT_VARIABLE, "").strip()
    app.extensions[_ZONE] = time_zone(name)
    app.add_template_global(moment)


def configured_zone() -> tzinfo | None:
    """The current app's zone; None means the machine's own."""
    zone: tzinfo | None = current_app.extensions[_ZONE]
    return zone


def moment(value: object, *, with_date: bool = True, slot: str = "") -> Markup:
    """`<time datetime="…Z" data-clock="date|time">` with the configured zone's words, in the page's language.

    No value gives "", or with a `slot` (a script fills it later, `data-slot`) an empty element. A value
    that is not a moment (a damaged line in a log) is shown as it is, escaped, never guessed at.
    """
    style = "date" if with_date else "time"
    slot_attribute = Markup(' data-slot="{}"').format(slot) if slot else Markup("")
    text = "" if value is None else str(value)
    parsed = parse_utc_z(text) if text else None
    if parsed is None and text:
        return Markup("<span{}>{}</span>").format(slot_attribute, text)
    if parsed is None:
        empty = Markup('<time datetime="" data-clock="{}"{}></time>').format(style, slot_attribute)
        return empty if slot else Markup("")
    try:
        words = moment_words(parsed, configured_zone(), current_language(), with_date=with_date)
    except OverflowError:  # a moment the zone cannot hold (year 1 or 9999, hand-edited): shown as written
        return Markup("<span{}>{}</span>").format(slot_attribute, text)
    return Markup('<time datetime="{}" data-clock="{}"{}>{}</time>').format(text, style, slot_attribute, words)
