"""Household confirmations: the cards of reads asked for by MCP clients, and the household's answers.

Only a logged-in browser session may answer (its CSRF token was checked before the view); an API
token gets 403 FORBIDDEN from the access table (web/access.py), so a program can never approve its own reads.
"""

from __future__ import annotations

from flask import Blueprint, Response, current_app, flash, jsonify, redirect, render_template, request, session, url_for
from flask.typing import ResponseReturnValue

from console_ha.answers.household_queue import HouseholdQueue
from console_ha.answers.page_watch import WATCH_SECONDS
from console_ha.errors import ConsoleHaError, InvalidRequest
from console_ha.language import Words
from console_ha.web import services
from console_ha.web.auth import current_principal, is_household, session_handle
from console_ha.web.bodies import json_object
from console_ha.web.error_responses import status_for
from console_ha.web.request_language import current_language

bp = Blueprint("confirmations", __name__)

MAX_TOKEN_CHARS = 256
POLL_SECONDS = 3
# Without JavaScript the page reloads itself this often (a <meta> refresh inside <noscript>), so a card that
# arrives is seen without a reload; long enough to read a card and the line an answer leaves.
NOSCRIPT_REFRESH_SECONDS = 10
# The household can stop that refresh and start it again (?refresh=off / on, kept for the session): a page that
# reloads itself on a timer loses a screen reader's place, and WCAG 2.2.1 (level A) asks that such a time
# limit can be turned off.
REFRESH_CHOICE = "confirmations_refresh"


def household_queue() -> HouseholdQueue:
    """The reads waiting for the household: the Console's queue, which MCP clients fill and this page answers."""
    return services().household


def _token(value: object) -> str:
    if not isinstance(value, str) or not 0 < len(value) <= MAX_TOKEN_CHARS:
        raise InvalidRequest(Words("That is not a confirmation token."), field="token")
    return value


@bp.get("/api/v1/confirmations")
def pending() -> Response:
    """The cards waiting now: all of them for the household; a program sees only its own."""
    principal = current_principal()
    if principal is not None and principal.method == "bearer":
        own = household_queue().pending(principal.name, principal.token_id or "")
        return jsonify(pending=[waiting.to_program_dict() for waiting in own])
    return jsonify(pending=[waiting.to_dict() for waiting in household_queue().pending()])


@bp.post("/api/v1/confirmations/<token>")
def answer(token: str) -> Response:
    """The household's answer to one card, as `{"approve": true|false}`."""
    approve = json_object().get("approve")
    if not isinstance(approve, bool):
        raise InvalidRequest('Send {"approve": true} or {"approve": false}.', field="approve")
    answered = household_queue().answer(_token(token), approve)
    # `message`: what happens now, in the household's words (the page shows it as it is).
    return jsonify(status=answered.status, message=answered.message)


@bp.get("/api/v1/confirmations/watch")
def watch() -> Response:
    """Every open page's long poll: answered as soon as the waiting cards differ from version `seen`, else in ~25 s.

    The household's session only (web/access.py); bounded per session and overall (answers/page_watch.py).
    `page` and `load` (the tab's and the page load's own random ids) let a newer question of a tab replace its older.
    """
    args = request.args
    seconds = float(current_app.config.get("CONSOLE_HA_WATCH_SECONDS", WATCH_SECONDS))
    answer = services().household_watch.wait(args.get("seen", "")[:64], session_handle(), seconds,
                                              page=args.get("page", "")[:64], load=args.get("load", "")[:64])
    return jsonify(answer.to_dict())


@bp.post("/api/v1/confirmations/watch/leave")
def leave_watch() -> Response:
    """A page going away (its `pagehide` beacon, form-encoded with the CSRF token): its long poll ends now."""
    form = request.form
    services().household_watch.leave(session_handle(), form.get("page", "")[:64], form.get("load", "")[:64])
    return Response(status=204)


@bp.get("/confirmations")
def page() -> str:
    """The household's page of waiting cards; it updates itself, and its forms work without JavaScript."""
    # It lists every program's cards: a program's API token sees only its own, through the API.
    choice = request.args.get("refresh")
    if choice in ("on", "off"):
        session[REFRESH_CHOICE] = choice == "on"
    return _render()


def shown(words: str) -> str:
    """`words` in the request's language (a plain str as it is)."""
    return words.in_language(current_language()) if isinstance(words, Words) else words


@bp.post("/confirmations")
def page_post() -> ResponseReturnValue:
    """A card's form posted without JavaScript: answer it, then show the page again."""
    form = request.form
    approve = form.get("decision") == "approve"
    try:
        answered = household_queue().answer(_token(form.get("token")), approve)
    except ConsoleHaError as err:
        return _render(error=err), status_for(err.code)
    # The session keeps a flashed message as JSON, where a Words is its English text: rendered here first.
    flash(shown(answered.message))
    return redirect(url_for(".page"), code=303)


def _render(*, error: ConsoleHaError | None = None) -> str:
    return render_template(
        "confirmations.html",
        pending=[waiting.to_dict() for waiting in household_queue().pending()],
        error=error,
        poll_seconds=POLL_SECONDS,
        refresh_seconds=NOSCRIPT_REFRESH_SECONDS,
        refreshing=session.get(REFRESH_CHOICE, True) is not False,
    )


@bp.app_context_processor
def _waiting_count() -> dict[str, object]:
    """How many cards wait, for the nav of every page the household sees."""
    if not is_household():
        return {"waiting_count": None}
    now = services().household_watch.now()
    # The version and the cards' ids let the page's first long poll wait for what is new to it.
    return {"waiting_count": len(now.cards), "waiting_version": now.version,
            "waiting_ids": " ".join(card["id"] for card in now.cards)}
