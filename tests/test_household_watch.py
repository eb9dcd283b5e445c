"""The long poll behind every page's waiting count: answered on a change at once, else at its timeout; bounded."""

from __future__ import annotations

import threading
import time
from types import SimpleNamespace
from typing import Any

from console_ha.capabilities.household_watch import BUSY_RETRY_SECONDS, HouseholdWatch, card_id


def _card(token: str, client: str = "desk assistant", title: str = "Read the history of Kitchen?") -> Any:
    return SimpleNamespace(token=token, client=client, proposal=SimpleNamespace(card=SimpleNamespace(title=title)))


class Cards:
    """The queue's waiting reads, changed by the test."""

    def __init__(self) -> None:
        self.items: list[Any] = []

    def __call__(self) -> list[Any]:
        return list(self.items)


def test_an_answer_comes_at_once_when_the_page_has_seen_another_version() -> None:
    """A page that rendered before a card arrived learns of it without waiting."""
    cards = Cards()
    watch = HouseholdWatch(cards, tick=0.01)
    empty = watch.now().version
    cards.items.append(_card("t1"))
    started = time.monotonic()
    answer = watch.wait(empty, "s", timeout=5)
    assert time.monotonic() - started < 1
    assert answer.version != empty and answer.to_dict()["count"] == 1
    card = answer.to_dict()["cards"][0]
    assert card["id"] == card_id(cards.items[0]) and "t1" not in str(answer.to_dict())
    assert card["notification_title"] == "“desk assistant” asks to read Home Assistant"
    assert card["notification_body"].startswith("Read the history of Kitchen?")


def test_a_new_card_ends_an_open_wait_within_a_tick() -> None:
    """The wait holds while nothing changes and ends within a tick of a new card (the target is 2 s)."""
    cards = Cards()
    watch = HouseholdWatch(cards, tick=0.05)
    seen = watch.now().version
    result: list[Any] = []
    thread = threading.Thread(target=lambda: result.append((watch.wait(seen, "s", timeout=10), time.monotonic())))
    thread.start()
    time.sleep(0.4)
    assert not result and watch.watching() == 1
    added = time.monotonic()
    cards.items.append(_card("t1"))
    thread.join(5)
    answer, ended = result[0]
    assert answer.to_dict()["count"] == 1 and ended - added < 0.5
    assert watch.watching() == 0


def test_with_nothing_new_the_answer_comes_at_the_timeout() -> None:
    """The same version again, after the timeout: the page simply asks again."""
    cards = Cards()
    watch = HouseholdWatch(cards, tick=0.02)
    seen = watch.now().version
    started = time.monotonic()
    answer = watch.wait(seen, "s", timeout=0.3)
    assert 0.25 < time.monotonic() - started < 2
    assert answer.version == seen and not answer.busy


def test_a_card_that_goes_away_by_itself_is_a_change_too() -> None:
    """Expiry is not announced by any call; the watch sees the list change."""
    cards = Cards()
    cards.items.append(_card("t1"))
    watch = HouseholdWatch(cards, tick=0.01)
    seen = watch.now().version
    cards.items.clear()
    assert watch.wait(seen, "s", timeout=5).to_dict()["count"] == 0


def test_open_waits_are_bounded_per_session_and_overall() -> None:
    """Past either bound the answer is at once and busy, with when to ask again; a finished wait frees its place."""
    cards = Cards()
    watch = HouseholdWatch(cards, max_watchers=3, per_session=2, tick=0.02)
    seen = watch.now().version
    threads = [threading.Thread(target=watch.wait, args=(seen, session, 1.0)) for session in ("a", "a", "b")]
    for thread in threads:
        thread.start()
    deadline = time.monotonic() + 2
    while watch.watching() < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    assert watch.watching() == 3
    third_of_a = watch.wait(seen, "a", timeout=5)
    assert third_of_a.busy and third_of_a.to_dict()["retry_after"] == BUSY_RETRY_SECONDS
    assert watch.wait(seen, "c", timeout=5).busy  # overall bound
    for thread in threads:
        thread.join(5)
    assert watch.watching() == 0
    assert not watch.wait(seen, "a", timeout=0.05).busy
