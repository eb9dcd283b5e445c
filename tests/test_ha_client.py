"""The Home Assistant client over real HTTP on loopback: GET only, error mapping, deadlines, caps, TLS, no leaks."""

from __future__ import annotations

import ast
import inspect
import json
import logging
import traceback
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import ijson
import pytest
import requests

from console_ha import deadline as deadline_module
from console_ha.errors import (
    HABadResponse,
    HANotFound,
    HATimeout,
    HATLSError,
    HAUnauthorized,
    HAUnreachable,
    HomeAssistantError,
)
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from tests.stub_ha import FAULT_KINDS, OUTLASTS_ANY_DEADLINE, OVERSIZED_BYTES, StubHomeAssistant

PACKAGE = Path(__file__).resolve().parent.parent / "console_ha"


def client_for(stub: StubHomeAssistant, **kwargs: Any) -> HomeAssistantClient:
    return HomeAssistantClient(stub.base_url, Secret(stub.token), **kwargs)


# --- reads ---------------------------------------------------------------------------------------


def test_reads_config_states_and_one_state(stub_ha: StubHomeAssistant) -> None:
    """config(), states() and state() return Home Assistant's payloads as they are."""
    client = client_for(stub_ha)
    assert client.config(timeout=2)["version"] == "2025.4.4"
    states = client.states(timeout=2, max_bytes=1_000_000)
    assert [s["entity_id"] for s in states] == [s["entity_id"] for s in stub_ha.states]
    assert client.state("lock.front_door", timeout=2)["state"] == "locked"


def test_sends_the_bearer_token_and_asks_for_an_uncompressed_body(stub_ha: StubHomeAssistant) -> None:
    """The token travels only in the Authorization header; HA is spared the compression."""
    client_for(stub_ha).config(timeout=2)
    (request,) = stub_ha.requests
    assert request.method == "GET"
    assert request.headers["Authorization"] == f"Bearer {stub_ha.token}"
    assert request.headers["Accept-Encoding"] == "identity"
    assert stub_ha.token not in request.path and not request.query


def test_stream_yields_a_file_that_ijson_can_read(stub_ha: StubHomeAssistant) -> None:
    """stream() gives a binary file over the body, for parsing without holding it whole."""
    with client_for(stub_ha).stream("/api/states", timeout=2, max_bytes=1_000_000) as body:
        ids = [item["entity_id"] for item in ijson.items(body, "item")]
    assert ids == [s["entity_id"] for s in stub_ha.states]


def test_a_missing_entity_is_not_found_and_named(stub_ha: StubHomeAssistant) -> None:
    """A removed entity gives HA_NOT_FOUND with a message that names it."""
    with pytest.raises(HANotFound) as caught:
        client_for(stub_ha).state("sensor.removed_long_ago", timeout=2)
    assert caught.value.code == "HA_NOT_FOUND"
    assert "sensor.removed_long_ago" in caught.value.message


def test_ignores_proxy_settings_from_the_environment(stub_ha: StubHomeAssistant,
                                                     monkeypatch: pytest.MonkeyPatch) -> None:
    """No proxy named in the environment ever sees the token."""
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")
    monkeypatch.setenv("http_proxy", "http://127.0.0.1:9")
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    assert client_for(stub_ha).config(timeout=2)["location_name"] == "Home"


# --- failures map to one exception each --------------------------------------------------------

FAULTS = [
    ("401", HAUnauthorized, "HA_UNAUTHORIZED"),
    ("403", HAUnauthorized, "HA_UNAUTHORIZED"),
    ("404", HANotFound, "HA_NOT_FOUND"),
    ("500", HABadResponse, "HA_BAD_RESPONSE"),
    ("invalid_json", HABadResponse, "HA_BAD_RESPONSE"),
    ("wrong_shape", HABadResponse, "HA_BAD_RESPONSE"),
    ("oversized", HABadResponse, "HA_BAD_RESPONSE"),
    ("drop", HAUnreachable, "HA_UNREACHABLE"),
    ("slow", HATimeout, "HA_TIMEOUT"),
    ("slow_body", HATimeout, "HA_TIMEOUT"),
    ("trickle_headers", HATimeout, "HA_TIMEOUT"),
    ("trickle_body", HATimeout, "HA_TIMEOUT"),
]


def test_the_fault_table_covers_every_fault_the_stub_has() -> None:
    assert {kind for kind, _, _ in FAULTS} == FAULT_KINDS


