"""The settings a plugin declares: what a declaration may say, each value's check, the file, and the accessor."""

from __future__ import annotations

import json
from types import SimpleNamespace

import pytest

from console_ha.errors import InvalidSettingsChange
from console_ha.hooks import hookimpl, settings
from console_ha.plugins.hook_calls import call_each
from console_ha.plugins.plugin_registry import Plugins
from console_ha.plugins.plugin_settings import InvalidDeclaration, PluginSettings, SettingField, checked_value
from console_ha.store.datadir import DataDir
from console_ha.store.plugin_switches import PluginSwitches
from console_ha.store.plugin_values import PluginValuesFile

TIME = SettingField("start", "time", {"en": "From"})
URL = SettingField("url", "url", {"en": "Send to"})
TEXT = SettingField("topic", "text", {"en": "Topic"})


@pytest.mark.parametrize("field, typed, kept", [
    (TIME, "00:00", "00:00"), (TIME, " 23:59 ", "23:59"), (TIME, "", ""),
    (URL, "http://192.168.1.5/console", "http://192.168.1.5/console"),
    (URL, "https://ntfy.example/x?y=1", "https://ntfy.example/x?y=1"),
    (TEXT, "cards", "cards"), (TEXT, "Café 👨\u200d👩\u200d👧 通知", "Café 👨\u200d👩\u200d👧 通知"),
])
def test_a_value_that_fits_its_type_is_kept(field: SettingField, typed: str, kept: str) -> None:
    assert checked_value(field, typed) == kept


@pytest.mark.parametrize("field, typed", [
    (TIME, "24:00"), (TIME, "7:30"), (TIME, "07:60"), (TIME, "07:30:00"), (TIME, "noon"),
    (URL, "ftp://ntfy.example/"), (URL, "file:///etc/passwd"), (URL, "https://"), (URL, "ntfy.example/x"),
    (URL, "http://[::1"), (URL, "https://a b.example/"),
    (TEXT, "two\nlines"), (TEXT, "x" * 501),
    (TEXT, "two\u2028lines"), (TEXT, "two\u2029lines"), (TEXT, "next\x85line"), (TEXT, "c1\x9bcontrol"),
    (TEXT, "cards\u202e"), (TEXT, "\u2066isolate"), (URL, "https://ntfy.example/\u202etopic"),
])
def test_a_value_that_does_not_fit_is_refused_naming_its_field(field: SettingField, typed: str) -> None:
    with pytest.raises(InvalidSettingsChange) as refused:
        checked_value(field, typed)
    assert refused.value.code == "INVALID_CONFIG" and refused.value.detail == {"field": field.name}


@pytest.mark.parametrize("declared", [
    "start",  # not a list
    [{"name": "start", "type": "date", "label": "From"}],
    [{"name": "Start", "type": "time", "label": "From"}],
    [{"name": "start", "type": "time"}],
    [{"name": "start", "type": "time", "label": {"fr": "De"}}],  # no English label
    [{"name": "start", "type": "time", "label": "From"}, {"name": "start", "type": "url", "label": "To"}],
    [{"name": f"s{n}", "type": "text", "label": "x"} for n in range(17)],
])
def test_a_plugin_that_declares_its_settings_wrongly_cannot_be_registered(data_dir: DataDir, declared: object) -> None:
    plugins = Plugins(PluginSwitches(data_dir))
    with pytest.raises(InvalidDeclaration):
        plugins.register(SimpleNamespace(CONSOLE_HA_SETTINGS=declared), "wrong")
    assert plugins.describe() == []


def test_a_label_in_the_households_language_else_in_english() -> None:
    field = SettingField("start", "time", {"en": "Quiet from", "fr": "Silence à partir de"})
    assert (field.label("fr"), field.label("de")) == ("Silence à partir de", "Quiet from")


class Reader:
    CONSOLE_HA_SETTINGS = [{"name": "start", "type": "time", "label": "From"},
                           {"name": "url", "type": "url", "label": "To"}]

    @hookimpl
    def on_input(self, message):
        return dict(settings())


