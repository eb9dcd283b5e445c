"""Bounded concurrency to Home Assistant: a call past the cap is refused at once with HA_BUSY, over real HTTP."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import Future, ThreadPoolExecutor
from typing import Any

import pytest

from console_ha.capabilities.confirmations import ConfirmationStore
from console_ha.capabilities.list_entities import NAME as LIST_ENTITIES
from console_ha.errors import CapabilityError, HABusy, HATimeout, HomeAssistantError
from console_ha.ha.addresses import origin_of
from console_ha.ha.areas import fetch_entity_areas
from console_ha.ha.call_limits import MAX_CALLS_IN_ALL, MAX_CALLS_PER_ORIGIN, RESERVED_THREADS, CallCaps, CallLimits
from console_ha.ha.home_assistants import HomeAssistants
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from tests.executors import executor_over
from tests.moving_clock import wait_for
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

# Long enough that a hung call is still hung while the test looks; the stub lets go when it stops.
HANG = 30.0


@pytest.fixture
def hung_ha() -> Iterator[StubHomeAssistant]:
    """A Home Assistant that accepts every request and answers none of them (until the test ends)."""
    with StubHomeAssistant() as stub:
        stub.fault("slow", delay=HANG)
        yield stub


@pytest.fixture
def limits() -> CallLimits:
    """One Console's call limits, at their defaults: every client and WebSocket of a test counts against them."""
    return CallLimits()


@pytest.fixture
def pool() -> Iterator[ThreadPoolExecutor]:
    """Threads for the calls a test leaves hanging."""
    executor = ThreadPoolExecutor(max_workers=16)
    yield executor
    executor.shutdown(wait=False, cancel_futures=True)


def hang_calls(stub: StubHomeAssistant, pool: ThreadPoolExecutor, count: int,
               limits: CallLimits) -> list[Future[dict[str, Any]]]:
    """`count` calls to the stub that are in flight, and seen by it, when this returns."""
    client = HomeAssistantClient(stub.base_url, Secret(stub.token), limits=limits)
    seen = len(stub.requests)
    futures = [pool.submit(client.config, timeout=HANG) for _ in range(count)]
    wait_for(lambda: len(stub.requests) >= seen + count)
    return futures


# --- the counter itself -----------------------------------------------------------------------


@pytest.mark.parametrize("a, b", [
    ("http://ha.local:8123", "http://HA.local:8123/"),
    ("http://ha.local", "http://ha.local:80/ha"),
    ("https://ha.local", "https://ha.local:443"),
    ("http://[::1]:8123", "http://[::1]:8123/api"),
])
def test_one_home_assistant_is_one_origin_whatever_the_path(a: str, b: str) -> None:
    """Paths, a default port written out and the host's case do not make a second Home Assistant."""
    assert origin_of(a) == origin_of(b)


@pytest.mark.parametrize("a, b", [
    ("http://ha.local:8123", "https://ha.local:8123"),
    ("http://ha.local:8123", "http://ha.local:8124"),
    ("http://ha.local:8123", "http://other.local:8123"),
])
def test_another_scheme_host_or_port_is_another_origin(a: str, b: str) -> None:
    """Each of scheme, host and port makes a Home Assistant of its own."""
    assert origin_of(a) != origin_of(b)


def test_the_cap_is_per_origin_and_in_all_and_places_come_back() -> None:
    """Past either cap a slot is refused with HA_BUSY; leaving a slot, even by an exception, frees it."""
    limits = CallLimits(CallCaps(per_origin=2, in_all=3))
    with limits.slot("http://a:1"), limits.slot("http://a:1/x"):
        with pytest.raises(HABusy) as caught:
            with limits.slot("http://a:1"):
                pass
        assert caught.value.code == "HA_BUSY" and caught.value.stage is None  # no executor, no stage
        with limits.slot("http://b:1"):
            assert limits.in_flight() == 3
            with pytest.raises(HABusy):
                with limits.slot("http://c:1"):
                    pass
    with pytest.raises(RuntimeError):
        with limits.slot("http://a:1"):
            raise RuntimeError("a call failed")
    assert limits.in_flight() == 0 and limits.in_flight("http://a:1") == 0


