"""Fixtures shared by every test module: a fresh data dir and a stub Home Assistant on loopback."""

from __future__ import annotations

import dataclasses
import logging
import os
import shutil
import subprocess
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Any

import pytest

from console_ha.store.datadir import DataDir

if TYPE_CHECKING:
    from pathlib import Path

    from console_ha.capabilities.executor import Executor
    from console_ha.store.model_config import ModelStore
    from tests.certs import Issued
    from tests.fake_model import FakeModel
    from tests.stub_ha import StubHomeAssistant

# mDNS stays on loopback in every test, whatever a developer's shell says.
os.environ["CONSOLE_HA_MDNS_INTERFACES"] = "127.0.0.1"


@pytest.fixture(autouse=True)
def _results_match_their_schemas(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Every result a registered capability returns, in any test, matches its declared result schema.

    Each capability's execute is wrapped, not replaced: the result goes on unchanged, and a departure
    fails the test at teardown (raised inside execute, the executor would turn it into INTERNAL_ERROR).
    """
    from console_ha.capabilities.registry import REGISTRY
    from tests.result_schemas import result_schema_errors

    drifted: list[str] = []
    for name, capability in list(REGISTRY.items()):
        def checked(*args: Any, _execute: Any = capability.execute, _name: str = name) -> dict[str, Any]:
            result = _execute(*args)
            drifted.extend(result_schema_errors(_name, result))
            return result

        monkeypatch.setitem(REGISTRY, name, dataclasses.replace(capability, execute=checked))
    yield
    assert not drifted, "a capability result departs from its declared schema:\n" + "\n".join(drifted[:10])


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


@pytest.fixture
def two_homes() -> Iterator[tuple[StubHomeAssistant, StubHomeAssistant]]:
    """Two stub Home Assistants on two ports, each with its own token; seeing the other's fails the test."""
    from tests.stub_ha import StubHomeAssistant

    with StubHomeAssistant(seed=1) as home, StubHomeAssistant(seed=2) as other:
        for stub, rival in ((home, other), (other, home)):
            stub.refuse_tokens_of(rival)
            stub.serve_registries({"light.living_room": "Living room"})
        yield home, other
    for stub in (home, other):
        assert stub.foreign_tokens_seen == [], (
            f"the Home Assistant at {stub.base_url} received another origin's token: {stub.foreign_tokens_seen}"
        )


# --- no secret in any response or log line, in every test of the suite ---------------------------------

# Stored tokens shorter than this are test placeholders ("t") that ordinary words would contain.
MIN_STORED_SECRET = 8


@pytest.fixture
def hidden_secrets() -> list[str]:
    """Secrets a test handled; none of them may appear in any response or log line of that test."""
    return []


@pytest.fixture
def recorded_responses() -> list[bytes]:
    """The raw bytes (headers and body) of every response the test's clients received."""
    return []


@pytest.fixture(autouse=True)
def _secrets_never_shown(
    request: pytest.FixtureRequest,
    hidden_secrets: list[str],
    recorded_responses: list[bytes],
    caplog: pytest.LogCaptureFixture,
) -> Iterator[None]:
    """After each test: no handled or stored secret is in any response, log line, or data file beside it.

    The secrets: those the test names (`hidden_secrets`), every stub (or real) Home Assistant's token,
    and the Home Assistant token stored in the test's data dir when the test ends.
    """
    caplog.set_level(logging.DEBUG)
    for name in ("stub_ha", "two_homes", "real_ha"):
        if name in request.fixturenames:
            value = request.getfixturevalue(name)
            hidden_secrets.extend(ha.token for ha in (value if isinstance(value, tuple) else (value,)) if ha.token)
    data_dir: DataDir | None = request.getfixturevalue("data_dir") if "data_dir" in request.fixturenames else None
    yield
    secrets = list(hidden_secrets)
    if data_dir is not None:
        secrets += _stored_token(data_dir)
    logged = caplog.text + "\n".join(record.getMessage() for record in caplog.records)
    for secret in secrets:
        assert all(secret.encode() not in raw for raw in recorded_responses), "a secret appeared in a response"
        assert secret not in logged, "a secret appeared in a log line"
    if data_dir is not None and data_dir.root.exists():
        for path in data_dir.root.rglob("*"):
            if path.is_file() and "secrets" not in path.relative_to(data_dir.root).parts:
                content = path.read_bytes()
                assert all(s.encode() not in content for s in secrets), f"a secret appeared in {path.name}"


def _stored_token(data_dir: DataDir) -> list[str]:
    """The token each Home Assistant instance has stored (`home`'s and every other's, issue 29)."""
    others = data_dir.instance("_").secrets.parent  # where every instance but home keeps its own
    paths = [data_dir.ha_token, *(others.glob("*/access-token") if others.is_dir() else [])]
    tokens = []
    for path in paths:
        try:
            first = path.read_text(encoding="ascii").split("\n", 1)[0].strip()
        except (OSError, UnicodeDecodeError):
            continue
        if len(first) >= MIN_STORED_SECRET:
            tokens.append(first)
    return tokens


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


@pytest.fixture
def queue_executor(data_dir: DataDir, stub_ha: StubHomeAssistant, clock: Clock) -> Any:
    """An executor for a household queue whose cards live on `clock`, over the stub with the living room allowed
    (the card events' tests, issue 30)."""
    from console_ha.capabilities.confirmations import ConfirmationStore
    from tests.executors import executor_over
    from tests.seed import seed_settings

    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url,
                             "allowlisted_entities": ["sensor.living_room_temperature"]}, token=stub_ha.token)
    return executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock)


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


