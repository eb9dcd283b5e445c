"""Settings and token are never paired wrongly: not after a `kill -9` at any moment, not under parallel saves.

Each test sends real requests to two recording Home Assistants (`two_homes`) after every run: each fails
the test if it ever receives the other's token. The kill loops run for `home` and for another instance
(`cabin`, beside a `home` of its own whose Home Assistant must never see the cabin's tokens, nor they its);
one more kills a loop that creates, renames and removes an instance, and checks each next start.
"""

from __future__ import annotations

import json
import os
import random
import signal
import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
import requests
from flask import Flask
from werkzeug.serving import make_server

from console_ha.ha.addresses import origin_of
from console_ha.store.config import ConfigStore
from console_ha.store.datadir import HOME_INSTANCE, DataDir
from console_ha.store.ha_token import TokenStore
from console_ha.store.instances import Instances
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant

from .conftest import API
from .live import Browser

KILL_RUNS = 30
KILL_BUDGET_SECONDS = 90.0
PARALLEL_ROUNDS = 30
CHECKOUT = Path(__file__).resolve().parents[2]

# The save path the API and the page both call, in a loop, alternating two (URL, token) pairs.
SAVER = r"""
import json, sys
from pathlib import Path
from console_ha.store.config import ConfigStore
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore, check_token
from console_ha.settings.saving import save_settings

job = json.loads(sys.stdin.readline())
data_dir = DataDir(Path(job["root"]))
configs, tokens = ConfigStore(data_dir, job["instance"]), TokenStore(data_dir, job["instance"])
print("ready", flush=True)
i = job["first"]
while True:
    url, token = job["pairs"][i % 2]
    save_settings(configs, tokens, {"base_url": url, "enabled": True}, token=check_token(token))
    i += 1
"""


# Creates an instance (its URL and token), renames it, removes it, again and again, alternating two pairs.
LIFECYCLE = r"""
import json, sys
from pathlib import Path
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import check_token
from console_ha.store.instances import Instances
from console_ha.settings.saving import remove_instance, save_settings

job = json.loads(sys.stdin.readline())
instances = Instances(DataDir(Path(job["root"])))
cabin = instances.get("cabin")
print("ready", flush=True)
i = job["first"]
while True:
    url, token = job["pairs"][i % 2]
    if not instances.exists("cabin"):
        save_settings(cabin.config, cabin.token, {"name": "Cabin", "base_url": url, "enabled": True},
                      token=check_token(token))
    save_settings(cabin.config, cabin.token, {"name": f"Cabin {i}"})
    remove_instance(instances, "cabin")
    i += 1
"""


def _temp_files(root: Path) -> list[Path]:
    return [p for p in root.rglob("*.tmp")]


def _saved_pairs(homes: tuple[StubHomeAssistant, ...]) -> set[tuple[str, str]]:
    return {(origin_of(stub.base_url), stub.token) for stub in homes}


def _check_the_stored_pair(data_dir: DataDir, pairs: set[tuple[str, str]], instance: str = HOME_INSTANCE) -> str:
    """The record is a pair saved together; the token handed out for the configured URL belongs to it."""
    record = TokenStore(data_dir, instance).read_record()
    config = ConfigStore(data_dir, instance).load()
    if record is None:
        return "no token yet"
    assert record.origin is not None, "this release never writes a token without its origin"
    assert (record.origin, record.token.reveal()) in pairs, "the record pairs one save's origin with another's token"
    token = TokenStore(data_dir, instance).read_for(config.base_url, configured_url=config.base_url)
    if not config.base_url:
        assert token is None
        return "token written, URL not yet"
    if token is None:
        assert origin_of(config.base_url) != record.origin
        return "URL and token of different saves: token withheld"
    assert (origin_of(config.base_url), token.reveal()) in pairs
    return "URL and token of one save"


def _real_requests(session: requests.Session, url: str, instance: str = HOME_INSTANCE) -> None:
    """The picker (REST and WebSocket) and the connection test with the stored pair; a refusal is fine."""
    picker = session.get(f"{url}{API}/entities?instance={instance}", timeout=10)
    test = session.post(f"{url}{API}/test?instance={instance}", json={}, timeout=10)
    # A slow stub on a loaded machine may time out (502 HA_TIMEOUT): not what this test is about.
    assert picker.status_code in (200, 409) or picker.json()["error"]["code"] == "HA_TIMEOUT", picker.text
    assert test.status_code in (200, 400, 409) or test.json()["error"]["code"] == "HA_TIMEOUT", test.text
    if picker.status_code == 409:
        assert picker.json()["error"]["code"] == "CAPABILITY_NOT_CONFIGURED"
        assert test.status_code in (400, 409)