@pytest.mark.parametrize("threads, per_origin, in_all", [(3, 1, 1), (4, 2, 2), (6, 4, 4), (8, 4, 6), (32, 4, 6)])
def test_caps_fitted_to_a_server_leave_its_reserved_threads_free(threads: int, per_origin: int, in_all: int) -> None:
    """Whatever the thread count, calls to Home Assistant can hold at most all but RESERVED_THREADS."""
    caps = CallCaps.for_threads(threads)
    assert (caps.per_origin, caps.in_all) == (per_origin, in_all)
    assert caps.in_all <= threads - RESERVED_THREADS
    assert caps.in_all <= MAX_CALLS_IN_ALL and caps.per_origin <= MAX_CALLS_PER_ORIGIN


def test_too_few_threads_to_keep_any_free_is_refused() -> None:
    """A server with no thread to spare cannot be protected: say so rather than pretend."""
    with pytest.raises(ValueError):
        CallCaps.for_threads(RESERVED_THREADS)


# --- the client over real HTTP ----------------------------------------------------------------


def test_a_call_past_the_cap_is_refused_at_once_and_nothing_is_sent(
        hung_ha: StubHomeAssistant, pool: ThreadPoolExecutor, limits: CallLimits) -> None:
    """With the cap's calls hanging, the next one fails with HA_BUSY in no time, without a request."""
    hung = hang_calls(hung_ha, pool, limits.per_origin, limits)
    sent = len(hung_ha.requests)
    client = HomeAssistantClient(hung_ha.base_url, Secret(hung_ha.token), limits=limits)
    with pytest.raises(HABusy) as caught:
        client.states(timeout=HANG, max_bytes=1_000_000)
    assert not any(call.done() for call in hung)  # refused while every place was still held: no wait for one
    assert caught.value.code == "HA_BUSY" and "Try again" in caught.value.message
    assert len(hung_ha.requests) == sent


def test_another_home_assistant_is_not_held_up_by_a_hung_one(
        hung_ha: StubHomeAssistant, stub_ha: StubHomeAssistant, pool: ThreadPoolExecutor,
        limits: CallLimits) -> None:
    """A second origin still answers while the first holds its whole per-origin cap."""
    assert limits.per_origin < limits.in_all
    hang_calls(hung_ha, pool, limits.per_origin, limits)
    answer = HomeAssistantClient(stub_ha.base_url, Secret(stub_ha.token), limits=limits).config(timeout=5)
    assert answer["version"]


def test_places_are_given_back_when_the_hung_calls_end(pool: ThreadPoolExecutor, limits: CallLimits) -> None:
    """Calls that time out release their places: the next call reaches Home Assistant again."""
    with StubHomeAssistant() as stub:
        stub.fault("slow", delay=HANG)
        client = HomeAssistantClient(stub.base_url, Secret(stub.token), limits=limits)
        futures = [pool.submit(client.config, timeout=1.0) for _ in range(limits.per_origin)]
        wait_for(lambda: len(stub.requests) >= limits.per_origin)
        with pytest.raises(HABusy):
            client.config(timeout=1.0)
        for future in futures:
            assert isinstance(future.exception(timeout=10), HATimeout)
        assert limits.in_flight(stub.base_url) == 0
        stub.clear_faults()
        assert client.config(timeout=5)["version"]