# --- fixtures several modules share (one definition each: tests/test_fixture_copies.py) ----------------


@pytest.fixture(scope="session")
def example_site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both example plugins installed by pip into a folder, as a household installs them (tests/example_plugins.py)."""
    from tests.example_plugins import pip_install_examples

    site = tmp_path_factory.mktemp("site-packages")
    pip_install_examples(site)
    return site


# What the conversation tests allow: a thermometer and a door sensor.
CONVERSATION_ALLOWED = ["sensor.living_room_temperature", "binary_sensor.front_door"]


@pytest.fixture
def model() -> Iterator[FakeModel]:
    """A fake OpenAI-compatible model server on loopback, scripted by the test."""
    from tests.fake_model import FakeModel

    with FakeModel() as fake:
        yield fake


@pytest.fixture
def configured(data_dir: DataDir, stub_ha: StubHomeAssistant) -> StubHomeAssistant:
    """Home Assistant reading turned on, saved as the settings page saves it: the stub, CONVERSATION_ALLOWED."""
    from tests.seed import seed_settings

    seed_settings(data_dir, {"enabled": True, "base_url": stub_ha.base_url,
                             "allowlisted_entities": CONVERSATION_ALLOWED}, token=stub_ha.token)
    return stub_ha


@pytest.fixture
def executor(data_dir: DataDir, clock: Clock) -> Executor:
    """An executor over the data dir's own stores, its confirmations and rate limits on the test's clock."""
    from console_ha.capabilities.confirmations import ConfirmationStore
    from tests.executors import executor_over

    return executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock)


@pytest.fixture
def model_store(data_dir: DataDir) -> ModelStore:
    """The model settings' store over the data dir."""
    from console_ha.store.model_config import ModelStore

    return ModelStore(data_dir)


@pytest.fixture
def issued(tmp_path: Path) -> Issued:
    """A household CA and a server certificate for 127.0.0.1 it signed."""
    from tests.certs import make_ca

    return make_ca(tmp_path / "ca")


@pytest.fixture
def rooms(stub_ha: StubHomeAssistant) -> StubHomeAssistant:
    """The stub with the area-filter tests' entities placed in their areas and on their devices."""
    from tests.test_list_entities_filters import place_entities

    place_entities(stub_ha)
    return stub_ha
