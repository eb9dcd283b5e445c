"""Fixtures shared by every test module: a fresh data dir and a stub Home Assistant on loopback."""

from __future__ import annotations

import os
from collections.abc import Iterator

import pytest

from console_ha.datadir import DataDir

# mDNS stays on loopback in every test, whatever a developer's shell says.
os.environ["CONSOLE_HA_MDNS_INTERFACES"] = "127.0.0.1"


@pytest.fixture
def data_dir(tmp_path) -> DataDir:
    """An empty data dir, as on a device that has never been configured."""
    return DataDir(tmp_path / "data")


@pytest.fixture
def stub_ha() -> Iterator["StubHomeAssistant"]:
    """A stub Home Assistant serving realistic payloads over real HTTP on 127.0.0.1."""
    from tests.stub_ha import StubHomeAssistant

    with StubHomeAssistant() as server:
        yield server
