"""The recording proxy carries REST and WebSocket to a real core byte for byte, and keeps what clients sent."""

from __future__ import annotations

import json
import os
import socket
import socketserver
import struct
import threading
import zlib
from collections.abc import Callable, Iterator

import pytest
import requests

from tests.real_ha.harness import LOCATION_NAME, RealHomeAssistant, free_port, mint_and_revoke
from tests.real_ha.wire import RecordingOverflow, RecordingProxy, readable

pytestmark = pytest.mark.real_ha

Proxies = Callable[[str], RecordingProxy]


class _Echo(socketserver.BaseRequestHandler):
    """Sends back every byte it reads, then closes once the client has half-closed."""

    def handle(self) -> None:
        while chunk := self.request.recv(1 << 16):
            self.request.sendall(chunk)


@pytest.fixture
def echo() -> Iterator[str]:
    """The base URL of a loopback echo server (not HTTP: the proxy only moves bytes)."""
    with socketserver.ThreadingTCPServer(("127.0.0.1", 0), _Echo) as server:
        server.daemon_threads = True
        thread = threading.Thread(target=server.serve_forever, daemon=True)
        thread.start()
        yield f"http://127.0.0.1:{server.server_address[1]}"
        server.shutdown()
        thread.join()


def _round_trip(url: str, payload: bytes) -> bytes:
    """Send `payload` through `url`'s port from one thread, half-close, and read the echo to its end."""
    with socket.create_connection(("127.0.0.1", int(url.rsplit(":", 1)[1])), timeout=30) as client:
        def send() -> None:
            client.sendall(payload)
            client.shutdown(socket.SHUT_WR)

        sender = threading.Thread(target=send)
        sender.start()
        received = bytearray()
        while chunk := client.recv(1 << 16):
            received += chunk
        sender.join()
    return bytes(received)


# --- against the real core ---------------------------------------------------------------------


def test_a_rest_get_reaches_the_core_and_its_bearer_token_is_recorded(
    real_ha: RealHomeAssistant, recording_proxy: Proxies
) -> None:
    proxy = recording_proxy(real_ha.base_url)

    response = real_ha.get("/api/", via=proxy.url)

    assert (response.status_code, response.json()) == (200, {"message": "API running."})
    assert proxy.sent_bytes().startswith(b"GET /api/ HTTP/1.1\r\n")
    assert proxy.saw(f"Authorization: Bearer {real_ha.token}".encode())


def test_a_websocket_auth_message_is_recorded_as_the_core_reads_it(
    real_ha: RealHomeAssistant, recording_proxy: Proxies
) -> None:
    """The client masks its frames, so the token is not in the raw bytes; unmasked, the auth message is."""
    proxy = recording_proxy(real_ha.base_url)

    with real_ha.websocket(via=proxy.url) as ws:
        config = ws.command("get_config")

    assert config["location_name"] == LOCATION_NAME
    assert real_ha.token.encode() not in proxy.sent_bytes()
    assert json.dumps({"type": "auth", "access_token": real_ha.token}).encode() in proxy.sent_plain()
    assert proxy.saw(real_ha.token.encode())


def test_a_token_that_never_went_through_the_proxy_is_not_seen(
    real_ha: RealHomeAssistant, recording_proxy: Proxies
) -> None:
    bystander, revoke = mint_and_revoke(real_ha, "wire test bystander")
    try:
        assert real_ha.get("/api/", token=bystander).status_code == 200  # a live token, sent straight to the core
        proxy = recording_proxy(real_ha.base_url)
        real_ha.get("/api/states", via=proxy.url).raise_for_status()
        with real_ha.websocket(via=proxy.url) as ws:
            ws.command("get_states")
    finally:
        revoke()

    assert proxy.saw(real_ha.token.encode())
    assert not proxy.saw(bystander.encode())
    assert proxy.connections == 2


