"""The two example plugins shipped in plugins/: loaded from their source for in-process tests, or installed by pip."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path
from types import ModuleType

PLUGINS = Path(__file__).resolve().parents[1] / "plugins"
# The plugin's name (its entry point's) -> its folder and module.
EXAMPLES = {"quiet_hours": ("quiet_hours", "console_ha_quiet_hours"), "notify": ("notify", "console_ha_notify")}


def load_example(name: str) -> ModuleType:
    """A fresh copy of the example plugin's module from its source (each test its own; sys.modules untouched)."""
    folder, module = EXAMPLES[name]
    spec = importlib.util.spec_from_file_location(module, PLUGINS / folder / f"{module}.py")
    assert spec is not None and spec.loader is not None
    loaded = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(loaded)
    return loaded


def pip_install_examples(site: Path) -> None:
    """Install both example plugins into `site` as pip does for a household: a wheel built from each pyproject.

    Offline: hatchling (the test extra's) builds them without a build environment from the index.
    """
    subprocess.run(
        [sys.executable, "-m", "pip", "install", "--quiet", "--disable-pip-version-check", "--no-deps",
         "--no-build-isolation", "--no-index", "--target", str(site),
         *(str(PLUGINS / folder) for folder, _ in EXAMPLES.values())],
        check=True, timeout=120,
    )
