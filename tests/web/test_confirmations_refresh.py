"""/confirmations refreshes itself without JavaScript: a <meta> refresh inside <noscript>, in the head (issue 25)."""

from __future__ import annotations

import re

from flask.testing import FlaskClient

from console_ha.web.confirmation_routes import NOSCRIPT_REFRESH_SECONDS

REFRESH = re.compile(r'<noscript><meta http-equiv="refresh" content="(\d+); url=(/[^"]*)"></noscript>')


def _head(html: str) -> str:
    return html.split("</head>", 1)[0]


def test_the_page_reloads_itself_as_a_get_of_itself_only_without_javascript(household: FlaskClient) -> None:
    """In the head, inside <noscript> (a page with its script ignores it), back to the page itself."""
    html = household.get("/confirmations").get_data(as_text=True)
    found = REFRESH.search(_head(html))
    assert found is not None
    assert (int(found.group(1)), found.group(2)) == (NOSCRIPT_REFRESH_SECONDS, "/confirmations")
    assert f"every {NOSCRIPT_REFRESH_SECONDS} seconds" in html


def test_a_refused_answer_s_page_reloads_as_the_page_not_the_post(household: FlaskClient) -> None:
    """The page a refused form answer renders (a POST's answer) reloads with a GET of /confirmations."""
    answer = household.post("/confirmations", data={"token": "no-such-card", "decision": "approve"})
    assert answer.status_code == 409
    found = REFRESH.search(_head(answer.get_data(as_text=True)))
    assert found is not None and found.group(2) == "/confirmations"


def test_other_pages_do_not_reload_themselves(household: FlaskClient) -> None:
    for path in ("/activity", "/settings/model", "/conversation"):
        assert 'http-equiv="refresh"' not in household.get(path).get_data(as_text=True), path


def test_the_household_can_stop_the_refresh_and_start_it_again(household: FlaskClient) -> None:
    """WCAG 2.2.1: a timed reload can be turned off (kept for the session, also after a form's answer), and on."""
    assert REFRESH.search(_head(household.get("/confirmations").get_data(as_text=True))) is not None
    assert 'href="/confirmations?refresh=off">Stop looking for new requests</a>' in household.get(
        "/confirmations").get_data(as_text=True)
    stopped = household.get("/confirmations?refresh=off").get_data(as_text=True)
    assert 'http-equiv="refresh"' not in stopped and "does not look for new requests by itself" in stopped
    assert f'href="/confirmations?refresh=on">Look for new requests every {NOSCRIPT_REFRESH_SECONDS} seconds' in stopped
    assert 'http-equiv="refresh"' not in household.get("/confirmations").get_data(as_text=True)
    refused = household.post("/confirmations", data={"token": "no-such-card", "decision": "approve"})
    assert 'http-equiv="refresh"' not in refused.get_data(as_text=True)
    again = household.get("/confirmations?refresh=on").get_data(as_text=True)
    assert REFRESH.search(_head(again)) is not None
    assert REFRESH.search(_head(household.get("/confirmations").get_data(as_text=True))) is not None
