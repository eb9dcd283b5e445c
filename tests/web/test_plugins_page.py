"""The household's plugins page: the installed plugins, each one's switch, and the settings a plugin declares."""

from __future__ import annotations

import json
import re
from collections.abc import Callable

import pytest
from flask import Flask
from flask.testing import FlaskClient

from console_ha.console import Console
from console_ha.store.datadir import DataDir
from tests.example_plugins import load_example

from .conftest import csrf_from, household_client

PAGE = "/settings/plugins"
FRENCH = {"Accept-Language": "fr"}


def console_of(app: Flask) -> Console:
    console: Console = app.extensions["console_ha"]
    return console


@pytest.fixture
def examples(app: Flask) -> Console:
    """The app's Console with the two example plugins registered in code, as if installed."""
    console = console_of(app)
    console.plugins.register(load_example("quiet_hours"), "quiet_hours")
    console.plugins.register(load_example("notify"), "notify")
    return console


def text_of(html: str) -> str:
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html))


def post_form(client: FlaskClient, path: str, **form: str):
    token = csrf_from(client.get(PAGE).get_data(as_text=True))
    return client.post(path, data={"csrf_token": token, **form})


def test_the_page_lists_each_installed_plugin_with_its_hooks_switch_and_settings(
    household: FlaskClient, examples: Console
) -> None:
    html = household.get(PAGE).get_data(as_text=True)
    words = text_of(html)
    assert "Its hooks: on_card" in words and "Its hooks: before_toolcall" in words
    assert words.index("notify") < words.index("quiet_hours")
    assert 'aria-label="Turn off notify"' in html and 'aria-label="Turn off quiet_hours"' in html
    assert re.search(r'<label for="plugin-quiet_hours-start">Quiet from</label>', html)
    assert re.search(r'id="plugin-quiet_hours-start" name="start"\s+type="time"', html)
    assert re.search(r'id="plugin-notify-url" name="url"\s+type="url"', html)
    assert "runs inside the Console with the Console’s rights" in words


def test_without_a_plugin_the_page_says_none_is_installed(household: FlaskClient) -> None:
    assert "No plugin is installed." in text_of(household.get(PAGE).get_data(as_text=True))


def test_the_settings_page_links_to_the_plugins_page(household: FlaskClient) -> None:
    assert f'href="{PAGE}"' in household.get("/settings/home-assistant").get_data(as_text=True)


def test_turning_a_plugin_off_keeps_it_listed_stops_its_hooks_and_is_saved(
    household: FlaskClient, examples: Console, data_dir: DataDir
) -> None:
    answer = post_form(household, f"{PAGE}/quiet_hours/switch", on="off")
    assert answer.status_code == 303 and answer.headers["Location"].endswith(PAGE)
    assert examples.plugins.implementations("before_toolcall") == []
    assert json.loads(data_dir.plugin_switches.read_text()) == {"turned_off": ["quiet_hours"]}
    html = household.get(PAGE).get_data(as_text=True)
    assert "“quiet_hours” is off" in html and 'aria-label="Turn on quiet_hours"' in html

    post_form(household, f"{PAGE}/quiet_hours/switch", on="on")
    assert [impl.plugin_name for impl in examples.plugins.implementations("before_toolcall")] == ["quiet_hours"]


def test_a_switch_for_a_plugin_not_installed_changes_nothing(
    household: FlaskClient, examples: Console, data_dir: DataDir
) -> None:
    answer = post_form(household, f"{PAGE}/front_door/switch", on="off")
    assert answer.status_code == 303
    assert not data_dir.plugin_switches.exists()
    assert "That plugin is not installed" in household.get(PAGE).get_data(as_text=True)


def test_saving_quiet_hours_keeps_the_times_for_the_plugins_hooks(
    household: FlaskClient, examples: Console, data_dir: DataDir
) -> None:
    answer = post_form(household, f"{PAGE}/quiet_hours/settings", start="22:00", end="07:00")
    assert answer.status_code == 303
    assert dict(examples.plugins.setting_values("quiet_hours")) == {"start": "22:00", "end": "07:00"}
    assert json.loads(data_dir.plugin_settings.read_text()) == {"quiet_hours": {"end": "07:00", "start": "22:00"}}
    assert oct(data_dir.plugin_settings.stat().st_mode & 0o777) == "0o600"
    html = household.get(PAGE).get_data(as_text=True)
    assert 'value="22:00"' in html and "Saved the settings of “quiet_hours”" in html


@pytest.mark.parametrize("path, form, field, words", [
    ("quiet_hours", {"start": "25:00", "end": "07:00"}, "start", "Give a time of day"),
    ("quiet_hours", {"start": "22:00", "end": "7"}, "end", "Give a time of day"),
    ("notify", {"url": "ftp://ntfy.example/console"}, "url", "starts with http:// or https://"),
    ("notify", {"url": "javascript:alert(1)"}, "url", "starts with http:// or https://"),
    ("notify", {"url": "https://ntfy.example/a\nb"}, "url", "one line of text"),
])
def test_a_setting_refused_saves_nothing_and_says_which_field(
    household: FlaskClient, examples: Console, data_dir: DataDir, path: str, form: dict[str, str], field: str,
    words: str
) -> None:
    answer = post_form(household, f"{PAGE}/{path}/settings", **form)
    assert answer.status_code == 400
    html = answer.get_data(as_text=True)
    assert words in html and "Nothing was saved." in html
    assert re.search(rf'id="plugin-{path}-{field}"[^>]*aria-invalid="true"', html)
    assert not data_dir.plugin_settings.exists()