@pytest.mark.parametrize(("kind", "error", "code"), FAULTS, ids=[f[0] for f in FAULTS])
def test_each_fault_maps_to_its_exception_and_code(stub_ha: StubHomeAssistant, kind: str,
                                                   error: type[HomeAssistantError], code: str) -> None:
    """Every way HA can fail becomes exactly one HA* error with the contract's code."""
    stub_ha.fault(kind, delay=2.0)
    with pytest.raises(error) as caught:
        client_for(stub_ha).states(timeout=0.4, max_bytes=1_000_000)
    assert caught.value.code == code
    # The stage is the executor's record of where an invocation ended; the client alone records none.
    assert caught.value.stage is None


@pytest.mark.parametrize(("method", "path"), [
    (lambda c: c.config(timeout=2), "/api/config"),
    (lambda c: c.states(timeout=2, max_bytes=100_000), "/api/states"),
    (lambda c: c.state("lock.front_door", timeout=2), "/api/states/lock.front_door"),
], ids=["config", "states", "state"])
def test_each_read_refuses_valid_json_of_the_wrong_shape(stub_ha: StubHomeAssistant,
                                                         method: Callable[[HomeAssistantClient], Any],
                                                         path: str) -> None:
    stub_ha.fault("wrong_shape", path)
    with pytest.raises(HABadResponse) as caught:
        method(client_for(stub_ha))
    assert caught.value.detail["reason"] == "wrong_shape"


def test_states_refuses_entries_without_entity_id_or_state(stub_ha: StubHomeAssistant) -> None:
    stub_ha.override("/api/states", json.dumps([{"entity_id": "light.a", "state": "on"}, {"state": "on"}]).encode())
    with pytest.raises(HABadResponse):
        client_for(stub_ha).states(timeout=2, max_bytes=100_000)


def test_a_wrong_token_is_unauthorized(stub_ha: StubHomeAssistant) -> None:
    client = HomeAssistantClient(stub_ha.base_url, Secret("not-" + stub_ha.token))
    with pytest.raises(HAUnauthorized):
        client.config(timeout=2)


def test_nothing_listening_is_unreachable(stub_ha: StubHomeAssistant) -> None:
    stub_ha.stop()  # frees the port: a connection there is refused
    with pytest.raises(HAUnreachable) as caught:
        client_for(stub_ha).config(timeout=2)
    assert stub_ha.base_url in caught.value.message


def test_a_redirect_is_not_followed(stub_ha: StubHomeAssistant) -> None:
    """A redirect could carry the token to another host: it is a bad response instead."""
    stub_ha.override("/api/config", b"", status=302)
    with pytest.raises(HABadResponse) as caught:
        client_for(stub_ha).config(timeout=2)
    assert caught.value.detail["reason"] == "redirect"
    assert len(stub_ha.requests) == 1


def test_a_token_that_cannot_be_a_header_is_refused_before_sending(stub_ha: StubHomeAssistant) -> None:
    client = HomeAssistantClient(stub_ha.base_url, Secret(stub_ha.token + "\r\nX-Evil: 1"))
    with pytest.raises(HAUnauthorized) as caught:
        client.config(timeout=2)
    assert stub_ha.token not in str(caught.value)
    assert stub_ha.requests == []


# --- deadline and byte cap -----------------------------------------------------------------------


def test_the_timeout_bounds_a_body_that_trickles_in(stub_ha: StubHomeAssistant) -> None:
    """Headers at once, then a piece now and then: the whole call still ends at the deadline.

    The whole body would come, a minute on: a timeout is the deadline's (held to its moment in test_deadline.py).
    """
    stub_ha.fault("slow_body", delay=OUTLASTS_ANY_DEADLINE)
    with pytest.raises(HATimeout) as caught:
        client_for(stub_ha).states(timeout=0.5, max_bytes=1_000_000)
    assert caught.value.message == "Home Assistant did not answer within 0.5 seconds."


@pytest.mark.parametrize("kind", ["trickle_headers", "trickle_body"])
def test_the_deadline_holds_for_headers_or_chunk_framing_sent_a_byte_at_a_time(
        stub_ha: StubHomeAssistant, kind: str) -> None:
    """Socket timeouts bound each read; a byte every 0.2 s never trips them, the deadline must.

    The whole answer (valid, 15 s and more of bytes) would come if waited for: a timeout is the deadline's.
    """
    stub_ha.fault(kind, delay=0.2)
    with pytest.raises(HATimeout) as caught:
        client_for(stub_ha).states(timeout=1.0, max_bytes=1_000_000)
    assert caught.value.message == "Home Assistant did not answer within 1 second."


