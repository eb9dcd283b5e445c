"""The household's values of its plugins' declared settings, in `D/console/plugin-settings.json`.

One object per plugin, each value text as the plugins page checked it: {"quiet_hours": {"start": "22:00"}}.
Written atomically under its lock. A file that cannot be used reads as no values at all (a plugin then acts
as if nothing were set, which each example plugin makes its quiet default) and is replaced at the next save.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Mapping
from pathlib import Path

from console_ha.store.atomic import atomic_write, ensure_dir, path_lock
from console_ha.store.datadir import DataDir

log = logging.getLogger(__name__)

Values = dict[str, dict[str, str]]


class PluginValuesFile:
    """Reads and writes the file of the household's values for its plugins' settings."""

    def __init__(self, data_dir: DataDir) -> None:
        self.path: Path = data_dir.plugin_settings

    def read(self) -> Values:
        """Every plugin's saved values; none when there is no file or it cannot be used."""
        try:
            body = json.loads(self.path.read_bytes())
        except FileNotFoundError:
            return {}
        except (OSError, ValueError) as err:
            log.warning("the plugins' settings cannot be read (%s); no plugin has settings", type(err).__name__)
            return {}
        if not isinstance(body, dict):
            log.warning("the plugins' settings file is not as written; no plugin has settings")
            return {}
        return {plugin: {name: value for name, value in values.items() if isinstance(value, str)}
                for plugin, values in body.items() if isinstance(plugin, str) and isinstance(values, dict)}

    def save(self, plugin: str, values: Mapping[str, str]) -> Values:
        """Replace `plugin`'s values (the others stay as saved) and return everything now saved."""
        ensure_dir(self.path.parent, 0o700)
        with path_lock(self.path):
            saved = self.read()
            saved[plugin] = dict(values)
            atomic_write(self.path, (json.dumps(saved, indent=2, ensure_ascii=False, sort_keys=True) + "\n")
                         .encode("utf-8"))
        return saved
