"""The Home Assistant REST client: GET only, bearer token, whole-call deadlines, byte caps, verified TLS."""

from __future__ import annotations

import ipaddress
import logging
import math
import re
import ssl
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any, BinaryIO, TypeGuard, cast
from urllib.parse import quote, unquote, urlsplit

import orjson
import requests
import urllib3

from console_ha.deadline import Deadline, is_timeout
from console_ha.errors import (
    HABadResponse,
    HANotFound,
    HATimeout,
    HATLSError,
    HAUnauthorized,
    HAUnreachable,
    HomeAssistantError,
    InvalidSettingsChange,
)
from console_ha.ha import websocket as ha_ws
from console_ha.ha.addresses import is_entity_id, normalise_base_url
from console_ha.ha.call_limits import CallLimits
from console_ha.ha.reads import UNDECLARED_READS, Reads
from console_ha.ha.transport import TAKEN, BodyReader, VerifiedAdapter, too_large
from console_ha.ha.websocket import HomeAssistantWebSocket
from console_ha.secret import Secret

if TYPE_CHECKING:
    # Only its type: the cache reads areas through a client, and a client made for a Console points at its cache.
    from console_ha.ha.areas import AreaIndexCache

log = logging.getLogger(__name__)

DEFAULT_CONFIG_MAX_BYTES = 1024 * 1024
# How long a client keeps Home Assistant's configuration for the reads that need only its time zone
# (`kept_config`): a change of Home Assistant's zone reaches "today" and "tomorrow" within this.
KEPT_CONFIG_SECONDS = 300.0
DEFAULT_STATE_MAX_BYTES = 256 * 1024
# The most an answer listing every entity (all states, a registry) may weigh: about 70,000 entities, ten
# times a large household's (5,000 send about 2 MB); parsing it costs a few hundred MiB.
ALL_ENTITIES_MAX_BYTES = 32 * 1024 * 1024

# The states in which Home Assistant says it does not know an entity's value.
UNAVAILABLE_STATES = frozenset({"unavailable", "unknown"})

# What a Home Assistant token can hold (check_token's rule); anything else could break the header.
_TOKEN_RE = re.compile(r"[\x21-\x7e]{1,4096}")
_PATH_RE = re.compile(r"/api/[A-Za-z0-9._~:%@+,=-]*(?:/[A-Za-z0-9._~:%@+,=-]+)*")

