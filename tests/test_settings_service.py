"""The settings service driven from plain Python (no Flask), against a stub Home Assistant on loopback."""

from __future__ import annotations

import json
import threading
from collections.abc import Callable, Iterator
from typing import Any

import pytest

from console_ha.capabilities.card_facts import CardMemory
from console_ha.capabilities.entity_budget import BUDGET_BYTES, entity_cost
from console_ha.errors import CapabilityError, ConfigInvalid, HABadResponse, HABusy, InvalidConfig
from console_ha.ha.areas import AreaCache
from console_ha.ha.discovery import Instance
from console_ha.ha.kept_clients import HomeAssistantClients
from console_ha.settings.settings_service import (
    AREA_WORKERS,
    DISCOVERY_REQUESTS,
    SaveRequest,
    SettingsService,
    SettingsUnreadable,
    Timeouts,
    TryRequest,
)
from console_ha.settings.tokens import TokenStatus
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TOKEN_FOR_ANOTHER_ORIGIN_REASON, TokenStore, check_token
from console_ha.store.instances import Instances
from console_ha.store.review import ReviewStore
from tests.seed import hand_edit, seed_settings
from tests.stub_ha import StubHomeAssistant


def _no_browse(**kwargs: Any) -> list[Instance]:
    raise AssertionError("no test here browses the network")


@pytest.fixture
def make_service(data_dir: DataDir) -> Iterator[Callable[..., SettingsService]]:
    """A settings service on the test's data dir, with the boundaries a test may replace."""
    made: list[SettingsService] = []

    def make(**boundaries: Any) -> SettingsService:
        service = SettingsService(
            Instances(data_dir), review_store=ReviewStore(data_dir),
            clients=boundaries.pop("clients", HomeAssistantClients()),
            discover=boundaries.pop("discover", _no_browse),
            areas=boundaries.pop("areas", AreaCache(fetch=lambda *a, **k: None)),
            timeouts=Timeouts(discovery=0.5, states=2.0, areas=0.5, test=2.0),
            card_memory=boundaries.pop("card_memory", CardMemory()),
        )
        made.append(service)
        return service

    yield make
    for service in made:
        service.close()


@pytest.fixture
def service(make_service: Callable[..., SettingsService]) -> SettingsService:
    return make_service()


def _save(service: SettingsService, base_url: str, token: str, **changes: Any) -> None:
    service.save(SaveRequest({"enabled": True, "base_url": base_url, **changes}, token=check_token(token)))


def _trying(stub_ha: StubHomeAssistant) -> TryRequest:
    return TryRequest.from_json({"base_url": stub_ha.base_url, "access_token": stub_ha.token})


# --- read, save, reset --------------------------------------------------------------------------------


def test_read_before_anything_is_saved_is_the_defaults(service: SettingsService) -> None:
    view = service.read()
    assert view.to_json() == {
        "enabled": False, "base_url": "", "has_access_token": False, "access_token_origin": None,
        "allowlisted_entities": [], "entity_names": {}, "instance": "home", "name": "Home", "revision": "absent",
        "config_error": None,
    }


def test_a_save_binds_the_token_to_the_url_saved_with_it(service: SettingsService, data_dir: DataDir) -> None:
    _save(service, "http://ha.local:8123/", "a-token-123", allowlisted_entities=["sensor.a"])
    view = service.read()
    assert view.config.base_url == "http://ha.local:8123"
    assert view.token == TokenStatus(True, "http://ha.local:8123")
    assert "a-token-123" not in json.dumps(view.to_json())
    assert TokenStore(data_dir).lookup("http://ha.local:8123", configured_url="").token == check_token("a-token-123")


def test_a_new_url_of_another_origin_without_a_token_is_refused_and_nothing_is_written(
    service: SettingsService, data_dir: DataDir
) -> None:
    _save(service, "http://ha.local:8123", "a-token-123")
    before = data_dir.ha_config.read_bytes()
    with pytest.raises(InvalidConfig) as refused:
        service.save(SaveRequest({"base_url": "http://elsewhere.local:8123"}))
    assert refused.value.detail == {"field": "access_token", "reason": TOKEN_FOR_ANOTHER_ORIGIN_REASON}
    assert data_dir.ha_config.read_bytes() == before


def test_the_save_refuses_a_new_allowlist_list_entities_could_not_answer(
    service: SettingsService, data_dir: DataDir
) -> None:
    """The fit is the save's check; the file itself (ConfigStore) keeps one saved before the check existed."""
    fits = BUDGET_BYTES // entity_cost("sensor.entity_number_0000")
    too_many = [f"sensor.entity_number_{n:04d}" for n in range(fits + 1)]
    with pytest.raises(InvalidConfig) as refused:
        service.save(SaveRequest({"allowlisted_entities": too_many}))
    assert refused.value.detail["field"] == "allowlisted_entities"
    assert service.read().config.allowlisted_entities == ()

    hand_edit(data_dir, {"allowlisted_entities": too_many})  # over the budget, as an older release saved it
    service.save(SaveRequest({"enabled": True, "allowlisted_entities": too_many}))
    assert service.read().config.enabled


