"""Notify, a console-ha plugin: when a card waits for the household, tell its phone.

On `on_card` "waiting" it POSTs the card's title, and nothing else, to the URL the household sets on the
Console's plugins page: an ntfy topic on its own server (https://ntfy.example/console), or a Home Assistant
webhook (http://homeassistant.local:8123/api/webhook/<id>) that the household's own automation turns into a
phone notification. ntfy takes the text as the message; a webhook gets {"message": title} as JSON, which the
automation reads as `trigger.json.message`. A short timeout, and a failure is logged, never raised: a card
waits whether or not the phone heard of it.
"""

from __future__ import annotations

import base64
import json
import logging
import urllib.request
from typing import Any
from urllib.parse import unquote, urlsplit, urlunsplit

from console_ha.hooks import hookimpl, settings

log = logging.getLogger(__name__)

CONSOLE_HA_SETTINGS = [
    {"name": "url", "type": "url", "label": {
        "en": "Send to (an ntfy topic or a Home Assistant webhook)",
        "fr": "Envoyer à (un sujet ntfy ou un webhook Home Assistant)",
        "de": "Senden an (ein ntfy-Thema oder ein Home-Assistant-Webhook)",
        "es": "Enviar a (un tema de ntfy o un webhook de Home Assistant)",
        "nl": "Versturen naar (een ntfy-onderwerp of een Home Assistant-webhook)",
        "zh-Hans": "发送到(ntfy 主题或 Home Assistant webhook)"}},
]

# Within the Console's 1 s for a hook: the connection and each read are bounded apart.
TIMEOUT_SECONDS = 0.8
MAX_TITLE_CHARACTERS = 200


def message(card: dict[str, Any]) -> str:
    """The text sent: the card's title in the household's language when it has one, else in English."""
    title = card.get("title_in_language") or card.get("title") or ""
    return str(title)[:MAX_TITLE_CHARACTERS]


def request_for(url: str, text: str) -> urllib.request.Request:
    """The POST for `url`: JSON for a Home Assistant webhook, the text itself for ntfy (and anything else).

    A user name and password in the URL (ntfy's access control: `https://user:password@server/topic`) are sent
    as Basic authentication, as curl sends them; urllib would take them for part of the host's name.
    """
    parts = urlsplit(url)
    headers = {"Content-Type": "text/plain; charset=utf-8"}
    if parts.username is not None or parts.password is not None:
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
        parts = parts._replace(netloc=parts.netloc.rpartition("@")[2])
    body = text.encode("utf-8")
    if parts.path.startswith("/api/webhook/"):
        body, headers["Content-Type"] = json.dumps({"message": text}).encode("utf-8"), "application/json"
    return urllib.request.Request(urlunsplit(parts), data=body, method="POST", headers=headers)


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Follow no redirect: urllib would send the request's headers (the household's password too) to whatever
    server the answer names. A 3xx is then an HTTPError, logged as any failure."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


_OPENER = urllib.request.build_opener(_NoRedirect())


@hookimpl
def on_card(event: str, card: dict[str, Any]) -> None:
    """A card is waiting: send its title to the household's URL, once, and never raise."""
    url = settings().get("url")
    if event != "waiting" or not url or urlsplit(url).scheme not in ("http", "https"):
        return
    try:
        # Done once the server has answered (a 2xx: HTTPError otherwise); its body is never read, so a server
        # slow to send it costs no more of the hook's second.
        _OPENER.open(request_for(url, message(card)), timeout=TIMEOUT_SECONDS).close()
    except (OSError, ValueError) as err:  # URLError, HTTPError, a timeout, a refused connection: all OSError
        # Never the URL: an ntfy topic's name is what lets anyone read it.
        log.warning("notify: the waiting card could not be sent (%s)", type(err).__name__)
