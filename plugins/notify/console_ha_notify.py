"""Notify, a console-ha plugin: when a card waits for the household, tell its phone.

On `on_card` "waiting" it POSTs the card's title, and nothing else, to the URL the household sets on the
Console's plugins page: an ntfy topic on its own server (https://ntfy.example/console), or a Home Assistant
webhook (http://homeassistant.local:8123/api/webhook/<id>) that the household's own automation turns into a
phone notification. ntfy takes the text as the message; a webhook gets {"message": title} as JSON, which the
automation reads as `trigger.json.message`.

One POST, straight to the URL's host: no redirect is followed (a 3xx is an answer like any other that is not
2xx), no proxy is used, no header is sent beyond the request's own (Host, Content-Type, Content-Length,
Accept-Encoding) and, for a URL with a user name and password (ntfy's access control,
`https://user:password@server/topic`), Basic authentication, as curl sends them. The whole POST has 0.8 s,
inside the Console's 1 s for a hook: only the answer's status line
is read, each read given what is left of the time, so a server that answers a byte at a time is given up on
too. A failure is logged, never raised: a card waits whether or not the phone heard of it.
"""

from __future__ import annotations

import base64
import http.client
import json
import logging
import socket
import time
from typing import Any
from urllib.parse import SplitResult, unquote, urlsplit

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

# Within the Console's 1 s for a hook: the connection, each read and the POST as a whole.
TIMEOUT_SECONDS = 0.8
MAX_TITLE_CHARACTERS = 200
ANSWER_BYTES = 1024  # of the server's answer, enough for its status line


def message(card: dict[str, Any]) -> str:
    """The text sent: the card's title in the household's language when it has one, else in English."""
    title = card.get("title_in_language") or card.get("title") or ""
    return str(title)[:MAX_TITLE_CHARACTERS]


def body_for(url: SplitResult, text: str) -> tuple[bytes, str]:
    """The body and its type for `url`: JSON for a Home Assistant webhook, the text itself for ntfy (and else)."""
    if url.path.startswith("/api/webhook/"):
        return json.dumps({"message": text}).encode("utf-8"), "application/json"
    return text.encode("utf-8"), "text/plain; charset=utf-8"


def post(url: str, text: str) -> int:
    """POST `text` to `url` within TIMEOUT_SECONDS as a whole; the answer's status (never followed).

    Only the answer's status line is read, each read given what is left of the time: a server that answers a byte
    at a time is given up on as one that never answers is, and no thread is started for it.
    """
    deadline = time.monotonic() + TIMEOUT_SECONDS
    parts = urlsplit(url)
    kind = http.client.HTTPSConnection if parts.scheme == "https" else http.client.HTTPConnection
    connection = kind(parts.hostname or "", parts.port, timeout=TIMEOUT_SECONDS)
    body, content_type = body_for(parts, text)
    headers = {"Content-Type": content_type}
    if parts.username is not None or parts.password is not None:
        pair = f"{unquote(parts.username or '')}:{unquote(parts.password or '')}"
        headers["Authorization"] = "Basic " + base64.b64encode(pair.encode("utf-8")).decode("ascii")
    try:
        connection.connect()
        connection.sock.settimeout(max(deadline - time.monotonic(), 0.001))  # the sending: what is left
        connection.request("POST", (parts.path or "/") + (f"?{parts.query}" if parts.query else ""), body=body,
                           headers=headers)
        return status_of(connection.sock, deadline)
    finally:
        connection.close()


def status_of(sock: socket.socket, deadline: float) -> int:
    """The status of the answer on `sock` ("HTTP/1.1 200 OK"), read by `deadline` (on the monotonic clock)."""
    answer = b""
    while b"\r\n" not in answer:
        left = deadline - time.monotonic()
        if left <= 0:
            raise TimeoutError("no status line in time")
        sock.settimeout(left)
        chunk = sock.recv(ANSWER_BYTES)
        if not chunk:
            raise ConnectionError("closed before a status line")
        answer += chunk
        if len(answer) > ANSWER_BYTES:
            raise ValueError("no status line in its first bytes")
    version, status, *_ = answer.split(b"\r\n", 1)[0].split(b" ", 2) + [b""]
    if not version.startswith(b"HTTP/") or not status.isdigit():
        raise ValueError("not an HTTP status line")
    return int(status)


@hookimpl
def on_card(event: str, card: dict[str, Any]) -> None:
    """A card is waiting: send its title to the household's URL, once, and never raise."""
    url = settings().get("url")
    if event != "waiting" or not url or urlsplit(url).scheme not in ("http", "https"):
        return
    # Never the URL in the log: an ntfy topic's name is what lets anyone read it.
    try:
        status = post(url, message(card))
    except (OSError, ValueError, http.client.HTTPException) as err:  # refused, timed out, shut, malformed
        log.warning("notify: the waiting card could not be sent (%s)", type(err).__name__)
        return
    if not 200 <= status < 300:
        log.warning("notify: the waiting card was answered %d, not sent on", status)
