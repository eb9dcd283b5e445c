"""The one place that maps error codes to HTTP status and renders the contract's error body."""

from __future__ import annotations

import logging
from collections.abc import Mapping
from types import MappingProxyType

from flask import Flask, Response, jsonify, render_template, request
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException, InternalServerError
from werkzeug.sansio.response import Response as SansIOResponse

from console_ha.errors import (
    ConsoleHaError,
    CsrfInvalid,
    Forbidden,
    InternalError,
    InvalidRequest,
    MethodNotAllowed,
    NotFound,
    PayloadTooLarge,
    RateLimited,
    Unauthenticated,
    UnsupportedMediaType,
    error_body,
    http_statuses,
)
from console_ha.language import Words

log = logging.getLogger(__name__)

# Every code the Console answers over HTTP, with its status, as the classes in console_ha.errors own them.
# HA_TIMEOUT is 502 like its siblings, not 504: the contract says "HA failure: 502 with an HA_* code", and a
# client tells them apart by code.
STATUS: Mapping[str, int] = http_statuses()

# Werkzeug's HTTP errors in the contract's words.
_HTTP_ERRORS: Mapping[int, type[ConsoleHaError]] = MappingProxyType({
    400: InvalidRequest,
    401: Unauthenticated,
    403: Forbidden,
    404: NotFound,
    405: MethodNotAllowed,
    413: PayloadTooLarge,
    415: UnsupportedMediaType,
    429: RateLimited,
})
# What each of them (and a crash) says, by class: the class owns its code.
_HTTP_MESSAGES: Mapping[type[ConsoleHaError], Words] = MappingProxyType({
    InvalidRequest: Words("The request could not be understood."),
    Unauthenticated: Words("Log in to the Console first, or send an API token."),
    Forbidden: Words("This is not allowed."),
    NotFound: Words("There is nothing at this address."),
    MethodNotAllowed: Words("This address does not accept that kind of request."),
    PayloadTooLarge: Words("The request is too large."),
    UnsupportedMediaType: Words("Send the request body as JSON."),
    RateLimited: Words("Too many attempts. Wait a few minutes, then try again."),
    InternalError: Words("Something went wrong inside the Console. Try again; if it keeps happening, "
                         "look at the Console's log."),
})
CSRF_MESSAGE = Words("The page's security token is missing or out of date. Reload the page and try again.")


def status_for(code: str) -> int:
    """The HTTP status for an error code; 500 for a code this table does not know."""
    return STATUS.get(code, 500)


def is_api_request() -> bool:
    """API paths (and the MCP endpoint) answer JSON; everything else is a page for a person."""
    return request.path in ("/api", "/mcp") or request.path.startswith(("/api/", "/mcp/"))


def error_response(err: ConsoleHaError, headers: dict[str, str] | None = None) -> Response:
    """Render `err` as JSON on API paths and as the error page elsewhere, with its status."""
    status = status_for(err.code)
    if status == 500 and err.code not in STATUS:
        log.error("error code %s has no status in web.errors.STATUS", err.code)
    if is_api_request():
        response = jsonify(error_body(err))
    else:
        response = Response(
            render_template("error.html", status=status, code=err.code, message=err.message),
            mimetype="text/html",
        )
    response.status_code = status
    for name, value in (headers or {}).items():
        response.headers[name] = value
    return response


def handle_console_error(err: ConsoleHaError) -> Response:
    """Answer a ConsoleHaError with its status and body; a 5xx is logged by code."""
    if status_for(err.code) >= 500:
        log.warning("%s %s answered %s", request.method, request.path, err.code)
    headers = {"WWW-Authenticate": 'Bearer realm="console-ha"'} if isinstance(err, Unauthenticated) else None
    return error_response(err, headers)


def _handle_csrf_error(err: CSRFError) -> Response:
    # flask-wtf's own reason ("The CSRF token is missing.") goes along as a detail for whoever debugs it.
    log.info("CSRF check failed on %s %s: %s", request.method, request.path, err.description)
    return error_response(CsrfInvalid(CSRF_MESSAGE, reason=err.description))


def _handle_http_error(err: HTTPException) -> SansIOResponse:
    # An HTTPException may carry its own response, which Werkzeug types as the sans-IO base of Flask's.
    if err.response is not None:
        return err.response
    error = _HTTP_ERRORS.get(err.code or 500)
    if error is None:
        return _handle_internal_error(err)
    # Keep what the exception says about itself, e.g. the Allow header of a 405.
    headers = {k: v for k, v in err.get_headers() if k.lower() != "content-type"}
    return error_response(error(_HTTP_MESSAGES[error]), headers)


def _handle_internal_error(err: HTTPException) -> Response:
    original = getattr(err, "original_exception", None)
    if original is not None:
        log.error("unhandled error on %s %s", request.method, request.path, exc_info=original)
    return error_response(InternalError(_HTTP_MESSAGES[InternalError]))


def register_error_handlers(app: Flask) -> None:
    """Give every error the contract's JSON body on API paths and the error page elsewhere."""
    app.register_error_handler(ConsoleHaError, handle_console_error)
    app.register_error_handler(CSRFError, _handle_csrf_error)
    app.register_error_handler(HTTPException, _handle_http_error)
    # Flask hands unhandled exceptions to the 500 handler (unless PROPAGATE_EXCEPTIONS, as in tests).
    app.register_error_handler(InternalServerError, _handle_internal_error)
