"""Making an API token on /settings/api-tokens: a session with CSRF only, shown once, configurations to copy;
Revoke asks first on a page of its own."""

from __future__ import annotations

import html
import json
import re
from collections.abc import Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.mcp.host_configs import host_configurations
from console_ha.secret import Secret
from console_ha.store.console_secrets import ConsoleSecrets
from console_ha.store.datadir import DataDir
from tests.web.conftest import PROGRAM_API, household_client
from tests.web.live import served

TOKENS_PAGE = "/settings/api-tokens"
_NEW_TOKEN = re.compile(r'id="new-token" type="text" readonly value="(cha_[A-Za-z0-9_-]+)"')
_CONFIG = re.compile(r'<pre id="config-(\w+)"[^>]*><code>(.*?)</code></pre>', re.S)


def _shown_token(page: str) -> str | None:
    match = _NEW_TOKEN.search(page)
    return match.group(1) if match else None


def test_the_household_makes_a_token_that_is_shown_once_over_real_http(
    make_app: Callable[..., Flask], password: str, console_secrets: ConsoleSecrets, data_dir: DataDir,
    caplog: pytest.LogCaptureFixture,
) -> None:
    """Session + CSRF + own Origin: 303 to the page, which shows it once with both configurations; a reload does not."""
    with served(make_app()) as console:
        household = console.browser()
        household.log_in(password)
        csrf = household.csrf("/confirmations")  # not the tokens page: a look there would take the new token
        made = household.post(TOKENS_PAGE, data={"name": "  Desk   assistant ", "csrf_token": csrf})
        assert made.status_code == 303 and made.headers["Location"] == TOKENS_PAGE
        page = household.get(TOKENS_PAGE).text
        token = _shown_token(page)
        assert token is not None and "The new token for “Desk assistant”" in page

        # It works as a program's token, and the configurations carry it and this Console's address.
        program = console.browser()
        program.http.headers["Authorization"] = f"Bearer {token}"
        assert program.get(PROGRAM_API).status_code == 200
        configs = {key: json.loads(html.unescape(text)) for key, text in _CONFIG.findall(page)}
        command = configs["command"]["mcpServers"]["console-ha"]
        assert command["args"] == ["mcp", "--url", console.url]
        assert command["env"] == {"CONSOLE_HA_API_TOKEN": token}
        assert command["command"].endswith("console-ha")
        http = configs["http"]["mcpServers"]["console-ha"]
        assert http == {"type": "http", "url": console.url + "/mcp", "headers": {"Authorization": f"Bearer {token}"}}

        again = household.get(TOKENS_PAGE).text
        assert _shown_token(again) is None and token not in again and "Desk assistant" in again
    # Never logged, never written in clear: the file keeps its hash only.
    assert token not in caplog.text
    for path in data_dir.root.rglob("*"):
        if path.is_file():
            assert token.encode() not in path.read_bytes(), path
    assert [t.name for t in console_secrets.api_tokens()] == ["Desk assistant"]


def test_a_new_token_survives_head_and_other_requests_and_only_the_pages_get_takes_it(
    make_app: Callable[..., Flask], password: str, console_secrets: ConsoleSecrets,
) -> None:
    """The probe's finding: a HEAD of the page used up the token, so the GET that followed showed none."""
    with served(make_app()) as console:
        household = console.browser()
        household.log_in(password)
        made = household.post(TOKENS_PAGE, data={"name": "Desk", "csrf_token": household.csrf("/confirmations")})
        assert made.status_code == 303
        token_id = console_secrets.api_tokens()[0].token_id
        for _ in range(2):
            head = household.http.head(console.url + TOKENS_PAGE, allow_redirects=False)
            assert head.status_code == 200 and head.content == b""
        assert household.http.options(console.url + TOKENS_PAGE).status_code == 200
        assert household.get(f"{TOKENS_PAGE}/{token_id}/revoke").status_code == 200
        assert household.get("/confirmations").status_code == 200
        refused = household.post(TOKENS_PAGE, data={"name": "", "csrf_token": household.csrf("/confirmations")})
        assert refused.status_code == 400 and _shown_token(refused.text) is None

        token = _shown_token(household.get(TOKENS_PAGE).text)
        assert token is not None and console_secrets.verify_api_token(token) is not None
        assert _shown_token(household.get(TOKENS_PAGE).text) is None


def test_making_a_token_needs_the_csrf_token(logged_in: FlaskClient, console_secrets: ConsoleSecrets) -> None:
    """A session's form without its CSRF token makes nothing."""
    response = logged_in.post(TOKENS_PAGE, data={"name": "sneaky"})
    assert response.status_code == 400
    assert console_secrets.api_tokens() == []


def test_a_token_from_another_site_is_refused(make_app: Callable[..., Flask], password: str,
                                              console_secrets: ConsoleSecrets) -> None:
    """A logged-in browser tricked into posting from another Origin gets 403; nothing is made."""
    with served(make_app()) as console:
        household = console.browser()
        household.log_in(password)
        csrf = household.csrf("/confirmations")
        response = household.post(TOKENS_PAGE, origin="http://evil.example", data={"name": "x", "csrf_token": csrf})
        assert response.status_code == 403
    assert console_secrets.api_tokens() == []


