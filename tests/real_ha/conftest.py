"""Real Home Assistant cores for the tests, on 127.0.0.1: `real_ha` (the house), `cabin_ha` (a second core
beside it, issue 29), and `recording_proxy`, which puts a recording proxy in front of either.

A developer can leave these tests out with `-m "not real_ha"`; CI runs them all. The first run
installs Home Assistant into <repo>/.cache/ha-venv (or $CONSOLE_HA_HA_VENV); later runs reuse it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import ExitStack
from pathlib import Path

import pytest

from tests.real_ha.harness import CABIN, HOUSE, RealHomeAssistant, Site, default_venv, install_home_assistant
from tests.real_ha.wire import RecordingProxy

_HERE = Path(__file__).parent


@pytest.hookimpl(tryfirst=True)
def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """Mark every test under tests/real_ha as `real_ha`, before `-m` deselects by marker."""
    for item in items:
        if _HERE in item.path.parents:
            item.add_marker(pytest.mark.real_ha)


def _running(tmp_path_factory: pytest.TempPathFactory, name: str, site: Site) -> Iterator[RealHomeAssistant]:
    """A provisioned core of `site` in its own config dir and port, stopped at the end."""
    hass = install_home_assistant(default_venv())
    instance = RealHomeAssistant(hass, tmp_path_factory.mktemp(name), site=site)
    try:
        instance.provision()
        yield instance
    finally:
        instance.stop()


@pytest.fixture(scope="session")
def real_ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealHomeAssistant]:
    """A provisioned, running Home Assistant 2025.4.4: onboarded, areas assigned, token minted.

    Tests that stop it must start it again before they return.
    """
    yield from _running(tmp_path_factory, "real_ha", HOUSE)


@pytest.fixture(scope="session")
def cabin_ha(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RealHomeAssistant]:
    """A second core, "Console Test Cabin", with its own config dir, port, token and entities (harness.CABIN).

    Its sensor.living_room_temperature shares the house's entity_id and reads another value. Tests that stop
    it must start it again before they return.
    """
    yield from _running(tmp_path_factory, "cabin_ha", CABIN)


@pytest.fixture
def recording_proxy() -> Iterator[Callable[[str], RecordingProxy]]:
    """Start a recording proxy in front of a base URL (`recording_proxy(cabin_ha.base_url)`); each one the
    test started is stopped at its end."""
    with ExitStack() as proxies:
        yield lambda base_url: proxies.enter_context(RecordingProxy.in_front_of(base_url))
