"""Two real cores side by side, a house and a cabin, each reached through its own recording proxy (issue 29).

The cores are driven with the harness's own client, not the Console: this is the ground the Console's
several-instance tests stand on: two origins that answer differently, and a wire that shows which token
went where.
"""

from __future__ import annotations

import time
from collections.abc import Callable

import pytest

from tests.real_ha.harness import (
    CABIN_LIVING_ROOM_TEMPERATURE,
    CABIN_LOCATION_NAME,
    CABIN_ONLY_ENTITY,
    CABIN_TEMPERATURE,
    LOCATION_NAME,
    RealHomeAssistant,
)
from tests.real_ha.wire import RecordingProxy

pytestmark = pytest.mark.real_ha

SHARED_ENTITY = "sensor.living_room_temperature"  # in both, with another value in each
HOUSE_ONLY_ENTITY = "sensor.kitchen_temperature"

Wired = tuple[tuple[RealHomeAssistant, RecordingProxy], tuple[RealHomeAssistant, RecordingProxy]]


@pytest.fixture
def wired(
    real_ha: RealHomeAssistant, cabin_ha: RealHomeAssistant, recording_proxy: Callable[[str], RecordingProxy]
) -> Wired:
    """(house, its proxy) and (cabin, its proxy)."""
    return (real_ha, recording_proxy(real_ha.base_url)), (cabin_ha, recording_proxy(cabin_ha.base_url))


def _state(core: RealHomeAssistant, proxy: RecordingProxy, entity_id: str) -> str | None:
    """The entity's state read through the proxy, or None when the core has no such entity."""
    response = core.get(f"/api/states/{entity_id}", via=proxy.url)
    if response.status_code == 404:
        return None
    response.raise_for_status()
    return response.json()["state"]


def test_each_core_answers_through_its_own_proxy_as_its_own_location(wired: Wired) -> None:
    names = []
    for core, proxy in wired:
        response = core.get("/api/", via=proxy.url)
        assert (response.status_code, response.json()) == (200, {"message": "API running."})
        with core.websocket(via=proxy.url) as ws:
            names.append(ws.command("get_config")["location_name"])

    assert names == [LOCATION_NAME, CABIN_LOCATION_NAME]
    (house, _), (cabin, _) = wired
    assert house.port != cabin.port and house.config_dir != cabin.config_dir


def test_their_states_differ_as_designed(wired: Wired) -> None:
    house, cabin = wired

    assert _state(*cabin, SHARED_ENTITY) == CABIN_LIVING_ROOM_TEMPERATURE
    assert _state(*house, SHARED_ENTITY) not in (None, CABIN_LIVING_ROOM_TEMPERATURE)
    assert (_state(*house, CABIN_ONLY_ENTITY), _state(*cabin, CABIN_ONLY_ENTITY)) == (None, CABIN_TEMPERATURE)
    assert _state(*house, HOUSE_ONLY_ENTITY) is not None
    assert _state(*cabin, HOUSE_ONLY_ENTITY) is None


def test_each_proxy_saw_its_own_cores_token_and_never_the_others(wired: Wired) -> None:
    for core, proxy in wired:
        core.get("/api/states", via=proxy.url).raise_for_status()
        with core.websocket(via=proxy.url) as ws:
            ws.command("get_states")

    (house, house_wire), (cabin, cabin_wire) = wired
    assert house.token != cabin.token
    for token, wire in ((house.token, house_wire), (cabin.token, cabin_wire)):
        assert wire.saw(f"Authorization: Bearer {token}".encode())  # REST: a header
        assert wire.saw(f'"access_token": "{token}"'.encode())  # WebSocket: inside the auth message
    assert not house_wire.saw(cabin.token.encode())
    assert not cabin_wire.saw(house.token.encode())


def test_each_core_refuses_the_others_token(real_ha: RealHomeAssistant, cabin_ha: RealHomeAssistant) -> None:
    """Two realms of their own: a token that reached the wrong origin would be refused there (and leaked)."""
    assert real_ha.get("/api/", token=cabin_ha.token).status_code == 401
    assert cabin_ha.get("/api/", token=real_ha.token).status_code == 401


def test_both_cores_start_side_by_side_within_the_harness_bound(
    real_ha: RealHomeAssistant, cabin_ha: RealHomeAssistant, capsys: pytest.CaptureFixture[str]
) -> None:
    """Stopped together and started at once on the same CPUs; start_together raises past START_TIMEOUT."""
    cores = (real_ha, cabin_ha)
    for core in cores:
        core.stop()
    started = time.monotonic()
    try:
        RealHomeAssistant.start_together(cores)
        seconds = time.monotonic() - started
    finally:
        for core in cores:
            core.start()

    for core in cores:
        assert core.get("/api/config").json()["state"] == "RUNNING"
    with capsys.disabled():  # a figure for docs/architecture.md, not a bound: START_TIMEOUT is that
        print(f"\n[two cores started side by side in {seconds:.1f} s]")