class HomeAssistantClient:
    """Reads Home Assistant's REST API. It can send GET and nothing else, to the paths in its `reads`.

    `reads` is an allowlist rather than a list of what to refuse: the service-call API (and anything added
    to Home Assistant later) is out of reach unless a part of the Console declares it (`ha.reads`).
    A Console's clients share its `limits` and its `area_indexes` (`ha.home_assistants`); a client made
    without them counts its own calls only and keeps no areas.
    """

    def __init__(self, base_url: str, token: Secret, *, ca_bundle: str | None = None,
                 session: requests.Session | None = None, limits: CallLimits | None = None,
                 reads: Reads = UNDECLARED_READS, area_indexes: AreaIndexCache | None = None) -> None:
        normalised = normalise_base_url(base_url)
        if not normalised:
            raise InvalidSettingsChange("The Home Assistant URL is not set.", field="base_url")
        if not isinstance(token, Secret):
            raise TypeError("token must be a Secret")
        self._base_url = normalised
        self._token = token
        self._ca_bundle = ca_bundle
        self._limits = limits or CallLimits()
        self._area_indexes = area_indexes
        self._reads = reads
        self._tls_problem: str | None = None
        # (when it was read on the monotonic clock, /api/config's answer): see `kept_config`.
        self._kept_config: tuple[float, dict[str, Any]] | None = None
        ssl_context: ssl.SSLContext | None = None
        # Only https needs a context. Loading the system trust store takes about 18 ms, which an
        # http:// Home Assistant (the usual one on a LAN) would pay on every capability invocation.
        if normalised.startswith("https:"):
            try:
                # The system trust store by default; only the household's own CA when a bundle is set.
                ssl_context = ssl.create_default_context(cafile=ca_bundle or None)
            except (OSError, ssl.SSLError, ValueError):
                self._tls_problem = "The CA certificate file for Home Assistant could not be read."
        # Only a name can hang in its lookup; an IP address over http is connected in one bounded attempt.
        self._needs_lookup = not (normalised.startswith("http:") and _is_ip_address(urlsplit(normalised).hostname))
        self._owns_session = session is None
        if session is None:
            session = requests.Session()
            # No proxy from the environment sees the token, and no ~/.netrc replaces it.
            session.trust_env = False
        self._session = session
        # Mounted for this base URL only, so a shared session keeps its other adapters.
        self._session.mount(self._base_url + "/", VerifiedAdapter(ssl_context))

    def __repr__(self) -> str:
        return f"HomeAssistantClient(base_url={self._base_url!r})"

    @property
    def base_url(self) -> str:
        """The normalised base URL, without a trailing slash or /api."""
        return self._base_url

    @property
    def cache_key(self) -> tuple[str, str, str]:
        """What tells its Home Assistant and credentials apart: URL, token (as a hash), CA bundle; keys caches."""
        return cache_key(self._base_url, self._token, self._ca_bundle)

    @property
    def area_indexes(self) -> AreaIndexCache | None:
        """Where this client's Console keeps its Home Assistants' areas (`areas.area_index`); None keeps none."""
        return self._area_indexes

    def close(self) -> None:
        """Close pooled connections, unless the session was lent to this client by its caller."""
        if self._owns_session:
            self._session.close()

    def __enter__(self) -> HomeAssistantClient:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    # --- the public reads ----------------------------------------------------------------------

    def get_json(self, path: str, *, params: Mapping[str, str] | None = None, timeout: float,
                 max_bytes: int) -> Any:
        """GET `path` and parse its JSON body, all within `timeout` seconds and `max_bytes` bytes."""
        with self._request(path, params=params, timeout=timeout, max_bytes=max_bytes) as body:
            raw = body.readall()
        failure: HABadResponse | None = None
        try:
            # orjson: /api/states of a large household is megabytes, and parsing it is most of our time.
            return orjson.loads(raw)
        except (ValueError, RecursionError):
            failure = HABadResponse("Home Assistant's answer could not be read as JSON.", reason="invalid_json")
        raise failure

    @contextmanager
    def stream(self, path: str, *, params: Mapping[str, str] | None = None, timeout: float,
               max_bytes: int) -> Iterator[BinaryIO]:
        """GET `path` and yield its body as a binary file that honours the deadline and byte cap."""
        with self._request(path, params=params, timeout=timeout, max_bytes=max_bytes) as body:
            yield cast(BinaryIO, body)

    def config(self, *, timeout: float, max_bytes: int = DEFAULT_CONFIG_MAX_BYTES) -> dict[str, Any]:
        """GET /api/config: version, location name, time zone and so on."""
        data = self.get_json("/api/config", timeout=timeout, max_bytes=max_bytes)
        if not isinstance(data, dict) or not isinstance(data.get("version", ""), str):
            raise _wrong_shape()
        return data

    def kept_config(self, *, timeout: float) -> dict[str, Any]:
        """/api/config as this client last read it, read again when older than KEPT_CONFIG_SECONDS.

        For the reads that need only the time zone (a calendar's days, a forecast's hours): the Console
        keeps its client per Home Assistant and credentials (ha.clients), so a read of a kept client makes
        one request, not two. A new URL, token or CA bundle is a new client, with nothing kept.
        """
        kept = self._kept_config
        if kept is not None and 0 <= time.monotonic() - kept[0] < KEPT_CONFIG_SECONDS:
            return kept[1]
        read_at = time.monotonic()
        answer = self.config(timeout=timeout)
        self._kept_config = (read_at, answer)  # one assignment: a request racing it reads either whole
        return answer

    def states(self, *, timeout: float, max_bytes: int) -> list[dict[str, Any]]:
        """GET /api/states: every entity's current state."""
        data = self.get_json("/api/states", timeout=timeout, max_bytes=max_bytes)
        if not isinstance(data, list) or not all(_is_state(item) for item in data):
            raise _wrong_shape()
        return data

    def state(self, entity_id: str, *, timeout: float, max_bytes: int = DEFAULT_STATE_MAX_BYTES) -> dict[str, Any]:
        """GET /api/states/<entity_id>: one entity's current state."""
        if not is_entity_id(entity_id):
            raise ValueError("entity_id must look like domain.object_id")
        missing = False
        try:
            data = self.get_json(f"/api/states/{entity_id}", timeout=timeout, max_bytes=max_bytes)
        except HANotFound:
            missing = True
        if missing:
            raise HANotFound(f"Home Assistant has no entity {entity_id}; it may have been removed or renamed.",
                             entity_id=entity_id)
        if not _is_state(data) or data["entity_id"] != entity_id:
            raise _wrong_shape()
        return data

    @contextmanager
    def websocket(self, *, timeout: float, max_bytes: int) -> Iterator[HomeAssistantWebSocket]:
        """One authenticated WebSocket to this client's Home Assistant (the token goes nowhere else).

        It holds one of the places the calls to this Home Assistant share (HABusy when none is free).
        """
        if self._tls_problem and self._base_url.startswith("https:"):
            raise HATLSError(self._tls_problem, reason="ca_bundle")
        with self._limits.slot(self._base_url), ha_ws.connect(
                self._base_url, self._token, timeout=timeout, max_bytes=max_bytes, ca_bundle=self._ca_bundle,
                commands=self._reads.commands,
        ) as connection:
            yield connection

    # --- the one place a request is made -----------------------------------------------------

    @contextmanager
    def _request(self, path: str, *, params: Mapping[str, str] | None, timeout: float,
                 max_bytes: int) -> Iterator[BodyReader]:
        """Send one GET and yield its capped, deadline-bound body; every failure is an HA* error."""
        url = self._url(path)
        _check_params(params)
        if not (isinstance(timeout, (int, float)) and math.isfinite(timeout)):
            raise ValueError("timeout must be a number of seconds")
        if timeout <= 0:
            # A budget shared by several calls can run out before this one starts.
            raise HATimeout("Home Assistant did not answer in the time allowed.")
        if not (isinstance(max_bytes, int) and max_bytes > 0):
            raise ValueError("max_bytes must be a positive integer")
        if self._tls_problem and self._base_url.startswith("https:"):
            raise HATLSError(self._tls_problem, reason="ca_bundle")
        token = self._token.reveal()
        if not _TOKEN_RE.fullmatch(token):
            raise HAUnauthorized("The stored access token has characters a Home Assistant token never has; "
                                 "paste it again.", reason="malformed_token")
        with self._limits.slot(self._base_url):
            # The deadline starts once a place is held; refusing took no time to speak of.
            with self._get_within(path, url, token, params=params, timeout=timeout, max_bytes=max_bytes) as body:
                yield body

    @contextmanager
    def _get_within(self, path: str, url: str, token: str, *, params: Mapping[str, str] | None, timeout: float,
              max_bytes: int) -> Iterator[BodyReader]:
        """The GET itself, once _request has checked its arguments and holds a place for it."""
        started = time.monotonic()
        deadline = Deadline(timeout, expired=lambda: _timeout_error(timeout))
        headers = {
            "Authorization": f"Bearer {token}",
            "Accept": "application/json",
            # HA spends far longer compressing than loopback or a LAN spends carrying the bytes.
            "Accept-Encoding": "identity",
            "User-Agent": "console-ha",
        }
        failure: HomeAssistantError | None = None
        response: requests.Response | None = None

        def send() -> requests.Response:
            return self._session.get(
                url,
                params=params,
                headers=headers,
                # `total` makes connect plus waiting for the headers share one budget. requests passes a
                # urllib3 Timeout through as it is; types-requests only knows floats and tuples.
                timeout=urllib3.Timeout(total=timeout, connect=timeout, read=timeout),  # type: ignore[arg-type]
                stream=True,
                allow_redirects=False,  # a redirect could carry the token elsewhere
                verify=True,
            )

        try:
            response = self._send_within(deadline, send)
        except TimeoutError:
            failure = _timeout_error(timeout)
        except requests.exceptions.SSLError:
            failure = HATLSError(
                "The secure connection to Home Assistant failed: its certificate is not trusted or does not "
                "match the address. Add your Home Assistant's CA certificate, or use its http:// address.",
                reason="certificate",
            )
        except requests.exceptions.Timeout:
            failure = _timeout_error(timeout)
        except requests.exceptions.ConnectionError as err:
            failure = (_timeout_error(timeout) if is_timeout(err) or deadline.passed() else self._unreachable())
        except (requests.RequestException, urllib3.exceptions.HTTPError, OSError, ValueError):
            failure = self._unreachable()
        if failure is not None:
            log.info("GET %s failed after %.0f ms: %s", path, (time.monotonic() - started) * 1000, failure.code)
            raise failure  # outside the except block: nothing that holds the header is chained
        assert response is not None
        # Socket timeouts bound each read, not the body as a whole: at the deadline the socket is shut,
        # so a body that trickles in cannot hold the call (and a worker thread) past its bound.
        try:
            with deadline.watch(response):
                failure = _status_error(response.status_code)
                if failure is None:
                    declared = response.headers.get("Content-Length", "")
                    if declared.isdigit() and int(declared) > max_bytes:
                        failure = too_large(max_bytes)
                if failure is not None:
                    log.info("GET %s answered %s: %s", path, response.status_code, failure.code)
                    raise failure
                body = BodyReader(response, deadline=deadline, max_bytes=max_bytes)
                yield body
                log.debug("GET %s: %s, %d bytes in %.0f ms", path, response.status_code, body.bytes_received,
                          (time.monotonic() - started) * 1000)
        finally:
            response.close()

    def _send_within(self, deadline: Deadline, send: Callable[[], requests.Response]) -> requests.Response:
        """`send()` up to its headers within `deadline`: on this thread when no name lookup can hold it."""
        if not self._needs_lookup:
            taken: list[Any] = []
            TAKEN.connections = taken
            try:
                return deadline.call_here(send, taken)
            finally:
                TAKEN.connections = None
        return deadline.call(send, requests.Response.close)

    def _url(self, path: str) -> str:
        """The absolute URL of a declared API path; anything else is a programming error."""
        if not isinstance(path, str) or not _PATH_RE.fullmatch(path):
            raise ValueError("path must be an /api/ path relative to the base URL")
        decoded = unquote(path)
        segments = decoded.split("/")
        if ".." in segments or "." in segments or "//" in decoded or any(ord(c) < 0x21 for c in decoded):
            raise ValueError("path must be an /api/ path relative to the base URL")
        if not self._reads.allows_path(decoded):
            raise ValueError("this client only reads the paths declared to it")
        return self._base_url + quote(decoded, safe="/:")

    def _unreachable(self) -> HAUnreachable:
        return HAUnreachable(
            f"Home Assistant could not be reached at {self._base_url}. "
            "Check that it is running and that the address is right."
        )


