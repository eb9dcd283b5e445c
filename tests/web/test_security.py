"""Security headers: a strict CSP and no caching on every page, API answer, redirect and error."""

from __future__ import annotations

import pytest
from flask.testing import FlaskClient

from .conftest import API


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