def test_a_damaged_file_is_reported_by_read_and_raised_by_save(service: SettingsService, data_dir: DataDir) -> None:
    data_dir.ha_config.parent.mkdir(parents=True)
    data_dir.ha_config.write_text("{broken")
    view = service.read()
    assert view.config_error is not None and view.config_error.detail["action"] == "reset"
    assert "not valid JSON" in view.config_error.cause.message
    assert view.to_json()["config_error"]["code"] == "CONFIG_INVALID"
    with pytest.raises(SettingsUnreadable) as raised:
        service.save(SaveRequest({"enabled": True}))
    assert isinstance(raised.value, ConfigInvalid) and raised.value.cause.message in raised.value.message


def test_reset_keeps_the_damaged_file_and_the_token(service: SettingsService, data_dir: DataDir) -> None:
    _save(service, "http://ha.local:8123", "a-token-123")
    data_dir.ha_config.write_text("{broken")
    view = service.save(SaveRequest({}, reset=True))
    assert view.config_error is None and view.config.base_url == "" and view.token.stored
    assert len(list(data_dir.capabilities.glob("home-assistant.json.broken-*"))) == 1


def test_no_front_end_can_save_the_files_own_ca_bundle(service: SettingsService, data_dir: DataDir) -> None:
    """`ca_bundle` decides whom the token is sent to over https: it is set by editing the file only."""
    with pytest.raises(InvalidConfig) as refused:
        service.save(SaveRequest({"ca_bundle": "/etc/ca.pem"}))
    assert refused.value.detail["field"] == "ca_bundle"
    assert not data_dir.ha_config.exists()


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"access_token": "t-123", "remove_access_token": True}, "access_token"),
        ({"reset": "yes"}, "reset"),
        ({"revision": 3}, "revision"),
        ({"reviewed_entities": ["not an id"]}, "reviewed_entities"),
    ],
)
def test_a_save_request_is_checked_before_anything_is_written(body: dict[str, Any], field: str) -> None:
    with pytest.raises(InvalidConfig) as refused:
        SaveRequest.from_json(body)
    assert refused.value.detail["field"] == field


# --- the entity catalogue -------------------------------------------------------------------------------


def test_the_catalogue_narrows_the_states_of_the_saved_home_assistant(
    service: SettingsService, stub_ha: StubHomeAssistant
) -> None:
    _save(service, stub_ha.base_url, stub_ha.token, allowlisted_entities=["sensor.gone_since"])
    body = json.loads(service.entities())
    ids = [e["entity_id"] for e in body["entities"]]
    assert ids == sorted(ids) and ids
    assert body["missing"][0]["entity_id"] == "sensor.gone_since"
    assert body["areas_known"] is False and body["budget_bytes"] == BUDGET_BYTES


def test_the_catalogue_without_settings_is_not_configured(service: SettingsService, data_dir: DataDir) -> None:
    with pytest.raises(CapabilityError) as refused:
        service.entities()
    assert (refused.value.code, refused.value.detail["field"]) == ("CAPABILITY_NOT_CONFIGURED", "base_url")
    seed_settings(data_dir, {"base_url": "http://ha.local:8123"})
    with pytest.raises(CapabilityError) as refused:
        service.entities()
    assert refused.value.detail["field"] == "access_token"


def test_the_stored_token_goes_only_to_its_own_origin(
    service: SettingsService, stub_ha: StubHomeAssistant, data_dir: DataDir
) -> None:
    """Saved for another origin: the picker is not set up (409), a preview of this URL is refused (400)."""
    _save(service, "http://other.local:8123", stub_ha.token)
    hand_edit(data_dir, {"base_url": stub_ha.base_url})  # as a crash between the two writes leaves it
    with pytest.raises(CapabilityError) as refused:
        service.entities()
    assert refused.value.code == "CAPABILITY_NOT_CONFIGURED"
    assert refused.value.detail["reason"] == TOKEN_FOR_ANOTHER_ORIGIN_REASON
    with pytest.raises(InvalidConfig) as refused_preview:
        service.preview_entities(TryRequest.from_json({"base_url": stub_ha.base_url}))
    assert refused_preview.value.detail["reason"] == TOKEN_FOR_ANOTHER_ORIGIN_REASON
    assert stub_ha.requests == []  # nothing was sent


def test_a_preview_sends_the_typed_token_to_the_typed_url_only(
    service: SettingsService, stub_ha: StubHomeAssistant
) -> None:
    body = json.loads(service.preview_entities(_trying(stub_ha)))
    assert body["entities"]
    assert service.read().config.base_url == ""  # nothing saved


def test_a_url_and_token_to_try_are_checked_and_the_token_never_shown(stub_ha: StubHomeAssistant) -> None:
    attempt = _trying(stub_ha)
    assert attempt.base_url == stub_ha.base_url and stub_ha.token not in repr(attempt)
    with pytest.raises(InvalidConfig) as refused:
        TryRequest.from_json({"base_url": stub_ha.base_url, "token": stub_ha.token})
    assert refused.value.detail["field"] == "token"


