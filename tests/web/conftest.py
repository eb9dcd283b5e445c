"""Fixtures for the web layer: an app on a fresh data dir, clients that are logged out, logged in, or bearers."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path
from typing import Any, cast

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from console_ha.web import create_app
from tests.fake_model import FakeModel

PASSWORD = "correct horse battery staple"
# The real default is scrypt (~70 ms a check); the tests prove the flows, not the hash's cost.
FAST_HASH = "pbkdf2:sha256:1000"
API = "/api/v1/conversation/home-assistant"
# What a program's API token may read (its own cards waiting for the household), and where it may ask.
PROGRAM_API = "/api/v1/confirmations"
MESSAGE_API = "/api/v1/conversation/message"
TEST_CONFIG = {
    "TESTING": True,
    "CONSOLE_HA_STATES_TIMEOUT": 2.0,
    "CONSOLE_HA_TEST_TIMEOUT": 2.0,
    "CONSOLE_HA_AREAS_TIMEOUT": 1.0,
    "CONSOLE_HA_DISCOVERY_TIMEOUT": 0.5,
}

_CSRF_META = re.compile(r'<meta name="csrf-token" content="([^"]+)">')


class RecordingClient(FlaskClient):
    """A test client that keeps every response's raw bytes, so a test can prove a secret never left."""

    def open(self, *args: Any, **kwargs: Any) -> Any:
        response = super().open(*args, **kwargs)
        headers = "\n".join(f"{k}: {v}" for k, v in response.headers.items()).encode()
        self.application.config["RECORDED_RESPONSES"].append(headers + b"\n\n" + response.get_data())
        return response


@pytest.fixture
def make_app(data_dir: DataDir, recorded_responses: list[bytes]) -> Callable[..., Flask]:
    """Build an app on the test's data dir whose clients record their responses."""

    def make(**config: Any) -> Flask:
        app = create_app(data_dir, {**TEST_CONFIG, **config, "RECORDED_RESPONSES": recorded_responses})
        app.test_client_class = RecordingClient
        return app

    return make


@pytest.fixture
def app(request: pytest.FixtureRequest, make_app: Callable[..., Flask]) -> Flask:
    """A Console app on an empty data dir; a `with_model` mark gives it the fake model, `app_config(**c)` config c."""
    if request.node.get_closest_marker("with_model"):
        return cast(Flask, request.getfixturevalue("app_with_model"))
    marked = request.node.get_closest_marker("app_config")
    return make_app(**(marked.kwargs if marked else {}))


@pytest.fixture
def app_with_model(make_app: Callable[..., Flask], model: FakeModel) -> Flask:
    """A Console whose model is the scripted fake."""
    return make_app(CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model", CONSOLE_HA_LLM_TIMEOUT=5)


@pytest.fixture
def client(app: Flask) -> FlaskClient:
    """A browser that has not logged in."""
    return app.test_client()


@pytest.fixture
def console_secrets(data_dir: DataDir) -> ConsoleSecrets:
    """The Console's own secrets in the test's data dir."""
    return ConsoleSecrets(data_dir)


@pytest.fixture
def password(console_secrets: ConsoleSecrets, hidden_secrets: list[str]) -> str:
    """The household's password, set (cheaply hashed) before the test."""
    console_secrets.set_password(PASSWORD, method=FAST_HASH)
    hidden_secrets.append(PASSWORD)
    return PASSWORD


def csrf_from(html: str) -> str:
    """The CSRF token a page carries in its meta tag."""
    match = _CSRF_META.search(html)
    assert match, "the page carries no CSRF meta tag"
    return match.group(1)


def log_in(client: FlaskClient, password: str = PASSWORD) -> Any:
    """Log in through the real form: GET it for the CSRF token, then POST the password."""
    token = csrf_from(client.get("/login").get_data(as_text=True))
    return client.post("/login", data={"password": password, "csrf_token": token})


def page_csrf(client: FlaskClient) -> str:
    """The CSRF token of the logged-in session, read from a page this layer renders (the error page)."""
    return csrf_from(client.get("/no-such-page").get_data(as_text=True))


def household_client(app: Flask, data_dir: DataDir) -> FlaskClient:
    """The household's browser on `app`: the password set (cheaply), logged in, sending the page's CSRF token."""
    ConsoleSecrets(data_dir).set_password(PASSWORD, method=FAST_HASH)
    client = app.test_client()
    assert log_in(client).status_code == 302
    client.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(client)
    return client


@pytest.fixture
def logged_in(client: FlaskClient, password: str) -> FlaskClient:
    """A browser with a session, sending no CSRF token unless a test adds one."""
    assert log_in(client, password).status_code == 302
    return client


@pytest.fixture
def household(logged_in: FlaskClient) -> FlaskClient:
    """A logged-in browser whose every request carries the CSRF token, as the page's fetch() calls do."""
    logged_in.environ_base["HTTP_X_CSRFTOKEN"] = page_csrf(logged_in)
    return logged_in


@pytest.fixture
def api_token(console_secrets: ConsoleSecrets, hidden_secrets: list[str]) -> str:
    """A bearer token made as `console-ha api-token create` makes one."""
    token = console_secrets.create_api_token("tests")
    hidden_secrets.append(token)
    return token


@pytest.fixture
def bearer(app: Flask, api_token: str) -> FlaskClient:
    """A program using an API token: no session, no CSRF token."""
    client = app.test_client()
    client.environ_base["HTTP_AUTHORIZATION"] = f"Bearer {api_token}"
    return client



def configure(client: FlaskClient, base_url: str, token: str, **extra: Any) -> dict[str, Any]:
    """Save a URL and token through the API, as the settings page does; returns the answer."""
    response = client.post(API, json={"base_url": base_url, "access_token": token, **extra})
    assert response.status_code == 200, response.get_json()
    return response.get_json()


def unused_port() -> int:
    """A loopback port with nothing listening on it."""
    import socket

    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def files_under(root: Path) -> list[Path]:
    """Every file under `root` (none when it does not exist)."""
    return sorted(p for p in root.rglob("*") if p.is_file()) if root.exists() else []


def error_of(response: Any, status: int, code: str) -> dict[str, Any]:
    """The error body's inner object, once the answer is `status` with `code` and a message (the one shape)."""
    assert response.status_code == status, response.get_data(as_text=True)
    error: dict[str, Any] = response.get_json()["error"]
    assert error["code"] == code and error["message"]
    return error


def snapshot(data_dir: DataDir) -> dict[Path, bytes]:
    """Every Home Assistant file of the data dir with its bytes (the Console's own files left out)."""
    return {path: path.read_bytes() for path in files_under(data_dir.root) if "console" not in path.parts}
