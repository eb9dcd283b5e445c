"""The build hook: compile the household's catalogs (.po) into .mo at every build and install.

`pip install .` and `pip install -e .` both run it, so the README's two commands still do all the set-up.
The compiling itself is scripts/i18n.py's (one place), loaded from beside this file.
"""

from __future__ import annotations

import importlib.util
from pathlib import Path
from typing import Any

from hatchling.builders.hooks.plugin.interface import BuildHookInterface


class CatalogBuildHook(BuildHookInterface):  # type: ignore[type-arg]
    """Compiles console_ha/translations/*/LC_MESSAGES/messages.po before the wheel (or editable) is built."""

    PLUGIN_NAME = "custom"

    def initialize(self, version: str, build_data: dict[str, Any]) -> None:
        """Write every catalog's .mo beside its .po, and ship them (git ignores them, the wheel must not)."""
        root = Path(self.root)
        spec = importlib.util.spec_from_file_location("console_ha_i18n", root / "scripts" / "i18n.py")
        if spec is None or spec.loader is None:
            raise RuntimeError("scripts/i18n.py is missing: the catalogs cannot be compiled")
        i18n = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(i18n)
        written = i18n.compile_all(root)
        if not written:
            raise RuntimeError("no catalog under console_ha/translations: the household's words would be missing")
        build_data.setdefault("artifacts", []).extend(str(path.relative_to(root)) for path in written)
