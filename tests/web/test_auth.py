"""Authentication: who may reach what, sessions, CSRF, API tokens, first run and lockout."""

from __future__ import annotations

import re
import stat

import pytest
from flask import Flask
from flask.sessions import SecureCookieSessionInterface
from flask.testing import FlaskClient
from werkzeug.test import Cookie

from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from console_ha.web.access import ACCESS, Access
from console_ha.web.auth import safe_next

from .conftest import (
    API,
    FAST_HASH,
    MESSAGE_API,
    PASSWORD,
    PROGRAM_API,
    TEST_CONFIG,
    csrf_from,
    log_in,
    page_csrf,
)
from .live import Browser, served

_CONVERTER = re.compile(r"<(?:[^:<>]+:)?([^<>]+)>")


def _every_route(app: Flask) -> list[tuple[str, str, str]]:
    """(endpoint, method, url) for every rule and method in the URL map, with placeholder arguments."""
    routes = []
    for rule in app.url_map.iter_rules():
        url = _CONVERTER.sub("x", rule.rule)
        for method in sorted(rule.methods or ()):
            routes.append((rule.endpoint, method, url))
    return routes


OPEN_ENDPOINTS = frozenset(endpoint for endpoint, access in ACCESS.items() if access is Access.OPEN)


def test_the_open_endpoints_are_health_login_first_run_and_static(app: Flask) -> None:
    """The open set is exactly these, and each is a real route: adding one must be a decision."""
    endpoints = {rule.endpoint for rule in app.url_map.iter_rules()}
    assert OPEN_ENDPOINTS == {"auth.health", "auth.login", "auth.setup", "static"}
    assert OPEN_ENDPOINTS <= endpoints


@pytest.mark.parametrize("has_password", [True, False], ids=["password-set", "first-run"])
def test_every_other_route_refuses_an_unauthenticated_request(
    app: Flask, client: FlaskClient, console_secrets: ConsoleSecrets, has_password: bool
) -> None:
    """Walk the URL map: API paths answer 401 UNAUTHENTICATED, pages redirect to login (or first run)."""
    if has_password:
        console_secrets.set_password(PASSWORD, method=FAST_HASH)
    entry = "/login" if has_password else "/setup"
    checked = 0
    routes = _every_route(app) + [("(none)", "GET", "/api/v1/no-such-thing"), ("(none)", "GET", "/no-such-page")]
    for endpoint, method, url in routes:
        if endpoint in OPEN_ENDPOINTS:
            continue
        response = client.open(url, method=method)
        where = f"{method} {url} ({endpoint})"
        if url.startswith("/api/") or url == "/mcp":  # the MCP endpoint answers 401 as the contract says
            assert response.status_code == 401, where
            if method != "HEAD":  # a HEAD answer has no body
                assert response.get_json()["error"]["code"] == "UNAUTHENTICATED", where
        else:
            assert response.status_code == 302, where
            assert response.location.startswith(entry), where
        checked += 1
    assert checked >= 10


def test_health_answers_without_login(client: FlaskClient) -> None:
    """GET /health is open and says only that the Console is up."""
    response = client.get("/health")
    assert response.status_code == 200
    assert response.get_json() == {"status": "ok"}


def test_static_files_need_no_login(client: FlaskClient) -> None:
    """The stylesheet loads on the login page before anyone has logged in."""
    response = client.get("/static/console.css")
    assert response.status_code == 200
    response.close()


def test_a_page_redirect_remembers_where_the_household_was_going(client: FlaskClient, password: str) -> None:
    """The login redirect carries `next`, and logging in goes there."""
    response = client.get("/settings/home-assistant?x=1")
    assert response.location == "/login?next=/settings/home-assistant?x%3D1"
    token = csrf_from(client.get(response.location).get_data(as_text=True))
    answer = client.post("/login", data={"password": password, "csrf_token": token,
                                         "next": "/settings/home-assistant?x=1"})
    assert answer.status_code == 302
    assert answer.location == "/settings/home-assistant?x=1"


