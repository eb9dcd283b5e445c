"""The settings service: everything the Home Assistant settings page does, in plain Python (no Flask).

Read, save and reset the settings and the token; the entity catalogue for the picker (from the saved
settings, or a URL and token being tried); the "is this Home Assistant?" test; discovery; the household's
CA certificate. A front end parses its request, calls one method here, and maps the answer or the error
(every refusal is a `ConsoleHaError` carrying its contract code).
"""

from __future__ import annotations

import copy
import logging
import threading
from collections.abc import Callable, Mapping
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from typing import Any

import orjson

from console_ha.capabilities.card_facts import CardMemory
from console_ha.errors import ConsoleHaError, HABusy, InvalidSettingsChange, SettingsFileDamaged
from console_ha.ha.addresses import ENTITY_ID_RE, normalise_base_url
from console_ha.ha.areas import AreaCache, EntityAreas, fetch_key
from console_ha.ha.discovery import Instance
from console_ha.ha.rest_client import ALL_ENTITIES_MAX_BYTES, HomeAssistantClient
from console_ha.language import Words
from console_ha.secret import Secret
from console_ha.settings import saving
from console_ha.settings.catalogue import catalogue_json, holds_token, is_sensitive
from console_ha.settings.connection import HomeAssistantFound, check_home_assistant, not_home_assistant
from console_ha.settings.held import SessionHolds
from console_ha.settings.instance_rules import INSTANCE_FIELD as INSTANCE_FIELD
from console_ha.settings.instance_rules import INSTANCE_ID_SHAPE, no_such_instance, not_added
from console_ha.settings.settings_view import SettingsUnreadable as SettingsUnreadable
from console_ha.settings.settings_view import SettingsView as SettingsView
from console_ha.settings.tokens import TokenStatus, not_configured, not_entered, optional_token, stored_token_for
from console_ha.store.ca_certificate import FIELD as CA_FIELD
from console_ha.store.config import ABSENT_REVISION, HomeAssistantConfig, StoredConfig, refuse_unknown
from console_ha.store.datadir import HOME_INSTANCE, is_instance_id
from console_ha.store.instances import Instances
from console_ha.store.review import FIELD as REVIEWED_FIELD
from console_ha.store.review import ReviewStore, check_reviewed

log = logging.getLogger(__name__)

# What a client may send to try a URL and token before saving them (the test, the picker's preview).
TRY_FIELDS = ("base_url", "access_token")

# After the states arrive, wait at most this long for the areas; a slower answer fills the cache for next time.
AREAS_GRACE = 1.0
# Area fetches in flight at once, for all picker loads together. Fetches are cached (`AreaCache`), so one
# that waits behind another mostly finds its answer ready; a second worker keeps a fetch hanging on a
# Home Assistant the household has left from holding up the new one. Picker loads of one Home Assistant
# share its fetch under way (`_areas_for`), so reloads cannot fill both workers with the same hung one.
AREA_WORKERS = 2

# Discovery requests that may hold a server thread at once: one browsing and one waiting for it. More
# would queue on the lock, each holding a thread for a whole browse, and /health would wait behind them.
DISCOVERY_REQUESTS = 2
DISCOVERY_RUNNING = Words("The Console is already looking for Home Assistant on your network. Wait a few "
                          "seconds for that search, then look again.")

ClientFactory = Callable[[str, Secret, str | None], HomeAssistantClient]


@dataclass(frozen=True)
class Timeouts:
    """Bounds on the settings page's calls to the outside, in seconds."""

    discovery: float = 3.0
    states: float = 8.0
    areas: float = 4.0
    test: float = 8.0


@dataclass(frozen=True)
class SensitiveItem:
    """A sensitive entity a save would newly let the assistant read, as the question names it."""

    entity_id: str
    name: str


