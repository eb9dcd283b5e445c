"""Security headers: a strict CSP and no caching on every page, API answer, redirect and error."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from .conftest import API, MESSAGE_API


@pytest.mark.parametrize(
    "path", ["/health", "/login", API, "/settings/home-assistant", "/no-such-page", "/api/v1/nothing"]
)
def test_every_response_carries_the_security_headers(client: FlaskClient, password: str, path: str) -> None:
    """Logged out: pages, redirects, 401s and 404s all carry them."""
    response = client.get(path)
    csp = response.headers["Content-Security-Policy"]
    for directive in ("default-src 'self'", "script-src 'self'", "style-src 'self'", "object-src 'none'",
                      "base-uri 'none'", "frame-ancestors 'none'", "form-action 'self'"):
        assert directive in csp
    assert "unsafe-inline" not in csp
    assert response.headers["X-Content-Type-Options"] == "nosniff"
    assert response.headers["X-Frame-Options"] == "DENY"
    assert response.headers["Referrer-Policy"] == "same-origin"
    assert response.headers["Cache-Control"] == "no-store"


def test_logged_in_api_answers_are_not_cached(household: FlaskClient) -> None:
    """Household data never lands in a cache."""
    assert household.get(API).headers["Cache-Control"] == "no-store"


def test_static_files_keep_their_own_caching(client: FlaskClient) -> None:
    """The stylesheet may be revalidated from cache; it is not private."""
    response = client.get("/static/console.css")
    assert response.headers.get("Cache-Control") != "no-store"
    assert "Content-Security-Policy" in response.headers
    response.close()


# --- Host: only the names the Console serves as ----------------------------------------------------

import http.client  # noqa: E402
import json  # noqa: E402
from collections.abc import Callable  # noqa: E402

from flask import Flask  # noqa: E402

from console_ha.errors import ConsoleHaError  # noqa: E402
from console_ha.store.console_secrets import ConsoleSecrets  # noqa: E402
from console_ha.web.security import listen_names, trusted_hosts  # noqa: E402

from .conftest import PASSWORD, csrf_from  # noqa: E402
from .live import served  # noqa: E402


def _raw(url: str, method: str, path: str, headers: dict[str, str], body: str | None = None) -> tuple[int, str, str]:
    """One request with exactly these headers (http.client sends Host only if told not to skip it)."""
    host, port = url.removeprefix("http://").split(":")
    connection = http.client.HTTPConnection(host, int(port), timeout=10)
    try:
        connection.putrequest(method, path, skip_host=True, skip_accept_encoding=True)
        for name, value in headers.items():
            connection.putheader(name, value)
        data = body.encode() if body is not None else None
        if data is not None:
            connection.putheader("Content-Length", str(len(data)))
        connection.endheaders(data)
        response = connection.getresponse()
        return response.status, response.getheader("Content-Type", ""), response.read().decode()
    finally:
        connection.close()


@pytest.mark.parametrize("host", ["evil.example", "evil.example:8000", "127.0.0.1.nip.io", "[::2]:8000",
                                  "localhost.evil.example"])
def test_a_foreign_host_gets_400_untrusted_host_over_real_http(make_app: Callable[..., Flask], host: str) -> None:
    """DNS rebinding: a name that resolves to the Console but is not one of its names gets no answer."""
    with served(make_app()) as console:
        status, content_type, body = _raw(console.url, "GET", API, {"Host": host, "Accept": "application/json"})
        assert status == 400
        assert content_type == "application/json"
        assert json.loads(body)["error"]["code"] == "UNTRUSTED_HOST"
        status, content_type, body = _raw(console.url, "GET", "/login", {"Host": host})
        assert status == 400 and "does not answer to this host name" in body
        assert "<form" not in body


@pytest.mark.parametrize("host", ["localhost", "localhost:8000", "127.0.0.1", "127.0.0.1:8000", "[::1]",
                                  "[::1]:8000"])
def test_the_loopback_names_are_answered_over_real_http(make_app: Callable[..., Flask], host: str) -> None:
    """This device's names as a browser sends them (lowercase, IPv6 compressed), with or without a port."""
    with served(make_app()) as console:
        status, _, body = _raw(console.url, "GET", "/health", {"Host": host})
        assert status == 200, body


