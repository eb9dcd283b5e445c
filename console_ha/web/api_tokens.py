"""The API tokens page: the household sees which programs hold a token, when each was last used, and revokes one.

Only a browser session may use it (web/access.py: a program with an API token must not list or revoke
tokens, its own or another's); changes carry the session's CSRF token, checked in auth.authenticate.
"""

from __future__ import annotations

import logging
import re

from flask import Blueprint, flash, redirect, render_template, request, url_for
from werkzeug.wrappers import Response

from console_ha.errors import InvalidSettingsChange
from console_ha.store.console_secrets import MAX_PATIENCE_SECONDS, MIN_PATIENCE_SECONDS, ApiToken
from console_ha.web import services

log = logging.getLogger(__name__)

bp = Blueprint("api_tokens", __name__)

_TOKEN_ID = re.compile(r"^[0-9a-f]{16}$")


@bp.get("/settings/api-tokens")
def page() -> str:
    """Every API token by name, when it was made and last used, each with its Revoke button."""
    tokens: list[ApiToken] = sorted(services().secrets.api_tokens(), key=lambda t: (t.name.lower(), t.created))
    return render_template("api_tokens.html", tokens=tokens, min_patience=MIN_PATIENCE_SECONDS,
                           max_patience=MAX_PATIENCE_SECONDS)


@bp.post("/settings/api-tokens/<token_id>/revoke")
def revoke(token_id: str) -> Response:
    """Revoke one token; the program holding it is refused from its next request on."""
    gone = services().secrets.revoke_api_token(token_id) if _TOKEN_ID.match(token_id) else None
    if gone is None:
        flash("That token was already revoked.", "error")
    else:
        log.info("the household revoked the API token %r on the page", gone.name)
        flash(f"Revoked the token “{gone.name}”. The program using it can no longer reach the Console.")
    return redirect(url_for("api_tokens.page"), 303)


@bp.post("/settings/api-tokens/<token_id>/patience")
def set_patience(token_id: str) -> Response:
    """Change how long one token's MCP calls wait for the household before they return and ask to call again."""
    try:
        changed = services().secrets.set_api_token_patience(token_id, request.form.get("patience")) \
            if _TOKEN_ID.match(token_id) else None
    except InvalidSettingsChange as err:
        flash(err.message, "error")
        return redirect(url_for("api_tokens.page"), 303)
    if changed is None:
        flash("That token was revoked.", "error")
    else:
        flash(f"The token “{changed.name}” now waits up to {changed.patience} seconds for your answer; then its "
              "program is told to call again for it.")
    return redirect(url_for("api_tokens.page"), 303)
