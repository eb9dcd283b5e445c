"""The Console's own time per confirmed invocation: both requests, minus the model's and Home Assistant's time.

One confirmed invocation is two requests: the message (model proposes, stages 1-4, card) and the
approval (stages 4-6 against Home Assistant, then the model answers). The model and Home Assistant
are timed where the Console waits on them (the HTTP exchange on their sessions); everything else
(Flask, authentication, JSON, config and token reads, audit writes, the executor, narrowing,
history parsing interleaved with reads excluded) is the Console's overhead.

The HTTP path is the household's: its logged-in browser session, sending the page's CSRF token, approves
its own card through the conversation API. A program's API token can no longer do that (its reads wait
for the household on /confirmations, and `confirmation` is refused to it: console_ha/web/access.py).

Run: .venv/bin/python benchmarks/bench_conversation.py [--iterations 200]
"""

from __future__ import annotations

import argparse
import statistics
import sys
import tempfile
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import requests

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from console_ha.console import Console, ConsoleOptions
from console_ha.conversation import ConversationService, ModelSettings, OpenAICompatibleModel
from console_ha.ha.rest_client import HomeAssistantClient
from console_ha.secret import Secret
from console_ha.store.datadir import DataDir
from console_ha.store.ha_token import TokenStore
from console_ha.web import create_app
from tests.fake_model import FakeModel, text, tool_call
from tests.seed import seed_settings
from tests.stub_ha import StubHomeAssistant
from tests.web.conftest import household_client

CASES = {
    "list_entities": ("home_assistant__list_entities", {}),
    "get_history": ("home_assistant__get_history", {"entity_id": "sensor.living_room_temperature", "period": "day"}),
}
ALLOWED = ["sensor.living_room_temperature", "binary_sensor.front_door", "light.living_room"]


class Stopwatch:
    """Time spent waiting on the outside (the model, Home Assistant), added up per iteration."""

    def __init__(self) -> None:
        self.model = 0.0
        self.ha = 0.0

    def reset(self) -> None:
        self.model = self.ha = 0.0


def timed_body(response: requests.Response, add: Callable[[float], None]) -> requests.Response:
    """Count every socket read of a streamed body as the outside's time.

    The adapters read bodies with `raw.read1` (to keep their deadlines), so the body must stay unread
    here: reading `response.content` first would leave them an empty stream.
    """
    read1 = response.raw.read1

    def timed_read1(*a: Any, **kw: Any) -> bytes:
        began = time.perf_counter()
        try:
            return read1(*a, **kw)
        finally:
            add(time.perf_counter() - began)

    response.raw.read1 = timed_read1  # type: ignore[method-assign]
    return response


