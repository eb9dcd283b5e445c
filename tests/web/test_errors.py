"""One error shape for every code: {"error": {"code", "message", ...}} with the status web.errors maps."""

from __future__ import annotations

from collections.abc import Callable
from typing import NoReturn

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.errors import (
    ConfirmationInvalid,
    ConsoleHaError,
    HABadResponse,
    HABusy,
    HANotFound,
    HATimeout,
    HATLSError,
    HAUnauthorized,
    HAUnreachable,
    error_classes,
)
from console_ha.web.error_responses import STATUS

from .conftest import API, log_in, page_csrf

# Every code the contract names, with the status this project gives it.
CONTRACT_CODES = {
    "UNAUTHENTICATED": 401,
    "INVALID_CONFIG": 400,
    "UNKNOWN_CAPABILITY": 404,
    "INVALID_ARGUMENTS": 400,
    "CAPABILITY_DISABLED": 409,
    "CAPABILITY_NOT_CONFIGURED": 409,
    "ENTITY_NOT_ALLOWLISTED": 403,
    "INVOCATION_LIMIT_EXCEEDED": 429,
    "REFUSED_BY_PLUGIN": 403,  # issue 30: a household's plugin refused the read (stage 3)
    "CONFIRMATION_DENIED": 409,
    "CONFIRMATION_INVALID": 409,
    "HA_UNREACHABLE": 502,
    "HA_TIMEOUT": 502,
    "HA_UNAUTHORIZED": 502,
    "HA_NOT_FOUND": 502,
    "HA_BAD_RESPONSE": 502,
    "HA_TLS_ERROR": 502,
    "HA_NO_STATISTICS": 502,  # issue 19: get_statistics for an entity that keeps none
    "RESULT_TOO_LARGE": 502,
    "MODEL_NOT_CONFIGURED": 503,
    "MODEL_UNAVAILABLE": 502,
}
# Codes this project adds to the contract's, with their statuses (docs/web.md).
PROJECT_CODES = {
    # the Console declines to queue another call behind those a hung Home Assistant holds: "try later"
    "HA_BUSY": 503,
}

_raised: dict[str, ConsoleHaError] = {}


def _raise(code: str) -> NoReturn:
    raise _raised[code]


def _boom() -> NoReturn:
    raise RuntimeError("secret internals: /etc/shadow")


@pytest.fixture
def raising_app(make_app: Callable[..., Flask]) -> Flask:
    """An app with routes that raise a chosen error, on an API path and on a page path."""
    app = make_app(PROPAGATE_EXCEPTIONS=False)
    app.add_url_rule("/api/v1/_raise/<code>", "raise_api", _raise)
    app.add_url_rule("/_raise/<code>", "raise_page", _raise)
    app.add_url_rule("/api/v1/_boom", "boom", _boom)
    return app


@pytest.fixture
def api(raising_app: Flask, password: str) -> FlaskClient:
    """The household's browser on the raising app (its routes are in no access table: the household's alone)."""
    client = raising_app.test_client()
    log_in(client, password)
    client.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(client)
    return client


def _assert_shape(body: dict, code: str) -> dict:
    assert set(body) == {"error"}
    error = body["error"]
    assert error["code"] == code
    assert isinstance(error["message"], str) and error["message"].strip()
    return error


def test_every_contract_code_has_its_status() -> None:
    """The table covers the contract's codes with the statuses docs/web.md records."""
    for code, status in CONTRACT_CODES.items():
        assert STATUS[code] == status, code


def test_every_added_code_has_its_status() -> None:
    """The codes the project adds have the statuses docs/web.md records."""
    for code, status in PROJECT_CODES.items():
        assert STATUS[code] == status, code


@pytest.mark.parametrize("code", sorted(STATUS))
def test_every_code_answers_its_status_and_the_contract_shape(api: FlaskClient, code: str) -> None:
    """JSON on API paths: the status from the table and {"error": {"code", "message", ...detail}}."""
    _raised[code] = ConsoleHaError("A sentence for a person.", code=code, field="base_url")
    response = api.get(f"/api/v1/_raise/{code}")
    assert response.status_code == STATUS[code]
    assert response.mimetype == "application/json"
    error = _assert_shape(response.get_json(), code)
    assert error == {"code": code, "message": "A sentence for a person.", "field": "base_url"}


@pytest.mark.parametrize("code", sorted(STATUS))
def test_every_code_on_a_page_path_renders_the_error_page(api: FlaskClient, code: str) -> None:
    """Pages get HTML with the same status and the message, not JSON."""
    _raised[code] = ConsoleHaError("A sentence for a person.", code=code)
    response = api.get(f"/_raise/{code}")
    assert response.status_code == STATUS[code]
    assert response.mimetype == "text/html"
    html = response.get_data(as_text=True)
    assert "A sentence for a person." in html and code in html


