"""Who may use the Console: first-run password, login, logout, and the check before every request."""

from __future__ import annotations

import hashlib
import hmac
import logging
from dataclasses import dataclass
from typing import Literal
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    current_app,
    g,
    jsonify,
    redirect,
    render_template,
    request,
    session,
    url_for,
)
from flask_wtf.csrf import CSRFError
from werkzeug.wrappers import Response  # a redirect's type; Flask's own Response is one

from console_ha.answers.household_queue import Asker
from console_ha.errors import InvalidSettingsChange, Unauthenticated
from console_ha.language import Words
from console_ha.store.console_secrets import MAX_PASSWORD_LENGTH, MIN_PASSWORD_LENGTH, PasswordAlreadySet
from console_ha.web import services, web_services
from console_ha.web.access import Access, access_to, refusal_for
from console_ha.web.error_responses import error_response, is_api_request
from console_ha.web.login_throttle import LoginThrottled, client_key
from console_ha.web.security import MUTATING_METHODS

log = logging.getLogger(__name__)

bp = Blueprint("auth", __name__)

SESSION_KEY = "auth"
# The server-side id of the session (store/console_secrets.py keeps its hash): logout ends it for every copy.
SESSION_ID = "sid"
WRONG_PASSWORD = Words("That password is not right. Try again.")
STALE_FORM = Words("The form was out of date. Try again.")
NO_PASSWORD = Words("Type the password.")
PASSWORDS_DIFFER = Words("The two passwords are not the same. Type them again.")
LOG_IN_FIRST = Words("Log in to the Console first, or send an API token.")
# Said on the login page a logout lands on (`?logged_out=1`): a page with no word looked like a failure.
LOGGED_OUT = Words("You are logged out. Log in again to use the Console.")


@dataclass(frozen=True)
class Principal:
    """Who made the current request, and how they proved it."""

    method: Literal["session", "bearer"]
    name: str
    # Which API token (its token_id), for a bearer: names are not unique, two devices may share one.
    token_id: str | None = None
    # A bearer's patience, in seconds (issue 20): how long its MCP calls wait before they return early.
    patience: float | None = None


def current_principal() -> Principal | None:
    """The authenticated principal of the current request, if any."""
    principal: Principal | None = g.get("principal")  # set only by authenticate()
    return principal


def safe_next(value: str | None) -> str:
    """A local path to go to after login; anything that could leave the Console becomes "/"."""
    if not value or not value.startswith("/") or value.startswith(("//", "/\\")):
        return "/"
    if any(ord(c) < 0x20 or c == "\\" for c in value):
        return "/"
    parts = urlsplit(value)
    if parts.scheme or parts.netloc:
        return "/"
    return value


def _requested_path() -> str:
    query = request.query_string.decode("latin-1")
    return f"{request.path}?{query}" if query else request.path


def _idle_limit() -> float:
    return current_app.permanent_session_lifetime.total_seconds()


def _session_is_valid() -> bool:
    # The session holds a fingerprint of the password hash (a new password ends every older session)
    # and an id the server must still know (logout ended it, wherever the cookie was copied to).
    secrets = services().secrets
    stored = session.get(SESSION_KEY)
    current = secrets.password_fingerprint()
    if not (isinstance(stored, str) and current is not None and hmac.compare_digest(stored, current)):
        return False
    return secrets.session_active(session.get(SESSION_ID), _idle_limit())


def _end_session(session_id: object) -> None:
    services().secrets.end_session(session_id)
    # A token the settings page without JavaScript kept for this session goes with it (settings/held.py), at
    # logout and at a login over it alike.
    services().settings.holds.forget(session_id)
    # Its pages' long polls answer now: they ask again, are refused, and go to the login page at once, not up
    # to 25 s later; and the places they held are free (answers/page_watch.py).
    services().household_watch.end_session(session_handle(session_id))


def _start_session(fingerprint: str | None = None) -> None:
    # A fresh session (and with it a fresh CSRF token) at every login. `fingerprint` is of the hash the
    # password was checked against: one changed during the check leaves this session ended at once.
    secrets = services().secrets
    _end_session(session.get(SESSION_ID))
    session.clear()
    session.permanent = True
    session[SESSION_KEY] = fingerprint or secrets.password_fingerprint()
    session[SESSION_ID] = secrets.start_session(_idle_limit())


def authenticate() -> Response | None:
    """Before every request: who is asking (an API token or a session), held to the endpoint's access (web/access.py).

    A request that matched no route (404, 405) still needs one or the other; its error comes after.
    """
    access = access_to(request.endpoint) if request.endpoint is not None else Access.ASKING
    if access is Access.OPEN:
        return None
    svc = services()
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, credentials = header.partition(" ")
        token = svc.secrets.verify_api_token(credentials.strip()) if scheme.lower() == "bearer" else None
        if token is None:
            log.info("refused an Authorization header on %s %s", request.method, request.path)
            raise Unauthenticated("The API token is not valid.")
        if access is Access.HOUSEHOLD:
            log.info("refused API token %r on %s %s: the household's alone", token.name, request.method, request.path)
            raise refusal_for(request.endpoint)
        # Bearer requests need no CSRF token: a browser never adds this header on another site's behalf.
        g.principal = Principal("bearer", token.name, token.token_id, token.patience)
        return None
    if access is Access.PROGRAM:
        # A browser session, logged in or not, is not accepted: only an API token opens it.
        raise Unauthenticated("This endpoint takes an API token: send Authorization: Bearer <token>.")
    if _session_is_valid():
        g.principal = Principal("session", "household")
        if request.method in MUTATING_METHODS:
            web_services().csrf.protect()
        return None
    if SESSION_KEY in session:
        # Expired or ended elsewhere: what the settings page kept for it (a pasted token) goes now, not later.
        services().settings.holds.forget(session.get(SESSION_ID))
        session.clear()
    if is_api_request():
        raise Unauthenticated(LOG_IN_FIRST)
    target = "auth.login" if svc.secrets.has_password() else "auth.setup"
    next_path = _requested_path() if request.method == "GET" else None
    return redirect(url_for(target, next=next_path))


