"""Finding Home Assistant with zeroconf: a real advertisement on 127.0.0.1, shaped like HA's own."""

from __future__ import annotations

import secrets
import socket
from collections.abc import Iterator

import pytest
from zeroconf import ServiceInfo, Zeroconf

from console_ha.ha import discovery
from console_ha.ha.discovery import SERVICE_TYPE, Instance, choose_base_url, configured_interfaces, discover
from tests.moving_clock import ClockReadings

LOOPBACK = ["127.0.0.1"]
# Unique per run: other test runs on this machine may advertise on loopback at the same time.
NAME = f"Test Home {secrets.token_hex(3)}"


def test_nothing_advertised_finds_nothing_within_the_bound(monkeypatch: pytest.MonkeyPatch) -> None:
    """Nothing answers: [] once the browse's clock says its timeout is spent, not a minute of real time later.

    The browse is for a service type of this test's own, so an advertisement from another test run on
    this machine's loopback cannot answer it.
    """
    monkeypatch.setattr(discovery, "SERVICE_TYPE", f"_cha-{secrets.token_hex(4)}._tcp.local.")
    clock = ClockReadings([1000.0, 1000.0 + 60.0])  # the browse starts, then its minute is gone
    assert discover(timeout=60.0, interfaces=LOOPBACK, clock=clock) == []
    assert clock.reads == 2


@pytest.fixture(scope="module")
def advertised() -> Iterator[ServiceInfo]:
    """A Home Assistant advertisement as HA 2025.4 sends it, on loopback only."""
    info = ServiceInfo(
        SERVICE_TYPE,
        f"{NAME}.{SERVICE_TYPE}",
        addresses=[socket.inet_aton("127.0.0.1")],
        port=8123,
        server="5d7f0c2e9a3b4c1d8e6f.local.",
        properties={
            "location_name": NAME,
            "uuid": "5d7f0c2e9a3b4c1d8e6f",
            "version": "2025.4.4",
            "external_url": "https://example.ui.nabu.casa",
            "internal_url": "http://127.0.0.1:8123",
            "base_url": "http://127.0.0.1:8123",
            "requires_api_password": "True",
        },
    )
    zc = Zeroconf(interfaces=LOOPBACK, use_asyncio=False)
    try:
        zc.register_service(info)
        yield info
        zc.unregister_service(info)
    finally:
        zc.close()


def test_an_advertised_home_assistant_is_found(advertised: ServiceInfo, monkeypatch: pytest.MonkeyPatch) -> None:
    """Name from location_name, the local internal_url, the TXT version; on the configured interfaces."""
    monkeypatch.setenv("CONSOLE_HA_MDNS_INTERFACES", "127.0.0.1")
    found = discover(timeout=2.5)  # how the bound ends the browse: the test above, on its own clock
    assert Instance(name=NAME, base_url="http://127.0.0.1:8123", version="2025.4.4") in found


@pytest.mark.parametrize(
    "value, expected",
    [
        (None, None),
        ("", None),
        ("127.0.0.1", ["127.0.0.1"]),
        (" 127.0.0.1 , 192.168.1.5 ", ["127.0.0.1", "192.168.1.5"]),
        ("127.0.0.1,eth0,::1", ["127.0.0.1"]),
        ("eth0", []),  # set, but nothing usable: browse nowhere rather than everywhere
    ],
)
def test_configured_interfaces(monkeypatch: pytest.MonkeyPatch, value: str | None, expected: list[str] | None
                               ) -> None:
    """Comma-separated IPv4 addresses; anything else is ignored with a warning."""
    if value is None:
        monkeypatch.delenv("CONSOLE_HA_MDNS_INTERFACES", raising=False)
    else:
        monkeypatch.setenv("CONSOLE_HA_MDNS_INTERFACES", value)
    assert configured_interfaces() == expected


def test_an_unusable_setting_browses_nowhere(monkeypatch: pytest.MonkeyPatch) -> None:
    """No multicast leaves the machine because of a typo."""
    monkeypatch.setenv("CONSOLE_HA_MDNS_INTERFACES", "eth0")
    opened: list[object] = []
    monkeypatch.setattr(discovery, "Zeroconf", lambda **kwargs: opened.append(kwargs))
    clock = ClockReadings([0.0])
    assert discover(timeout=3.0, clock=clock) == []
    assert opened == [] and clock.reads == 0  # no socket opened, and nothing waited for


@pytest.mark.parametrize(
    "props, addresses, expected",
    [
        ({"internal_url": "http://192.168.1.20:8123", "external_url": "https://x.ui.nabu.casa"}, ["192.168.1.20"],
         "http://192.168.1.20:8123"),
        ({"internal_url": "", "base_url": "http://homeassistant.local:8123/"}, ["192.168.1.20"],
         "http://homeassistant.local:8123"),
        ({"external_url": "https://x.ui.nabu.casa"}, ["192.168.1.20"], "http://192.168.1.20:8123"),
        ({"external_url": "https://x.ui.nabu.casa"}, [], "https://x.ui.nabu.casa"),
        ({"internal_url": "not a url"}, ["fe80::1"], "http://[fe80::1]:8123"),
        ({}, [], ""),
    ],
    ids=["internal", "base-local-name", "address-before-cloud", "cloud-last", "invalid-url", "nothing"],
)
def test_the_base_url_prefers_a_local_address(props: dict[str, str], addresses: list[str], expected: str) -> None:
    """A local TXT URL, else the advertised address and port, else any valid TXT URL."""
    assert choose_base_url(props, addresses, 8123) == expected


def test_the_zeroconf_instance_is_always_closed(monkeypatch: pytest.MonkeyPatch) -> None:
    """Even when browsing fails, the sockets are released."""
    closed: list[bool] = []

    class Spy(Zeroconf):
        def close(self) -> None:
            closed.append(True)
            super().close()

    def broken_browser(*args: object, **kwargs: object) -> None:
        raise RuntimeError("browser failed")

    monkeypatch.setattr(discovery, "Zeroconf", Spy)
    monkeypatch.setattr(discovery, "ServiceBrowser", broken_browser)
    with pytest.raises(RuntimeError):
        discover(timeout=0.2, interfaces=LOOPBACK)
    assert closed == [True]
