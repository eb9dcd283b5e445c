"""The household's switch per installed plugin, in `D/console/plugins.json`: which ones it turned off.

A plugin turned off stays installed and listed; its hooks are not called. The file names the plugins turned
off (not those on), so a plugin installed later is on until the household says otherwise, as installing it
asked. A file that cannot be used turns every plugin off: a damaged file must never turn on a plugin the
household turned off (one that sends a card's title out of the house, say).
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from pathlib import Path

from console_ha.store.atomic import atomic_write, ensure_dir, path_lock
from console_ha.store.datadir import DataDir

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class Switches:
    """What the file says: the plugins turned off, or that every plugin is off (the file cannot be used)."""

    turned_off: frozenset[str]
    all_off: bool = False

    def is_on(self, plugin: str) -> bool:
        """Whether the household lets `plugin`'s hooks run."""
        return not self.all_off and plugin not in self.turned_off


class PluginSwitches:
    """Reads and writes the plugins' switches file, atomically under its lock."""

    def __init__(self, data_dir: DataDir) -> None:
        self.path: Path = data_dir.plugin_switches

    def read(self) -> Switches:
        """The switches as saved; none turned off when there is no file, all off when it cannot be used."""
        try:
            body = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return Switches(frozenset())
        except (OSError, ValueError) as err:
            log.warning("the plugins' switches cannot be read (%s); every plugin is off", type(err).__name__)
            return Switches(frozenset(), all_off=True)
        names = body.get("turned_off") if isinstance(body, dict) else None
        if not isinstance(names, list) or not all(isinstance(name, str) for name in names):
            log.warning("the plugins' switches file is not as written; every plugin is off")
            return Switches(frozenset(), all_off=True)
        return Switches(frozenset(names))

    def set_on(self, plugin: str, on: bool, installed: Iterable[str]) -> Switches:
        """Turn `plugin` on or off; the others stay as they are.

        A file that cannot be used is written again with every `installed` plugin off but this one's choice:
        every plugin was off while it was damaged, and turning one on must not turn on the others.
        """
        ensure_dir(self.path.parent, 0o700)
        with path_lock(self.path):
            saved = self.read()
            turned_off = set(installed) if saved.all_off else set(saved.turned_off)
            if on:
                turned_off.discard(plugin)
            else:
                turned_off.add(plugin)
            body = {"turned_off": sorted(turned_off)}
            atomic_write(self.path, (json.dumps(body, indent=2, ensure_ascii=False) + "\n").encode("utf-8"))
        return Switches(frozenset(turned_off))
