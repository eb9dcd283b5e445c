"""The standing probe: every route of the app, asked by every kind of principal, answers as web/access.py says.

The principals are: nobody; a program's API token; the household's session without its CSRF token; the
session with it; and the session with its CSRF token sent from a page of another origin. The expected
answer of each comes from the one table (`ACCESS`), so a route added without an entry fails here.
"""

from __future__ import annotations

import re
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest
from flask import Flask
from flask.testing import FlaskClient
from werkzeug.test import TestResponse

from console_ha.web.access import ACCESS, Access
from console_ha.web.security import MUTATING_METHODS

from .conftest import log_in, page_csrf

_CONVERTER = re.compile(r"<(?:[a-z_]+:)?([a-z_]+)>")
# A value for each URL variable: shaped as the route expects, so the request reaches the guard and past it.
_VALUES = {"token_id": "0123456789abcdef", "token": "no-such-card", "filename": "no-such-file.css",
           "name": "no_such_plugin"}
FOREIGN = "http://evil.example"


@dataclass(frozen=True)
class Route:
    endpoint: str
    method: str
    url: str

    @property
    def mutating(self) -> bool:
        return self.method in MUTATING_METHODS

    def __str__(self) -> str:
        return f"{self.method} {self.url} ({self.endpoint})"


def every_route(app: Flask) -> list[Route]:
    """Each (endpoint, method) of the URL map, HEAD and OPTIONS left to Flask."""
    return [
        Route(rule.endpoint, method, _CONVERTER.sub(lambda m: _VALUES[m.group(1)], rule.rule))
        for rule in app.url_map.iter_rules()
        for method in sorted((rule.methods or set()) - {"HEAD", "OPTIONS"})
    ]


def _code(response: TestResponse) -> str | None:
    body = response.get_json(silent=True)
    if isinstance(body, dict) and isinstance(body.get("error"), dict):
        return str(body["error"].get("code"))
    match = re.search(r"\b(FORBIDDEN|CSRF_INVALID|UNAUTHENTICATED)\b", response.get_data(as_text=True))
    return match.group(1) if match else None


def refused_as(response: TestResponse, principal: str, access: Access) -> str | None:
    """How the guard refused the request ("FORBIDDEN", "UNAUTHENTICATED", "CSRF_INVALID", "LOGIN"), or None.

    A redirect to the login page is the guard's only for nobody on a closed page: logging out, or the
    first-run page once a password is set, lead there by design.
    """
    redirected = response.status_code == 302 and response.location.startswith(("/login", "/setup"))
    if redirected and principal == "nobody" and access is not Access.OPEN:
        return "LOGIN"
    if response.status_code in (400, 401, 403):
        code = _code(response)
        if code in ("FORBIDDEN", "UNAUTHENTICATED", "CSRF_INVALID"):
            return code
    return None


def expected(access: Access, principal: str, route: Route) -> str | None:
    """What the table says the guard does with `principal` on `route`: a refusal's name, or None (let through)."""
    is_api = route.url.startswith("/api/") or route.url == "/mcp"
    if principal == "foreign origin" and route.mutating:
        return "FORBIDDEN"  # a browser's change from another site, refused before anything else looks at it
    if access is Access.OPEN:
        return None
    if principal == "nobody":
        return "UNAUTHENTICATED" if is_api else "LOGIN"
    if principal == "api token":
        return "FORBIDDEN" if access is Access.HOUSEHOLD else None
    # A household session, in three ways.
    if access is Access.PROGRAM:
        return "UNAUTHENTICATED"
    if principal == "session without csrf" and route.mutating:
        return "CSRF_INVALID"
    return None


@pytest.fixture
def principals(app: Flask, api_token: str, password: str) -> dict[str, Callable[[], FlaskClient]]:
    """A fresh client of each kind for every request: a logout or a revoke must not change the next one."""

    def nobody() -> FlaskClient:
        return app.test_client()

    def program() -> FlaskClient:
        client = app.test_client()
        client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {api_token}"
        return client

    def session(csrf: bool, origin: str | None = None) -> Callable[[], FlaskClient]:
        def make() -> FlaskClient:
            client = app.test_client()
            assert log_in(client, password).status_code == 302
            if csrf:
                client.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(client)
            if origin:
                client.environ_base["HTTP_ORIGIN"] = origin
            return client
        return make

    return {
        "nobody": nobody,
        "api token": program,
        "session without csrf": session(False),
        "session with csrf": session(True),
        "foreign origin": session(True, FOREIGN),
    }


def test_every_route_has_an_entry_in_the_access_table(app: Flask) -> None:
    """A route added without saying who may use it fails here (and is refused to an API token meanwhile)."""
    endpoints = {rule.endpoint for rule in app.url_map.iter_rules()}
    assert endpoints == set(ACCESS), (f"no entry: {sorted(endpoints - set(ACCESS))}; "
                                      f"no route: {sorted(set(ACCESS) - endpoints)}")


def test_a_program_may_only_ask(app: Flask) -> None:
    """Issue 16's rule as the table says it: /mcp, conversation messages and its own cards; nothing else."""
    programs = {endpoint for endpoint, access in ACCESS.items() if access in (Access.PROGRAM, Access.ASKING)}
    assert programs == {"mcp.endpoint", "conversation.message", "confirmations.pending"}


def test_every_route_answers_every_principal_as_the_table_says(
    app: Flask, principals: dict[str, Callable[[], FlaskClient]]
) -> None:
    """Walk the URL map with each principal; each answer is what ACCESS gives (and never a crash)."""
    mismatches = []
    checked = 0
    for route in every_route(app):
        access = ACCESS[route.endpoint]
        for principal, make in principals.items():
            # An empty JSON object is a body every view reads without a crash; the guard runs before it.
            body: dict[str, Any] = {"json": {}} if route.mutating and route.endpoint != "auth.login" else {}
            response = make().open(route.url, method=route.method, **body)
            want, got = expected(access, principal, route), refused_as(response, principal, access)
            if got != want or response.status_code >= 500:
                mismatches.append(f"{route} as {principal}: expected {want or 'let through'}, "
                                  f"got {response.status_code} {got or _code(response) or ''}")
            checked += 1
    assert not mismatches, "\n".join(mismatches)
    assert checked == 5 * len(every_route(app))


def test_a_route_missing_from_the_table_is_the_household_s_alone(
    app: Flask, principals: dict[str, Callable[[], FlaskClient]]
) -> None:
    """The guard fails closed: until the table names it, a new route refuses a program's token."""
    app.add_url_rule("/api/v1/new-thing", "new_thing", lambda: {"ok": True})
    assert "new_thing" not in ACCESS
    refused = principals["api token"]().get("/api/v1/new-thing")
    assert refused.status_code == 403 and refused.get_json()["error"]["code"] == "FORBIDDEN"
    assert principals["session with csrf"]().get("/api/v1/new-thing").get_json() == {"ok": True}
