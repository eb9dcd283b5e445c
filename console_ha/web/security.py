"""Security headers on every response: a strict Content-Security-Policy and no caching of private data."""

from __future__ import annotations

from flask import Flask, Response, request

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # `same-origin`, not `no-referrer`: flask-wtf's CSRF check over https requires a same-origin Referer,
    # and `no-referrer` would make every save fail there. Other origins still get no Referer at all.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


def _set_headers(response: Response) -> Response:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    # Pages and API answers hold household data and tokens for forms: never kept by a cache.
    # Static files keep Flask's own revalidation headers.
    if request.endpoint != "static":
        response.headers["Cache-Control"] = "no-store"
        response.headers.pop("Expires", None)
    return response


def register_security_headers(app: Flask) -> None:
    """Add the security headers to every response the app sends."""
    app.after_request(_set_headers)