@pytest.fixture
def serve(make_app: Callable[..., Flask]) -> Iterator[Callable[[], str]]:
    """Start the Console (a new app each call, as a restart is) on a loopback port; stops them all after."""
    servers = []

    def start() -> str:
        server = make_server("127.0.0.1", 0, make_app(), threaded=True)
        threading.Thread(target=server.serve_forever, daemon=True).start()
        servers.append(server)
        return f"http://127.0.0.1:{server.server_port}"

    yield start
    for server in servers:
        server.shutdown()
        server.server_close()


def _household(url: str, password: str) -> requests.Session:
    """The household's browser session on the Console at `url`, sending its CSRF token as the page's fetch() does."""
    browser = Browser(url)
    browser.http.trust_env = False
    assert browser.log_in(password).status_code == 302
    browser.http.headers["X-CSRFToken"] = browser.csrf("/no-such-page")
    return browser.http


@pytest.fixture(params=[HOME_INSTANCE, "cabin"])
def saved_instance(request: pytest.FixtureRequest, data_dir: DataDir, hidden_secrets: list[str],
                   two_homes: tuple[StubHomeAssistant, StubHomeAssistant]) -> Iterator[str]:
    """The instance the saves are of. For `cabin`: made first, beside a `home` saved for a Home Assistant of its
    own, which must never receive the cabin's tokens (nor the cabin's Home Assistants `home`'s)."""
    if request.param == HOME_INSTANCE:
        yield request.param
        return
    with StubHomeAssistant(seed=3) as house:
        hidden_secrets.append(house.token)
        house.refuse_tokens_of(*two_homes)
        for stub in two_homes:
            stub.refuse_tokens_of(house)
        seed_settings(data_dir, {"base_url": house.base_url, "enabled": True}, token=house.token)
        seed_settings(data_dir, {"name": "Cabin"}, instance=request.param)
        yield request.param
        assert TokenStore(data_dir).read_record() is not None
        token = TokenStore(data_dir).read_for(house.base_url, configured_url=house.base_url)
        assert token is not None and token.reveal() == house.token  # home's own pair, untouched by the cabin's saves
    assert house.foreign_tokens_seen == [], f"home's Home Assistant got another's token: {house.foreign_tokens_seen}"


def _kill(program: str, job: dict[str, object], rng: random.Random) -> None:
    """Start `program` with `job`, let it run a random moment, and SIGKILL it."""
    saver = subprocess.Popen([sys.executable, "-c", program], stdin=subprocess.PIPE, stdout=subprocess.PIPE,
                             env={**os.environ, "PYTHONPATH": str(CHECKOUT)}, cwd=CHECKOUT)
    try:
        assert saver.stdin is not None and saver.stdout is not None
        saver.stdin.write((json.dumps(job) + "\n").encode())
        saver.stdin.close()
        assert saver.stdout.readline() == b"ready\n"
        time.sleep(rng.uniform(0.0, 0.03))
    finally:
        saver.send_signal(signal.SIGKILL)
        saver.wait(10)
    assert saver.returncode == -signal.SIGKILL, "the saver died of something else than the kill"


def _random() -> random.Random:
    return random.Random(int(os.environ.get("CONSOLE_HA_KILL_SEED", "0")) or None)


def test_kill_9_at_any_moment_of_a_save_never_pairs_a_token_with_another_origin(
    data_dir: DataDir, two_homes: tuple[StubHomeAssistant, StubHomeAssistant], serve: Callable[[], str],
    password: str, caplog: pytest.LogCaptureFixture, saved_instance: str,
) -> None:
    """A saver alternating two (URL, token) pairs is SIGKILLed at random moments, about 30 times.

    After each kill: the next start sweeps the temporary files; the stored record is a pair saved together;
    a real picker load and connection test send a token only to the origin it was saved with.
    """
    pairs = _saved_pairs(two_homes)
    rng = _random()
    outcomes: Counter[str] = Counter()
    job = {"root": str(data_dir.root), "pairs": [[stub.base_url, stub.token] for stub in two_homes],
           "instance": saved_instance}
    started = time.monotonic()
    runs = 0
    while runs < KILL_RUNS and time.monotonic() - started < KILL_BUDGET_SECONDS:
        _kill(SAVER, {**job, "first": runs}, rng)
        runs += 1
        if _temp_files(data_dir.root):
            outcomes["temporary files left by the kill"] += 1

        url = serve()  # the next start
        assert _temp_files(data_dir.root) == [], "a start must sweep what killed writes left"
        outcomes[_check_the_stored_pair(data_dir, pairs, saved_instance)] += 1
        _real_requests(_household(url, password), url, saved_instance)
    assert runs >= 10, f"only {runs} runs in {KILL_BUDGET_SECONDS} s"
    # What the runs met, for a person reading the log (the guard on the stubs is the assertion).
    print(f"kill -9 loop ({saved_instance}): {runs} runs: {dict(outcomes)}")
    caplog.clear()  # thirty starts' worth of "removed temporary files" lines are not what the secret check is for