@pytest.mark.parametrize(
    "error, code",
    [
        (HAUnreachable("Home Assistant could not be reached."), "HA_UNREACHABLE"),
        (HATimeout("Home Assistant did not answer in time."), "HA_TIMEOUT"),
        (HAUnauthorized("Home Assistant refused the token.", status=401), "HA_UNAUTHORIZED"),
        (HANotFound("No such entity."), "HA_NOT_FOUND"),
        (HABadResponse("Odd answer.", reason="invalid_json"), "HA_BAD_RESPONSE"),
        (HATLSError("Certificate not trusted.", reason="certificate"), "HA_TLS_ERROR"),
        (HABusy("Home Assistant is still busy with earlier requests."), "HA_BUSY"),
        (ConfirmationInvalid(None, "That confirmation is no longer valid."), "CONFIRMATION_INVALID"),
    ],
)
def test_the_error_classes_map_through_their_code(api: FlaskClient, error: ConsoleHaError, code: str) -> None:
    """The HA* exceptions and capability errors answer with their own code and detail."""
    _raised[code] = error
    response = api.get(f"/api/v1/_raise/{code}")
    assert response.status_code == STATUS[code]
    body = _assert_shape(response.get_json(), code)
    assert body["message"] == error.message
    for key, value in error.detail.items():
        assert body[key] == value


def test_an_unknown_code_is_a_500_with_the_same_shape(api: FlaskClient) -> None:
    """A code missing from the table is a bug, but still answers in the contract's shape."""
    _raised["NOT_IN_THE_TABLE"] = ConsoleHaError("Something odd.", code="NOT_IN_THE_TABLE")
    response = api.get("/api/v1/_raise/NOT_IN_THE_TABLE")
    assert response.status_code == 500
    _assert_shape(response.get_json(), "NOT_IN_THE_TABLE")


def test_an_unhandled_exception_is_internal_error_without_its_details(api: FlaskClient) -> None:
    """A crash answers 500 INTERNAL_ERROR; the exception's text stays in the log."""
    response = api.get("/api/v1/_boom")
    assert response.status_code == 500
    _assert_shape(response.get_json(), "INTERNAL_ERROR")
    assert b"shadow" not in response.get_data()


def test_an_unknown_api_path_is_not_found(bearer: FlaskClient) -> None:
    """404 NOT_FOUND as JSON on an API path."""
    response = bearer.get("/api/v1/no-such-thing")
    assert response.status_code == 404
    _assert_shape(response.get_json(), "NOT_FOUND")


def test_an_unknown_page_is_an_html_not_found(logged_in: FlaskClient) -> None:
    """404 as the error page elsewhere."""
    response = logged_in.get("/no-such-page")
    assert response.status_code == 404
    assert response.mimetype == "text/html"
    assert "There is nothing at this address." in response.get_data(as_text=True)


def test_a_wrong_method_is_method_not_allowed_with_allow(bearer: FlaskClient) -> None:
    """405 METHOD_NOT_ALLOWED keeps the Allow header."""
    response = bearer.put(API)
    assert response.status_code == 405
    _assert_shape(response.get_json(), "METHOD_NOT_ALLOWED")
    assert "POST" in response.headers["Allow"]


def test_an_oversized_body_is_payload_too_large(household: FlaskClient) -> None:
    """Bodies are capped: 413 PAYLOAD_TOO_LARGE."""
    response = household.post(API, data=b"{" + b" " * (2 * 1024 * 1024) + b"}", content_type="application/json")
    assert response.status_code == 413
    _assert_shape(response.get_json(), "PAYLOAD_TOO_LARGE")


@pytest.mark.parametrize(
    "data, content_type",
    [
        (b'{"enabled": tru', "application/json"),
        (b"[1, 2]", "application/json"),
        (b'"text"', "application/json"),
        (b"enabled=true", "application/x-www-form-urlencoded"),
        (b"", "application/json"),
        (b"\xff\xfe", "application/json"),
    ],
    ids=["malformed", "array", "string", "form", "empty", "not-utf8"],
)
def test_a_body_that_is_not_a_json_object_is_invalid_request(
    household: FlaskClient, data: bytes, content_type: str
) -> None:
    """400 INVALID_REQUEST, and nothing is written."""
    response = household.post(API, data=data, content_type=content_type)
    assert response.status_code == 400
    _assert_shape(response.get_json(), "INVALID_REQUEST")
    assert household.get(API).get_json()["revision"] == "absent"


@pytest.mark.parametrize("code", sorted(STATUS))
def test_every_error_class_answers_with_the_code_and_status_it_owns(api: FlaskClient, code: str) -> None:
    """Each class in console_ha.errors owns one code and its status; raised, it answers the one body shape."""
    owner = error_classes()[code]
    assert owner.code == code and owner.http_status == STATUS[code]
    error = owner.__new__(owner)  # the message and detail every class takes, whatever its own constructor adds
    ConsoleHaError.__init__(error, "A sentence for a person.", field="base_url")
    _raised[code] = error
    response = api.get(f"/api/v1/_raise/{code}")
    assert response.status_code == owner.http_status
    assert _assert_shape(response.get_json(), code) == {
        "code": code, "message": "A sentence for a person.", "field": "base_url"}