@pytest.mark.parametrize(
    "value, expected",
    [
        ("/settings/home-assistant", "/settings/home-assistant"),
        ("//evil.example/", "/"),
        ("/\\evil.example", "/"),
        ("https://evil.example/", "/"),
        ("javascript:alert(1)", "/"),
        ("", "/"),
        (None, "/"),
    ],
)
def test_next_only_ever_leads_inside_the_console(value: str | None, expected: str) -> None:
    """An open redirect through ?next= is not possible."""
    assert safe_next(value) == expected


def test_login_page_has_a_password_field_and_a_log_in_button(client: FlaskClient, password: str) -> None:
    """The contract's accessible names: a field labelled Password and a button Log in."""
    html = client.get("/login").get_data(as_text=True)
    assert '<label for="password">Password</label>' in html
    assert 'id="password" name="password"' in html and 'type="password"' in html
    assert ">Log in</button>" in html
    assert "<script" not in html and "style=" not in html


def test_a_wrong_password_is_refused_and_a_right_one_starts_a_session(client: FlaskClient, password: str) -> None:
    """Wrong: 401 and the form again with a message. Right: a session cookie, HttpOnly and SameSite=Lax."""
    wrong = log_in(client, "not the password")
    assert wrong.status_code == 401
    assert "That password is not right" in wrong.get_data(as_text=True)
    assert client.get(API).status_code == 401

    right = log_in(client, password)
    assert right.status_code == 302
    cookie = right.headers["Set-Cookie"]
    assert cookie.startswith("console_ha_session=")
    assert "HttpOnly" in cookie and "SameSite=Lax" in cookie and "Secure" not in cookie
    assert client.get(API).status_code == 200


def test_the_session_cookie_is_secure_when_configured(data_dir: DataDir, password: str) -> None:
    """Behind https the cookie is marked Secure (console-ha serve --secure-cookies)."""
    app = create_app(data_dir, {**TEST_CONFIG, "SESSION_COOKIE_SECURE": True})
    client = app.test_client()
    response = log_in(client, password)
    assert "Secure" in response.headers["Set-Cookie"]


def test_a_login_form_without_its_csrf_token_is_refused(client: FlaskClient, password: str) -> None:
    """Login CSRF: a form posted from elsewhere cannot log the browser in."""
    response = client.post("/login", data={"password": password})
    assert response.status_code == 400
    assert client.get(API).status_code == 401


def test_repeated_wrong_passwords_lock_the_client_out(client: FlaskClient, password: str) -> None:
    """After five wrong passwords a minute even the right one waits: 429 RATE_LIMITED with Retry-After."""
    for _ in range(5):
        assert log_in(client, "guess").status_code == 401
    locked = log_in(client, password)
    assert locked.status_code == 429
    assert "RATE_LIMITED" in locked.get_data(as_text=True)
    assert "Retry-After" in locked.headers
    assert client.get(API).status_code == 401