def asker_for(principal: Principal) -> Asker:
    """A program's API token as the household queue names it on a card; revoked, it gets no read."""
    token_id, secrets = principal.token_id or "", services().secrets
    # waitress says when the client hung up (cli.WAITRESS_OPTIONS); another WSGI server may not.
    disconnected = request.environ.get("waitress.client_disconnected")
    if callable(disconnected):
        return Asker(principal.name, token_id, lambda: secrets.has_api_token(token_id),
                     lambda: not disconnected())
    return Asker(principal.name, token_id, lambda: secrets.has_api_token(token_id))


def is_household() -> bool:
    """Whether the current request is the household's own browser session (not a program's API token)."""
    principal = current_principal()
    return principal is not None and principal.method == "session"


@bp.get("/health")
def health() -> Response:
    """Liveness for supervisors and tests; says nothing about the household."""
    return jsonify(status="ok")


@bp.route("/login", methods=["GET", "POST"])
def login() -> Response | tuple[str, int] | str:
    """The password form; a right password starts a session and goes on to `next`.

    Only a real password check counts towards the throttle: a form refused before it (no CSRF token, a
    foreign Origin, which security.py refused earlier, no password) costs the household nothing.
    """
    secrets = services().secrets
    next_url = safe_next(request.values.get("next"))
    if not secrets.has_password():
        return redirect(url_for("auth.setup", next=next_url))
    if request.method == "GET":
        if _session_is_valid():
            return redirect(next_url)
        notice = LOGGED_OUT if request.args.get("logged_out") == "1" else None
        return render_template("login.html", next=next_url, error=None, notice=notice)
    try:
        web_services().csrf.protect()
    except CSRFError:
        return render_template("login.html", next=next_url, error=STALE_FORM), 400
    password = request.form.get("password", "")
    if not password or len(password) > MAX_PASSWORD_LENGTH:
        # No check: nothing can match, and a megabyte "password" is not worth a slow hash.
        error = WRONG_PASSWORD if password else NO_PASSWORD
        return render_template("login.html", next=next_url, error=error), 400
    client = client_key(request.remote_addr)
    checked: list[str] = []

    def check() -> bool:
        fingerprint = secrets.verified_fingerprint(password)
        checked.extend([fingerprint] if fingerprint else [])
        return fingerprint is not None

    try:
        right = web_services().login_throttle.attempt(client, check)
    except LoginThrottled as err:
        log.warning("login from %s refused: waiting %d s after wrong passwords", client, err.retry_after)
        return error_response(err, {"Retry-After": str(err.retry_after)})
    if not right:
        log.warning("wrong Console password from %s", request.remote_addr)
        return render_template("login.html", next=next_url, error=WRONG_PASSWORD), 401
    _start_session(checked[0])
    log.info("household logged in from %s", request.remote_addr)
    return redirect(next_url)


def _setup_page(next_url: str, error: str | None = None, field: str | None = None) -> str:
    return render_template("setup.html", next=next_url, error=error, field=field, min_length=MIN_PASSWORD_LENGTH)


@bp.route("/setup", methods=["GET", "POST"])
def setup() -> Response | tuple[str, int] | str:
    """First run: set the Console password; once one exists this only leads to the login page."""
    secrets = services().secrets
    next_url = safe_next(request.values.get("next"))
    if secrets.has_password():
        return redirect(url_for("auth.login", next=next_url))
    if request.method == "GET":
        return _setup_page(next_url)
    try:
        web_services().csrf.protect()
    except CSRFError:
        return _setup_page(next_url, STALE_FORM), 400
    password = request.form.get("password", "")
    if password != request.form.get("confirm", ""):
        return _setup_page(next_url, PASSWORDS_DIFFER, "confirm"), 400
    try:
        secrets.set_password(password, only_if_unset=True)
    except InvalidSettingsChange as err:
        return _setup_page(next_url, err.message, "password"), 400
    except PasswordAlreadySet:
        return redirect(url_for("auth.login", next=next_url))
    _start_session()
    return redirect(next_url)


def session_handle(session_id: object = None) -> str:
    """This browser session (or the one of `session_id`) as the long polls count it: a digest of its id, which
    itself stays in the cookie."""
    if session_id is None:
        session_id = session.get(SESSION_ID, "")
    return hashlib.sha256(str(session_id).encode("utf-8")).hexdigest()


@bp.post("/logout")
def logout() -> Response:
    """End the session on the server too, so a copy of its cookie opens nothing (CSRF was checked)."""
    _end_session(session.get(SESSION_ID))
    session.clear()
    return redirect(url_for("auth.login", logged_out=1))


def init_app(app: Flask) -> None:
    """Install the authentication check and the template helpers."""
    app.before_request(authenticate)
    app.context_processor(lambda: {"principal": current_principal()})