def test_a_rebinding_page_cannot_complete_first_run(make_app: Callable[..., Flask],
                                                    console_secrets: ConsoleSecrets) -> None:
    """No password yet: a page on evil.example (resolving to 127.0.0.1) can neither read /setup nor post it."""
    with served(make_app()) as console:
        status, _, body = _raw(console.url, "GET", "/setup", {"Host": "evil.example:8000"})
        assert status == 400 and "csrf" not in body
        form = "password=attacker+chose+this&confirm=attacker+chose+this"
        status, _, _ = _raw(console.url, "POST", "/setup", {
            "Host": "evil.example:8000", "Origin": "http://evil.example:8000",
            "Content-Type": "application/x-www-form-urlencoded"}, form)
        assert status == 400
    assert not console_secrets.has_password()


def test_trusted_host_names_come_from_the_cli_and_the_environment(
    make_app: Callable[..., Flask], monkeypatch: pytest.MonkeyPatch
) -> None:
    """`--trusted-host console.local` and CONSOLE_HA_TRUSTED_HOSTS=a,b each add a name; others stay refused."""
    monkeypatch.setenv("CONSOLE_HA_TRUSTED_HOSTS", " kitchen.home.arpa , 192.168.1.20 ")
    app = make_app(CONSOLE_HA_TRUSTED_HOSTS=["console.local"])
    client = app.test_client()
    for host in ("console.local:8000", "kitchen.home.arpa", "192.168.1.20:8000", "localhost"):
        assert client.get("/health", headers={"Host": host}).status_code == 200, host
    for host in ("console.local.evil.example", "192.168.1.21", "home.arpa"):
        response = client.get(API, headers={"Host": host})
        assert response.status_code == 400, host
        assert response.get_json()["error"]["code"] == "UNTRUSTED_HOST"


@pytest.mark.parametrize("name", ["http://console.local", "console.local:8000", "a b", "evil/.example"])
def test_a_trusted_host_that_is_not_a_host_name_is_refused(name: str) -> None:
    """A URL or a name with a port would never match: the Console says so instead of ignoring it."""
    with pytest.raises(ConsoleHaError, match="not a host name"):
        trusted_hosts([name])


def test_the_trusted_list_is_never_empty_and_starts_with_loopback() -> None:
    """Werkzeug trusts every name for an empty list; ours always holds the loopback names."""
    names = [str(n) for n in trusted_hosts([])]
    assert names == ["localhost", "127.0.0.1", "[::1]"]