def test_kill_9_while_creating_renaming_and_removing_an_instance_leaves_a_usable_data_dir(
    data_dir: DataDir, two_homes: tuple[StubHomeAssistant, StubHomeAssistant], serve: Callable[[], str],
    password: str, caplog: pytest.LogCaptureFixture,
) -> None:
    """A loop that creates `cabin` (URL and token), renames it and removes it is SIGKILLed at random moments.

    After each kill the next start sweeps temporary files and whatever secrets an unfinished create or remove
    left; the instances list answers; `cabin`, if there, is one save's URL and token (or none), and its picker
    and test send its token only to that origin; `home` is as it was.
    """
    house, cabin = two_homes
    seed_settings(data_dir, {"base_url": house.base_url, "enabled": True}, token=house.token)
    home_before = (data_dir.ha_config.read_bytes(), data_dir.ha_token.read_bytes())
    pairs = {(origin_of(cabin.base_url), cabin.token)}
    job = {"root": str(data_dir.root), "pairs": [[cabin.base_url, cabin.token]] * 2}
    rng = _random()
    outcomes: Counter[str] = Counter()
    started = time.monotonic()
    runs = 0
    while runs < KILL_RUNS and time.monotonic() - started < KILL_BUDGET_SECONDS:
        _kill(LIFECYCLE, {**job, "first": runs}, rng)
        runs += 1
        if Instances(data_dir).leftovers():
            outcomes["secrets of no instance left by the kill"] += 1
        url = serve()  # the next start
        assert _temp_files(data_dir.root) == [] and Instances(data_dir).leftovers() == ()
        session = _household(url, password)
        listed = session.get(f"{url}{API}/instances", timeout=10)
        assert listed.status_code == 200, listed.text
        ids = [instance["id"] for instance in listed.json()["instances"]]
        assert all(instance["config_error"] is None for instance in listed.json()["instances"])
        if ids == ["home", "cabin"]:
            outcomes["cabin there: " + _check_the_stored_pair(data_dir, pairs, "cabin")] += 1
            _real_requests(session, url, "cabin")
        else:
            assert ids == ["home"]
            outcomes["cabin gone or never made"] += 1
        assert (data_dir.ha_config.read_bytes(), data_dir.ha_token.read_bytes()) == home_before
    assert runs >= 10, f"only {runs} runs in {KILL_BUDGET_SECONDS} s"
    print(f"kill -9 create/rename/remove loop: {runs} runs: {dict(outcomes)}")
    caplog.clear()


def test_parallel_saves_of_different_pairs_always_leave_one_saved_pair(
    data_dir: DataDir, two_homes: tuple[StubHomeAssistant, StubHomeAssistant], serve: Callable[[], str],
    password: str,
) -> None:
    """About 30 rounds of four concurrent saves (two Home Assistants, two spellings each) over real HTTP."""
    home, other = two_homes
    pairs = _saved_pairs(two_homes)
    url = serve()
    bodies = [
        {"base_url": home.base_url, "access_token": home.token, "enabled": True},
        {"base_url": other.base_url, "access_token": other.token, "enabled": True},
        {"base_url": home.base_url + "/api/", "access_token": home.token},
        {"base_url": other.base_url.upper(), "access_token": other.token},
    ]
    sessions = [_household(url, password) for _ in bodies]

    def save(barrier: threading.Barrier, answers: list[int], session: requests.Session,
             body: dict[str, object]) -> None:
        barrier.wait(5)
        answers.append(session.post(f"{url}{API}", json=body, timeout=10).status_code)

    for _round in range(PARALLEL_ROUNDS):
        barrier = threading.Barrier(len(bodies))
        answers: list[int] = []
        threads = [threading.Thread(target=save, args=(barrier, answers, session, body))
                   for session, body in zip(sessions, bodies, strict=True)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join(15)
        assert answers == [200] * len(bodies)
        assert _check_the_stored_pair(data_dir, pairs) == "URL and token of one save"
        assert sessions[0].get(f"{url}{API}/entities", timeout=10).status_code == 200
