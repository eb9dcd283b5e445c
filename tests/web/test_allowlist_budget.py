"""An allowlist list_entities could not answer is refused on save, over the API and the no-JavaScript form."""

from __future__ import annotations

import re
from pathlib import Path

from flask.testing import FlaskClient
from markupsafe import escape

from console_ha.capabilities.entity_budget import BUDGET_BYTES, entity_cost
from console_ha.ha.addresses import ENTITY_ID_RE
from console_ha.store.config import MAX_ALLOWLIST
from console_ha.store.datadir import DataDir
from console_ha.store.review import MAX_SENT_BY_PAGE
from tests.seed import seed_settings

from .conftest import API, page_csrf

PAGE = "/settings/home-assistant"
# 400 ids of one length: about 290 of them fit.
TOO_MANY = [f"light.lamp_{i:03d}" for i in range(400)]
FITS = BUDGET_BYTES // entity_cost(TOO_MANY[0])


def test_the_api_refuses_an_allowlist_that_cannot_fit_and_says_how_many_do(
        household: FlaskClient, data_dir: DataDir) -> None:
    """400 INVALID_CONFIG, field allowlisted_entities, the number that fits; nothing written."""
    seed_settings(data_dir, {"allowlisted_entities": TOO_MANY[:10]})
    before = data_dir.ha_config.read_bytes()
    response = household.post(API, json={"allowlisted_entities": TOO_MANY})
    assert response.status_code == 400
    error = response.get_json()["error"]
    assert (error["code"], error["field"], error["fits"], error["chosen"]) == (
        "INVALID_CONFIG", "allowlisted_entities", FITS, 400)
    assert f"about {FITS:,} entities" in error["message"]
    assert data_dir.ha_config.read_bytes() == before


def test_the_api_accepts_exactly_as_many_as_fit(household: FlaskClient) -> None:
    """The limit is the budget, not a round number: FITS are saved, FITS + 1 are not."""
    assert household.post(API, json={"allowlisted_entities": TOO_MANY[:FITS]}).status_code == 200
    assert household.post(API, json={"allowlisted_entities": TOO_MANY[:FITS + 1]}).status_code == 400


def test_without_javascript_the_refusal_says_how_many_fit(logged_in: FlaskClient, data_dir: DataDir) -> None:
    """The form's refusal is the page again, with the number that fits, and nothing saved."""
    response = logged_in.post(PAGE, data={
        "csrf_token": page_csrf(logged_in), "revision": "", "base_url": "", "allowlisted_entities": TOO_MANY})
    html = response.get_data(as_text=True)
    assert response.status_code == 400
    assert f"about {FITS:,} entities" in html and "Nothing was saved." in html
    assert not data_dir.ha_config.exists()


def test_the_page_gives_the_meter_the_servers_numbers(logged_in: FlaskClient, data_dir: DataDir) -> None:
    """budget.js is loaded with the budget of entity_budget, not a copy; each box carries the server's cost.

    No per-entity formula goes to a script (issue 21): the picker's JSON and the boxes carry each cost.
    """
    seed_settings(data_dir, {"allowlisted_entities": ["light.kitchen"]})
    html = logged_in.get(PAGE).get_data(as_text=True)
    tag = re.search(r'<script[^>]*id="budget-script"[^>]*>', html)
    assert tag, "the page does not load budget.js"
    assert 'src="/static/budget.js"' in tag.group(0)
    assert f'data-budget-bytes="{BUDGET_BYTES}"' in tag.group(0)
    assert "data-entity-bytes" not in html
    box = re.search(r'<input type="checkbox" id="allow-1"[^>]*>', html)
    assert box and 'value="light.kitchen"' in box.group(0)
    assert f'data-cost="{entity_cost("light.kitchen")}"' in box.group(0)


def test_the_page_gives_the_picker_the_servers_limits(logged_in: FlaskClient) -> None:
    """static/settings/ and budget.js get the allowlist's size limit and the entity-id rule from the page.

    One fact, one place: config_store's MAX_ALLOWLIST and ENTITY_ID_RE, not copies in the scripts.
    """
    html = logged_in.get(PAGE).get_data(as_text=True)
    form = re.search(r'<form id="ha-settings"[^>]*>', html)
    assert form, "the page has no settings form"
    assert f'data-allowlist-limit="{MAX_ALLOWLIST}"' in form.group(0)
    assert f'data-entity-id-pattern="{escape(ENTITY_ID_RE.pattern)}"' in form.group(0)
    assert f'data-review-limit="{MAX_SENT_BY_PAGE}"' in form.group(0)
    static = Path(__file__).resolve().parents[2] / "static"
    scripts = sorted(static.glob("settings/*.js")) + [static / "budget.js"]
    assert len(scripts) > 2, "the settings page's modules are not where the page loads them from"
    for path in scripts:
        script, source = path.name, path.read_text()
        assert str(MAX_ALLOWLIST) not in source, f"{script} copies MAX_ALLOWLIST"
        assert "[a-z0-9_]" not in source, f"{script} copies the entity-id pattern"