@dataclass(frozen=True)
class SaveRequest:
    """One save, from any front end: the changes, the token's fate, and what the household saw."""

    changes: Mapping[str, Any]
    token: Secret | None = None  # a new token, already checked (`optional_token`)
    remove_token: bool = False  # with a new token as well, the new token is stored
    expected_revision: str | None = None  # the revision the household saw; None to save regardless
    reset: bool = False  # start again from empty settings (a damaged file is kept aside) before the changes
    reviewed: list[str] | None = None  # the entities the picker showed: remembered, never allowlisted

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> SaveRequest:
        """The settings API's POST body, checked field by field; nothing is written on error."""
        body = dict(body)
        reset = _flag(body, "reset")
        remove_token = _flag(body, "remove_access_token")
        revision = body.pop("revision", None)
        if revision is not None and not isinstance(revision, str):
            raise InvalidSettingsChange("`revision` must be the text GET answered with.", field="revision")
        token = optional_token(body.pop("access_token", None))
        reviewed = body.pop(REVIEWED_FIELD, None)
        reviewed = check_reviewed(reviewed) if reviewed is not None else None
        if token is not None and remove_token:
            raise InvalidSettingsChange("Send a new access token or remove the stored one, not both.",
                                        field="access_token")
        return cls(body, token, remove_token, revision, reset, reviewed)  # the fields left: the save checks them


@dataclass(frozen=True)
class TryRequest:
    """A URL and token to try before saving them; either may be left out ("", None) for the saved one."""

    base_url: str = ""  # normalised (`normalise_base_url`)
    token: Secret | None = None  # checked (`optional_token`)

    @classmethod
    def from_json(cls, body: Mapping[str, Any]) -> TryRequest:
        """The body of a test or a preview: only `base_url` and `access_token`, each checked."""
        refuse_unknown(body, TRY_FIELDS)
        return cls(normalise_base_url(body.get("base_url") or ""), optional_token(body.get("access_token")))