def test_a_hook_reads_its_own_plugins_saved_values_and_no_other_plugins(data_dir: DataDir) -> None:
    class Other:
        CONSOLE_HA_SETTINGS = [{"name": "start", "type": "time", "label": "From"}]

        @hookimpl
        def on_input(self, message):
            return dict(settings())

    values = PluginSettings(PluginValuesFile(data_dir))
    plugins = Plugins(PluginSwitches(data_dir), values)
    plugins.register(Reader(), "reader")
    plugins.register(Other(), "other")
    values.save("reader", {"start": "22:00", "url": ""})
    values.save("other", {"start": "06:00"})
    answers = {answer.plugin: answer.value for answer in call_each(plugins, "on_input", {"message": "hi"}).answers}
    assert answers == {"reader": {"start": "22:00"}, "other": {"start": "06:00"}}
    assert dict(settings()) == {}  # outside a hook call: nothing


def test_one_value_refused_saves_none_of_the_plugins_values(data_dir: DataDir) -> None:
    values = PluginSettings(PluginValuesFile(data_dir))
    Plugins(PluginSwitches(data_dir), values).register(Reader(), "reader")
    values.save("reader", {"start": "22:00"})
    with pytest.raises(InvalidSettingsChange):
        values.save("reader", {"start": "23:00", "url": "gopher://x"})
    assert dict(values.values("reader")) == {"start": "22:00"}
    assert json.loads(data_dir.plugin_settings.read_text()) == {"reader": {"start": "22:00"}}


def test_the_values_are_kept_for_the_next_start(data_dir: DataDir) -> None:
    values = PluginSettings(PluginValuesFile(data_dir))
    Plugins(PluginSwitches(data_dir), values).register(Reader(), "reader")
    values.save("reader", {"start": "22:00"})
    again = PluginSettings(PluginValuesFile(data_dir))
    Plugins(PluginSwitches(data_dir), again).register(Reader(), "reader")
    assert dict(again.values("reader")) == {"start": "22:00"}


@pytest.mark.parametrize("damaged", [b"{not json", b"[]", b'{"reader": "22:00"}'])
def test_a_damaged_values_file_reads_as_nothing_set(data_dir: DataDir, damaged: bytes) -> None:
    data_dir.plugin_settings.parent.mkdir(parents=True)
    data_dir.plugin_settings.write_bytes(damaged)
    values = PluginSettings(PluginValuesFile(data_dir))
    Plugins(PluginSwitches(data_dir), values).register(Reader(), "reader")
    assert dict(values.values("reader")) == {}


@pytest.mark.parametrize("saved, kept", [
    ({"start": "7", "url": "https://ntfy.example/x"}, {"url": "https://ntfy.example/x"}),  # edited by hand
    ({"start": "22:00", "url": "ntfy.example/x"}, {"start": "22:00"}),  # kept while `url` was a text field
    ({"start": " 22:00 ", "url": "https://a\nb"}, {"start": "22:00"}),
])
def test_a_saved_value_that_does_not_fit_its_declared_type_is_never_handed_to_a_hook(
    data_dir: DataDir, saved: dict[str, str], kept: dict[str, str]
) -> None:
    """A hook may trust a setting's type: a value that fails the page's check counts as not set."""
    data_dir.plugin_settings.parent.mkdir(parents=True)
    data_dir.plugin_settings.write_text(json.dumps({"reader": saved}))
    plugins = Plugins(PluginSwitches(data_dir), PluginSettings(PluginValuesFile(data_dir)))
    plugins.register(Reader(), "reader")
    assert [answer.value for answer in call_each(plugins, "on_input", {"message": "hi"}).answers] == [kept]
    assert dict(plugins.setting_values("reader")) == kept


def test_quiet_hours_with_a_time_edited_by_hand_refuse_nothing_and_never_fail(data_dir: DataDir) -> None:
    from tests.example_plugins import load_example

    data_dir.plugin_settings.parent.mkdir(parents=True)
    data_dir.plugin_settings.write_text(json.dumps({"quiet_hours": {"start": "22h", "end": "07:00"}}))
    plugins = Plugins(PluginSwitches(data_dir), PluginSettings(PluginValuesFile(data_dir)))
    plugins.register(load_example("quiet_hours"), "quiet_hours")
    outcome = call_each(plugins, "before_toolcall", {"capability": "get_state", "arguments": {},
                                                     "principal": "household"})
    assert outcome.answers == [] and outcome.skipped == []


@pytest.mark.parametrize("field", [URL, TEXT])
def test_a_value_too_long_is_told_its_length_not_that_it_is_more_than_one_line(field: SettingField) -> None:
    typed = "https://ntfy.example/" + "t" * 500 if field is URL else "t" * 501
    with pytest.raises(InvalidSettingsChange) as refused:
        checked_value(field, typed)
    assert refused.value.message == "Give at most 500 characters."
