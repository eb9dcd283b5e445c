"""Who may talk to the Console at all: trusted Host names, same-origin changes, and security headers.

Order matters and `init_app` fixes it: the Host check runs before anything else (a rebinding page gets
nothing, not even a redirect to the login page), the Origin check before authentication and the login
throttle (a refused request never counts as a password check), and the headers after every response.
"""

from __future__ import annotations

import ipaddress
import logging
import os
import re
import socket
from collections.abc import Iterable, Mapping
from urllib.parse import urlsplit

from flask import Flask, Response, jsonify, request
from werkzeug.exceptions import SecurityError

from console_ha.errors import ConsoleHaError, Forbidden, UntrustedHost, error_body
from console_ha.language import Words, from_browser, localised
from console_ha.web.error_responses import is_api_request

log = logging.getLogger(__name__)

ENV_TRUSTED_HOSTS = "CONSOLE_HA_TRUSTED_HOSTS"
# Always answered: a browser on this device.
LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")
# `--host` values that mean "every address of this machine".
WILDCARD_HOSTS = frozenset({"0.0.0.0", "::", "[::]", ""})
MUTATING_METHODS = frozenset({"POST", "PUT", "PATCH", "DELETE"})
UNTRUSTED_HOST_MESSAGE = Words(
    "The Console does not answer to this host name. Open it by the address it serves as, or add the "
    "name with {command} (or {variable}).",
    command="`console-ha serve --trusted-host NAME`", variable=ENV_TRUSTED_HOSTS)
FOREIGN_ORIGIN_MESSAGE = Words("This request came from another site, so the Console refused it.")

CONTENT_SECURITY_POLICY = (
    "default-src 'self'; script-src 'self'; style-src 'self'; img-src 'self'; connect-src 'self'; "
    "object-src 'none'; base-uri 'none'; frame-ancestors 'none'; form-action 'self'"
)

HEADERS = {
    "Content-Security-Policy": CONTENT_SECURITY_POLICY,
    "X-Content-Type-Options": "nosniff",
    # `same-origin`, not `no-referrer`: flask-wtf's CSRF check over https requires a same-origin Referer,
    # and `no-referrer` would make every save fail there. Other origins still get no Referer at all.
    "Referrer-Policy": "same-origin",
    "X-Frame-Options": "DENY",
    "Cross-Origin-Opener-Policy": "same-origin",
    "Cross-Origin-Resource-Policy": "same-origin",
}


# --- Host ----------------------------------------------------------------------------------------


class _BracketedIPv6(str):
    """An IPv6 literal as Werkzeug's TRUSTED_HOSTS can match it.

    Werkzeug 3.1's `host_is_trusted` cuts each trusted entry at its first ":" (to drop a port), so an
    IPv6 entry can never equal the Host's "[::1]". This entry keeps its brackets through that cut;
    tests/web/test_security.py proves both that [::1] is answered and that another IPv6 is not.
    """

    def partition(self, sep: str) -> tuple[str, str, str]:
        return (str(self), "", "")


# What Werkzeug accepts in a Host name (a leading dot trusts every name under it, as Werkzeug documents).
_HOST_NAME = re.compile(r"^\.?[a-z0-9-]+(\.[a-z0-9-]+)*$")


def _entry(name: str) -> str:
    name = name.strip().lower().rstrip(".")
    bare = name[1:-1] if name.startswith("[") and name.endswith("]") else name
    try:
        ip = ipaddress.ip_address(bare)
    except ValueError:
        if not _HOST_NAME.match(name):
            raise ConsoleHaError(
                f"{name[:100]!r} is not a host name the Console can answer to: give a name such as "
                "console.local or an IP address, without http:// or a port."
            ) from None
        return name
    return _BracketedIPv6(f"[{ip.compressed}]") if ip.version == 6 else str(ip)


def trusted_hosts(names: Iterable[str]) -> list[str]:
    """TRUSTED_HOSTS for Flask: the loopback names plus `names` (host names or IP addresses, no ports)."""
    entries: list[str] = []
    for name in (*LOOPBACK_NAMES, *names):
        if name and name.strip() and name.strip() not in WILDCARD_HOSTS:
            entry = _entry(name)
            if entry not in entries:
                entries.append(entry)
    # Never empty (the loopback names are always in it): Werkzeug treats an empty list as "trust every name".
    return entries


def names_from_env(environ: Mapping[str, str] = os.environ) -> list[str]:
    """The names in CONSOLE_HA_TRUSTED_HOSTS (comma-separated)."""
    return [n.strip() for n in environ.get(ENV_TRUSTED_HOSTS, "").split(",") if n.strip()]


