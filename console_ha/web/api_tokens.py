"""The API tokens page: the household makes a token for a program, sees which programs hold one and when each
was last used, and revokes one after saying yes a second time.

Only a browser session may use it (web/access.py: a program with an API token must not make, list or revoke
tokens, its own or another's); changes carry the session's CSRF token, checked in auth.authenticate.

A new token is shown once. Making it is a POST; the page that shows it is the GET the POST redirects to, so a
reload asks nothing again and shows the token no more. Between the two the token waits in memory
(`NewTokens`), for that browser session only, and is gone at the page's first GET or after `SHOWN_FOR_SECONDS`;
it is never logged or written down, the file keeps only its hash. Only that GET takes it: a HEAD (a link
checker, a proxy, a browser's preflight of the redirect) gets the page's headers and leaves it waiting.
"""

from __future__ import annotations

import logging
import re
import threading
import time
from collections import OrderedDict
from dataclasses import dataclass

from flask import Blueprint, abort, current_app, flash, redirect, render_template, request, url_for
from flask.typing import ResponseReturnValue
from werkzeug.wrappers import Response

from console_ha.errors import InvalidSettingsChange
from console_ha.language import Words
from console_ha.mcp.host_configs import HostConfiguration, host_configurations
from console_ha.secret import Secret
from console_ha.store.console_secrets import (
    DEFAULT_PATIENCE_SECONDS,
    MAX_PATIENCE_SECONDS,
    MAX_TOKEN_NAME_LENGTH,
    MIN_PATIENCE_SECONDS,
    ApiToken,
    check_token_name,
)
from console_ha.web import services
from console_ha.web.auth import session_handle
from console_ha.web.request_language import current_language

log = logging.getLogger(__name__)

bp = Blueprint("api_tokens", __name__)

_TOKEN_ID = re.compile(r"^[0-9a-f]{16}$")
# How long a made token waits for the page that shows it (the redirect follows at once), and how many
# sessions' new tokens may wait at once (one each).
SHOWN_FOR_SECONDS = 120.0
MAX_WAITING_TO_BE_SHOWN = 16


@dataclass(frozen=True)
class NewToken:
    """A token just made, on its way to the one page that shows it."""

    name: str
    token: Secret
    made: float


class NewTokens:
    """New tokens between the POST that made them and the GET that shows them, one per browser session."""

    def __init__(self) -> None:
        self._waiting: OrderedDict[str, NewToken] = OrderedDict()
        self._lock = threading.Lock()

    def keep(self, session_key: str, new: NewToken) -> None:
        """Hold `new` for `session_key`'s next look; the oldest goes past the bound."""
        with self._lock:
            self._waiting.pop(session_key, None)
            self._waiting[session_key] = new
            while len(self._waiting) > MAX_WAITING_TO_BE_SHOWN:
                self._waiting.popitem(last=False)

    def take(self, session_key: str) -> NewToken | None:
        """The token made for this session, once: it is forgotten as it is handed out, or when too old."""
        with self._lock:
            new = self._waiting.pop(session_key, None)
        if new is None or time.monotonic() - new.made > SHOWN_FOR_SECONDS:
            return None
        return new

    def peek(self, session_key: str) -> NewToken | None:
        """The token made for this session, left waiting for the GET that takes it."""
        with self._lock:
            new = self._waiting.get(session_key)
        if new is None or time.monotonic() - new.made > SHOWN_FOR_SECONDS:
            return None
        return new


def _new_tokens() -> NewTokens:
    # One per app; setdefault makes it once even when two first requests race.
    kept: NewTokens = current_app.extensions.setdefault("console_ha_new_tokens", NewTokens())
    return kept


def _session_key() -> str:
    # The browser session's id, kept only as a digest (auth's, as the long polls count sessions): another
    # session never sees this session's token.
    return session_handle()


def _tokens() -> list[ApiToken]:
    return sorted(services().secrets.api_tokens(), key=lambda t: (t.name.lower(), t.created))


def _shown_now() -> NewToken | None:
    # Flask answers a HEAD with the GET's view; only a GET hands the token out. A HEAD renders it too, so
    # its headers (Content-Length) are the GET's, and Werkzeug sends no body with a HEAD.
    kept = _new_tokens()
    return kept.take(_session_key()) if request.method == "GET" else kept.peek(_session_key())