def test_parallel_guesses_are_counted_before_the_next_is_tried(app, client: FlaskClient, password: str) -> None:
    """Forty guesses at once after one failure: four more are judged, the other 36 are refused at once."""
    import threading

    log_in(client, "warm-up")  # the form's CSRF token and one counted failure
    clients = [app.test_client() for _ in range(40)]
    tokens = [csrf_from(c.get("/login").get_data(as_text=True)) for c in clients]
    statuses: list[int] = []
    start = threading.Barrier(len(clients))

    def guess(c: FlaskClient, token: str) -> None:
        start.wait()
        statuses.append(c.post("/login", data={"password": "guess", "csrf_token": token}).status_code)

    threads = [threading.Thread(target=guess, args=pair) for pair in zip(clients, tokens, strict=True)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert statuses.count(401) == 4 and statuses.count(429) == 36


def test_successful_logins_do_not_count_towards_the_lockout(client: FlaskClient, password: str) -> None:
    """Only failures are counted: a household logging in often is never locked out."""
    for _ in range(8):
        assert log_in(client, password).status_code == 302
        client.delete_cookie("console_ha_session")


def test_first_run_leads_to_setup_which_sets_the_password_and_logs_in(
    client: FlaskClient, console_secrets: ConsoleSecrets
) -> None:
    """No password: login redirects to /setup; setting one there starts a session; then /setup is closed."""
    assert client.get("/login").location.startswith("/setup")
    page = client.get("/setup")
    assert page.status_code == 200
    html = page.get_data(as_text=True)
    assert '<label for="new-password">New password</label>' in html
    # "Password" matches only the first field, even without exact matching.
    assert '<label for="confirm-password">Type it again</label>' in html
    token = csrf_from(html)
    response = client.post("/setup", data={"password": "a long enough one", "confirm": "a long enough one",
                                            "csrf_token": token})
    assert response.status_code == 302
    assert console_secrets.verified_fingerprint("a long enough one") is not None
    stored = console_secrets.password_hash()
    assert stored is not None and stored.startswith("scrypt:")
    assert client.get(API).status_code == 200
    assert client.get("/setup").location.startswith("/login")


@pytest.mark.parametrize(
    "password, confirm, message",
    [("short", "short", "at least 8 characters"), ("a long enough one", "a different one", "not the same")],
)
def test_setup_refuses_a_weak_or_mistyped_password(
    client: FlaskClient, console_secrets: ConsoleSecrets, password: str, confirm: str, message: str
) -> None:
    """The form comes back with the reason, and no password is stored."""
    token = csrf_from(client.get("/setup").get_data(as_text=True))
    response = client.post("/setup", data={"password": password, "confirm": confirm, "csrf_token": token})
    assert response.status_code == 400
    assert message in response.get_data(as_text=True)
    assert not console_secrets.has_password()


def test_setup_cannot_replace_an_existing_password(client: FlaskClient, password: str,
                                                   console_secrets: ConsoleSecrets) -> None:
    """Once a password exists, POST /setup changes nothing."""
    before = console_secrets.password_hash()
    response = client.post("/setup", data={"password": "an attacker's one", "confirm": "an attacker's one"})
    assert response.status_code == 302
    assert console_secrets.password_hash() == before


def test_a_session_post_without_the_csrf_token_is_refused(logged_in: FlaskClient) -> None:
    """A logged-in browser's mutating request without X-CSRFToken: 400 CSRF_INVALID, nothing saved."""
    response = logged_in.post(API, json={"enabled": True})
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "CSRF_INVALID"
    assert error["reason"] == "The CSRF token is missing."
    assert logged_in.get(API).get_json()["enabled"] is False


def test_a_session_post_with_a_forged_csrf_token_is_refused(logged_in: FlaskClient) -> None:
    """A token that is not this session's own does not pass."""
    response = logged_in.post(API, json={"enabled": True}, headers={"X-CSRFToken": "forged.token.value"})
    assert response.status_code == 400
    assert response.get_json()["error"]["code"] == "CSRF_INVALID"


def test_a_session_post_with_the_pages_csrf_token_is_accepted(household: FlaskClient) -> None:
    """The header the page's fetch() sends (from the meta tag) lets the change through."""
    response = household.post(API, json={"enabled": True})
    assert response.status_code == 200
    assert response.get_json()["enabled"] is True


def test_a_bearer_post_needs_no_csrf_token(bearer: FlaskClient) -> None:
    """API token requests are exempt by how they authenticate, not by route: a message passes the guard.

    No model is set up, so the answer is the conversation's own 503, not the CSRF check's 400.
    """
    response = bearer.post(MESSAGE_API, json={"message": "hi"})
    assert response.status_code == 503
    assert response.get_json()["error"]["code"] == "MODEL_NOT_CONFIGURED"


@pytest.mark.parametrize("header", ["Bearer cha_not-a-real-token", "Bearer ", "Basic dXNlcjpwYXNz", "cha_x"])
def test_a_wrong_authorization_header_is_refused(client: FlaskClient, api_token: str, header: str) -> None:
    """Anything but a stored API token: 401 UNAUTHENTICATED with a Bearer challenge."""
    response = client.get(API, headers={"Authorization": header})
    assert response.status_code == 401
    assert response.get_json()["error"]["code"] == "UNAUTHENTICATED"
    assert response.headers["WWW-Authenticate"].startswith("Bearer")


def test_a_revoked_api_token_stops_working(bearer: FlaskClient, console_secrets: ConsoleSecrets) -> None:
    """Tokens are read fresh on every request, so revoking one takes effect at once."""
    assert bearer.get(PROGRAM_API).status_code == 200
    console_secrets.revoke_api_tokens("tests")
    assert bearer.get(PROGRAM_API).status_code == 401


def test_logout_ends_the_session_and_needs_the_csrf_token(household: FlaskClient) -> None:
    """POST /logout with the token ends the session; a GET is not a logout."""
    assert household.get("/logout").status_code == 405
    assert household.get(API).status_code == 200
    response = household.post("/logout")
    assert response.status_code == 302 and response.location == "/login?logged_out=1"
    assert household.get(API).status_code == 401
    landed = household.get(response.location).get_data(as_text=True)
    assert "You are logged out." in landed and 'role="status"' in landed
    assert "You are logged out." not in household.get("/login").get_data(as_text=True)


def test_logout_without_the_csrf_token_keeps_the_session(logged_in: FlaskClient) -> None:
    """Another site cannot log the household out."""
    assert logged_in.post("/logout").status_code == 400
    assert logged_in.get(API).status_code == 200


def test_pages_carry_the_csrf_meta_tag_and_a_log_out_button(logged_in: FlaskClient) -> None:
    """base.html gives every page the token for fetch() and the navigation with Log out."""
    html = logged_in.get("/no-such-page").get_data(as_text=True)
    assert '<meta name="csrf-token"' in html
    for label in ("Settings", "Conversation", "Activity"):
        assert f">{label}</a>" in html
    assert ">Log out</button>" in html


def test_a_new_password_ends_every_older_session(logged_in: FlaskClient, console_secrets: ConsoleSecrets) -> None:
    """`console-ha set-password` logs every browser out."""
    assert logged_in.get(API).status_code == 200
    console_secrets.set_password("a brand new password", method=FAST_HASH)
    assert logged_in.get(API).status_code == 401


def _session_cookie(client: FlaskClient) -> Cookie:
    """The Console's session cookie, which the client has been given."""
    cookie = client.get_cookie("console_ha_session")
    assert cookie is not None, "no session cookie"
    return cookie


def test_the_session_key_is_persisted_and_shared_by_two_apps(data_dir: DataDir, password: str) -> None:
    """A session made by one app (process) is valid in another on the same data dir; the key file is 0600."""
    first = create_app(data_dir, TEST_CONFIG)
    second = create_app(data_dir, TEST_CONFIG)
    assert first.secret_key == second.secret_key
    browser = first.test_client()
    assert log_in(browser, password).status_code == 302
    cookie = _session_cookie(browser)
    other = second.test_client()
    other.set_cookie(cookie.key, cookie.value)
    assert other.get(API).status_code == 200
    key_file = ConsoleSecrets(data_dir).session_key_path
    assert stat.S_IMODE(key_file.stat().st_mode) == 0o600
    assert stat.S_IMODE(key_file.parent.stat().st_mode) == 0o700


def test_a_csrf_token_has_no_time_limit_of_its_own(app: Flask) -> None:
    """A settings page left open for hours still saves: the token lives as long as the session."""
    assert app.config["WTF_CSRF_TIME_LIMIT"] is None
    assert app.config["WTF_CSRF_CHECK_DEFAULT"] is False


def test_a_bearer_request_with_a_session_cookie_still_needs_no_csrf(household: FlaskClient, api_token: str) -> None:
    """The Authorization header decides: a program may hold a cookie too, and is still a program."""
    household.environ_base.pop("HTTP_X_CSRFTOKEN")
    program = {"Authorization": f"Bearer {api_token}"}
    response = household.post(MESSAGE_API, json={"message": "hi"}, headers=program)
    assert response.get_json()["error"]["code"] == "MODEL_NOT_CONFIGURED"  # past the guard, no CSRF asked
    refused = household.post(API, json={"enabled": True}, headers=program)
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "FORBIDDEN"


def test_a_fresh_login_gives_a_fresh_csrf_token(client: FlaskClient, password: str) -> None:
    """The token known before login (perhaps to someone else) is not valid after it."""
    before = csrf_from(client.get("/login").get_data(as_text=True))
    client.post("/login", data={"password": password, "csrf_token": before})
    assert client.post(API, json={}, headers={"X-CSRFToken": before}).status_code == 400
    assert client.post(API, json={}, headers={"X-CSRFToken": page_csrf(client)}).status_code == 200


# --- sessions end on the server ------------------------------------------------------------------

import json  # noqa: E402
import threading  # noqa: E402
from collections.abc import Callable  # noqa: E402

from console_ha import cli  # noqa: E402
from console_ha.store.console_secrets import MAX_SESSIONS  # noqa: E402
from console_ha.web.login_throttle import LoginThrottle  # noqa: E402


def test_logout_ends_the_session_for_a_copied_cookie_over_real_http(
    make_app: Callable[..., Flask], password: str
) -> None:
    """A cookie copied before logout (another device, a stolen backup) opens nothing after it."""
    with served(make_app()) as console:
        browser = console.browser()
        assert browser.log_in(password).status_code == 302
        copy = console.browser()
        copy.http.cookies.update(browser.http.cookies)
        assert copy.get(API).status_code == 200
        token = browser.csrf("/settings/home-assistant")
        assert browser.post("/logout", data={"csrf_token": token}).status_code == 302
        assert copy.get(API).status_code == 401
        assert copy.get("/settings/home-assistant").status_code == 302
        assert browser.get(API).status_code == 401


def test_logging_out_one_browser_keeps_the_others(make_app: Callable[..., Flask], password: str) -> None:
    """Each login is its own session: the phone logging out does not log out the laptop."""
    with served(make_app()) as console:
        phone, laptop = console.browser(), console.browser()
        phone.log_in(password)
        laptop.log_in(password)
        phone.post("/logout", data={"csrf_token": phone.csrf("/settings/home-assistant")})
        assert phone.get(API).status_code == 401
        assert laptop.get(API).status_code == 200


def test_set_password_on_the_command_line_ends_every_session_over_real_http(
    make_app: Callable[..., Flask], password: str, data_dir: DataDir, monkeypatch: pytest.MonkeyPatch
) -> None:
    """`console-ha set-password` (another process, here its main()) logs out every browser at once."""
    import io
    import sys

    with served(make_app()) as console:
        browsers = [console.browser() for _ in range(3)]
        for browser in browsers:
            assert browser.log_in(password).status_code == 302
            assert browser.get(API).status_code == 200
        monkeypatch.setattr(sys, "stdin", io.StringIO("a new household password\n"))
        assert cli.main(["set-password", "--data-dir", str(data_dir.root)]) == 0
        for browser in browsers:
            assert browser.get(API).status_code == 401
    assert json.loads(ConsoleSecrets(data_dir).sessions_path.read_text()) == {"sessions": {}}


def test_the_sessions_file_is_private_and_holds_no_session_id(
    logged_in: FlaskClient, console_secrets: ConsoleSecrets
) -> None:
    """0600 in the 0700 directory; only hashes of ids, so reading it gives no cookie."""
    from itsdangerous import URLSafeTimedSerializer  # noqa: F401  (flask's signer; the cookie is signed)

    path = console_secrets.sessions_path
    assert stat.S_IMODE(path.stat().st_mode) == 0o600
    cookie = _session_cookie(logged_in).value
    interface = logged_in.application.session_interface  # Flask's own, signed cookie sessions
    assert isinstance(interface, SecureCookieSessionInterface)
    serializer = interface.get_signing_serializer(logged_in.application)
    assert serializer is not None
    session_id = serializer.loads(cookie)["sid"]
    assert session_id not in path.read_text()
    assert len(json.loads(path.read_text())["sessions"]) == 1


def test_a_session_idle_past_its_lifetime_has_ended(console_secrets: ConsoleSecrets) -> None:
    """The server keeps the last activity (to the hour) and ends a session idle for the whole lifetime."""
    session_id = console_secrets.start_session(idle_limit=3600)
    assert console_secrets.session_active(session_id, idle_limit=3600)
    assert not console_secrets.session_active(session_id, idle_limit=0)
    assert not console_secrets.session_active("not-a-session", idle_limit=3600)
    assert not console_secrets.session_active(None, idle_limit=3600)


def test_at_most_max_sessions_are_kept_and_the_oldest_ends(console_secrets: ConsoleSecrets,
                                                         monkeypatch: pytest.MonkeyPatch) -> None:
    """Logging in again and again cannot grow the file without bound."""
    now = [1_000_000.0]
    monkeypatch.setattr("console_ha.store.console_secrets.time.time", lambda: now[0])
    ids = []
    for _ in range(MAX_SESSIONS + 3):
        ids.append(console_secrets.start_session(idle_limit=10**9))
        now[0] += 1
    assert [console_secrets.session_active(i, idle_limit=10**9) for i in ids[:3]] == [False] * 3
    assert all(console_secrets.session_active(i, idle_limit=10**9) for i in ids[3:])


def test_a_damaged_sessions_file_logs_everyone_out(logged_in: FlaskClient, console_secrets: ConsoleSecrets,
                                                   caplog: pytest.LogCaptureFixture) -> None:
    """Nobody is let in on a file that cannot be read; logging in again repairs it."""
    console_secrets.sessions_path.write_text("{not json")
    assert logged_in.get(API).status_code == 401
    assert "cannot be read" in caplog.text
    assert log_in(logged_in).status_code == 302
    assert logged_in.get(API).status_code == 200


def test_a_new_login_ends_the_browsers_previous_session(client: FlaskClient, password: str,
                                                       console_secrets: ConsoleSecrets) -> None:
    """Logging in again from the same browser replaces its session rather than adding one."""
    log_in(client, password)
    first = _session_cookie(client).value
    again = client.post("/login", data={"password": password, "csrf_token": page_csrf(client)})
    assert again.status_code == 302
    assert len(json.loads(console_secrets.sessions_path.read_text())["sessions"]) == 1
    other = client.application.test_client()
    other.set_cookie("console_ha_session", first)
    assert other.get(API).status_code == 401


# --- login throttling counts only real password checks ---------------------------------------------


def _count_checks(app: Flask) -> list[bool]:
    """Record every real password check the app makes (the slow hash comparison)."""
    secrets = app.extensions["console_ha"].secrets
    # The login's one password check (every password check goes through it).
    real = secrets.verified_fingerprint
    checks: list[bool] = []
    guard = threading.Lock()

    def counted(password: str) -> str | None:
        result = real(password)
        with guard:
            checks.append(result is not None)
        return result

    secrets.verified_fingerprint = counted
    return checks


def test_parallel_wrong_guesses_over_real_http_get_at_most_the_limit_of_checks(
    make_app: Callable[..., Flask], password: str
) -> None:
    """Twenty-four browsers guess at once from one address: five checks, the rest 429 with Retry-After."""
    app = make_app()
    # A first wait longer than any slow test machine needs to serve the burst: the burst alone is judged.
    app.extensions["console_ha_web"].login_throttle = LoginThrottle(first_delay=60)
    checks = _count_checks(app)
    with served(app) as console:
        browsers = [console.browser() for _ in range(24)]
        tokens = [b.csrf("/login") for b in browsers]
        answers: list[tuple[int, str | None]] = []
        start = threading.Barrier(len(browsers))

        def guess(browser: Browser, token: str) -> None:
            start.wait()
            r = browser.post("/login", data={"password": "a wrong guess", "csrf_token": token})
            answers.append((r.status_code, r.headers.get("Retry-After")))

        threads = [threading.Thread(target=guess, args=pair) for pair in zip(browsers, tokens, strict=True)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
    statuses = [status for status, _ in answers]
    assert len(checks) == 5 and not any(checks)
    assert statuses.count(401) == 5 and statuses.count(429) == 19
    assert all(retry is not None and int(retry) >= 1 for status, retry in answers if status == 429)


@pytest.mark.parametrize("refused", ["no-csrf", "foreign-origin", "no-password", "huge-password"])
def test_requests_refused_before_the_check_never_lock_anyone_out_over_real_http(
    make_app: Callable[..., Flask], password: str, refused: str
) -> None:
    """Thirty login posts from another page (no CSRF, foreign Origin, or a malformed form): no check, no lockout."""
    app = make_app()
    checks = _count_checks(app)
    with served(app) as console:
        attacker = console.browser()
        token = attacker.csrf("/login")
        for _ in range(30):
            if refused == "no-csrf":
                response = attacker.post("/login", origin=None, data={"password": "guess"})
            elif refused == "foreign-origin":
                response = attacker.post("/login", origin="http://evil.example",
                                         data={"password": "guess", "csrf_token": token})
            elif refused == "no-password":
                response = attacker.post("/login", data={"csrf_token": token})
            else:
                response = attacker.post("/login", data={"password": "x" * 5000, "csrf_token": token})
            assert response.status_code in (400, 403), response.status_code
        assert checks == []
        household = console.browser()
        assert household.log_in(password).status_code == 302
    assert checks == [True]


def test_the_wait_grows_and_then_the_right_password_works(
    make_app: Callable[..., Flask], password: str, clock
) -> None:
    """After five wrong passwords: 1 s, then 2 s, 4 s …; once the wait is over the household gets in."""
    app = make_app()
    app.extensions["console_ha_web"].login_throttle = LoginThrottle(clock=clock)
    client = app.test_client()
    for _ in range(5):
        assert log_in(client, "guess").status_code == 401
    waits = []
    for _ in range(3):
        refused = log_in(client, password)
        assert refused.status_code == 429
        waits.append(int(refused.headers["Retry-After"]))
        clock.now += waits[-1]
        assert log_in(client, "guess").status_code == 401
    assert waits == [1, 2, 4]
    assert log_in(client, password).status_code == 429
    clock.now += 8
    assert log_in(client, password).status_code == 302


def test_the_wait_never_grows_past_five_minutes_and_a_quiet_client_starts_afresh(clock) -> None:
    """No hour-long lockout: the delay caps at 300 s; fifteen quiet minutes bring the free attempts back."""
    throttle = LoginThrottle(clock=clock)
    assert [throttle.delay_after(n) for n in (4, 5, 6, 13, 14, 40)] == [0, 1, 2, 256, 300, 300]
    for _ in range(20):
        clock.now += 301
        throttle.attempt("10.0.0.9", lambda: False)
    clock.now += 900
    for _ in range(5):
        throttle.attempt("10.0.0.9", lambda: False)


def test_an_error_inside_the_check_counts_as_a_failed_check(clock) -> None:
    """A crash in the hash comparison is no free attempt."""
    from console_ha.web.login_throttle import LoginThrottled

    throttle = LoginThrottle(free_attempts=1, clock=clock)

    def broken() -> bool:
        raise RuntimeError("hash library failed")

    with pytest.raises(RuntimeError):
        throttle.attempt("10.0.0.9", broken)
    with pytest.raises(LoginThrottled):
        throttle.attempt("10.0.0.9", lambda: True)


@pytest.mark.parametrize("address, key", [("192.0.2.7", "192.0.2.7"), ("::ffff:192.0.2.7", "192.0.2.7"),
                                          ("2001:db8::1", "2001:db8::/64"), ("2001:db8::ffff:1", "2001:db8::/64")])
def test_ipv6_clients_are_counted_per_64(address: str, key: str) -> None:
    """One IPv6 host can take any address of its /64: the count follows the network, not the address."""
    from console_ha.web.login_throttle import client_key

    assert client_key(address) == key


# --- the API tokens page ---------------------------------------------------------------------------

TOKENS_PAGE = "/settings/api-tokens"


def test_the_tokens_page_lists_each_token_by_name_and_last_use(
    household: FlaskClient, bearer: FlaskClient, console_secrets: ConsoleSecrets
) -> None:
    """Never used, then used: the page says when; it never shows a token or its hash."""
    console_secrets.create_api_token("node-red")
    html = household.get(TOKENS_PAGE).get_data(as_text=True)
    assert "node-red" in html and "tests" in html
    assert html.count("Never used.") == 2
    assert bearer.get(PROGRAM_API).status_code == 200
    html = household.get(TOKENS_PAGE).get_data(as_text=True)
    assert html.count("Never used.") == 1 and "Last used <time" in html
    for token in console_secrets.api_tokens():
        assert token.digest not in html
    assert 'aria-label="Revoke node-red"' in html and 'aria-label="Revoke tests"' in html


def test_last_use_is_written_at_most_once_a_minute(bearer: FlaskClient, console_secrets: ConsoleSecrets) -> None:
    """A program polling every second does not rewrite the token file every second."""
    bearer.get(PROGRAM_API)
    written = console_secrets.api_tokens_path.stat().st_mtime_ns
    first = console_secrets.api_tokens()[0].last_used
    for _ in range(5):
        assert bearer.get(PROGRAM_API).status_code == 200
    assert console_secrets.api_tokens_path.stat().st_mtime_ns == written
    assert console_secrets.api_tokens()[0].last_used == first is not None


def test_the_household_revokes_a_token_on_the_page_over_real_http(
    make_app: Callable[..., Flask], password: str, api_token: str
) -> None:
    """Revoke (session + CSRF + own Origin): the program is refused at its next request."""
    with served(make_app()) as console:
        program = console.browser()
        program.http.headers["Authorization"] = f"Bearer {api_token}"
        assert program.get(PROGRAM_API).status_code == 200
        household = console.browser()
        household.log_in(password)
        page = household.get(TOKENS_PAGE).text
        revoke = re.search(r'action="(/settings/api-tokens/[0-9a-f]{16}/revoke)"', page)
        assert revoke is not None
        action = revoke.group(1)
        assert household.post(action, data={}).status_code == 400  # no CSRF token: nothing revoked
        assert program.get(PROGRAM_API).status_code == 200
        done = household.post(action, data={"csrf_token": household.csrf(TOKENS_PAGE)})
        assert done.status_code == 303 and done.headers["Location"] == TOKENS_PAGE
        assert "Revoked the token “tests”" in household.get(TOKENS_PAGE).text
        assert program.get(PROGRAM_API).status_code == 401
        again = household.post(action, data={"csrf_token": household.csrf(TOKENS_PAGE)})
        assert again.status_code == 303
        assert "already revoked" in household.get(TOKENS_PAGE).text


def test_an_api_token_can_neither_list_nor_revoke_tokens(bearer: FlaskClient, console_secrets: ConsoleSecrets) -> None:
    """403 FORBIDDEN for the page and the revoke, with or without the token's own id; nothing is removed."""
    assert bearer.get(TOKENS_PAGE).status_code == 403
    token_id = console_secrets.api_tokens()[0].token_id
    response = bearer.post(f"{TOKENS_PAGE}/{token_id}/revoke")
    assert response.status_code == 403 and "FORBIDDEN" in response.get_data(as_text=True)
    assert len(console_secrets.api_tokens()) == 1


def test_the_tokens_page_needs_a_login_and_the_settings_page_links_to_it(
    client: FlaskClient, password: str
) -> None:
    """Logged out: the login page; logged in: the settings page leads there."""
    assert client.get(TOKENS_PAGE).location.startswith("/login")
    log_in(client, password)
    assert f'href="{TOKENS_PAGE}"' in client.get("/settings/home-assistant").get_data(as_text=True)


def test_revoking_by_id_removes_only_that_token(console_secrets: ConsoleSecrets) -> None:
    """Two tokens with the same name: the page's button removes the one it names, by its id."""
    first = console_secrets.create_api_token("phone")
    console_secrets.create_api_token("phone")
    tokens = console_secrets.api_tokens()
    assert console_secrets.revoke_api_token(tokens[1].token_id) == tokens[1]
    assert console_secrets.verify_api_token(first) is not None
    assert [t.digest for t in console_secrets.api_tokens()] == [tokens[0].digest]
    assert console_secrets.revoke_api_token("0" * 16) is None


def test_a_password_changed_during_the_login_check_ends_that_login_too(
        app: Flask, password: str, data_dir: DataDir, monkeypatch: pytest.MonkeyPatch) -> None:
    """The old password, checked while `set-password` replaced it, opens nothing: over real HTTP.

    The hash check is slow on purpose, so a login with a leaked password can be in the middle of it
    when the household changes that password; the session it starts must carry the checked hash,
    not the new one, or the leaked password would outlive its change.
    """
    from werkzeug.security import check_password_hash as real_check  # what the module imported

    import console_ha.store.console_secrets as module

    def check_then_change(hashed: str, candidate: str) -> bool:
        right = real_check(hashed, candidate)
        # `console-ha set-password` in another process finishes while this check runs.
        ConsoleSecrets(data_dir).set_password("a-new-password-42", method=FAST_HASH)
        return right

    monkeypatch.setattr(module, "check_password_hash", check_then_change)
    with served(app) as console:
        browser = console.browser()
        assert browser.log_in(password).status_code == 302
        page = browser.get("/settings/home-assistant")
    assert page.status_code == 302 and "/login" in page.headers["Location"]