def test_a_get_to_an_ip_address_over_http_runs_on_the_caller_s_thread_and_a_named_host_s_does_not(
        stub_ha: StubHomeAssistant, monkeypatch: pytest.MonkeyPatch) -> None:
    """No name lookup, no handoff: the watchdog bounds it (the trickle test above holds it to the deadline)."""
    handed_off: list[object] = []
    run = deadline_module.WORKERS.run

    def counted(work: Callable[[], None]) -> None:
        handed_off.append(work)
        run(work)

    monkeypatch.setattr(deadline_module.WORKERS, "run", counted)
    assert client_for(stub_ha).config(timeout=5)["time_zone"] == "Europe/Amsterdam"
    assert handed_off == [] and deadline_module.WATCHDOG.pending() == 0
    named = HomeAssistantClient(stub_ha.base_url.replace("127.0.0.1", "localhost"), Secret(stub_ha.token))
    assert named.config(timeout=5)["time_zone"] == "Europe/Amsterdam"
    assert len(handed_off) == 1


def test_a_spent_budget_is_a_timeout_without_a_request(stub_ha: StubHomeAssistant) -> None:
    """A deadline shared by several calls may be gone before the next one: HA_TIMEOUT, nothing sent."""
    with pytest.raises(HATimeout):
        client_for(stub_ha).config(timeout=-0.01)
    assert stub_ha.requests == []


def test_the_timeout_message_reads_as_whole_seconds(stub_ha: StubHomeAssistant) -> None:
    stub_ha.fault("slow", delay=3.0)
    with pytest.raises(HATimeout) as caught:
        client_for(stub_ha).config(timeout=1.0013)
    assert caught.value.message == "Home Assistant did not answer within 1 second."


def test_the_timeout_bounds_a_slow_stream_while_it_is_read(stub_ha: StubHomeAssistant) -> None:
    stub_ha.fault("slow_body", delay=OUTLASTS_ANY_DEADLINE)
    with pytest.raises(HATimeout) as caught:
        with client_for(stub_ha).stream("/api/states", timeout=0.5, max_bytes=1_000_000) as body:
            while body.read(1024):
                pass
    assert "within 0.5 seconds" in caught.value.message


def test_the_byte_cap_stops_reading_a_streamed_body(stub_ha: StubHomeAssistant) -> None:
    """A 64 MB chunked body stops being read just past the cap: the stub writes no more than sockets hold."""
    stub_ha.fault("oversized")
    received = 0
    with pytest.raises(HABadResponse) as caught:
        with client_for(stub_ha).stream("/api/states", timeout=10, max_bytes=200_000) as body:
            while chunk := body.read(8192):
                received += len(chunk)
    assert caught.value.detail["reason"] == "too_large"
    assert received <= 200_000
    # Past the cap the client hangs up: the stub's writes stop once loopback's socket buffers are full.
    assert stub_ha.body_bytes_written < OVERSIZED_BYTES // 4


def test_a_declared_length_over_the_cap_is_refused_unread(stub_ha: StubHomeAssistant) -> None:
    with pytest.raises(HABadResponse) as caught:
        client_for(stub_ha).states(timeout=2, max_bytes=100)
    assert caught.value.detail["reason"] == "too_large"


# --- the token never leaks -----------------------------------------------------------------------


def _leaks(token: str, error: BaseException) -> list[str]:
    views = {
        "str": str(error),
        "repr": repr(error),
        "traceback": "".join(traceback.format_exception(error)),
        "args": repr(error.args),
    }
    if isinstance(error, HomeAssistantError):
        views["to_dict"] = json.dumps(error.to_dict())
    return [name for name, text in views.items() if token in text]


@pytest.mark.parametrize("kind", sorted(FAULT_KINDS))
def test_no_fault_puts_the_token_in_an_exception_or_a_log_line(stub_ha: StubHomeAssistant, kind: str,
                                                               caplog: pytest.LogCaptureFixture) -> None:
    """Whatever goes wrong, the token is in no message, repr, traceback, error body or log line."""
    caplog.set_level(logging.DEBUG)
    stub_ha.fault(kind, delay=2.0)
    client = client_for(stub_ha)
    for call in (lambda: client.states(timeout=0.4, max_bytes=1_000_000),
                 lambda: client.config(timeout=0.4),
                 lambda: client.state("lock.front_door", timeout=0.4)):
        with pytest.raises(HomeAssistantError) as caught:
            call()
        assert _leaks(stub_ha.token, caught.value) == []
        # Nothing chained that could hold the request and its Authorization header.
        assert caught.value.__cause__ is None and caught.value.__context__ is None
    assert stub_ha.token not in caplog.text


