"""Finding Home Assistant on the local network: a bounded zeroconf browse for `_home-assistant._tcp`."""

from __future__ import annotations

import ipaddress
import logging
import os
import queue
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

from zeroconf import InterfaceChoice, IPVersion, ServiceBrowser, ServiceInfo, ServiceStateChange, Zeroconf

from console_ha.errors import InvalidSettingsChange
from console_ha.ha.addresses import normalise_base_url, origin_of

log = logging.getLogger(__name__)

SERVICE_TYPE = "_home-assistant._tcp.local."
ENV_INTERFACES = "CONSOLE_HA_MDNS_INTERFACES"
MAX_INSTANCES = 32
MAX_NAME_LENGTH = 200
# Home Assistant's TXT record carries up to three URLs; the first local one in this order wins.
URL_KEYS = ("internal_url", "base_url", "external_url")


@dataclass(frozen=True)
class Instance:
    """One Home Assistant found on the network."""

    name: str
    base_url: str
    version: str | None
    # Every other URL the advertisement names (its TXT URLs, its address): the same Home Assistant, added
    # perhaps under one of them.
    also_at: tuple[str, ...] = field(default=(), compare=False)

    def to_json(self) -> dict[str, Any]:
        """The contract's `{"name", "base_url", "version"}`."""
        return {"name": self.name, "base_url": self.base_url, "version": self.version}

    def origins(self) -> frozenset[str]:
        """The origins (`scheme://host:port`) it can be reached at, as far as its advertisement says."""
        origins = set()
        for url in (self.base_url, *self.also_at):
            try:
                origins.add(origin_of(url))
            except ValueError:
                continue  # an address no URL can name (a link-local one with its zone, say): no origin to match
        return frozenset(origins)


def configured_interfaces(value: str | None = None) -> list[str] | None:
    """The IPv4 addresses from CONSOLE_HA_MDNS_INTERFACES; None (all interfaces) when it is unset."""
    text = os.environ.get(ENV_INTERFACES) if value is None else value
    if text is None or not text.strip():
        return None
    addresses = []
    for item in text.split(","):
        item = item.strip()
        try:
            addresses.append(str(ipaddress.IPv4Address(item)))
        except ValueError:
            log.warning("%s: ignoring %r, which is not an IPv4 address", ENV_INTERFACES, item)
    # Set but with nothing usable: browse nowhere rather than everywhere, which the setting meant to avoid.
    return addresses


def discover(timeout: float = 3.0, interfaces: list[str] | None = None, *,
             clock: Callable[[], float] = time.monotonic) -> list[Instance]:
    """Browse for Home Assistant for `timeout` seconds of `clock` on `interfaces` (default: the configured ones)."""
    if interfaces is None:
        interfaces = configured_interfaces()
    if interfaces is not None and not interfaces:
        return []
    deadline = clock() + timeout
    try:
        zc = Zeroconf(interfaces=interfaces or InterfaceChoice.All, use_asyncio=False)
    except OSError as err:
        log.warning("mDNS browse not possible: %s", err)
        return []
    try:
        return _browse(zc, deadline, clock)
    finally:
        zc.close()


def _browse(zc: Zeroconf, deadline: float, clock: Callable[[], float]) -> list[Instance]:
    names: queue.Queue[str] = queue.Queue()

    def on_change(
        zeroconf: Zeroconf, service_type: str, name: str, state_change: ServiceStateChange
    ) -> None:
        # Runs on the browser's thread: only hand the name over, resolve on this one.
        if state_change in (ServiceStateChange.Added, ServiceStateChange.Updated):
            names.put(name)

    found: dict[str, Instance] = {}
    browser = ServiceBrowser(zc, SERVICE_TYPE, handlers=[on_change])
    try:
        while len(found) < MAX_INSTANCES:
            remaining = deadline - clock()
            if remaining <= 0:
                break
            try:
                name = names.get(timeout=remaining)
            except queue.Empty:
                break
            if name in found:
                continue
            info = ServiceInfo(SERVICE_TYPE, name)
            remaining_ms = int((deadline - clock()) * 1000)
            if not info.load_from_cache(zc) and (remaining_ms <= 0 or not info.request(zc, remaining_ms)):
                continue
            instance = instance_from_info(info)
            if instance is not None:
                found[name] = instance
    finally:
        browser.cancel()
    return sorted(found.values(), key=lambda i: (i.name.casefold(), i.base_url))


def instance_from_info(info: ServiceInfo) -> Instance | None:
    """Read a resolved advertisement; None when it names no usable URL or address."""
    props = _text_properties(info.properties)
    instance_name = info.name.removesuffix("." + SERVICE_TYPE)
    name = (props.get("location_name") or instance_name).strip()[:MAX_NAME_LENGTH]
    addresses = info.parsed_addresses(IPVersion.V4Only) + info.parsed_addresses(IPVersion.V6Only)
    base_url = choose_base_url(props, addresses, info.port)
    if not base_url:
        log.info("ignoring the advertisement %r: no usable URL or address", info.name)
        return None
    also_at = tuple(url for url in (*_text_urls(props), *_address_urls(addresses, info.port)) if url != base_url)
    return Instance(name=name or instance_name, base_url=base_url, version=props.get("version") or None,
                    also_at=also_at)


def choose_base_url(props: dict[str, str], addresses: list[str], port: int | None) -> str:
    """A local TXT URL, else the advertised address and port, else any valid TXT URL; "" if none."""
    urls = _text_urls(props)
    for url in urls:
        if _is_local(url):
            return url
    at_addresses = _address_urls(addresses, port)
    if at_addresses:
        return at_addresses[0]
    return urls[0] if urls else ""


def _text_urls(props: dict[str, str]) -> list[str]:
    """The valid URLs of the TXT record, in URL_KEYS' order."""
    urls = []
    for key in URL_KEYS:
        try:
            url = normalise_base_url(props.get(key, ""))
        except InvalidSettingsChange:
            continue
        if url:
            urls.append(url)
    return urls


def _address_urls(addresses: list[str], port: int | None) -> list[str]:
    """The advertised addresses at the advertised port, as http URLs."""
    if not port:
        return []
    return [f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}" for host in addresses]


def _is_local(url: str) -> bool:
    # A Console on the household's network wants the address that stays on it, not a cloud relay.
    host = urlsplit(url).hostname or ""
    try:
        address = ipaddress.ip_address(host)
    except ValueError:
        return host.endswith(".local") or "." not in host
    return address.is_private or address.is_loopback or address.is_link_local


def _text_properties(raw: dict[bytes, bytes | None]) -> dict[str, str]:
    props = {}
    for key, value in raw.items():
        if value is None:
            continue
        props[key.decode("utf-8", "replace")] = value.decode("utf-8", "replace")
    return props
