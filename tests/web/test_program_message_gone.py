"""A program's conversation message whose program hung up while its card waited reads nothing (issue 20).

The program speaks real HTTP to waitress (which sees the hang-up); the household answers through the
test client of the same app.
"""

from __future__ import annotations

import json
import socket
import time

from console_ha.store.audit import AuditLog
from tests.fake_model import FakeModel, answer_from_tool_result, tool_call
from tests.mcp.conftest import serve, stop
from tests.web.test_conversation_api import CONFIRMATIONS, QUESTION, _card_for, household_of


def _post_and_hang_up(url: str, api_token: str) -> socket.socket:
    host, port = url.removeprefix("http://").split(":")
    body = json.dumps({"message": QUESTION}).encode()
    sock = socket.create_connection((host, int(port)))
    sock.sendall(b"POST /api/v1/conversation/message HTTP/1.1\r\nHost: " + f"{host}:{port}".encode()
                 + b"\r\nAuthorization: Bearer " + api_token.encode() + b"\r\nContent-Type: application/json"
                 + b"\r\nContent-Length: " + str(len(body)).encode() + b"\r\n\r\n" + body)
    return sock


def test_a_program_that_hung_up_gets_no_read_when_the_household_allows(make_app, password, api_token, configured,
                                                                        data_dir) -> None:
    with FakeModel() as model:
        app = make_app(CONSOLE_HA_LLM_URL=model.url, CONSOLE_HA_LLM_MODEL="fake-model", CONSOLE_HA_LLM_TIMEOUT=5)
        model.script(tool_call("home_assistant__list_entities", {}), answer_from_tool_result)
        server, thread, url = serve(app)
        try:
            household = household_of(app, password)
            sock = _post_and_hang_up(url, api_token)
            card = _card_for(household)
            sock.close()  # the program is gone
            time.sleep(2.5)  # waitress notices; the waiting message looks about once a second
            answered = household.post(f"{CONFIRMATIONS}/{card['token']}", json={"approve": True})
            deadline = time.monotonic() + 5
            while server.task_dispatcher.active_count and time.monotonic() < deadline:
                time.sleep(0.05)
            assert configured.requests == [], "Home Assistant was read for a program that had hung up"
            events = [e["event"] for e in AuditLog(data_dir).events()]
            assert "executed" not in events
            # The card went when its program did: the household is told so, and Activity says it was withdrawn.
            assert answered.status_code == 409, answered.get_data(as_text=True)
            assert "withdrawn" in answered.get_json()["error"]["message"]
            assert events[-1] == "cancelled"
        finally:
            stop(server, thread)