class ModelSession(requests.Session):
    """The model's session: the POST until its headers, and every socket read of the body."""

    def __init__(self, watch: Stopwatch) -> None:
        super().__init__()
        self.trust_env = False
        self.watch = watch

    def _add(self, seconds: float) -> None:
        self.watch.model += seconds

    def post(self, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        started = time.perf_counter()
        response = super().post(*args, **kwargs)
        self.watch.model += time.perf_counter() - started
        return timed_body(response, self._add)


class HASession(requests.Session):
    """Home Assistant's session: the GET until its headers, and every socket read of the body."""

    def __init__(self, watch: Stopwatch) -> None:
        super().__init__()
        self.trust_env = False
        self.watch = watch

    def _add(self, seconds: float) -> None:
        self.watch.ha += seconds

    def get(self, *args: Any, **kwargs: Any) -> requests.Response:  # type: ignore[override]
        started = time.perf_counter()
        response = super().get(*args, **kwargs)
        self.watch.ha += time.perf_counter() - started
        return timed_body(response, self._add)


def responder(function: str, arguments: dict[str, Any]) -> Callable[[dict[str, Any]], dict[str, Any]]:
    """A model that proposes the capability, then answers once it sees the tool result."""
    proposal = tool_call(function, arguments)
    done = text("Done.")

    def respond(request: dict[str, Any]) -> dict[str, Any]:
        return done if request["messages"][-1]["role"] == "tool" else proposal

    return respond


def percentile(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def run(iterations: int, warmup: int) -> None:
    """Measure each capability through the HTTP endpoint and through the service alone."""
    with StubHomeAssistant() as ha, FakeModel() as model, tempfile.TemporaryDirectory() as tmp:
        data_dir = DataDir(Path(tmp) / "data")
        seed_settings(data_dir, {"enabled": True, "base_url": ha.base_url, "allowlisted_entities": ALLOWED})
        TokenStore(data_dir).write(Secret(ha.token), ha.base_url)
        watch = Stopwatch()
        # The Console's kept clients, each timed: the app reuses one client per Home Assistant, as served.
        console = Console.open(data_dir, ConsoleOptions(
            model_environment=lambda: {"CONSOLE_HA_LLM_URL": model.url, "CONSOLE_HA_LLM_MODEL": "bench"}),
            make_client=lambda base_url, token, **parts: HomeAssistantClient(
                base_url, token, session=HASession(watch), **parts))
        app = create_app(console=console)
        # The household's browser: the password set (cheaply hashed), logged in through /login, and the
        # page's CSRF token sent as X-CSRFToken on every request. Where a Bearer token was checked before,
        # each of the two POSTs now checks the signed session cookie against the password and sessions
        # files, checks the CSRF token and sends the cookie back refreshed: part of the "http" overhead.
        client = household_client(app, data_dir)

        service: ConversationService = console.conversation
        service.model = OpenAICompatibleModel(ModelSettings((model.url,), "bench"), session=ModelSession(watch))

        def via_http(function: str, arguments: dict[str, Any]) -> None:
            paused = client.post("/api/v1/conversation/message", json={"message": "how warm is it?"}).get_json()
            pending = paused.get("pending_confirmation")  # an error answer has none: show it whole
            assert pending is not None, paused
            done = client.post("/api/v1/conversation/message", json={
                "conversation_id": paused["conversation_id"],
                "confirmation": {"token": pending["token"], "approve": True}}).get_json()
            assert done["reply"] == "Done.", done

        def via_service(function: str, arguments: dict[str, Any]) -> None:
            paused = service.send(None, "how warm is it?")
            assert paused.pending_confirmation is not None
            done = service.confirm(paused.conversation_id, paused.pending_confirmation.token, True)
            assert done.reply == "Done."

        print(f"console-ha: own time per confirmed invocation ({iterations} runs each, {warmup} warm-up)")
        print(f"{'path':<8} {'capability':<14} {'overhead mean':>14} {'p50':>8} {'p95':>8} "
              f"{'total mean':>11} {'model':>8} {'HA':>8}")
        for path, one in (("http", via_http), ("service", via_service)):
            for name, (function, arguments) in CASES.items():
                model.fallback = responder(function, arguments)
                overheads, totals, models, has = [], [], [], []
                for i in range(warmup + iterations):
                    watch.reset()
                    started = time.perf_counter()
                    one(function, arguments)
                    total = time.perf_counter() - started
                    if i >= warmup:
                        overheads.append((total - watch.model - watch.ha) * 1000)
                        totals.append(total * 1000)
                        models.append(watch.model * 1000)
                        has.append(watch.ha * 1000)
                print(f"{path:<8} {name:<14} {statistics.mean(overheads):>11.2f} ms "
                      f"{percentile(overheads, 0.5):>5.2f} ms {percentile(overheads, 0.95):>5.2f} ms "
                      f"{statistics.mean(totals):>8.2f} ms "
                      f"{statistics.mean(models):>5.2f} ms {statistics.mean(has):>5.2f} ms")


def main(argv: list[str] | None = None) -> None:
    """Parse the arguments and print the figures."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--iterations", type=int, default=200)
    parser.add_argument("--warmup", type=int, default=20)
    args = parser.parse_args(argv)
    run(args.iterations, args.warmup)


if __name__ == "__main__":
    main()
