"""A real plugin distribution for the tests: a module and its dist-info with an entry point, on a tmp sys.path."""

from __future__ import annotations

import sys
import textwrap
from pathlib import Path

import pytest


def install_plugin(site: Path, monkeypatch: pytest.MonkeyPatch, *, name: str, version: str, source: str) -> None:
    """Put the distribution `name` (module `name`, entry point `name` in the group `console_ha`) on sys.path.

    importlib.metadata finds a dist-info on sys.path as pip would have left it: no install, nothing outside `site`.
    """
    info = site / f"{name}-{version}.dist-info"
    info.mkdir(parents=True)
    (info / "METADATA").write_text(f"Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n")
    (info / "entry_points.txt").write_text(f"[console_ha]\n{name} = {name}\n")
    (site / f"{name}.py").write_text(textwrap.dedent(source))
    if str(site) not in sys.path:
        monkeypatch.syspath_prepend(str(site))
    monkeypatch.delitem(sys.modules, name, raising=False)