def test_stopping_cuts_open_connections_refuses_new_ones_and_leaves_no_thread(real_ha: RealHomeAssistant) -> None:
    with RecordingProxy.in_front_of(real_ha.base_url) as proxy, real_ha.websocket(via=proxy.url) as ws:
        assert ws.command("get_config")["location_name"] == LOCATION_NAME
        proxy.stop()

        with pytest.raises(OSError):
            ws.command("get_config")

    assert proxy.alive_threads() == []
    assert not [thread for thread in threading.enumerate() if thread.name.startswith(f"{proxy.name}-")]
    with pytest.raises(ConnectionRefusedError):
        socket.create_connection(("127.0.0.1", proxy.port), timeout=5)
    assert real_ha.get("/api/").status_code == 200


# --- the proxy alone -------------------------------------------------------------------------


def test_bytes_pass_both_ways_unchanged_and_a_half_close_is_passed_on(echo: str) -> None:
    payload = os.urandom(3 * 1024 * 1024)

    with RecordingProxy.in_front_of(echo) as proxy:
        echoed = _round_trip(proxy.url, payload)

    assert echoed == payload  # the echo ends only when the proxy passed the client's half-close on
    assert proxy.sent_bytes() == payload


def test_an_origin_that_is_down_gets_the_client_connection_closed() -> None:
    with RecordingProxy(("127.0.0.1", free_port())) as proxy:
        with pytest.raises(requests.ConnectionError):
            requests.get(f"{proxy.url}/api/", headers={"Authorization": "Bearer never-delivered"}, timeout=5)

        assert proxy.connections == 0
        assert not proxy.saw(b"never-delivered")


def test_past_its_limit_a_recording_keeps_its_start_and_refuses_to_prove_an_absence(echo: str) -> None:
    with RecordingProxy.in_front_of(echo, limit=16) as proxy:
        _round_trip(proxy.url, b"GET /api/ HTTP/1.1\r\n" + b"x" * 100)

        assert proxy.saw(b"GET /api/")
        with pytest.raises(RecordingOverflow):
            proxy.saw(b"never sent")
        with pytest.raises(RecordingOverflow):
            proxy.sent_bytes()

        proxy.clear()
        assert not proxy.saw(b"never sent")
        assert proxy.sent_bytes() == b""


# --- reading a WebSocket stream ----------------------------------------------------------------

_UPGRADE = (b"GET /api/websocket HTTP/1.1\r\nHost: 127.0.0.1\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            b"Sec-WebSocket-Extensions: permessage-deflate\r\n\r\n")


def _frame(opcode: int, payload: bytes, *, fin: bool = True, compressed: bool = False) -> bytes:
    """One client frame, masked as RFC 6455 requires."""
    head = bytearray([(0x80 if fin else 0) | (0x40 if compressed else 0) | opcode])
    if len(payload) < 126:
        head.append(0x80 | len(payload))
    else:
        head += bytes([0x80 | 126]) + struct.pack("!H", len(payload))
    mask = os.urandom(4)
    return bytes(head) + mask + bytes(byte ^ mask[i % 4] for i, byte in enumerate(payload))


def test_compressed_fragmented_and_long_messages_are_read_back_unmasked() -> None:
    deflater = zlib.compressobj(wbits=-zlib.MAX_WBITS)  # one for the connection: the second message leans on the first

    def deflated(message: bytes) -> bytes:
        return (deflater.compress(message) + deflater.flush(zlib.Z_SYNC_FLUSH))[:-4]

    auth = json.dumps({"type": "auth", "access_token": "secret-in-a-deflated-frame"}).encode()
    states = json.dumps({"id": 1, "type": "get_states", "note": "secret-in-a-deflated-frame"}).encode()
    long = json.dumps({"id": 2, "type": "x", "pad": "p" * 300, "token": "secret-in-a-long-frame"}).encode()
    squeezed = deflated(auth)
    stream = (_UPGRADE + _frame(0x1, squeezed[:5], fin=False, compressed=True) + _frame(0x0, squeezed[5:])
              + _frame(0x1, deflated(states), compressed=True) + _frame(0x1, long))

    plain = readable(stream)

    assert b"secret" not in stream
    assert plain == b"\n".join([_UPGRADE, auth, states, long])


def test_a_stream_that_is_not_a_websocket_upgrade_reads_as_it_is() -> None:
    stream = b"GET /api/ HTTP/1.1\r\nAuthorization: Bearer abc\r\n\r\n\x81\x85junk"

    assert readable(stream) == stream