def test_concurrent_callers_never_get_more_than_the_cap_through(hung_ha: StubHomeAssistant, limits: CallLimits) -> None:
    """Twenty callers released at once: exactly the cap's worth reach Home Assistant, the rest are busy."""
    client = HomeAssistantClient(hung_ha.base_url, Secret(hung_ha.token), limits=limits)
    start = threading.Barrier(20)
    outcomes: list[str] = []
    lock = threading.Lock()

    def call() -> None:
        start.wait()
        try:
            client.config(timeout=2.0)
            outcome = "answered"
        except HomeAssistantError as err:
            outcome = err.code
        with lock:
            outcomes.append(outcome)

    threads = [threading.Thread(target=call) for _ in range(20)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    assert sorted(set(outcomes)) == ["HA_BUSY", "HA_TIMEOUT"]
    assert outcomes.count("HA_TIMEOUT") == limits.per_origin
    assert len(hung_ha.requests) == limits.per_origin


def test_the_area_websocket_counts_against_the_same_cap(hung_ha: StubHomeAssistant, pool: ThreadPoolExecutor,
                                                        limits: CallLimits) -> None:
    """With the REST calls holding every place, the area registries are not asked for (and are None)."""
    hung = hang_calls(hung_ha, pool, limits.per_origin, limits)
    sent = len(hung_ha.requests)
    assert fetch_entity_areas(hung_ha.base_url, Secret(hung_ha.token), limits=limits, timeout=HANG) is None
    assert not any(call.done() for call in hung)  # None while every place was still held: no wait for one
    assert len(hung_ha.requests) == sent


def test_a_hanging_area_websocket_holds_a_place(hung_ha: StubHomeAssistant, pool: ThreadPoolExecutor,
                                                limits: CallLimits) -> None:
    """While the WebSocket waits on Home Assistant, it is one of the calls in flight."""
    pool.submit(fetch_entity_areas, hung_ha.base_url, Secret(hung_ha.token), limits=limits, timeout=HANG)
    wait_for(lambda: len(hung_ha.requests) >= 1)
    assert limits.in_flight(hung_ha.base_url) == 1


# --- a capability past the cap -----------------------------------------------------------------


def test_a_capability_past_the_cap_fails_with_ha_busy_at_stage_5(
        data_dir, clock, hung_ha: StubHomeAssistant, pool: ThreadPoolExecutor) -> None:
    """An approved list_entities finds the cap taken: HA_BUSY at stage 5, audited, nothing sent."""
    home_assistants = HomeAssistants()  # a Console's: its clients count against its limits
    seed_settings(data_dir, {"enabled": True, "base_url": hung_ha.base_url,
                             "allowlisted_entities": ["sensor.living_room_temperature"]}, token=hung_ha.token)
    executor = executor_over(data_dir, confirmations=ConfirmationStore(clock=clock), clock=clock,
                             clients=home_assistants.clients.lend)
    proposal = executor.propose(LIST_ENTITIES, {}, conversation_id="c")
    limits = home_assistants.limits
    hung = hang_calls(hung_ha, pool, limits.per_origin, limits)
    sent = len(hung_ha.requests)
    with pytest.raises(CapabilityError) as caught:
        executor.answer(proposal.token, approve=True, conversation_id="c")
    assert not any(call.done() for call in hung)  # refused while every place was still held: no wait for one
    assert (caught.value.code, caught.value.stage) == ("HA_BUSY", 5)
    assert hung_ha.base_url not in caught.value.message
    assert len(hung_ha.requests) == sent
    audit = [line for line in data_dir.audit_log.read_text().splitlines() if '"failed"' in line]
    assert len(audit) == 1 and '"HA_BUSY"' in audit[0]


# --- `console-ha serve` fits the caps to its threads ----------------------------------------------


class _FakeServer:
    effective_port = 8000

    def run(self) -> None:
        raise KeyboardInterrupt

    def close(self) -> None:
        pass


def test_serve_fits_the_caps_to_its_threads(data_dir, monkeypatch: pytest.MonkeyPatch) -> None:
    """With 5 threads, calls to Home Assistant may hold 3 of them, never the 2 kept for /health and pages."""
    import waitress

    from console_ha import cli

    served: list[Any] = []

    def create_server(app: Any, **kwargs: Any) -> _FakeServer:
        served.append(app)
        return _FakeServer()

    monkeypatch.setattr(waitress, "create_server", create_server)
    monkeypatch.setattr("console_ha.cli.signal.signal", lambda *args: None)
    assert cli.main(["serve", "--threads", "5", "--port", "0", "--data-dir", str(data_dir.root)]) == 0
    limits = served[0].extensions["console_ha"].home_assistants.limits  # the served Console's, not the process's
    assert (limits.per_origin, limits.in_all) == (3, 3)


def test_serve_refuses_threads_it_could_not_keep_free(data_dir, monkeypatch: pytest.MonkeyPatch,
                                                      capsys: pytest.CaptureFixture[str]) -> None:
    """`--threads 2` would leave Home Assistant able to take every thread: refused, nothing served."""
    import waitress

    from console_ha import cli

    served: list[object] = []

    def create_server(app, **kwargs):
        served.append(kwargs)
        return _FakeServer()

    monkeypatch.setattr(waitress, "create_server", create_server)
    assert cli.main(["serve", "--threads", "2", "--data-dir", str(data_dir.root)]) == 2
    assert "--threads must be at least 3" in capsys.readouterr().err
    assert served == []