def test_an_api_token_cannot_make_a_token_nor_ask_to_revoke_one(bearer: FlaskClient,
                                                               console_secrets: ConsoleSecrets) -> None:
    """403 FORBIDDEN (a page, so the error page): a token that could make tokens would outlive its revocation."""
    response = bearer.post(TOKENS_PAGE, data={"name": "another"})
    assert response.status_code == 403 and "FORBIDDEN" in response.get_data(as_text=True)
    token_id = console_secrets.api_tokens()[0].token_id
    assert bearer.get(f"{TOKENS_PAGE}/{token_id}/revoke").status_code == 403
    assert [t.name for t in console_secrets.api_tokens()] == ["tests"]


@pytest.mark.parametrize("name", ["", "   ", "x" * 101, "tab\there\x00"])
def test_a_bad_name_is_refused_on_the_page_and_nothing_is_made(
    household: FlaskClient, console_secrets: ConsoleSecrets, name: str
) -> None:
    """400 with the reason beside the field, which keeps what was typed; no token."""
    response = household.post(TOKENS_PAGE, data={"name": name})  # the CSRF token in its header, as always here
    assert response.status_code == 400
    page = response.get_data(as_text=True)
    assert 'aria-invalid="true"' in page and 'role="alert"' in page
    assert console_secrets.api_tokens() == []
    assert _shown_token(page) is None


def test_one_session_never_sees_the_token_another_made(app: Flask, data_dir: DataDir,
                                                        console_secrets: ConsoleSecrets) -> None:
    """The new token waits for the session that made it; a second browser's look shows nothing."""
    first = household_client(app, data_dir)
    second = app.test_client()
    from tests.web.conftest import log_in
    log_in(second)
    assert first.post(TOKENS_PAGE, data={"name": "laptop"}).status_code == 303
    assert _shown_token(second.get(TOKENS_PAGE).get_data(as_text=True)) is None
    token = _shown_token(first.get(TOKENS_PAGE).get_data(as_text=True))
    assert token is not None and console_secrets.verify_api_token(token) is not None


def test_revoke_asks_first_on_a_page_of_its_own(household: FlaskClient, console_secrets: ConsoleSecrets) -> None:
    """The list's Revoke is a GET to a question; only the question's POST (with CSRF) revokes."""
    console_secrets.create_api_token("old laptop")
    token_id = console_secrets.api_tokens()[0].token_id
    listing = household.get(TOKENS_PAGE).get_data(as_text=True)
    assert f'<form method="get" action="{TOKENS_PAGE}/{token_id}/revoke"' in listing
    question = household.get(f"{TOKENS_PAGE}/{token_id}/revoke")
    assert question.status_code == 200
    text = question.get_data(as_text=True)
    assert "Revoke the token “old laptop”?" in text and 'aria-label="Yes, revoke old laptop"' in text
    assert len(console_secrets.api_tokens()) == 1  # asking removes nothing
    done = household.post(f"{TOKENS_PAGE}/{token_id}/revoke")
    assert done.status_code == 303
    assert console_secrets.api_tokens() == []
    gone = household.get(f"{TOKENS_PAGE}/{token_id}/revoke")
    assert gone.status_code == 303  # already revoked: back to the list, which says so
    assert "already revoked" in household.get(TOKENS_PAGE).get_data(as_text=True)
    assert household.get(f"{TOKENS_PAGE}/not-an-id/revoke").status_code == 404


def test_the_configurations_are_json_with_the_token_and_the_consoles_address() -> None:
    """Both shapes parse; the command host gets the base URL, the HTTP host its /mcp; no trailing slash kept."""
    token = "cha_" + "a" * 43
    command, http = host_configurations("http://console.local:8000/", Secret(token), command="/opt/bin/console-ha")
    assert json.loads(command.text) == {"mcpServers": {"console-ha": {
        "command": "/opt/bin/console-ha", "args": ["mcp", "--url", "http://console.local:8000"],
        "env": {"CONSOLE_HA_API_TOKEN": token}}}}
    assert json.loads(http.text)["mcpServers"]["console-ha"]["url"] == "http://console.local:8000/mcp"
    assert token not in repr(command.title + command.explanation + http.title + http.explanation)


def test_a_new_token_waits_for_its_page_two_minutes_at_most_and_sixteen_at_once() -> None:
    """Taken once; too old, or pushed out by the seventeenth session's, it is gone (the household makes another)."""
    import time

    from console_ha.web.api_tokens import MAX_WAITING_TO_BE_SHOWN, SHOWN_FOR_SECONDS, NewToken, NewTokens

    kept = NewTokens()
    kept.keep("old", NewToken("old", Secret("cha_old"), time.monotonic() - SHOWN_FOR_SECONDS - 1))
    assert kept.take("old") is None
    for n in range(MAX_WAITING_TO_BE_SHOWN + 1):
        kept.keep(f"s{n}", NewToken(f"t{n}", Secret(f"cha_{n}"), time.monotonic()))
    assert kept.take("s0") is None  # the oldest went past the bound
    new = kept.take("s1")
    assert new is not None and new.token.reveal() == "cha_1" and "cha_1" not in repr(new)
    assert kept.take("s1") is None  # once
    peeked = kept.peek("s2")  # a HEAD's look leaves it for the GET
    assert peeked is not None and kept.take("s2") is peeked and kept.peek("s2") is None