def cache_key(base_url: str, token: Secret, ca_bundle: str | None) -> tuple[str, str, str]:
    """What makes two calls to Home Assistant the same: the URL, the token and the CA bundle."""
    # A hash of the token, so a new token is a new key and the token itself is not kept in one.
    return base_url, token.digest(), ca_bundle or ""


def _is_ip_address(host: str | None) -> bool:
    try:
        ipaddress.ip_address(host or "")
    except ValueError:
        return False
    return True


def _check_params(params: Mapping[str, str] | None) -> None:
    if params is None:
        return
    for key, value in params.items():
        if not isinstance(key, str) or not isinstance(value, str):
            raise ValueError("query parameters must be strings")


def _is_state(item: object) -> TypeGuard[dict[str, Any]]:
    return (isinstance(item, dict) and isinstance(item.get("entity_id"), str)
            and isinstance(item.get("state"), str))


def _seconds(value: float) -> str:
    """A duration for a person: 7.9987 is "8 seconds", 0.5 stays "0.5 seconds"."""
    text = str(round(value)) if value >= 1 else f"{value:.1g}"
    return f"{text} second" if text == "1" else f"{text} seconds"


def _timeout_error(timeout: float) -> HATimeout:
    return HATimeout(f"Home Assistant did not answer within {_seconds(timeout)}.")


def _wrong_shape() -> HABadResponse:
    return HABadResponse("Home Assistant answered with something other than what was asked for.",
                         reason="wrong_shape")


def _status_error(status: int) -> HomeAssistantError | None:
    """The error for a non-2xx status, or None for success."""
    if 200 <= status < 300:
        return None
    if status == 401:
        return HAUnauthorized("Home Assistant refused the access token. Create a new long-lived access token "
                              "in your Home Assistant profile and save it here.", status=status)
    if status == 403:
        return HAUnauthorized("Home Assistant refused access (it may have blocked this device after failed "
                              "logins). Check its settings and the access token.", status=status)
    if status == 404:
        return HANotFound("Home Assistant has no such item.", status=status)
    if 300 <= status < 400:
        return HABadResponse("Home Assistant answered with a redirect; check the address, for example "
                             "http:// versus https://.", status=status, reason="redirect")
    return HABadResponse(f"Home Assistant answered with an error (HTTP {status}).", status=status,
                         reason="status")
