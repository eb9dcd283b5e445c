"""One Console's plugins: those installed under the entry point group `console_ha`, and the household's switches.

Built once per Console by the composition root, never a module global: two Consoles in one process (the
tests) each keep their own plugins and switches.
"""

from __future__ import annotations

import functools
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from importlib.metadata import Distribution, entry_points
from typing import Any

import pluggy
from pluggy import HookImpl

from console_ha.hooks import HOOK_NAMES, PROJECT, StageHooks, settings_context
from console_ha.plugins.plugin_settings import PluginSettings, SettingField, declared_settings
from console_ha.store.plugin_switches import PluginSwitches, Switches


class UnknownPlugin(LookupError):
    """A switch was asked for a plugin that is not installed."""


@dataclass(frozen=True)
class PluginInfo:
    """What the household sees of one installed plugin."""

    name: str
    version: str | None  # its distribution's version; None for one registered in code (the tests')
    hooks: tuple[str, ...]  # the hooks it implements, in `HOOK_NAMES` order
    on: bool  # False: the household turned it off; it stays installed and its hooks are not called


@dataclass(frozen=True)
class BrokenPlugin:
    """An installed plugin that stops the Console's start: its entry point's name, its distribution, its error."""

    name: str
    distribution: str | None
    version: str | None
    error: str  # the exception's type and the first line of its message


def broken_plugins() -> list[BrokenPlugin]:
    """Each plugin installed under the entry point group `console_ha` that `Plugins.installed` would stop at.

    Loaded one by one, as `installed` does all at once: its import, its hooks checked against the specs, its
    settings' declaration. For `console-ha plugins`, the command a household runs when the Console will not
    start: it names the plugin to fix or uninstall where the start's traceback names a file.
    """
    broken = []
    for entry in sorted(entry_points(group=PROJECT), key=lambda entry: entry.name):
        trial = pluggy.PluginManager(PROJECT)
        trial.add_hookspecs(StageHooks)
        try:
            plugin = entry.load()
            declared_settings(plugin, entry.name)
            trial.register(plugin, name=entry.name)
        except Exception as err:  # whatever its import raises
            first_line = (str(err).splitlines() or [""])[0][:200]
            dist = entry.dist
            broken.append(BrokenPlugin(entry.name, dist.name if dist else None, dist.version if dist else None,
                                       f"{type(err).__name__}: {first_line}" if first_line else type(err).__name__))
    return broken


