"""What a Home Assistant address and an entity id look like: the URL check, its origin, the id pattern."""

from __future__ import annotations

import ipaddress
import re
from urllib.parse import urlsplit, urlunsplit

from console_ha.errors import InvalidSettingsChange
from console_ha.language import Words

ENTITY_ID_RE = re.compile(r"^[a-z0-9_]+\.[a-z0-9_]+$")
# RFC 3986's characters (unreserved, reserved and %); anything else is refused, not guessed at.
URL_CHARACTERS = re.compile(r"[A-Za-z0-9\-._~:/?#\[\]@!$&'()*+,;=%]+")
HOST_LABEL = re.compile(r"[A-Za-z0-9_](?:[A-Za-z0-9_-]{0,61}[A-Za-z0-9_])?")
MAX_ENTITY_ID_LENGTH = 255
MAX_BASE_URL_LENGTH = 2048
DEFAULT_PORTS = {"http": 80, "https": 443}


def normalise_base_url(value: object) -> str:
    """Check a base URL (http/https, host, no credentials, query or fragment) and normalise it."""
    if not isinstance(value, str):
        raise InvalidSettingsChange(Words("The Home Assistant URL must be text."), field="base_url")
    text = value.strip()
    if text == "":
        return ""
    if len(text) > MAX_BASE_URL_LENGTH or not URL_CHARACTERS.fullmatch(text):
        # Printable ASCII of a URL only: a backslash, a control or a bidi character could make the
        # host the card shows differ from the host the token is sent to.
        raise InvalidSettingsChange(Words("The Home Assistant URL is not a valid URL."), field="base_url")
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as err:
        raise InvalidSettingsChange(Words("The Home Assistant URL is not a valid URL."), field="base_url") from err
    if parts.scheme.lower() not in ("http", "https"):
        raise InvalidSettingsChange(Words("The Home Assistant URL must start with http:// or https://."),
                                    field="base_url")
    if not parts.hostname:
        raise InvalidSettingsChange(Words("The Home Assistant URL needs a host name or address."), field="base_url")
    if parts.username is not None or parts.password is not None or "@" in parts.netloc:
        raise InvalidSettingsChange(
            Words("The Home Assistant URL must not contain a user name or password; "
                  "the access token is entered separately."),
            field="base_url",
        )
    if parts.query or parts.fragment or text.endswith(("?", "#")):
        raise InvalidSettingsChange(Words("The Home Assistant URL must not have a query or fragment."),
                                    field="base_url")
    path = parts.path.rstrip("/")
    while path.endswith("/api"):
        path = path[: -len("/api")].rstrip("/")
    host = parts.hostname
    if not _is_host(host):
        raise InvalidSettingsChange(Words("The Home Assistant URL's host is not a valid name or address."),
                                    field="base_url")
    if port is not None and not 0 < port < 65536:
        raise InvalidSettingsChange(Words("The Home Assistant URL's port must be between 1 and 65535."),
                                    field="base_url")
    if ":" in host:
        host = f"[{host}]"
    netloc = host if port is None else f"{host}:{port}"
    return urlunsplit((parts.scheme.lower(), netloc, path, "", ""))


def origin_of(url: str) -> str:
    """`scheme://host:port` of an http(s) URL, the port always written out: http://h and http://h:80 agree.

    The one definition of "which server": the token's binding, the Home Assistant call cap and the
    check that the model is not Home Assistant all compare these.

    Host names are compared as written, lower-cased (no DNS): `ha.local` and `192.168.1.5` are different
    origins even when they are the same machine, which only costs the household a second paste.
    """
    parts = urlsplit(url.strip())
    scheme = parts.scheme.lower()
    host = parts.hostname  # lower-cased, brackets of an IPv6 literal removed
    if scheme not in DEFAULT_PORTS or not host:
        raise ValueError("not an http or https URL with a host")
    port = parts.port or DEFAULT_PORTS[scheme]
    if ":" in host:
        host = f"[{host}]"
    return f"{scheme}://{host}:{port}"


def _is_host(host: str) -> bool:
    """An IP address, or a name made of letters, digits, hyphens and underscores between dots."""
    try:
        ipaddress.ip_address(host)
        return True
    except ValueError:
        pass
    labels = host.removesuffix(".").split(".")
    return len(host) <= 253 and all(HOST_LABEL.fullmatch(label) for label in labels)


def is_entity_id(value: object) -> bool:
    """True for a well-formed `domain.object_id`."""
    return (
        isinstance(value, str)
        and len(value) <= MAX_ENTITY_ID_LENGTH
        and ENTITY_ID_RE.fullmatch(value) is not None
    )