@pytest.mark.parametrize("base_url", ["http://127.0.0.1:9", "https://127.0.0.1:9"])
def test_transport_errors_do_not_leak_the_token(base_url: str, caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG)
    token = StubHomeAssistant().token
    with pytest.raises(HAUnreachable) as caught:
        HomeAssistantClient(base_url, Secret(token)).config(timeout=1)
    assert _leaks(token, caught.value) == []
    assert token not in caplog.text


def test_the_client_shows_only_its_base_url(stub_ha: StubHomeAssistant) -> None:
    client = client_for(stub_ha)
    assert repr(client) == f"HomeAssistantClient(base_url={stub_ha.base_url!r})"
    assert stub_ha.token not in repr(vars(client)) and stub_ha.token not in str(client)


# --- GET and nothing else ------------------------------------------------------------------------

SENDING_VERBS = {"post", "put", "patch", "delete", "request", "head", "options", "send"}
# Receivers that are HTTP machinery (requests, a session, urllib3, http.client), not e.g. a store.
HTTP_RECEIVER = ("requests", "session", "urllib3", "http", "pool", "adapter")
# The model adapter POSTs to the household's OpenAI-compatible model server, never to HA: that one
# file may send, as long as it cannot reach Home Assistant's client.
MODEL_ADAPTER = PACKAGE / "conversation" / "model.py"
# `console-ha mcp`: posts MCP messages to the Console's own /mcp (the SDK's client, and a cancellation notice
# it must post itself: docs/mcp.md), never to Home Assistant.
STDIO_FORWARDER = PACKAGE / "mcp" / "stdio.py"


def _modules() -> Iterator[Path]:
    yield from sorted(PACKAGE.rglob("*.py"))


def _sending_calls(tree: ast.AST) -> list[str]:
    found = []
    for node in ast.walk(tree):
        if not isinstance(node, ast.Call) or not isinstance(node.func, ast.Attribute):
            continue
        receiver = ast.unparse(node.func.value).lower()
        if not any(word in receiver for word in HTTP_RECEIVER):
            continue
        if node.func.attr in SENDING_VERBS:
            found.append(f"line {node.lineno}: {ast.unparse(node.func)}(")
        if any(k.arg in ("method", "verb") for k in node.keywords):
            found.append(f"line {node.lineno}: method= in {ast.unparse(node.func)}(")
    return found


# The Home Assistant client's modules: the client itself, and the kept clients that lend it (console_ha.ha).
HA_CLIENT_MODULES = ("ha_client", "ha.client", "ha.clients", "ha.rest_client", "ha.kept_clients")
HA_CLIENT_NAMES = ("client", "clients", "rest_client", "kept_clients")


def _imports_the_ha_client(tree: ast.AST) -> bool:
    """Whether the module imports Home Assistant's client, under its old flat name or its home in `ha/`."""
    for n in ast.walk(tree):
        if isinstance(n, ast.ImportFrom):
            module = n.module or ""
            if module.endswith(HA_CLIENT_MODULES) or (
                    module.endswith("ha") and any(a.name in HA_CLIENT_NAMES for a in n.names)):
                return True
        if isinstance(n, ast.Import) and any(a.name.endswith(HA_CLIENT_MODULES) for a in n.names):
            return True
    return False


def test_no_module_names_the_service_call_api() -> None:
    """The one HA API that changes the home is named nowhere in the package."""
    offenders = [p.name for p in _modules() if "api/services" in p.read_text(encoding="utf-8").lower()]
    assert offenders == []


def test_no_module_sends_anything_but_get() -> None:
    """No code reaching HTTP calls post/put/patch/delete/request or passes method= (the model adapter and the
    stdio forwarder to the Console aside, neither of which may use the Home Assistant client)."""
    offenders: dict[str, list[str]] = {}
    for path in _modules():
        source = path.read_text(encoding="utf-8")
        tree = ast.parse(source)
        if path in (MODEL_ADAPTER, STDIO_FORWARDER):
            assert not _imports_the_ha_client(tree), f"{path.name} may send (to the model, to the Console), so must " \
                                                     "not use the HA client"
            continue
        if calls := _sending_calls(tree):
            offenders[str(path.relative_to(PACKAGE))] = calls
    assert offenders == {}