class Plugins:
    """The plugin manager with the stage hooks, and which plugins the household turned off."""

    def __init__(self, switches: PluginSwitches, settings: PluginSettings | None = None) -> None:
        self._manager = pluggy.PluginManager(PROJECT)
        self._manager.add_hookspecs(StageHooks)
        self._store = switches
        # The settings plugins declare and the household's values (the plugins page); none saved without a store.
        self._settings = settings or PluginSettings()
        # Implementations of plugins with settings, each wrapped once to hand them their values (`_with_settings`).
        self._wrapped: dict[int, tuple[HookImpl, HookImpl]] = {}
        self._switching = threading.Lock()  # two pages' switches at once: the one kept is the one saved last
        # Read once here and kept, written through by `set_on`: a hook call reads no file.
        self._switches: Switches = switches.read()

    @classmethod
    def installed(cls, switches: PluginSwitches, settings: PluginSettings | None = None) -> Plugins:
        """The plugins installed in this environment under the entry point group `console_ha`, loaded."""
        plugins = cls(switches, settings)
        # A plugin that fails to import (its own traceback) or declares a hook wrongly (pluggy's
        # PluginValidationError, naming it) stops the Console from starting: a half-loaded set would be a surprise.
        # So does one whose settings are declared wrongly (InvalidDeclaration, naming it).
        plugins._manager.load_setuptools_entrypoints(PROJECT)
        for name, plugin in plugins._manager.list_name_plugin():
            plugins._settings.declare(plugin, name)
        return plugins

    def register(self, plugin: object, name: str) -> None:
        """Register a plugin given in code (a test's, or one the Console ships), checked against the specs."""
        self._settings.declare(plugin, name)
        self._manager.register(plugin, name=name)

    def describe(self) -> list[PluginInfo]:
        """Every installed plugin with its version, its hooks and its switch, by name."""
        versions = {name: dist.version for name, dist in self._distributions().items()}
        found = []
        for name, plugin in self._manager.list_name_plugin():
            implemented = {caller.name for caller in self._manager.get_hookcallers(plugin) or []}
            hooks = tuple(hook for hook in HOOK_NAMES if hook in implemented)
            found.append(PluginInfo(name, versions.get(name), hooks, self._switches.is_on(name)))
        return sorted(found, key=lambda info: info.name)

    def implementations(self, hook: str) -> list[HookImpl]:
        """The implementations of `hook` whose plugin is on, in pluggy's call order (tryfirst first).

        pluggy keeps them trylast first and calls them from the end; wrappers (`wrapper=True`,
        `hookwrapper=True`) are left out: they would run around the others, outside any deadline.
        """
        caller = getattr(self._manager.hook, hook)
        return [self._with_settings(impl) for impl in reversed(caller.get_hookimpls())
                if not (impl.wrapper or impl.hookwrapper) and self._switches.is_on(impl.plugin_name)]

    def _with_settings(self, impl: HookImpl) -> HookImpl:
        """`impl` itself, or for a plugin that declares settings the same implementation handed their values.

        The values are set in the context of the thread that runs the call (`console_ha.hooks.settings()`), read
        afresh at each call: a save on the plugins page applies from the next one.
        """
        if not self._settings.fields(impl.plugin_name):
            return impl
        kept = self._wrapped.get(id(impl))
        if kept is None:
            # The original is kept beside its wrapper, so its id cannot be reused by another while it is here.
            kept = (impl, HookImpl(impl.plugin, impl.plugin_name, self._handing_settings(impl), impl.opts))
            self._wrapped[id(impl)] = kept
        return kept[1]

    def _handing_settings(self, impl: HookImpl) -> Callable[..., Any]:
        function, plugin, values = impl.function, impl.plugin_name, self._settings.values

        @functools.wraps(function)
        def call(*args: Any, **kwargs: Any) -> Any:
            token = settings_context().set(values(plugin))
            try:
                return function(*args, **kwargs)
            finally:
                settings_context().reset(token)

        return call

    @property
    def switches_unusable(self) -> bool:
        """Whether the switches file could not be used, so every plugin is off until the household turns one on."""
        return self._switches.all_off

    def set_on(self, name: str, on: bool) -> None:
        """Turn an installed plugin on or off, without uninstalling it; saved for the next start too."""
        names = [plugin_name for plugin_name, _ in self._manager.list_name_plugin()]
        if name not in names:
            raise UnknownPlugin(name)
        with self._switching:
            self._switches = self._store.set_on(name, on, names)

    def setting_fields(self, name: str) -> tuple[SettingField, ...]:
        """The settings the plugin `name` declares for the household, in its order; none when it declares none."""
        return self._settings.fields(name)

    def setting_values(self, name: str) -> Mapping[str, str]:
        """The household's saved values of the plugin `name`'s settings, as its hooks see them."""
        return self._settings.values(name)

    def save_settings(self, name: str, typed: Mapping[str, str]) -> Mapping[str, str]:
        """Check and save every setting the installed plugin `name` declares, or none (InvalidSettingsChange).

        UnknownPlugin when no plugin of that name is installed, or it declares no settings.
        """
        installed = any(plugin_name == name for plugin_name, _ in self._manager.list_name_plugin())
        if not installed or not self._settings.fields(name):
            raise UnknownPlugin(name)
        return self._settings.save(name, typed)

    def _distributions(self) -> dict[str, Distribution]:
        # pluggy keeps (plugin, distribution) pairs; a plugin's name is what it was registered under.
        by_plugin = {id(plugin): dist for plugin, dist in self._manager.list_plugin_distributions()}
        return {name: by_plugin[id(plugin)] for name, plugin in self._manager.list_name_plugin()
                if id(plugin) in by_plugin}