def _render(*, error: InvalidSettingsChange | None = None, typed_name: str = "") -> str:
    new = _shown_now() if error is None else None
    configurations: list[HostConfiguration] = []
    if new is not None:
        # The Console's address as this browser reached it: the host names it answers to are checked already.
        configurations = host_configurations(request.host_url, new.token)
    return render_template(
        "api_tokens.html", tokens=_tokens(), new_token=new, configurations=configurations, error=error,
        typed_name=typed_name, max_name_length=MAX_TOKEN_NAME_LENGTH,
        min_patience=MIN_PATIENCE_SECONDS, max_patience=MAX_PATIENCE_SECONDS,
        # A token made on the page starts with the default patience; its Patience setting in the list changes it.
        new_token_patience=DEFAULT_PATIENCE_SECONDS if new is not None else None,
    )


@bp.get("/settings/api-tokens")
def page() -> str:
    """Every API token by name, when it was made and last used, each with its Revoke button; a new one, once."""
    return _render()


@bp.post("/settings/api-tokens")
def create() -> ResponseReturnValue:
    """Make a token named by the form's `name`; the page it redirects to shows it, once."""
    typed = request.form.get("name", "")
    try:
        token = services().secrets.create_api_token(typed)
    except InvalidSettingsChange as err:
        return _render(error=err, typed_name=typed[:MAX_TOKEN_NAME_LENGTH * 2]), 400
    name = check_token_name(typed)  # the name as the store kept it (spaces folded)
    _new_tokens().keep(_session_key(), NewToken(name, Secret(token), time.monotonic()))
    log.info("the household made the API token %r on the page", name)
    return redirect(url_for("api_tokens.page"), 303)


def _token_or_404(token_id: str) -> ApiToken | None:
    if not _TOKEN_ID.match(token_id):
        abort(404)
    return next((t for t in services().secrets.api_tokens() if t.token_id == token_id), None)


def _tell(words: str, category: str = "message") -> None:
    """Flash `words` in the request's language: the session keeps a flashed message as plain text."""
    flash(words.in_language(current_language()) if isinstance(words, Words) else words, category)


@bp.get("/settings/api-tokens/<token_id>/revoke")
def confirm_revoke(token_id: str) -> ResponseReturnValue:
    """The question before a revoke, as a page of its own (the list's Revoke without JavaScript comes here)."""
    token = _token_or_404(token_id)
    if token is None:
        _tell(Words("That token was already revoked."), "error")
        return redirect(url_for("api_tokens.page"), 303)
    return render_template("api_token_revoke.html", token=token)


@bp.post("/settings/api-tokens/<token_id>/revoke")
def revoke(token_id: str) -> Response:
    """Revoke one token; the program holding it is refused from its next request on."""
    gone = services().secrets.revoke_api_token(token_id) if _TOKEN_ID.match(token_id) else None
    if gone is None:
        _tell(Words("That token was already revoked."), "error")
    else:
        log.info("the household revoked the API token %r on the page", gone.name)
        _tell(Words("Revoked the token “{name}”. The program using it can no longer reach the Console.",
                    name=gone.name))
    return redirect(url_for("api_tokens.page"), 303)


@bp.post("/settings/api-tokens/<token_id>/patience")
def set_patience(token_id: str) -> Response:
    """Change how long one token's MCP calls wait for the household before they return and ask to call again."""
    try:
        changed = services().secrets.set_api_token_patience(token_id, request.form.get("patience")) \
            if _TOKEN_ID.match(token_id) else None
    except InvalidSettingsChange as err:
        _tell(err.message, "error")
        return redirect(url_for("api_tokens.page"), 303)
    if changed is None:
        _tell(Words("That token was revoked."), "error")
    else:
        _tell(Words.counted("The token “{name}” now waits up to {count} second for your answer; then its "
                            "program is told to call again for it.",
                            "The token “{name}” now waits up to {count} seconds for your answer; then its "
                            "program is told to call again for it.", changed.patience, name=changed.name))
    return redirect(url_for("api_tokens.page"), 303)