def test_the_page_speaks_the_households_language(household: FlaskClient, examples: Console) -> None:
    html = household.get(PAGE, headers=FRENCH).get_data(as_text=True)
    assert 'aria-label="Désactiver quiet_hours"' in html
    assert ">Silence à partir de</label>" in html  # the plugin's own label in French


def test_an_api_token_cannot_see_or_switch_the_plugins(bearer: FlaskClient, examples: Console,
                                                      data_dir: DataDir) -> None:
    assert bearer.get(PAGE).status_code == 403
    answer = bearer.post(f"{PAGE}/quiet_hours/switch", data={"on": "off"})
    assert answer.status_code == 403 and "FORBIDDEN" in answer.get_data(as_text=True)
    assert bearer.post(f"{PAGE}/notify/settings", data={"url": "https://evil.example/"}).status_code == 403
    assert not data_dir.plugin_switches.exists() and not data_dir.plugin_settings.exists()


def test_a_switch_without_the_csrf_token_is_refused(logged_in: FlaskClient, examples: Console,
                                                    data_dir: DataDir) -> None:
    answer = logged_in.post(f"{PAGE}/quiet_hours/switch", data={"on": "off"})
    assert answer.status_code == 400 and "CSRF_INVALID" in answer.get_data(as_text=True)
    assert not data_dir.plugin_switches.exists()


@pytest.mark.parametrize("name", ["front_door", "tablet_rules"])
def test_settings_for_a_plugin_not_installed_or_without_settings_save_nothing(
    household: FlaskClient, examples: Console, data_dir: DataDir, name: str
) -> None:
    class TabletRules:  # installed, declares no settings
        pass

    examples.plugins.register(TabletRules(), "tablet_rules")
    answer = post_form(household, f"{PAGE}/{name}/settings", start="22:00")
    assert answer.status_code == 303
    assert not data_dir.plugin_settings.exists()
    assert "That plugin is not installed" in household.get(PAGE).get_data(as_text=True)


@pytest.mark.parametrize("code", ["fr", "de", "es", "nl", "zh-Hans"])
def test_no_english_is_left_on_the_page_in_any_other_language(
    household: FlaskClient, examples: Console, code: str
) -> None:
    """The page's own words and the example plugins' labels, in each of the Console's other languages."""
    html = household.get(PAGE, headers={"Accept-Language": code}).get_data(as_text=True)
    assert f'<html lang="{code}"' in html
    for english in (">Turn off<", "Its hooks:", ">Save settings<", "Leave a field empty", "A plugin adds",
                    ">Quiet from<", ">Quiet until<", ">Send to (an ntfy", "Back to the settings",
                    "Registered by the Console itself"):
        assert english not in html, english


@pytest.mark.parametrize("name", ["acme/front_door", "acme.front-door", "tablet rules"])
def test_a_plugin_whose_name_holds_a_slash_or_a_space_can_be_turned_off_from_its_form(
    household: FlaskClient, examples: Console, data_dir: DataDir, name: str
) -> None:
    """An entry point's name may hold any character but `=`: the switch's form must reach its route."""
    class Rules:
        pass

    examples.plugins.register(Rules(), name)
    html = household.get(PAGE).get_data(as_text=True)
    action = re.search(r'<form method="post" action="([^"]+)"[^>]*>\s*<input[^>]*>\s*<input type="hidden" '
                       rf'name="on" value="off">\s*<button[^>]*aria-label="Turn off {re.escape(name)}"', html)
    assert action, "no switch form for the plugin"
    answer = household.post(action.group(1).replace("&amp;", "&"), data={"csrf_token": csrf_from(html), "on": "off"})
    assert answer.status_code == 303
    assert json.loads(data_dir.plugin_switches.read_text()) == {"turned_off": [name]}


def test_a_damaged_switches_file_is_told_on_the_page_and_turning_one_on_writes_it_again(
    make_app: Callable[..., Flask], data_dir: DataDir
) -> None:
    """Every plugin is off while the file cannot be read: the page says why, and no other plugin comes back on."""
    data_dir.plugin_switches.parent.mkdir(parents=True)
    data_dir.plugin_switches.write_text('{"turned_off": "notify"')
    app = make_app()
    console = console_of(app)
    console.plugins.register(load_example("quiet_hours"), "quiet_hours")
    console.plugins.register(load_example("notify"), "notify")
    household = household_client(app, data_dir)
    words = text_of(household.get(PAGE).get_data(as_text=True))
    assert "The file of the plugins’ switches cannot be read, so every plugin is off." in words
    assert 'aria-label="Turn on quiet_hours"' in household.get(PAGE).get_data(as_text=True)

    post_form(household, f"{PAGE}/quiet_hours/switch", on="on")
    assert json.loads(data_dir.plugin_switches.read_text()) == {"turned_off": ["notify"]}
    assert "cannot be read" not in text_of(household.get(PAGE).get_data(as_text=True))
