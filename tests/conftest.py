"""Fixtures shared by every test module: a fresh data dir and a stub Home Assistant on loopback."""

from __future__ import annotations

import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING

import pytest

from console_ha.datadir import DataDir

if TYPE_CHECKING:
    from tests.stub_ha import StubHomeAssistant

# mDNS stays on loopback in every test, whatever a developer's shell says.
os.environ["CONSOLE_HA_MDNS_INTERFACES"] = "127.0.0.1"


@pytest.fixture(autouse=True)
def _call_limits_restored() -> Iterator[None]:
    """`console-ha serve` fits the process-wide Home Assistant call caps to its threads: undo that per test."""
    from console_ha.ha_client import CALL_LIMITS

    caps = {"per_origin": CALL_LIMITS.per_origin, "in_all": CALL_LIMITS.in_all}
    yield
    CALL_LIMITS.configure(**caps)


@pytest.fixture
def data_dir(tmp_path) -> DataDir:
    """An empty data dir, as on a device that has never been configured."""
    return DataDir(tmp_path / "data")


@pytest.fixture
def stub_ha() -> Iterator[StubHomeAssistant]:
    """A stub Home Assistant serving realistic payloads over real HTTP on 127.0.0.1."""
    from tests.stub_ha import StubHomeAssistant

    with StubHomeAssistant() as server:
        yield server


class Clock:
    """A wall clock that tests move forward by hand (`clock.now += 301`)."""

    def __init__(self, start: float | None = None) -> None:
        self.now = time.time() if start is None else start

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    """A clock at the current time that only moves when a test moves it."""
    return Clock()


@pytest.fixture(scope="session")
def self_signed_cert(tmp_path_factory: pytest.TempPathFactory) -> tuple[str, str]:
    """A self-signed certificate for 127.0.0.1 and its key, which nothing trusts unless told to."""
    if shutil.which("openssl") is None:
        pytest.skip("openssl is needed to make a test certificate")
    directory = tmp_path_factory.mktemp("tls")
    cert, key = directory / "cert.pem", directory / "key.pem"
    subprocess.run(
        ["openssl", "req", "-x509", "-newkey", "ec", "-pkeyopt", "ec_paramgen_curve:prime256v1", "-nodes",
         "-keyout", str(key), "-out", str(cert), "-days", "2", "-subj", "/CN=127.0.0.1",
         "-addext", "subjectAltName=IP:127.0.0.1,DNS:localhost"],
        check=True, capture_output=True, timeout=60,
    )
    return str(cert), str(key)