def listen_names(host: str) -> list[str]:
    """The names a Console listening on `host` serves as, beyond loopback.

    A specific address is its own name. A wildcard (0.0.0.0, ::) listens on every address, so it serves
    as this machine's host name, that name under .local (mDNS), and each address its interfaces have at
    start. An address gained later (a new DHCP lease) needs a restart or --trusted-host.
    """
    if host not in WILDCARD_HOSTS:
        return [host]
    hostname = socket.gethostname().lower()
    names = [hostname, f"{hostname.split('.')[0]}.local"]
    # A host name no browser can send (an underscore, say) is left out rather than stopping the Console.
    names = [n for n in names if _HOST_NAME.match(n)]
    names += interface_addresses()
    return names


def interface_addresses() -> list[str]:
    """Every IP address of this machine's interfaces (without IPv6 zone ids)."""
    import ifaddr

    found: list[str] = []
    for adapter in ifaddr.get_adapters():
        for address in adapter.ips:
            ip = address.ip if isinstance(address.ip, str) else address.ip[0]
            found.append(ip.split("%")[0])
    return found


def _refuse_untrusted_host() -> Response | None:
    # Flask 3.1 checks TRUSTED_HOSTS while matching the URL and keeps the error for later, so the
    # before_request hooks would otherwise run (and redirect) first. Answered here, without a template:
    # an untrusted request has no URL adapter to build links with.
    if not isinstance(request.routing_exception, SecurityError):
        return None
    log.warning("refused a request for an untrusted host %r", request.headers.get("Host", "")[:100])
    # In the browser's language only: the saved choice is the household's, not for a page of another name.
    language = from_browser(tag for tag, quality in request.accept_languages if quality > 0)
    body = localised(error_body(UntrustedHost(UNTRUSTED_HOST_MESSAGE)), language)
    wants_json = is_api_request() or request.is_json or request.accept_mimetypes.best == "application/json"
    if wants_json:
        response = jsonify(body)
    else:
        response = Response(UNTRUSTED_HOST_MESSAGE.in_language(language) + "\n", mimetype="text/plain")
    response.status_code = 400
    return response


# --- Origin --------------------------------------------------------------------------------------


def _host_and_port(url: str) -> tuple[str, int | None] | None:
    """An http(s) URL's host and port, the port None when it is the scheme's default (as browsers send it)."""
    try:
        parts = urlsplit(url)
        port = parts.port
    except ValueError:
        return None
    if parts.scheme not in ("http", "https") or not parts.hostname:
        return None
    default = 443 if parts.scheme == "https" else 80
    return parts.hostname.lower(), None if port == default else port


def _check_origin() -> None:
    """A mutating browser request must come from the Console's own pages.

    The source is the `Origin` header; without it, the `Referer`; without both (an old browser, a
    privacy extension, a script), the CSRF token alone decides, as it did before. It must name the host
    and port the request was sent to (the Host header, already checked against TRUSTED_HOSTS). The scheme
    is not compared: behind an https reverse proxy the Console itself sees plain http, and a page on the
    same host and port with the other scheme would be this same server. Requests with an Authorization
    header are programs with an API token: a browser never adds one for another site.
    """
    if request.method not in MUTATING_METHODS or "Authorization" in request.headers:
        return
    source = request.headers.get("Origin")
    if source is None:
        source = request.headers.get("Referer")
        if source is None:
            return
    own = _host_and_port(request.host_url)
    if own is None or _host_and_port(source) != own:
        log.warning("refused %s %s from origin %r", request.method, request.path, source[:100])
        raise Forbidden(FOREIGN_ORIGIN_MESSAGE)


# --- headers -------------------------------------------------------------------------------------


def _set_headers(response: Response) -> Response:
    for name, value in HEADERS.items():
        response.headers.setdefault(name, value)
    # Pages and API answers hold household data and tokens for forms: never kept by a cache.
    # Static files keep Flask's own revalidation headers.
    if request.endpoint != "static":
        response.headers["Cache-Control"] = "no-store"
        response.headers.pop("Expires", None)
    return response


def register_security_headers(app: Flask) -> None:
    """Add the security headers to every response the app sends."""
    app.after_request(_set_headers)


def init_app(app: Flask) -> None:
    """Install the Host and Origin checks (before every other hook) and the security headers."""
    app.before_request(_refuse_untrusted_host)
    app.before_request(_check_origin)
    register_security_headers(app)
