"""Who may use the Console: first-run password, login, logout, and the check before every request."""

from __future__ import annotations

import functools
import hmac
import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, Literal
from urllib.parse import urlsplit

from flask import (
    Blueprint,
    Flask,
    Response,
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

from ..console_secrets import PasswordAlreadySet
from ..errors import InvalidConfig
from . import services
from .errors import Unauthenticated, is_api_request

log = logging.getLogger(__name__)

bp = Blueprint("auth", __name__)

# The only endpoints anyone may reach without logging in. A test walks the URL map against this set.
OPEN_ENDPOINTS = frozenset({"auth.login", "auth.setup", "auth.health", "static"})
MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
SESSION_KEY = "auth"
WRONG_PASSWORD = "That password is not right. Try again."
STALE_FORM = "The form was out of date. Try again."


@dataclass(frozen=True)
class Principal:
    """Who made the current request, and how they proved it."""

    method: Literal["session", "bearer"]
    name: str


def current_principal() -> Principal | None:
    """The authenticated principal of the current request, if any."""
    return g.get("principal")


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


def _session_is_valid() -> bool:
    # The session holds a fingerprint of the password hash: a new password ends every older session.
    stored = session.get(SESSION_KEY)
    current = services().secrets.password_fingerprint()
    return isinstance(stored, str) and current is not None and hmac.compare_digest(stored, current)


def _start_session() -> None:
    # A fresh session (and with it a fresh CSRF token) at every login.
    session.clear()
    session.permanent = True
    session[SESSION_KEY] = services().secrets.password_fingerprint()


def authenticate() -> Response | None:
    """Before every request: let open endpoints through, else require an API token or a session."""
    if request.endpoint in OPEN_ENDPOINTS:
        return None
    svc = services()
    header = request.headers.get("Authorization")
    if header is not None:
        scheme, _, credentials = header.partition(" ")
        token = svc.secrets.verify_api_token(credentials.strip()) if scheme.lower() == "bearer" else None
        if token is None:
            log.info("refused an Authorization header on %s %s", request.method, request.path)
            raise Unauthenticated("The API token is not valid.")
        # Bearer requests need no CSRF token: a browser never adds this header on another site's behalf.
        g.principal = Principal("bearer", token.name)
        return None
    if _session_is_valid():
        g.principal = Principal("session", "household")
        if request.method in MUTATING_METHODS:
            svc.csrf.protect()
        return None
    if SESSION_KEY in session:
        session.clear()
    if is_api_request():
        raise Unauthenticated("Log in to the Console first, or send an API token.")
    target = "auth.login" if svc.secrets.has_password() else "auth.setup"
    next_path = _requested_path() if request.method == "GET" else None
    return redirect(url_for(target, next=next_path))


@bp.get("/health")
def health() -> Response:
    """Liveness for supervisors and tests; says nothing about the household."""
    return jsonify(status="ok")


@bp.route("/login", methods=["GET", "POST"])
def login() -> Response | tuple[str, int] | str:
    """The password form; a right password starts a session and goes on to `next`."""
    secrets = services().secrets
    next_url = safe_next(request.values.get("next"))
    if not secrets.has_password():
        return redirect(url_for("auth.setup", next=next_url))
    if request.method == "GET":
        if _session_is_valid():
            return redirect(next_url)
        return render_template("login.html", next=next_url, error=None)
    try:
        services().csrf.protect()
    except CSRFError:
        return render_template("login.html", next=next_url, error=STALE_FORM), 400
    if not secrets.verify_password(request.form.get("password", "")):
        log.warning("wrong Console password from %s", request.remote_addr)
        return render_template("login.html", next=next_url, error=WRONG_PASSWORD), 401
    _start_session()
    log.info("household logged in from %s", request.remote_addr)
    return redirect(next_url)


@bp.route("/setup", methods=["GET", "POST"])
def setup() -> Response | tuple[str, int] | str:
    """First run: set the Console password; once one exists this only leads to the login page."""
    secrets = services().secrets
    next_url = safe_next(request.values.get("next"))
    if secrets.has_password():
        return redirect(url_for("auth.login", next=next_url))
    if request.method == "GET":
        return render_template("setup.html", next=next_url, error=None, field=None)
    try:
        services().csrf.protect()
    except CSRFError:
        return render_template("setup.html", next=next_url, error=STALE_FORM, field=None), 400
    password = request.form.get("password", "")
    if password != request.form.get("confirm", ""):
        error = "The two passwords are not the same. Type them again."
        return render_template("setup.html", next=next_url, error=error, field="confirm"), 400
    try:
        secrets.set_password(password, only_if_unset=True)
    except InvalidConfig as err:
        return render_template("setup.html", next=next_url, error=err.message, field="password"), 400
    except PasswordAlreadySet:
        return redirect(url_for("auth.login", next=next_url))
    _start_session()
    return redirect(next_url)


@bp.post("/logout")
def logout() -> Response:
    """End the session (its CSRF token was checked before this ran)."""
    session.clear()
    return redirect(url_for("auth.login"))


def _one_attempt_at_a_time(view: Callable[..., Any]) -> Callable[..., Any]:
    """Password attempts run one after another, so each sees the failures counted before it.

    The limiter checks before the view and counts a failure after it: in parallel, forty guesses would
    all pass the check before the first was counted. A household logs in rarely; waiting costs nothing.
    """
    attempts = threading.Lock()

    @functools.wraps(view)
    def serialised(*args: Any, **kwargs: Any) -> Any:
        if request.method != "POST":
            return view(*args, **kwargs)
        with attempts:
            return view(*args, **kwargs)

    return serialised


def init_app(app: Flask) -> None:
    """Install the authentication check, the login rate limit and the template helpers."""
    app.before_request(authenticate)
    limiter = app.extensions["console_ha"].limiter
    # Only failed attempts count (a right password redirects); past the limit even a right one waits.
    limited = limiter.limit(
        lambda: current_app.config["CONSOLE_HA_LOGIN_LIMIT"],
        methods=["POST"],
        deduct_when=lambda response: response.status_code != 302,
    )
    app.view_functions["auth.login"] = _one_attempt_at_a_time(limited(app.view_functions["auth.login"]))
    app.context_processor(lambda: {"principal": current_principal()})
