"""The `real_ha` fixture: one real Home Assistant core per test session, on 127.0.0.1.

A developer can leave these tests out with `-m "not real_ha"`; CI runs them all. The first run
installs Home Assistant into <repo>/.cache/ha-venv (or $CONSOLE_HA_HA_VENV); later runs reuse it.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.real_ha.harness import RealHomeAssistant, default_venv, install_home_assistant

_HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/real_ha as `real_ha`, before `-m` deselects by marker."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.real_ha)


@pytest.fixture(scope="session")
def real_ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealHomeAssistant]:
    """A provisioned, running Home Assistant 2025.4.4: onboarded, areas assigned, token minted.

    Tests that stop it must start it again before they return.
    """
    hass = install_home_assistant(default_venv())
    instance = RealHomeAssistant(hass, tmp_path_factory.mktemp("real_ha"))
    try:
        instance.provision()
        yield instance
    finally:
        instance.stop()