def test_a_specific_listen_address_is_its_own_name_and_a_wildcard_is_this_machines(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """--host 192.168.1.20 answers to that; --host 0.0.0.0 to the host name, name.local and each interface address."""
    assert listen_names("192.168.1.20") == ["192.168.1.20"]
    monkeypatch.setattr("socket.gethostname", lambda: "kitchen-pi")
    monkeypatch.setattr("console_ha.web.security.interface_addresses", lambda: ["127.0.0.1", "10.0.0.7", "fe80::1"])
    for wildcard in ("0.0.0.0", "::"):
        assert listen_names(wildcard) == ["kitchen-pi", "kitchen-pi.local", "127.0.0.1", "10.0.0.7", "fe80::1"]


def test_a_machine_name_no_browser_can_send_is_left_out_of_the_wildcard_names(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """A host called Kitchen_Pi does not stop `serve --host 0.0.0.0`: its addresses still work."""
    monkeypatch.setattr("socket.gethostname", lambda: "Kitchen_Pi")
    monkeypatch.setattr("console_ha.web.security.interface_addresses", lambda: ["10.0.0.7"])
    assert listen_names("0.0.0.0") == ["10.0.0.7"]
    assert [str(n) for n in trusted_hosts(listen_names("0.0.0.0"))][-1] == "10.0.0.7"


def test_the_interface_addresses_include_loopback() -> None:
    """The real enumeration (ifaddr) finds at least this machine's 127.0.0.1."""
    from console_ha.web.security import interface_addresses

    assert "127.0.0.1" in interface_addresses()


# --- Origin: a change comes from the Console's own pages -------------------------------------------


def test_a_change_from_a_foreign_origin_is_403_over_real_http(make_app: Callable[..., Flask], password: str) -> None:
    """Logged in, with the right CSRF token even: Origin evil.example is refused and nothing is saved."""
    with served(make_app()) as console:
        browser = console.browser()
        assert browser.log_in(password).status_code == 302
        token = browser.csrf("/settings/home-assistant")
        port = console.url.rsplit(":", 1)[1]
        for origin in ("http://evil.example", "null", f"http://localhost:{port}", "http://127.0.0.1",
                       f"http://127.0.0.1:{int(port) + 1}", "file://", f"ftp://127.0.0.1:{port}",
                       "http://[", f"http://127.0.0.1:{port}@evil.example"):
            refused = browser.post(API, origin=origin, json={"enabled": True}, headers={"X-CSRFToken": token})
            assert refused.status_code == 403, origin
            assert refused.json()["error"]["code"] == "FORBIDDEN"
        assert browser.get(API).json()["enabled"] is False
        same = browser.post(API, json={"enabled": True}, headers={"X-CSRFToken": token})
        assert same.status_code == 200 and same.json()["enabled"] is True


def test_without_origin_a_foreign_referer_is_refused_and_none_leaves_it_to_csrf(
    make_app: Callable[..., Flask], password: str
) -> None:
    """No Origin: the Referer decides; neither: the CSRF token alone (present: saved; missing: 400)."""
    with served(make_app()) as console:
        browser = console.browser()
        browser.log_in(password)
        token = browser.csrf("/settings/home-assistant")
        foreign = browser.post(API, origin=None, json={"enabled": True},
                               headers={"X-CSRFToken": token, "Referer": "http://evil.example/page"})
        assert foreign.status_code == 403
        own = browser.post(API, origin=None, json={"enabled": True},
                           headers={"X-CSRFToken": token, "Referer": console.url + "/settings/home-assistant"})
        assert own.status_code == 200
        assert browser.post(API, origin=None, json={"enabled": False}, headers={"X-CSRFToken": token}).ok
        no_token = browser.post(API, origin=None, json={"enabled": True})
        assert no_token.status_code == 400 and no_token.json()["error"]["code"] == "CSRF_INVALID"


def test_behind_an_https_proxy_the_public_origin_is_the_consoles_own(
    make_app: Callable[..., Flask], password: str
) -> None:
    """The proxy passes Host console.example; the browser's Origin is https://console.example: accepted."""
    app = make_app(CONSOLE_HA_TRUSTED_HOSTS=["console.example"])
    client = app.test_client()
    headers = {"Host": "console.example"}
    token = csrf_from(client.get("/login", headers=headers).get_data(as_text=True))
    answer = client.post("/login", data={"password": password, "csrf_token": token},
                         headers={**headers, "Origin": "https://console.example"})
    assert answer.status_code == 302
    refused = client.post("/logout", data={"csrf_token": token},
                          headers={**headers, "Origin": "https://console.example:8443"})
    assert refused.status_code == 403


def test_a_bearer_request_is_not_judged_by_origin(bearer: FlaskClient) -> None:
    """A program with an API token is not a browser acting for another site: its message passes the guard."""
    response = bearer.post(MESSAGE_API, json={"message": "hi"}, headers={"Origin": "http://evil.example"})
    assert response.get_json()["error"]["code"] == "MODEL_NOT_CONFIGURED"  # no model set up: the turn's own answer


def test_login_and_logout_from_a_foreign_origin_are_refused(client: FlaskClient, password: str) -> None:
    """Login CSRF and forced logout: both 403 before anything is checked."""
    token = csrf_from(client.get("/login").get_data(as_text=True))
    response = client.post("/login", data={"password": password, "csrf_token": token},
                           headers={"Origin": "http://evil.example"})
    assert response.status_code == 403
    assert client.get(API).status_code == 401
    assert client.post("/login", data={"password": PASSWORD, "csrf_token": token},
                       headers={"Origin": "http://localhost"}).status_code == 302
    page = csrf_from(client.get("/no-such-page").get_data(as_text=True))
    assert client.post("/logout", data={"csrf_token": page},
                       headers={"Origin": "http://evil.example"}).status_code == 403
    assert client.get(API).status_code == 200


# --- bodies: an unknown key is named, cut ----------------------------------------------------------

from console_ha.unknown_keys import MAX_SHOWN_KEY  # noqa: E402

LONG = "k" * 10_000
CUT = "k" * MAX_SHOWN_KEY + "…"


def test_the_settings_api_names_an_unknown_key_cut(household: FlaskClient) -> None:
    """400 INVALID_CONFIG with the key, cut, as `field`: a 10,000-character key is not echoed back."""
    response = household.post(API, json={"enabled": True, LONG: 1})
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "INVALID_CONFIG" and error["field"] == CUT
    assert LONG not in response.get_data(as_text=True)


def test_the_conversation_api_names_an_unknown_key(bearer: FlaskClient) -> None:
    """A message body with a key the API does not know is refused, naming it, before any model is asked."""
    response = bearer.post("/api/v1/conversation/message", json={"message": "hello", LONG: 1})
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert error["code"] == "INVALID_REQUEST" and error["field"] == CUT
    assert error["message"] == f"Unknown field: {CUT}."