def test_the_model_adapter_check_would_catch_an_import_of_the_ha_client() -> None:
    """The exemption's condition follows the client to console_ha/ha/: each way of importing it is caught."""
    for source in ("from console_ha.ha.rest_client import HomeAssistantClient", "from console_ha.ha import rest_client",
                   "import console_ha.ha.rest_client", "from console_ha.ha.kept_clients import HomeAssistantClients",
                   "from console_ha.ha_client import HomeAssistantClient"):
        assert _imports_the_ha_client(ast.parse(source)), source
    assert not _imports_the_ha_client(ast.parse("from console_ha.ha.addresses import origin_of\nimport requests"))


def test_the_scan_would_catch_a_post() -> None:
    tree = ast.parse("self._session.post(url)\nrequests.request('DELETE', url)\nsession.get(url, method='PUT')")
    assert len(_sending_calls(tree)) == 3
    assert _sending_calls(ast.parse("self._session.get(url)\n@bp.post('/x')\ndef f(): store.delete(k)")) == []


def test_the_client_has_no_way_to_send_another_verb() -> None:
    for name in SENDING_VERBS | {"put_json", "post_json", "call_service"}:
        assert not hasattr(HomeAssistantClient, name), name
    for name, member in inspect.getmembers(HomeAssistantClient, callable):
        if name.startswith("__"):
            continue
        params = inspect.signature(member).parameters
        assert not {"method", "verb", "data", "json", "body"} & set(params), name


def test_every_request_on_the_wire_is_a_get(stub_ha: StubHomeAssistant) -> None:
    """Through the session the client uses, every read is a GET."""
    verbs: list[str] = []

    class RecordingSession(requests.Session):
        def request(self, method: str, url: str, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
            verbs.append(method)
            return super().request(method, url, *args, **kwargs)

    client = client_for(stub_ha, session=RecordingSession())
    client.config(timeout=2)
    client.states(timeout=2, max_bytes=1_000_000)
    client.state("light.bedroom", timeout=2)
    client.get_json("/api/", timeout=2, max_bytes=1000)
    with client.stream("/api/states", timeout=2, max_bytes=1_000_000) as body:
        body.read()
    assert set(verbs) == {"GET"}
    assert {r.method for r in stub_ha.requests} == {"GET"}


@pytest.mark.parametrize("path", [
    "/api/services/light/turn_on",
    "/api/Services/lock/unlock",
    "/api/%73ervices/lock/unlock",
    "/api/states/../services/lock/unlock",
    "/api/template",
    "/auth/token",
    "api/states",
    "http://evil.example/api/states",
    "//evil.example/api/states",
    "/api/states?x=1",
])
def test_paths_outside_the_read_api_are_refused_before_sending(stub_ha: StubHomeAssistant, path: str) -> None:
    with pytest.raises(ValueError):
        client_for(stub_ha).get_json(path, timeout=2, max_bytes=1000)
    assert stub_ha.requests == []


# --- TLS -----------------------------------------------------------------------------------------


@pytest.fixture
def https_stub(self_signed_cert: tuple[str, str]) -> Iterator[StubHomeAssistant]:
    cert, key = self_signed_cert
    with StubHomeAssistant(certfile=cert, keyfile=key) as server:
        yield server


def test_an_untrusted_certificate_is_a_tls_error(https_stub: StubHomeAssistant) -> None:
    with pytest.raises(HATLSError) as caught:
        client_for(https_stub).config(timeout=2)
    assert caught.value.code == "HA_TLS_ERROR"
    assert https_stub.requests == []


def test_the_households_ca_bundle_makes_it_trusted(https_stub: StubHomeAssistant,
                                                    self_signed_cert: tuple[str, str]) -> None:
    client = client_for(https_stub, ca_bundle=self_signed_cert[0])
    assert client.config(timeout=2)["version"] == "2025.4.4"


def test_a_session_that_skips_verification_is_overruled(https_stub: StubHomeAssistant) -> None:
    session = requests.Session()
    session.verify = False
    with pytest.raises(HATLSError):
        client_for(https_stub, session=session).config(timeout=2)


def test_https_to_a_plain_http_server_is_a_tls_error(stub_ha: StubHomeAssistant) -> None:
    client = HomeAssistantClient(stub_ha.base_url.replace("http:", "https:"), Secret(stub_ha.token))
    with pytest.raises(HATLSError):
        client.config(timeout=2)


def test_an_unreadable_ca_bundle_is_a_tls_error(https_stub: StubHomeAssistant, tmp_path: Path) -> None:
    with pytest.raises(HATLSError):
        client_for(https_stub, ca_bundle=str(tmp_path / "missing.pem")).config(timeout=2)
