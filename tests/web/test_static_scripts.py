"""The page scripts build no HTML from strings and keep no copy of the server's words or limits."""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from flask.testing import FlaskClient

from console_ha.store.ca_certificate import MAX_PEM_BYTES
from console_ha.words import SETTINGS_WORDS

STATIC = Path(__file__).resolve().parents[2] / "static"
PAGE = "/settings/home-assistant"

# Every way a script can turn a string into markup: the DOM is built from <template> clones and textContent.
HTML_FROM_STRINGS = re.compile(
    r"\b(?:innerHTML|outerHTML|insertAdjacentHTML|document\s*\.\s*write(?:ln)?"
    r"|createContextualFragment|setHTMLUnsafe|parseHTMLUnsafe|srcdoc)\b"
)


def scripts() -> list[Path]:
    """Every script the pages load, in every folder under static/."""
    return sorted(STATIC.rglob("*.js"))


def markup_from_strings(source: str) -> list[str]:
    """The lines of `source` that would assemble HTML from a string."""
    return [line.strip() for line in source.splitlines() if HTML_FROM_STRINGS.search(line)]


@pytest.mark.parametrize(
    "line",
    [
        'el.innerHTML = "<b>x</b>";',
        "row.outerHTML = html;",
        'list.insertAdjacentHTML("beforeend", item);',
        "document.write(page);",
        "document . writeln(page);",
        "list.append(document.createRange().createContextualFragment(item));",
        "row.setHTMLUnsafe(html);",
        "list.append(Document.parseHTMLUnsafe(html).body);",
        "frame.srcdoc = html;",
    ],
)
def test_the_scan_catches_each_way_of_assembling_html(line: str) -> None:
    """The scan below would fail on any of these."""
    assert markup_from_strings(f"const a = 1;\n{line}\n") == [line]


def test_the_scan_lets_dom_building_through() -> None:
    """Cloning a template and setting text is what the scripts do instead."""
    source = 'const row = template.content.firstElementChild.cloneNode(true);\nrow.textContent = "x";\n'
    assert markup_from_strings(source) == []


def test_no_script_assembles_html_from_strings() -> None:
    """Every script under static/ builds the DOM from templates and textContent."""
    assert len(scripts()) >= 8, "the scan found fewer scripts than the pages load"
    found = {path.relative_to(STATIC).as_posix(): markup_from_strings(path.read_text()) for path in scripts()}
    assert {name: lines for name, lines in found.items() if lines} == {}


def test_no_script_keeps_a_copy_of_the_settings_words() -> None:
    """The household's words for each error code come from the server (console_ha.words), not the scripts."""
    for path in scripts():
        source = path.read_text()
        for code, words in SETTINGS_WORDS.items():
            assert words[:40] not in source, f"{path.name} copies the words of {code}"
            assert f"{code}:" not in source, f"{path.name} keeps a table keyed by {code}"


def test_the_ca_certificate_limit_comes_from_the_server(logged_in: FlaskClient) -> None:
    """The largest PEM the page reads from a file is the store's MAX_PEM_BYTES, sent on the CA section."""
    html = logged_in.get(PAGE).get_data(as_text=True)
    section = re.search(r'<details class="ca" id="ca-section"[^>]*>', html)
    assert section and f'data-ca-max-bytes="{MAX_PEM_BYTES}"' in section.group(0)
    for path in scripts():
        source = path.read_text()
        assert "64 * 1024" not in source and str(MAX_PEM_BYTES) not in source, f"{path.name} copies the CA limit"


# What only static/api.js may do: ask the server, and react to a 401 (by reading it or leaving the page).
SERVER_CALLS = re.compile(
    r"\bfetch\s*\(|\bXMLHttpRequest\b|\bsendBeacon\b|\bEventSource\b|\bWebSocket\b"
    r"|\bstatus\s*[!=]==?\s*401\b|\blocation\s*\.\s*(?:assign|replace)\b|\blocation\s*(?:\.\s*href\s*)?=[^=]"
)


@pytest.mark.parametrize(
    "line",
    [
        "const r = await fetch(url);",
        "const x = new XMLHttpRequest();",
        "if (response.status === 401) return;",
        "window.location.assign(loginUrl);",
        "location.href = loginUrl;",
    ],
)
def test_the_scan_catches_each_way_around_the_api_module(line: str) -> None:
    """The scan below would fail on any of these."""
    assert SERVER_CALLS.search(line)


def test_every_page_script_asks_the_server_through_api_js() -> None:
    """One fetch wrapper with one reaction to a 401 (static/api.js); the pages import it."""
    found = {path.relative_to(STATIC).as_posix() for path in scripts() if SERVER_CALLS.search(path.read_text())}
    assert found == {"api.js"}
    importers = {path.relative_to(STATIC).as_posix() for path in scripts()
                 if re.search(r'^import \{ api(?:, \w+)* \} from "\.{1,2}/api\.js";$', path.read_text(), re.M)}
    assert {"nav.js", "confirmations.js", "conversation.js", "model.js", "settings/main.js"} <= importers


def test_the_entity_budget_arithmetic_is_in_one_script() -> None:
    """budget.js imports static/entity_budget.js (which tests/e2e/test_budget_meter.py checks against the
    server); no script holds the cost formula's domain term: every cost is the server's (issue 21)."""
    domain_term = re.compile(r"""\.indexOf\(\s*["']\.["']\s*\)""")
    assert {path.name for path in scripts() if domain_term.search(path.read_text())} == set()
    assert "entityBytes" not in "".join(path.read_text() for path in scripts())
    assert 'from "./entity_budget.js"' in (STATIC / "budget.js").read_text()
