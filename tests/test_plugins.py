"""The household's plugins: found by entry point, listed with version and hooks, turned off without uninstalling."""

from __future__ import annotations

import json
from pathlib import Path

import pluggy
import pytest

from console_ha.hooks import HOOK_NAMES, StageHooks, hookimpl
from console_ha.plugins.plugin_registry import PluginInfo, Plugins, UnknownPlugin
from console_ha.store.datadir import DataDir
from console_ha.store.plugin_switches import PluginSwitches
from tests.tiny_plugin import install_plugin


class QuietHours:
    @hookimpl
    def before_toolcall(self, capability):
        return "quiet"


class Counter:
    @hookimpl
    def after_output(self, reply):
        return None

    @hookimpl
    def on_card(self, event, card):
        return None


def plugins_with(data_dir: DataDir, **given: object) -> Plugins:
    plugins = Plugins(PluginSwitches(data_dir))
    for name, plugin in given.items():
        plugins.register(plugin, name)
    return plugins


def test_the_hooks_are_the_contracts_with_its_arguments() -> None:
    """Each hook of the contract's table ("Plugins and stage hooks"), with exactly its arguments and a docstring."""
    expected = {
        "on_input": ("message", "principal"), "pre_action": ("messages", "principal"),
        "post_action": ("reply", "tool_calls", "principal"),
        "before_toolcall": ("capability", "arguments", "principal"),
        "after_toolcall": ("capability", "arguments", "result", "principal"),
        "before_output": ("reply", "principal"), "after_output": ("reply", "principal"),
        "on_card": ("event", "card", "principal"),
    }
    manager = pluggy.PluginManager("console_ha")
    manager.add_hookspecs(StageHooks)
    found = {name: getattr(manager.hook, name).spec.argnames for name in HOOK_NAMES}
    assert found == expected
    assert all(getattr(StageHooks, name).__doc__ for name in HOOK_NAMES)


def test_a_plugin_is_listed_with_its_hooks_in_the_contracts_order(data_dir: DataDir) -> None:
    plugins = plugins_with(data_dir, counter=Counter(), quiet_hours=QuietHours())
    assert plugins.describe() == [
        PluginInfo("counter", None, ("after_output", "on_card"), True),
        PluginInfo("quiet_hours", None, ("before_toolcall",), True),
    ]


def test_an_implementation_that_names_an_argument_the_hook_has_not_is_refused(data_dir: DataDir) -> None:
    class Wrong:
        @hookimpl
        def on_input(self, message, password):
            return None

    with pytest.raises(pluggy.PluginValidationError):
        plugins_with(data_dir, wrong=Wrong())


def test_a_plugin_turned_off_stays_listed_its_hooks_are_not_called_and_the_choice_is_kept(
    data_dir: DataDir,
) -> None:
    plugins = plugins_with(data_dir, counter=Counter(), quiet_hours=QuietHours())
    plugins.set_on("quiet_hours", False)
    assert [info.on for info in plugins.describe()] == [True, False]
    assert plugins.implementations("before_toolcall") == []
    assert json.loads(data_dir.plugin_switches.read_text()) == {"turned_off": ["quiet_hours"]}

    again = plugins_with(data_dir, counter=Counter(), quiet_hours=QuietHours())
    assert again.implementations("before_toolcall") == []
    again.set_on("quiet_hours", True)
    assert [impl.plugin_name for impl in again.implementations("before_toolcall")] == ["quiet_hours"]


def test_a_switch_for_a_plugin_not_installed_is_refused(data_dir: DataDir) -> None:
    plugins = plugins_with(data_dir, counter=Counter())
    with pytest.raises(UnknownPlugin):
        plugins.set_on("quiet_hours", False)
    assert not data_dir.plugin_switches.exists()


@pytest.mark.parametrize("damaged", [b"{not json", b'{"turned_off": "quiet_hours"}', b"[]", b'{"turned_off": [1]}'])
def test_a_damaged_switches_file_turns_every_plugin_off_and_one_turned_on_turns_on_alone(
    data_dir: DataDir, damaged: bytes
) -> None:
    """A damaged file never turns on a plugin the household had turned off; turning one on leaves the rest off."""
    data_dir.plugin_switches.parent.mkdir(parents=True)
    data_dir.plugin_switches.write_bytes(damaged)
    plugins = plugins_with(data_dir, counter=Counter(), quiet_hours=QuietHours())
    assert [info.on for info in plugins.describe()] == [False, False]
    plugins.set_on("counter", True)
    assert [info.on for info in plugins.describe()] == [True, False]
    assert json.loads(data_dir.plugin_switches.read_text()) == {"turned_off": ["quiet_hours"]}


def test_the_implementations_come_in_pluggys_call_order(data_dir: DataDir) -> None:
    """Registered later runs first, tryfirst before the rest, trylast after: pluggy's own order."""
    called: list[str] = []
    names = ("last", "first", "a", "b")
    plugins = plugins_with(data_dir, **{name: _recorder([], name) for name in names})
    order = [impl.plugin_name for impl in plugins.implementations("on_input")]
    manager = pluggy.PluginManager("console_ha")
    manager.add_hookspecs(StageHooks)
    for name in names:
        manager.register(_recorder(called, name), name)
    manager.hook.on_input(message="hi", principal="household")
    assert order == called == ["first", "b", "a", "last"]


def _recorder(called: list[str], name: str) -> object:
    """A plugin that notes its name when called: "first" marked tryfirst, "last" trylast."""
    class Recorder:
        @hookimpl(tryfirst=name == "first", trylast=name == "last")
        def on_input(self, message):
            called.append(name)
    return Recorder()


def test_a_wrapper_is_not_among_the_implementations_called(data_dir: DataDir) -> None:
    """A wrapper would run around the others, outside any deadline: it is never called."""
    class Wrapper:
        @hookimpl(wrapper=True)
        def on_input(self, message):
            return (yield)

    plugins = plugins_with(data_dir, wrapper=Wrapper(), counter=Counter())
    assert plugins.implementations("on_input") == []


def test_a_plugin_installed_as_a_distribution_is_loaded_from_its_entry_point(
    data_dir: DataDir, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A real distribution on sys.path (its dist-info with an entry point): loaded, named, versioned."""
    install_plugin(tmp_path / "site", monkeypatch, name="tiny", version="1.2.3", source="""
        from console_ha.hooks import hookimpl

        @hookimpl
        def on_card(event, card):
            return None
    """)

    plugins = Plugins.installed(PluginSwitches(data_dir))
    assert PluginInfo("tiny", "1.2.3", ("on_card",), True) in plugins.describe()
    assert [impl.plugin_name for impl in plugins.implementations("on_card")] == ["tiny"]