class SettingsService:
    """Everything the settings page does, over the stores and the boundaries to Home Assistant."""

    def __init__(
        self,
        instances: Instances,
        *,
        review_store: ReviewStore,
        clients: ClientFactory,
        discover: Callable[..., list[Instance]],
        areas: AreaCache,
        timeouts: Timeouts,
        card_memory: CardMemory,
    ) -> None:
        # Every collaborator is built once by the composition root (`Console.open`) and handed in.
        self.instances = instances
        # The instance this service reads and saves (`at` makes one for another; it shares everything else).
        self._instance = instances.home
        self._config = self._instance.config
        self._tokens = self._instance.token
        self._ca = self._instance.ca
        self._reviews = review_store
        self._clients = clients
        self._timeouts = timeouts
        # The Console's memory for its cards: the picker's load tells it the allowed devices' kinds of reading.
        self._card_memory = card_memory
        # The boundaries a test fakes (zeroconf, the WebSocket registries): swappable after construction.
        self.discover = discover
        self.areas = areas
        # Built once: a pool per picker load would start a thread for every request.
        self._area_pool = ThreadPoolExecutor(max_workers=AREA_WORKERS, thread_name_prefix="ha-areas")
        # The fetch under way for each URL, token and CA bundle (`areas.fetch_key`).
        self._area_fetches: dict[tuple[str, str, str], Future[EntityAreas | None]] = {}
        self._area_fetches_lock = threading.Lock()
        # One zeroconf browse at a time; a second request (a reload while the first still browses) waits
        # for it, and past DISCOVERY_REQUESTS in all a request is refused at once.
        self._discovery_lock = threading.Lock()
        self._discovery_requests = threading.BoundedSemaphore(DISCOVERY_REQUESTS)
        # What the page without JavaScript keeps per browser session between two posts (a pasted token,
        # the sensitive question's nonces); swappable, like the boundaries, for a test's clock.
        self.holds = SessionHolds()

    def at(self, instance: object, *, creating: bool = False) -> SettingsService:
        """This service for one instance's settings, token and CA certificate (`home`: itself).

        Everything else is shared: the area workers, discovery's bounds, the holds of the page without
        JavaScript. 400 INVALID_CONFIG on `instance` for an id of the wrong shape, or one there is not (unless
        `creating`: a save with a name makes it).
        """
        if instance == self._instance.id:
            return self
        if not is_instance_id(instance):
            raise InvalidSettingsChange(INSTANCE_ID_SHAPE, field=INSTANCE_FIELD)
        assert isinstance(instance, str)  # what is_instance_id said
        if not creating and not self.instances.exists(instance):
            raise no_such_instance(instance)
        bound = copy.copy(self)
        bound._instance = self.instances.get(instance)
        bound._config, bound._tokens, bound._ca = bound._instance.config, bound._instance.token, bound._instance.ca
        bound._reviews = bound._instance.review
        return bound

    @property
    def instance(self) -> str:
        """The id of the instance this service reads and saves."""
        return self._instance.id

    def close(self) -> None:
        """Let the area workers go (a fetch under way finishes and fills the cache)."""
        self._area_pool.shutdown(wait=False)

    # --- reading and saving ---------------------------------------------------------------------

    @property
    def config_file(self) -> str:
        """Where the settings file is, for a page that tells the household how to fix it by hand."""
        return str(self._config.path)

    def read(self) -> SettingsView:
        """The settings as saved; a damaged file gives the defaults and `config_error`, never an exception."""
        try:
            stored = self._config.read()
        except SettingsFileDamaged as err:
            config = HomeAssistantConfig()
            return SettingsView(config, None, TokenStatus.of(self._tokens, config.base_url), self._unreadable(err),
                                self.instance)
        return self._view(stored)

    def save(self, request: SaveRequest) -> SettingsView:
        """Validate everything, then write the token, the file and the review in one pass; nothing on error.

        The one pass is `saving.save_settings`: one read, one validation, one revision check, under the saves'
        lock taken once. A reset checks the changes against the defaults, and writes nothing either when
        they are refused.
        """
        changes, token, remove_token = request.changes, request.token, request.remove_token
        try:
            saved = saving.save_settings(self._config, self._tokens, changes, token=token, remove_token=remove_token,
                                         expected_revision=request.expected_revision, reset=request.reset,
                                         reviewed=request.reviewed, reviews=self._reviews)
        except SettingsFileDamaged as err:
            raise self._unreadable(err) from err
        changed = sorted(changes) + (["access_token"] if token is not None or remove_token else [])
        changed += ["reset"] if request.reset else []
        log.info("Home Assistant settings of %s saved: %s", self.instance, ", ".join(changed) or "nothing changed")
        # The token record the save left, not read again.
        return SettingsView(saved.config, saved.revision, TokenStatus.of_record(saved.token, saved.config.base_url),
                            instance=self.instance)

    def _view(self, stored: StoredConfig) -> SettingsView:
        return SettingsView(stored.config, stored.revision, TokenStatus.of(self._tokens, stored.config.base_url),
                            instance=self.instance)

    # --- the instances ----------------------------------------------------------------------------

    def instance_list(self) -> list[dict[str, Any]]:
        """Every instance as the instances list shows it (`SettingsView.listed`), in `Instances.ids()` order.

        One removed (in another tab) after `ids()` was read is left out, not answered with a 400 for it.
        """
        listed = []
        for instance in self.instances.ids():
            try:
                view = self.at(instance).read()
            except InvalidSettingsChange:
                continue  # gone before its settings were read
            if view.revision == ABSENT_REVISION and instance != HOME_INSTANCE:
                continue  # gone while they were read
            listed.append(view.listed())
        return listed

    def remove_instance(self) -> list[dict[str, Any]]:
        """Remove this instance (never `home`) with its token and CA certificate; the instances left."""
        saving.remove_instance(self.instances, self.instance)
        return self.instance_list()

    def _unreadable(self, err: SettingsFileDamaged) -> SettingsUnreadable:
        return SettingsUnreadable(err, self._config.path.name)

    def _stored_config(self) -> HomeAssistantConfig:
        try:
            return self._config.load()
        except SettingsFileDamaged as err:
            raise self._unreadable(err) from err

    def _config_or_default(self) -> HomeAssistantConfig:
        """The saved settings (their allowlist and CA bundle), or the defaults when the file is damaged."""
        try:
            return self._config.load()
        except SettingsFileDamaged:
            return HomeAssistantConfig()

    def sensitive_to_confirm(self, submitted: list[str], confirmed: frozenset[str]) -> list[SensitiveItem]:
        """The sensitive entities among `submitted` that are neither allowlisted yet nor `confirmed`.

        Sensitivity is the picker's (`catalogue.is_sensitive`): by the domain, and for an on/off sensor by its
        device class, from the catalogue of the saved URL and token. When the catalogue cannot be read, the
        domain alone decides, so a door sensor then goes unasked: the question is the household's safeguard
        against a slip, not the access control (that is the allowlist). A damaged file asks nothing (the save
        refuses it by itself).
        """
        view = self.read()
        saved = set(view.config.allowlisted_entities)
        new = [e for e in submitted if e not in saved and e not in confirmed and ENTITY_ID_RE.fullmatch(e)]
        if view.config_error is not None or not new:
            return []
        known: dict[str, dict[str, Any]] = {}
        # The domain decides for every kind but on/off sensors, whose device class only Home Assistant knows:
        # only then is it asked (the catalogue also gives their names).
        if view.can_list and any(e.partition(".")[0] == "binary_sensor" for e in new):
            try:
                known = {e["entity_id"]: e for e in orjson.loads(self.entities()).get("entities", [])}
            except ConsoleHaError as err:
                log.info("sensitive entities without the catalogue (%s): judged by their domain", err.code)
        items = []
        for entity_id in new:
            entry = known.get(entity_id)
            if bool(entry.get("sensitive")) if entry else is_sensitive(entity_id.partition(".")[0], {}):
                name = (entry or {}).get("friendly_name") or view.config.display_name(entity_id)
                items.append(SensitiveItem(entity_id, str(name)))
        return items

    # --- which URL and token a call uses --------------------------------------------------------

    def _saved_connection(self) -> tuple[str, Secret, HomeAssistantConfig]:
        """The saved URL and the stored token for its origin: 409 CAPABILITY_NOT_CONFIGURED without them."""
        config = self._stored_config()
        if not config.base_url:
            raise not_configured("base_url")
        token = stored_token_for(self._tokens, config.base_url, configured_url=config.base_url, saved=True)
        return config.base_url, token, config

    def _connection_to_try(self, attempt: TryRequest) -> tuple[str, Secret, HomeAssistantConfig]:
        """The URL and token a test or a preview sends to, by the one rule; the configuration beside them.

        A typed token goes to the URL typed with it (else the saved one, which the page shows); with both
        typed, a damaged file does not stand in the way. Without one, the stored token goes only to the
        origin it was saved for (`TokenStore.lookup`), as a save of that URL would be refused otherwise.
        """
        given_url, given_token = attempt.base_url, attempt.token
        config = self._config_or_default() if given_url and given_token else self._stored_config()
        base_url = given_url or config.base_url
        if not base_url:
            raise not_entered("base_url")
        token = given_token or stored_token_for(self._tokens, base_url, configured_url=config.base_url,
                                                saved=False)
        return base_url, token, config

    def _client(self, base_url: str, token: Secret, config: HomeAssistantConfig) -> HomeAssistantClient:
        # Shared between requests (the client factory keeps it), so it is not closed here.
        return self._clients(base_url, token, self._instance.ca_bundle(config))

    # --- the entity catalogue ---------------------------------------------------------------------

    def entities(self) -> bytes:
        """The picker's JSON from the saved URL and token: HA's states narrowed, with areas and costs."""
        # The one token this call sends, over REST and in the WebSocket's auth message: checked for its origin.
        return self._catalogue(*self._saved_connection())

    def preview_entities(self, attempt: TryRequest) -> bytes:
        """The picker's JSON from a URL and token not yet saved (set-up in one save); nothing is written.

        The token is chosen exactly as `test_connection` chooses it.
        """
        return self._catalogue(*self._connection_to_try(attempt))

    def _catalogue(self, base_url: str, token: Secret, config: HomeAssistantConfig) -> bytes:
        ca_bundle = self._instance.ca_bundle(config)
        # The registries come over a separate WebSocket; ask for them while the states are on their way.
        areas_future = self._areas_for(base_url, token, ca_bundle)
        states = self._client(base_url, token, config).states(timeout=self._timeouts.states,
                                                              max_bytes=ALL_ENTITIES_MAX_BYTES)
        areas: EntityAreas | None
        try:
            areas = areas_future.result(timeout=AREAS_GRACE)
        except FutureTimeout:
            areas = None
            log.info("entity areas not ready within %.1f s; answering without them", AREAS_GRACE)
        payload = catalogue_json(states, config, areas, self._reviews.read_for(base_url))
        if holds_token(payload, token):
            # Home Assistant never says its token back; an impostor would (say, as an entity's name), to have
            # the page show it. One scan of the answer, as the connection test does for /api/config.
            log.warning("the entity list from %s holds the token sent; not Home Assistant", base_url)
            raise not_home_assistant()
        # The allowed devices' kinds of reading, for the cards of the reads that follow.
        self._card_memory.remember(fetch_key(base_url, token, ca_bundle), states, config.allowlisted_entities)
        return payload

    def _areas_for(self, base_url: str, token: Secret, ca_bundle: str | None) -> Future[EntityAreas | None]:
        """The areas of this Home Assistant, fetched on the pool: the fetch under way for it, else a new one."""
        key = fetch_key(base_url, token, ca_bundle)
        with self._area_fetches_lock:
            future = self._area_fetches.get(key)
            if future is not None:
                return future
            future = self._area_pool.submit(self.areas.get, base_url, token, timeout=self._timeouts.areas,
                                            ca_bundle=ca_bundle)
            self._area_fetches[key] = future

        def forget(done: Future[EntityAreas | None]) -> None:
            with self._area_fetches_lock:
                if self._area_fetches.get(key) is done:
                    del self._area_fetches[key]

        # Outside the lock: a fetch already done runs `forget` here, at once.
        future.add_done_callback(forget)
        return future

    # --- the connection test and discovery ------------------------------------------------------------

    def test_connection(self, attempt: TryRequest) -> HomeAssistantFound:
        """Check a URL and token (typed, else saved) against HA's /api/config; the precise failure if not."""
        base_url, token, config = self._connection_to_try(attempt)
        return check_home_assistant(self._client(base_url, token, config), base_url, token,
                                    timeout=self._timeouts.test)

    def discover_instances(self) -> list[Instance]:
        """The Home Assistants a bounded zeroconf browse finds that are not added yet (`not_added`)."""
        return not_added(self._browse(), self.instances)

    def _browse(self) -> list[Instance]:
        """Every Home Assistant a bounded zeroconf browse finds; 503 HA_BUSY when two are under way."""
        # At most DISCOVERY_REQUESTS hold a server thread (one browsing, one waiting for it, as after a
        # reload); more are refused at once, not queued: queued, each would hold a thread for a whole
        # browse after the other, and /health and the pages would wait behind them (HA_BUSY's reason).
        if not self._discovery_requests.acquire(blocking=False):
            raise HABusy(DISCOVERY_RUNNING, reason="discovery_running")
        try:
            with self._discovery_lock:
                return self.discover(timeout=self._timeouts.discovery)
        finally:
            self._discovery_requests.release()

    # --- the household's own CA certificate ---------------------------------------------------------

    def ca_certificate(self) -> dict[str, Any]:
        """The CA certificate the Console trusts for https, described; none when the system's store is used."""
        path, infos = self._ca.current()
        return {
            "stored": path is not None,
            "managed_by_file": self._ca.managed_by_file(),
            "readable": path is None or bool(infos),
            "certificates": [info.to_json() for info in infos],
        }

    def store_ca_certificate(self, pem: object) -> dict[str, Any]:
        """Check a pasted or uploaded PEM and store it (replacing any), atomically; 400 with why if unusable."""
        if not isinstance(pem, str) or not pem.strip():
            raise InvalidSettingsChange(Words("Paste a CA certificate, or choose its file."), field=CA_FIELD)
        self._ca.store(pem)
        return self.ca_certificate()

    def remove_ca_certificate(self) -> dict[str, Any]:
        """Forget the stored CA certificate: https is then checked against the system's trust store only."""
        self._ca.remove()
        log.info("the stored CA certificate for Home Assistant was removed")
        return self.ca_certificate()


def _flag(body: dict[str, Any], name: str) -> bool:
    value = body.pop(name, False)
    if not isinstance(value, bool):
        raise InvalidSettingsChange(f"`{name}` must be true or false.", field=name)
    return value
