"""The household's answer over real HTTP (waitress, several worker threads): an Allow and a Don't allow sent
at the same moment, and replays of either, move a card once; the loser and every replay get 409."""

from __future__ import annotations

import threading
from collections import Counter

import requests

from console_ha.answers.card_state import CardState
from console_ha.answers.household_queue import Asker, HouseholdQueue
from console_ha.capabilities.get_history import NAME as GET_HISTORY
from tests.mcp.conftest import ServedConsole
from tests.mcp.test_mcp_http import audit_events

ENTITY = "sensor.living_room_temperature"
ROUNDS = 8


def answer_at_once(console: ServedConsole, household: requests.Session, token: str) -> dict[bool, int]:
    """Allow and Don't allow for one card, released together from two threads: each answer's HTTP status."""
    start = threading.Barrier(2)
    statuses: dict[bool, int] = {}

    def post(approve: bool) -> None:
        start.wait(5)
        statuses[approve] = household.post(console.url + f"/api/v1/confirmations/{token}",
                                           json={"approve": approve}, timeout=10).status_code

    threads = [threading.Thread(target=post, args=(approve,)) for approve in (True, False)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(15)
    return statuses


def test_an_allow_and_a_denial_at_the_same_moment_move_the_card_once(configured, household):
    queue: HouseholdQueue = configured.app.extensions["console_ha"].household
    outcomes: Counter[CardState] = Counter()
    for attempt in range(ROUNDS):
        # A program of its own each round, so no card joins an earlier round's.
        call = queue.call(Asker("desk", token_id=f"{attempt:016x}"), GET_HISTORY, {"entity_id": ENTITY,
                                                                                     "period": "day"})
        card = call.waiting
        statuses = answer_at_once(configured, household, card.token)
        assert sorted(statuses.values()) == [200, 409], statuses
        assert card.state is (CardState.ALLOWED if statuses[True] == 200 else CardState.DENIED)
        for approve in (True, False):  # a replay of either (Back and resend) changes nothing
            replay = household.post(configured.url + f"/api/v1/confirmations/{card.token}",
                                    json={"approve": approve}, timeout=10)
            assert replay.status_code == 409 and replay.json()["error"]["code"] == "CONFIRMATION_INVALID"
        outcomes[card.state] += 1
        queue.detach(card, call.attachment)
    lines = audit_events(configured)
    assert sum(1 for line in lines if line["event"] == "denied") == outcomes[CardState.DENIED]
    assert sum(1 for line in lines if line["event"] == "held") == outcomes[CardState.ALLOWED]
    assert "approved" not in {line["event"] for line in lines}  # nothing was collected: nothing read
