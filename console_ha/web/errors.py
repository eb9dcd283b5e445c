"""The one place that maps error codes to HTTP status and renders the contract's error body."""

from __future__ import annotations

import logging
from types import MappingProxyType
from typing import Any

from flask import Flask, Response, jsonify, render_template, request
from flask_wtf.csrf import CSRFError
from werkzeug.exceptions import HTTPException, InternalServerError
from werkzeug.sansio.response import Response as SansIOResponse

from console_ha.errors import ConsoleHaError

log = logging.getLogger(__name__)

# Every code the Console answers with, and its status. HA_TIMEOUT is 502 like its siblings, not 504:
# the contract says "HA failure: 502 with an HA_* code", and a client tells them apart by code.
STATUS: MappingProxyType[str, int] = MappingProxyType(
    {
        # requests and sessions
        "INVALID_REQUEST": 400,
        "UNTRUSTED_HOST": 400,
        "CSRF_INVALID": 400,
        "UNAUTHENTICATED": 401,
        "FORBIDDEN": 403,
        "NOT_FOUND": 404,
        "METHOD_NOT_ALLOWED": 405,
        "PAYLOAD_TOO_LARGE": 413,
        "UNSUPPORTED_MEDIA_TYPE": 415,
        "RATE_LIMITED": 429,
        "INTERNAL_ERROR": 500,
        # settings
        "INVALID_CONFIG": 400,
        "CONFIG_STALE": 409,
        "CONFIG_INVALID": 409,
        "PASSWORD_ALREADY_SET": 409,
        # capabilities, by executor stage
        "UNKNOWN_CAPABILITY": 404,
        "INVALID_ARGUMENTS": 400,
        "CAPABILITY_DISABLED": 409,
        "CAPABILITY_NOT_CONFIGURED": 409,
        "ENTITY_NOT_ALLOWLISTED": 403,
        "INVOCATION_LIMIT_EXCEEDED": 429,
        "CONFIRMATION_DENIED": 409,
        "CONFIRMATION_INVALID": 409,
        "HA_UNREACHABLE": 502,
        "HA_TIMEOUT": 502,
        "HA_UNAUTHORIZED": 502,
        "HA_NOT_FOUND": 502,
        "HA_BAD_RESPONSE": 502,
        "HA_TLS_ERROR": 502,
        # Not a failure of Home Assistant's answer but the Console declining to queue one more call
        # behind those still waiting on it: 503, "try again shortly", like any overloaded service.
        "HA_BUSY": 503,
        "RESULT_TOO_LARGE": 502,
        # conversation
        "MODEL_NOT_CONFIGURED": 503,
        "MODEL_UNAVAILABLE": 502,
    }
)

# Werkzeug's HTTP errors in the contract's words.
_HTTP_CODES = {
    400: "INVALID_REQUEST",
    401: "UNAUTHENTICATED",
    403: "FORBIDDEN",
    404: "NOT_FOUND",
    405: "METHOD_NOT_ALLOWED",
    413: "PAYLOAD_TOO_LARGE",
    415: "UNSUPPORTED_MEDIA_TYPE",
    429: "RATE_LIMITED",
}
_HTTP_MESSAGES = {
    "INVALID_REQUEST": "The request could not be understood.",
    "UNAUTHENTICATED": "Log in to the Console first, or send an API token.",
    "FORBIDDEN": "This is not allowed.",
    "NOT_FOUND": "There is nothing at this address.",
    "METHOD_NOT_ALLOWED": "This address does not accept that kind of request.",
    "PAYLOAD_TOO_LARGE": "The request is too large.",
    "UNSUPPORTED_MEDIA_TYPE": "Send the request body as JSON.",
    "RATE_LIMITED": "Too many attempts. Wait a few minutes, then try again.",
    "INTERNAL_ERROR": "Something went wrong inside the Console. Try again; if it keeps happening, "
    "look at the Console's log.",
}
CSRF_MESSAGE = (
    "The page's security token is missing or out of date. Reload the page and try again."
)


class Unauthenticated(ConsoleHaError):
    """The request carries neither a logged-in session nor a valid API token."""

    code = "UNAUTHENTICATED"


class InvalidRequest(ConsoleHaError):
    """The request itself is malformed: not JSON, not an object, a value of the wrong type."""

    code = "INVALID_REQUEST"


def status_for(code: str) -> int:
    """The HTTP status for an error code; 500 for a code this table does not know."""
    return STATUS.get(code, 500)


def is_api_request() -> bool:
    """API paths (and the MCP endpoint) answer JSON; everything else is a page for a person."""
    return request.path in ("/api", "/mcp") or request.path.startswith(("/api/", "/mcp/"))


def error_body(code: str, message: str, **detail: Any) -> dict[str, Any]:
    """The contract's error body: {"error": {"code", "message", ...detail}}."""
    return {"error": {"code": code, "message": message, **detail}}


def error_response(err: ConsoleHaError, headers: dict[str, str] | None = None) -> Response:
    """Render `err` as JSON on API paths and as the error page elsewhere, with its status."""
    status = status_for(err.code)
    if status == 500 and err.code not in STATUS:
        log.error("error code %s has no status in web.errors.STATUS", err.code)
    if is_api_request():
        response = jsonify(err.to_dict())
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
    headers = {"WWW-Authenticate": 'Bearer realm="console-ha"'} if err.code == "UNAUTHENTICATED" else None
    return error_response(err, headers)


def _handle_csrf_error(err: CSRFError) -> Response:
    # flask-wtf's own reason ("The CSRF token is missing.") goes along as a detail for whoever debugs it.
    log.info("CSRF check failed on %s %s: %s", request.method, request.path, err.description)
    return error_response(ConsoleHaError(CSRF_MESSAGE, code="CSRF_INVALID", reason=err.description))


def _handle_http_error(err: HTTPException) -> SansIOResponse:
    # An HTTPException may carry its own response, which Werkzeug types as the sans-IO base of Flask's.
    if err.response is not None:
        return err.response
    code = _HTTP_CODES.get(err.code or 500, "INTERNAL_ERROR")
    if code == "INTERNAL_ERROR":
        return _handle_internal_error(err)
    # Keep what the exception says about itself, e.g. the Allow header of a 405.
    headers = {k: v for k, v in err.get_headers() if k.lower() != "content-type"}
    return error_response(ConsoleHaError(_HTTP_MESSAGES[code], code=code), headers)


def _handle_internal_error(err: HTTPException) -> Response:
    original = getattr(err, "original_exception", None)
    if original is not None:
        log.error("unhandled error on %s %s", request.method, request.path, exc_info=original)
    return error_response(ConsoleHaError(_HTTP_MESSAGES["INTERNAL_ERROR"], code="INTERNAL_ERROR"))


def register_error_handlers(app: Flask) -> None:
    """Give every error the contract's JSON body on API paths and the error page elsewhere."""
    app.register_error_handler(ConsoleHaError, handle_console_error)
    app.register_error_handler(CSRFError, _handle_csrf_error)
    app.register_error_handler(HTTPException, _handle_http_error)
    # Flask hands unhandled exceptions to the 500 handler (unless PROPAGATE_EXCEPTIONS, as in tests).
    app.register_error_handler(InternalServerError, _handle_internal_error)