def test_an_answer_that_holds_the_token_is_not_home_assistant(
    service: SettingsService, stub_ha: StubHomeAssistant
) -> None:
    stub_ha.states = [{"entity_id": "sensor.echo", "state": "on", "attributes": {"friendly_name": stub_ha.token}}]
    with pytest.raises(HABadResponse) as refused:
        service.preview_entities(_trying(stub_ha))
    assert refused.value.detail["reason"] == "not_home_assistant"


def test_area_fetches_share_one_bounded_pool(
    make_service: Callable[..., SettingsService], stub_ha: StubHomeAssistant
) -> None:
    """However many picker loads, the areas are fetched on at most AREA_WORKERS threads, made once."""
    threads: set[threading.Thread] = set()

    def fetch(*args: Any, **kwargs: Any) -> dict[str, str]:
        threads.add(threading.current_thread())
        return {"sensor.outside_temperature": "Garden"}

    service = make_service(areas=AreaCache(ttl=0, failure_ttl=0, fetch=fetch))
    _save(service, stub_ha.base_url, stub_ha.token)
    for _ in range(2 * AREA_WORKERS + 2):
        assert json.loads(service.entities())["areas_known"] is True
    assert 1 <= len(threads) <= AREA_WORKERS



def test_picker_loads_of_a_home_assistant_whose_areas_hang_leave_a_worker_for_another(
    make_service: Callable[..., SettingsService], two_homes: tuple[StubHomeAssistant, StubHomeAssistant]
) -> None:
    """Reloads while one Home Assistant's registries hang share its fetch: another's areas still come in time.

    Before the shared pool each load had a thread of its own, so a hung registry never cost another Home
    Assistant its areas; with AREA_WORKERS threads in all, one fetch per Home Assistant keeps that true.
    """
    saved, tried = two_homes
    release = threading.Event()

    def fetch(base_url: str, token: Any, **kwargs: Any) -> dict[str, str] | None:
        if base_url == saved.base_url:
            release.wait(10)  # the saved one's WebSocket answers nothing (until the test ends)
            return None
        return {"sensor.outside_temperature": "Garden"}

    service = make_service(areas=AreaCache(ttl=0, failure_ttl=0, fetch=fetch))
    _save(service, saved.base_url, saved.token)
    try:
        for _ in range(AREA_WORKERS):  # the page loaded, then reloaded
            assert json.loads(service.entities())["areas_known"] is False
        assert json.loads(service.preview_entities(_trying(tried)))["areas_known"] is True
    finally:
        release.set()

# --- the connection test and discovery --------------------------------------------------------------------


def test_the_connection_test_names_the_home_assistant_found(
    service: SettingsService, stub_ha: StubHomeAssistant
) -> None:
    found = service.test_connection(_trying(stub_ha))
    assert found.to_json()["ok"] is True and found.version and found.base_url == stub_ha.base_url


def test_a_404_at_api_config_is_not_home_assistant(service: SettingsService, stub_ha: StubHomeAssistant) -> None:
    stub_ha.fault("404", path_prefix="/api/config")
    with pytest.raises(HABadResponse) as refused:
        service.test_connection(_trying(stub_ha))
    assert refused.value.detail["reason"] == "not_home_assistant"


def test_discovery_browses_once_at_a_time_and_refuses_past_its_bound(
    make_service: Callable[..., SettingsService],
) -> None:
    """One browse and one waiting for it; a third request is refused at once (HA_BUSY, discovery_running)."""
    release, browsing = threading.Event(), threading.Event()
    seen: list[float] = []

    def slow_browse(timeout: float) -> list[Instance]:
        seen.append(timeout)
        browsing.set()
        release.wait(5)
        return [Instance("Home", "http://192.168.1.20:8123", "2025.4.4")]

    service = make_service(discover=slow_browse)
    answers: list[object] = []

    def ask() -> None:
        try:
            answers.append(service.discover_instances())
        except HABusy as err:
            answers.append(err)
            release.set()  # the refusal came at once, while the first browse still held its place

    callers = [threading.Thread(target=ask) for _ in range(DISCOVERY_REQUESTS + 1)]
    callers[0].start()
    assert browsing.wait(5)
    for thread in callers[1:]:
        thread.start()
    for thread in callers:
        thread.join(10)
    refused = [a for a in answers if isinstance(a, HABusy)]
    assert len(refused) == 1 and refused[0].detail["reason"] == "discovery_running"
    assert len(answers) == DISCOVERY_REQUESTS + 1 and seen == [0.5] * DISCOVERY_REQUESTS


# --- the CA certificate ---------------------------------------------------------------------------------------


def test_no_ca_certificate_is_the_system_trust_store(service: SettingsService) -> None:
    assert service.ca_certificate() == {"stored": False, "managed_by_file": None, "readable": True,
                                        "certificates": []}
    with pytest.raises(InvalidConfig) as refused:
        service.store_ca_certificate("  ")
    assert refused.value.detail["field"] == "ca_certificate"
    assert service.remove_ca_certificate()["stored"] is False
